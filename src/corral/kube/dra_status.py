"""``corral run`` writes a pod's resource claims before its bind, as kube-scheduler's DynamicResources
plugin does in PreBind (``bindClaim``): the finalizer ``resource.kubernetes.io/delete-protection`` on the
claim, then its status — ``allocation`` (the devices, the configuration of their classes and of the
claim, the node selector of the node, the allocation time) and the pod added to ``reservedFor`` — and
only then the ``Binding``. A claim already allocated (shared with a pod placed earlier) only gains the
pod in ``reservedFor``. A claim of a scheduling.k8s.io PodGroup (KEP-5729) is reserved for the group
(``resource: podgroups``) once, not for each pod. Both writes carry the claim's ``resourceVersion``: a claim changed meanwhile
answers 409 and the bind is left for the next cycle, decided again from fresh state.

A claim corral instantiated from a template (the resourceclaim controller has not created it yet) is
not written: the bind waits, as kube-scheduler's PreEnqueue waits for the claim, and the next cycle
sees the generated claim (``status.resourceClaimStatuses``).

A dry run writes nothing; :func:`assume_claims` overlays on the watch cache what the writes and the
resourceclaim controller would leave, so that the next cycle finds every device of this cycle still
held (as ``corral schedule --cycles`` keeps the allocations on its model): a named claim gains its
allocation and the pods in ``reservedFor``; a claim made from a template is assumed created (named
``<pod>-<entry>``, the template's spec, allocated and reserved) and the pod's
``status.resourceClaimStatuses`` names it.
"""

from __future__ import annotations

from typing import Any

from corral.dra.inventory import Inventory
from corral.dra.records import ClaimAllocation
from corral.kube.api import RESOURCES, ResourceType
from corral.model.clock import format_time

__all__ = ["CLAIM", "FINALIZER", "allocation_status", "assume_claims", "claim_patches"]

FINALIZER = "resource.kubernetes.io/delete-protection"
CLAIM: ResourceType = next(r for r in RESOURCES if r.kind == "ResourceClaim")


def allocation_status(inv: Inventory | None, record: ClaimAllocation, now: float) -> dict[str, Any]:
    """``status.allocation`` for ``record``, in the shape kube-scheduler writes (resource.k8s.io/v1)."""
    results = []
    for d in record.devices:
        row = {k: d[k] for k in ("request", "driver", "pool", "device")}
        if d.get("adminAccess"):
            row["adminAccess"] = True
        results.append(row)
    config: list[dict[str, Any]] = []
    claim = inv.claims.get(record.claim) if inv is not None else None
    if claim is not None and inv is not None:
        requested = [d["request"] for d in record.devices]
        by_class: dict[str, list[str]] = {}
        for r in claim.spec.requests:
            for sub in r.alternatives:
                if sub.name in requested:
                    by_class.setdefault(sub.device_class, []).append(sub.name)
        for name, reqs in by_class.items():
            klass = inv.classes.get(name)
            for c in klass.config if klass is not None else ():
                config.append({"source": "FromClass", "requests": sorted(set(reqs)), **dict(c)})
        for c in claim.spec.config:
            config.append({"source": "FromClaim", **dict(c)})
    out: dict[str, Any] = {
        "devices": {"results": results, **({"config": config} if config else {})},
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [record.node]}]}
            ]
        },
        "allocationTimestamp": format_time(now),
    }
    return out


def claim_patches(
    raw: dict, record: ClaimAllocation, pod_uid: str, inv: Inventory | None, now: float
) -> tuple[dict | None, dict | None]:
    """The (metadata patch, status patch) that reserve ``raw`` (the cached claim) for the pod of
    ``record``; None for a write that is already there."""
    meta = raw.get("metadata") or {}
    rv = meta.get("resourceVersion")
    guard = {"resourceVersion": rv} if rv else {}
    finalizers = list(meta.get("finalizers") or [])
    meta_patch = None
    if FINALIZER not in finalizers:
        meta_patch = {"metadata": {**guard, "finalizers": [*finalizers, FINALIZER]}}
    status = raw.get("status") or {}
    _, _, pod_name = record.pod.partition("/")
    reserved = list(status.get("reservedFor") or [])
    entry = _consumer(inv, record, pod_name, pod_uid)
    body: dict[str, Any] = {}
    if not any(
        r.get("name") == entry["name"] and r.get("resource", "pods") == entry["resource"] for r in reserved
    ):
        body["reservedFor"] = [*reserved, entry]
    if not status.get("allocation"):
        body["allocation"] = allocation_status(inv, record, now)
    status_patch = {"metadata": guard, "status": body} if body else None
    return meta_patch, status_patch


