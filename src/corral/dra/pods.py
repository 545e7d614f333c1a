"""Pods meet the inventory: their claims resolved, snapshot allocations read, and the devices charged to
pod requests and node allocatable as resource vectors (:mod:`corral.dra.inventory`, "Resources")."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from corral.dra.inventory import ClaimRef, Inventory, class_counts, resource_name
from corral.dra.objects import EXACT, Claim, ClaimSpec
from corral.errors import InputError

__all__ = ["attach_pods", "inventory_of"]

_HOLDING_PHASES = ("Pending", "Running", "")


def _holds(rec: Any) -> bool:
    return bool(rec.node_name) and rec.phase in _HOLDING_PHASES and not rec.deleting


def attach_pods(
    inv: Inventory,
    pods: list[Any],
    nodes: list[Any],
    templates: dict[tuple[str, str], ClaimSpec],
    served: set[str],
    groups: dict[tuple[str, str], Any] | None = None,
) -> None:
    """Resolve the claims of ``pods`` (PodRecs; ``groups``: the scheduling.k8s.io PodGroups by namespace
    and name, whose claims their pods share), record the snapshot's allocations, and work out the
    devices charged to pod requests and node allocatable (``inv.pod_extra``, ``inv.node_extra``)."""
    for rec in sorted(pods, key=lambda p: (p.namespace, p.name)):
        if not rec.claim_refs:
            continue
        refs = []
        group = (groups or {}).get((rec.namespace, rec.native_group)) if rec.native_group else None
        for entry, claim_name, template in rec.claim_refs:
            if group is not None and (entry, claim_name, template) in group.claims:
                key, why = _resolve_group(inv, rec, group, entry, claim_name, template, templates)
            else:
                key, why = _resolve(inv, rec, entry, claim_name, template, templates)
            if why:
                if rec.scheduler in served and not rec.node_name:
                    inv.missing.setdefault(rec.uid, why)
                continue
            if key:
                refs.append(ClaimRef(entry, key))
                inv.consumers.setdefault(key, []).append(rec.uid)
        inv.pod_claims[rec.uid] = tuple(refs)
    by_uid = {p.uid: p for p in pods}
    by_name = {(p.namespace, p.name): p for p in pods}
    index = inv.device_index()
    rows = {n: i for i, n in enumerate(inv.node_names)}
    for key, claim in sorted(inv.claims.items()):
        if not claim.allocated:
            continue
        devs = tuple((r, index[(d, p, n)]) for r, d, p, n in claim.devices if (d, p, n) in index)
        row = rows.get(claim.node, -1)
        if row < 0 and devs:
            row = int(inv.dev_node[devs[0][1]])
        inv.allocations[key] = (row, devs)
        reserved = [by_name.get((claim.namespace, n)) for n in claim.reserved_for]
        if claim.reserved_groups:
            # reserved for a PodGroup (KEP-5729): allocated while the group exists, whatever its pods
            # do; kube-scheduler never deallocates such a claim
            inv.pinned.add(key)
        elif any(
            r is not None and (r.scheduler not in served or key not in _named_claims(inv, r))
            for r in reserved
        ):
            # in use by pods of another scheduler, or by a pod that does not name it (the claim
            # kube-scheduler makes for an extended-resource request, KEP-5004): a fact
            inv.pinned.add(key)
        # reserved only for pods the snapshot no longer has (deleted: the resourceclaim controller drops
        # them and frees the claim), or for none: held while a consumer in the snapshot holds a node
    _charge(inv, by_uid, nodes)


def _named_claims(inv: Inventory, rec: Any) -> set[str]:
    return {r.claim for r in inv.pod_claims.get(rec.uid, ())}


def _resolve(
    inv: Inventory,
    rec: Any,
    entry: str,
    claim_name: str,
    template: str,
    templates: dict[tuple[str, str], ClaimSpec],
) -> tuple[str, str]:
    """``(claim key, why it cannot be had)`` of one pod claim entry; ``("", "")``: no claim needed."""
    ns = rec.namespace
    if claim_name:
        claim = inv.claims.get(f"{ns}/{claim_name}")
        if claim is None:
            return "", f"pod {ns}/{rec.name}: waiting for ResourceClaim {ns}/{claim_name} to be created"
        if claim.deleting and not rec.node_name:
            return "", f"pod {ns}/{rec.name}: ResourceClaim {ns}/{claim_name} is being deleted"
        return claim.key, ""
    if entry in rec.claim_statuses:
        generated = rec.claim_statuses[entry]
        if not generated:
            return "", ""  # the controller decided no claim is needed
        claim = inv.claims.get(f"{ns}/{generated}")
        if claim is None:
            return "", f"pod {ns}/{rec.name}: waiting for ResourceClaim {ns}/{generated} to be created"
        return claim.key, ""
    spec = templates.get((ns, template))
    if spec is None:
        return "", f"pod {ns}/{rec.name}: ResourceClaimTemplate {ns}/{template} does not exist"
    if rec.node_name:
        return "", ""  # bound without its generated claim in the snapshot: holds nothing corral sees
    name = f"{rec.name}-{entry}"
    claim = Claim(namespace=ns, name=name, spec=spec, template=template, file=rec.file)
    inv.claims[claim.key] = claim
    return claim.key, ""


def _resolve_group(
    inv: Inventory,
    rec: Any,
    group: Any,
    entry: str,
    claim_name: str,
    template: str,
    templates: dict[tuple[str, str], ClaimSpec],
) -> tuple[str, str]:
    """``(claim key, why it cannot be had)`` of a pod's entry that matches a claim of its PodGroup
    exactly (KEP-5729): the named claim, or the one claim generated for the group from the template —
    named by the group's (else the pod's) ``status.resourceClaimStatuses``, else instantiated by corral
    as ``<podgroup>-<entry>`` once for all the group's pods."""
    ns, pg = rec.namespace, rec.native_group
    if claim_name:
        key, why = _resolve(inv, rec, entry, claim_name, template, templates)
    elif entry in group.claim_statuses or entry in rec.claim_statuses:
        generated = group.claim_statuses.get(entry, rec.claim_statuses.get(entry, ""))
        if not generated:
            return "", ""  # the controller decided no claim is needed
        if f"{ns}/{generated}" not in inv.claims:
            return (
                "",
                f"pod {ns}/{rec.name}: waiting for ResourceClaim {ns}/{generated} of PodGroup {pg} to be created",
            )
        key, why = f"{ns}/{generated}", ""
    else:
        spec = templates.get((ns, template))
        if spec is None:
            return "", f"PodGroup {ns}/{pg}: ResourceClaimTemplate {ns}/{template} does not exist"
        key, why = f"{ns}/{pg}-{entry}", ""
        if key not in inv.claims:
            inv.claims[key] = Claim(
                namespace=ns, name=f"{pg}-{entry}", spec=spec, template=template, file=rec.file
            )
    if key:
        inv.groups[key] = (pg, group.uid)
    return key, why


