"""``corral run`` writes a pod's resource claims before its bind, as kube-scheduler's DynamicResources
plugin does in PreBind (``bindClaim``): the finalizer ``resource.kubernetes.io/delete-protection`` on the
claim, then its status — ``allocation`` (the devices, the configuration of their classes and of the
claim, the node selector of the node, the allocation time) and the pod added to ``reservedFor`` — and
only then the ``Binding``. A claim already allocated (shared with a pod placed earlier) only gains the
pod in ``reservedFor``. Both writes carry the claim's ``resourceVersion``: a claim changed meanwhile
answers 409 and the bind is left for the next cycle, decided again from fresh state.

A claim corral instantiated from a template (the resourceclaim controller has not created it yet) is
not written: the bind waits, as kube-scheduler's PreEnqueue waits for the claim, and the next cycle
sees the generated claim (``status.resourceClaimStatuses``).
"""

from __future__ import annotations

from typing import Any

from corral.dra.inventory import Inventory
from corral.dra.records import ClaimAllocation
from corral.kube.api import RESOURCES, ResourceType
from corral.model.clock import format_time

__all__ = ["CLAIM", "FINALIZER", "allocation_status", "claim_patches"]

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
    entry = {"resource": "pods", "name": pod_name, "uid": pod_uid}
    body: dict[str, Any] = {}
    if not any(r.get("name") == pod_name and r.get("resource", "pods") == "pods" for r in reserved):
        body["reservedFor"] = [*reserved, entry]
    if not status.get("allocation"):
        body["allocation"] = allocation_status(inv, record, now)
    status_patch = {"metadata": guard, "status": body} if body else None
    return meta_patch, status_patch


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
