"""Dynamic Resource Allocation objects (``resource.k8s.io``) as records: read and reported here; the
allocation is :mod:`corral.dra`'s.

- a pending pod corral schedules that has ``spec.resourceClaims`` (and a ``scheduling.k8s.io`` PodGroup
  with ``spec.resourceClaims`` its pods share) has its claims allocated by the ``dra`` plugin
  (:mod:`corral.dra`);
- ``ResourceSlice``, ``DeviceClass``, ``ResourceClaim`` and ``ResourceClaimTemplate`` are read (every
  served version: ``v1``, ``v1beta1``, ``v1beta2``) and counted by ``corral validate``: devices per node,
  claims allocated and waiting, device classes that stand for an extended resource (Kubernetes then
  serves a pod's extended-resource request from devices, KEP-5004; corral sees only the node's
  allocatable, so such pods wait in corral where kube-scheduler would place them: warned);
- pods bound to a node hold their devices already: they are fixed load as before.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from corral.manifests.fields import Obj

__all__ = ["DRA_APIS", "DRA_KINDS", "DraRec", "claim_refs", "claim_statuses", "dra_lines", "parse_dra"]

DRA_APIS = tuple(f"resource.k8s.io/{v}" for v in ("v1", "v1beta1", "v1beta2"))
DRA_KINDS = ("ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate")
NAMESPACED = ("ResourceClaim", "ResourceClaimTemplate")


@dataclass
class DraRec:
    kind: str
    name: str
    namespace: str
    node: str = ""  # ResourceSlice: spec.nodeName ("" for a slice of several nodes)
    devices: int = 0  # ResourceSlice: devices listed
    driver: str = ""
    allocated: bool = False  # ResourceClaim: status.allocation is set
    extended_resource: str = ""  # DeviceClass: spec.extendedResourceName
    file: str = ""
    #: the object as the allocator reads it (corral.dra.objects: Slice, DeviceClass, Claim, ClaimSpec)
    obj: Any = None


def parse_dra(o: Obj) -> DraRec:
    """The little of a DRA object that ``corral validate`` reports."""
    spec, status = o.section("spec"), o.section("status")
    from corral.dra import objects

    rec = DraRec(o.kind, o.name, o.namespace, file=o.file)
    if o.kind == "ResourceSlice":
        rec.node = o.string(spec.get("nodeName"), "spec.nodeName")
        rec.devices = len(o.listof(spec.get("devices"), "spec.devices"))
        rec.driver = o.string(spec.get("driver"), "spec.driver")
        rec.obj = objects.parse_slice(o)
    elif o.kind == "DeviceClass":
        rec.extended_resource = o.string(spec.get("extendedResourceName"), "spec.extendedResourceName")
        rec.obj = objects.parse_class(o)
    elif o.kind == "ResourceClaim":
        rec.allocated = bool(status.get("allocation"))
        rec.obj = objects.parse_claim(o)
    else:
        rec.obj = objects.parse_template(o)
    return rec


def dra_lines(recs: list[DraRec]) -> tuple[list[str], list[tuple[str, str, str]]]:
    """``(what was read, warnings as (object, field, message))`` for the DRA objects of a snapshot."""
    if not recs:
        return [], []
    by_kind: dict[str, list[DraRec]] = {}
    for r in recs:
        by_kind.setdefault(r.kind, []).append(r)
    parts = []
    slices = by_kind.get("ResourceSlice", [])
    if slices:
        nodes = {s.node for s in slices if s.node}
        drivers = Counter(s.driver for s in slices)
        parts.append(
            f"{len(slices)} ResourceSlices ({sum(s.devices for s in slices)} devices on {len(nodes)} nodes; "
            f"drivers {', '.join(sorted(d or '?' for d in drivers))})"
        )
    classes = by_kind.get("DeviceClass", [])
    if classes:
        parts.append(f"{len(classes)} DeviceClasses")
    claims = by_kind.get("ResourceClaim", [])
    if claims:
        done = sum(1 for c in claims if c.allocated)
        parts.append(f"{len(claims)} ResourceClaims ({done} allocated, {len(claims) - done} not)")
    templates = by_kind.get("ResourceClaimTemplate", [])
    if templates:
        parts.append(f"{len(templates)} ResourceClaimTemplates")
    lines = [
        "read Dynamic Resource Allocation objects (resource.k8s.io): "
        + "; ".join(parts)
        + ". corral allocates devices to the claims of the pods it schedules (the dra plugin), a "
        "scheduling.k8s.io PodGroup's claims once for all the pods of the group that name them"
    ]
    warnings: list[tuple[str, str, str]] = []
    for c in classes:
        if c.extended_resource:
            warnings.append(
                (
                    f"DeviceClass {c.name}",
                    "spec.extendedResourceName",
                    f"Kubernetes serves requests for {c.extended_resource} from this class's devices; "
                    f"corral counts the class's devices as {c.extended_resource} only for claims that use "
                    "the class, and gives a pod that asks for it as an extended resource (no claim) only "
                    "what nodes advertise in status.allocatable: such pods may wait in corral where "
                    "kube-scheduler would place them",
                )
            )
    return lines, warnings


def claim_refs(o: Obj, raw: Any, base: str = "spec.resourceClaims") -> tuple[tuple[str, str, str], ...]:
    """A pod's (or a PodGroup's) ``spec.resourceClaims`` as ``(entry name, resourceClaimName,
    resourceClaimTemplateName)``; exactly one of the two sources must be set (the API's rule)."""
    out = []
    for i, c in enumerate(o.listof(raw, base)):
        path = f"{base}[{i}]"
        c = o.mapping(c, path)
        name = o.string(c.get("name"), f"{path}.name")
        claim = o.string(c.get("resourceClaimName"), f"{path}.resourceClaimName")
        template = o.string(c.get("resourceClaimTemplateName"), f"{path}.resourceClaimTemplateName")
        if not name:
            raise o.error("missing name", f"{path}.name")
        if bool(claim) == bool(template):
            raise o.error("exactly one of resourceClaimName and resourceClaimTemplateName must be set", path)
        out.append((name, claim, template))
    return tuple(out)


def claim_statuses(o: Obj, raw: Any, base: str = "status.resourceClaimStatuses") -> dict[str, str]:
    """``status.resourceClaimStatuses`` (of a pod or a PodGroup): entry name -> the claim generated for
    it ("" when none is needed)."""
    out = {}
    for i, c in enumerate(o.listof(raw, base)):
        c = o.mapping(c, f"{base}[{i}]")
        out[o.string(c.get("name"), f"{base}[{i}].name")] = o.string(
            c.get("resourceClaimName"), f"{base}[{i}].resourceClaimName"
        )
    return out


def claim_names(o: Obj, raw: Any) -> tuple[str, ...]:
    """The names of a pod's ``spec.resourceClaims``."""
    out = []
    for i, c in enumerate(o.listof(raw, "spec.resourceClaims")):
        c = o.mapping(c, f"spec.resourceClaims[{i}]")
        out.append(o.string(c.get("name"), f"spec.resourceClaims[{i}].name") or f"[{i}]")
    return tuple(out)