def _claim_counts(inv: Inventory, claim: Claim) -> dict[str, float]:
    """Devices (milli) a claim is charged, by resource name."""
    out: dict[str, float] = defaultdict(float)
    if claim.key in inv.allocations:
        subs = {s.name: s for r in claim.spec.requests for s in r.alternatives}
        for req, _dev in inv.allocations[claim.key][1]:
            sub = subs.get(req)
            if sub is not None:
                out[resource_name(inv.classes.get(sub.device_class), sub.device_class)] += 1000.0
        return out
    for r in claim.spec.requests:
        sub = r.alternatives[0]
        if sub.mode == EXACT:
            out[resource_name(inv.classes.get(sub.device_class), sub.device_class)] += 1000.0 * sub.count
    return out


def _charge(inv: Inventory, by_uid: dict[str, Any], nodes: list[Any]) -> None:
    """Fill ``inv.pod_extra`` and ``inv.node_extra`` (records are never changed: the watch cache of
    ``corral run`` assembles the same records again and again)."""
    used_classes: set[str] = set()
    for key, uids in sorted(inv.consumers.items()):
        claim = inv.claims[key]
        used_classes.update(s.device_class for r in claim.spec.requests for s in r.alternatives)
        reserved = [u for n in claim.reserved_for for u in uids if by_uid[u].name == n]
        holding = [u for u in uids if _holds(by_uid[u])]
        payer = (reserved or holding or sorted(uids, key=lambda u: (by_uid[u].namespace, by_uid[u].name)))[0]
        if key in inv.allocations and not (reserved or holding):
            continue  # allocated for pods not in the snapshot: the node's books hold it (pinned)
        extra = inv.pod_extra.setdefault(payer, {})
        for name, milli in _claim_counts(inv, claim).items():
            extra[name] = extra.get(name, 0.0) + milli
    # the class of every allocation in force counts on its node too
    for key in inv.allocations:
        claim = inv.claims[key]
        used_classes.update(s.device_class for r in claim.spec.requests for s in r.alternatives)
    counts_by_class = class_counts(inv, {c for c in used_classes if c in inv.classes})
    # what the classes that stand for an extended resource select on each node, claims or not (the
    # simulator counts a DRA cluster's GPUs this way: corral.sim.clusters)
    extended = class_counts(inv, {n for n, c in inv.classes.items() if c.extended_resource})
    for cname, per_node in extended.items():
        rname = inv.classes[cname].extended_resource
        have = inv.extended_counts.get(rname)
        inv.extended_counts[rname] = (
            per_node * 1000.0 if have is None else np.maximum(have, per_node * 1000.0)
        )
    for row, name in enumerate(inv.node_names):
        extra = {}
        for cname, per_node in counts_by_class.items():
            if per_node[row] > 0:
                rname = resource_name(inv.classes[cname], cname)
                extra[rname] = max(extra.get(rname, 0.0), float(per_node[row]) * 1000.0)
        if extra:
            inv.node_extra[name] = extra