def _consumer(inv: Inventory | None, record: ClaimAllocation, pod_name: str, pod_uid: str) -> dict[str, str]:
    """The ``reservedFor`` entry of ``record``: the pod, or for a claim of a scheduling.k8s.io PodGroup
    the group (KEP-5729: reserved for the PodGroup instead of its individual pods)."""
    group = inv.groups.get(record.claim) if inv is not None else None
    if group is not None:
        return {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": group[0], "uid": group[1]}
    return {"resource": "pods", "name": pod_name, "uid": pod_uid}


def write_claims(
    api: Any, cache: Any, records: list[ClaimAllocation], pod_raw: dict, inv: Inventory | None, now: float
) -> tuple[str, str] | None:
    """Reserve every claim of ``records`` for their pod (finalizer, then status), before its bind;
    None when all are written, else the bind's ``(outcome, detail)``: ``skipped`` while a claim is
    still to be created, ``failed`` when a write is refused (the bind waits for the next cycle)."""
    from corral.kube.api import APIError

    uid = (pod_raw.get("metadata") or {}).get("uid", "")
    for record in records:
        if record.template:
            return "skipped", f"waiting for the ResourceClaim of template {record.template} to be created"
        ns, _, name = record.claim.partition("/")
        found = cache.find("ResourceClaim", record.claim)
        if found is None:
            return "skipped", f"ResourceClaim {record.claim} is not in the cache"
        raw = found[1]
        meta_patch, status_patch = claim_patches(raw, record, uid, inv, now)
        try:
            if meta_patch is not None:
                raw = api.patch(CLAIM.item(name, ns), meta_patch)
                if status_patch is not None:  # the finalizer moved the version on
                    rv = (raw.get("metadata") or {}).get("resourceVersion")
                    status_patch["metadata"] = {"resourceVersion": rv} if rv else {}
            if status_patch is not None:
                raw = api.patch(CLAIM.item(name, ns, "status"), status_patch)
        except APIError as exc:
            return "failed", f"ResourceClaim {record.claim}: {exc.status} {exc.message}"
        cache.assume("ResourceClaim", record.claim, _assumed(raw, status_patch), _assumed(raw, status_patch))
    return None


def _assumed(raw: dict, status_patch: dict | None) -> dict:
    """What the cache shows of the claim until the watch confirms the write."""
    status = (status_patch or {}).get("status") or {}
    return (
        {"status": status}
        if status
        else {"metadata": {"finalizers": (raw.get("metadata") or {}).get("finalizers")}}
    )


def _group_claim(cache: Any, pod: dict, ns: str, claim_name: str) -> tuple[str, str, str]:
    """``(PodGroup, its uid, entry name)`` when ``claim_name`` is a claim of the pod's scheduling.k8s.io
    PodGroup (named by it, generated for it, or ``<podgroup>-<entry>`` as corral instantiates it); else
    empty strings."""
    pg = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") or ""
    found = cache.find("PodGroup", f"{ns}/{pg}") if pg else None
    if found is None:
        return "", "", ""
    raw = found[1]
    generated = {
        c.get("resourceClaimName"): c.get("name")
        for c in (raw.get("status") or {}).get("resourceClaimStatuses") or []
    }
    for c in (raw.get("spec") or {}).get("resourceClaims") or []:
        name = c.get("name", "")
        if claim_name in (c.get("resourceClaimName"), f"{pg}-{name}") or generated.get(claim_name) == name:
            return pg, (raw.get("metadata") or {}).get("uid", ""), name
    return "", "", ""


def assume_claims(cache: Any, records: list[ClaimAllocation], now: float, ttl: float) -> None:
    """Overlay on ``cache`` the claims of a dry run's binds (module docstring), for ``ttl`` seconds."""
    reserved: dict[str, list[dict]] = {}
    statuses: dict[tuple[str, str], list[dict]] = {}  # (kind, key) -> status.resourceClaimStatuses
    for record in records:
        found = cache.find("Pod", record.pod)
        if found is None:
            continue
        pod = found[1]
        ns, _, pod_name = record.pod.partition("/")
        _, _, claim_name = record.claim.partition("/")
        pg, pg_uid, pg_entry = _group_claim(cache, pod, ns, claim_name)
        entry = (
            {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": pg, "uid": pg_uid}
            if pg
            else {"resource": "pods", "name": pod_name, "uid": (pod.get("metadata") or {}).get("uid", "")}
        )
        claim = cache.find("ResourceClaim", record.claim)
        if claim is None and record.template:
            template = cache.find("ResourceClaimTemplate", f"{ns}/{record.template}")
            if template is None:
                continue
            raw = {
                "apiVersion": CLAIM.api_version,
                "kind": "ResourceClaim",
                "metadata": {"name": claim_name, "namespace": ns, "uid": f"dry-run-{record.claim}"},
                "spec": ((template[1].get("spec") or {}).get("spec")) or {},
                "status": {"allocation": allocation_status(None, record, now), "reservedFor": [entry]},
            }
            if not cache.assume_created("ResourceClaim", record.claim, raw, ttl):
                continue
            reserved[record.claim] = [entry]
            owner = ("PodGroup", f"{ns}/{pg}") if pg else ("Pod", record.pod)
            have = statuses.get(owner)
            if have is None:
                obj = cache.find(*owner)
                have = statuses[owner] = list(
                    ((obj[1] if obj else {}).get("status") or {}).get("resourceClaimStatuses") or []
                )
            name = pg_entry or (
                claim_name[len(pod_name) + 1 :] if claim_name.startswith(f"{pod_name}-") else claim_name
            )
            have.append({"name": name, "resourceClaimName": claim_name})
            continue
        if claim is None:
            continue
        status = claim[1].get("status") or {}
        have = reserved.setdefault(record.claim, list(status.get("reservedFor") or []))
        if not any(
            r.get("name") == entry["name"] and r.get("resource", "pods") == entry["resource"] for r in have
        ):
            have.append(entry)
        patch: dict[str, Any] = {"reservedFor": list(have)}
        if not status.get("allocation"):
            patch["allocation"] = allocation_status(None, record, now)
        cache.assume("ResourceClaim", record.claim, {"status": patch}, None, ttl)
    for (kind, key), have in statuses.items():
        cache.assume(kind, key, {"status": {"resourceClaimStatuses": have}}, None, ttl)