def _native_groups(by_kind: dict[str, list]) -> dict[tuple[str, str], Any]:
    """The scheduling.k8s.io PodGroups with claims (those under a composite too), by namespace and name."""
    out = {}
    for g in by_kind.get("PodGroup", []):
        native = getattr(g, "native", None)
        if native is None:
            continue
        if native.claims:
            out[(g.namespace, g.name)] = native
        if native.composite is not None:
            for leaf, group in native.composite.leaves.items():
                if group.claims:
                    out[(g.namespace, leaf)] = group
    return out


def inventory_of(by_kind: dict[str, list], served: set[str]) -> Inventory | None:
    """The DRA inventory of a snapshot's records (``Cluster.dra``), or None when no pod has claims and no
    claim is allocated; with the devices charged to pod requests and node allocatable."""
    from corral.dra.inventory import build_inventory

    pods = by_kind.get("Pod", [])
    claims = [r.obj for r in by_kind.get("ResourceClaim", [])]
    extended = any(r.obj.extended_resource for r in by_kind.get("DeviceClass", []))
    if not any(p.claim_refs for p in pods) and not any(c.allocated for c in claims) and not extended:
        return None
    templates = {}
    for r in by_kind.get("ResourceClaimTemplate", []):
        key = (r.namespace, r.name)
        if key in templates:
            raise InputError(
                "duplicate claim template",
                file=r.file or None,
                obj=f"ResourceClaimTemplate {key[0]}/{key[1]}",
                field="metadata.name",
            )
        templates[key] = r.obj
    inv = build_inventory(
        sorted({n.name for n in by_kind.get("Node", [])}),
        [r.obj for r in by_kind.get("ResourceSlice", [])],
        [r.obj for r in by_kind.get("DeviceClass", [])],
        claims,
        templates,
    )
    attach_pods(inv, pods, by_kind.get("Node", []), templates, served, _native_groups(by_kind))
    for p in pods:
        refs = inv.pod_claims.get(p.uid)
        if refs:
            # the pod's class: a claim made from a template is the template's shape; a named claim is itself
            # (a claim of a PodGroup is the group's own, whatever it is made from)
            inv.pod_key[p.uid] = tuple(
                ("template", inv.claims[r.claim].namespace, inv.claims[r.claim].template)
                if inv.claims[r.claim].template and r.claim not in inv.groups
                else ("claim", r.claim)
                for r in refs
            )
    return inv
