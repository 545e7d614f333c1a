"""The ``resource.k8s.io`` objects as the allocator reads them (``v1``; ``v1beta2`` has the same shape,
``v1beta1`` puts a request's fields on the request itself and a device's under ``basic``).

Every field is honoured, refused by name (:class:`~corral.errors.InputError`, one line: the object, the
field, what to do), or documented as inert (docs/kubernetes.md, "Dynamic Resource Allocation"):

- ResourceSlice ``spec``: ``driver``, ``pool{name, generation, resourceSliceCount}``, ``nodeName``,
  ``devices[]{name, attributes, capacity}`` and partitionable devices (KEP-4815, e.g. MIG):
  ``sharedCounters[]{name, counters}`` (in a slice of its own as ``v1`` asks, or beside the devices as
  ``v1beta1`` allowed) and per device ``consumesCounters[]{counterSet, counters}`` are honoured
  (:mod:`corral.dra.inventory`). Refused: slices for several nodes (``allNodes``, ``nodeSelector``,
  ``perDeviceNodeSelection``), ``partitionTypeAttribute`` and, per device, ``consumesCounters[].
  compatibilityGroups`` (1.37's co-allocation groups), ``taints``, ``bindsToNode``,
  ``bindingConditions``/``bindingFailureConditions``, ``allowMultipleAllocations: true`` (consumable
  capacity) and per-device node selection.
- DeviceClass ``spec``: ``selectors[].cel.expression`` and ``extendedResourceName`` (the resource name
  the class's devices count as) are honoured; ``config`` is copied into an allocation's configuration,
  as kube-scheduler does (it changes no placement).
- ResourceClaim / ResourceClaimTemplate ``spec.devices``: ``requests[]`` with ``exactly`` (and v1beta1's
  inline form) — ``deviceClassName``, ``selectors``, ``allocationMode`` (``ExactCount``, default, with
  ``count``, default 1; ``All``), ``adminAccess`` — and ``firstAvailable[]`` sub-requests;
  ``constraints[].matchAttribute`` (with ``requests``) are honoured. ``config`` is copied, inert.
  ``tolerations`` are inert (corral refuses device taints, so there is nothing to tolerate). Refused:
  ``capacity.requests`` (consumable capacity) and ``constraints[].distinctAttribute``.
- ResourceClaim ``status.allocation`` (its devices are in use; its node from ``nodeSelector``) and
  ``status.reservedFor`` (the pods using it; a ``podgroups`` entry — a PodGroup's claim, KEP-5729 —
  keeps it allocated while the group exists: corral never frees it) are honoured; ``status.devices`` (what drivers report) is
  inert. A claim with ``metadata.deletionTimestamp`` is not used by new pods, as in Kubernetes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral.model.quantity import parse_quantity

if TYPE_CHECKING:  # the manifests package imports this one: only the type here
    from corral.manifests.fields import Obj

__all__ = [
    "ALL",
    "EXACT",
    "Claim",
    "ClaimSpec",
    "Constraint",
    "Device",
    "DeviceClass",
    "Request",
    "Slice",
    "SubRequest",
    "parse_claim",
    "parse_class",
    "parse_slice",
    "parse_template",
]

EXACT, ALL = "ExactCount", "All"
#: Kubernetes' limit on the devices of one allocation (resourceapi.AllocationResultsMaxSize)
MAX_RESULTS = 32


@dataclass(frozen=True)
class Device:
    name: str
    attributes: tuple[tuple[str, Any], ...]  # fully qualified name -> value, sorted
    capacity: tuple[tuple[str, int], ...]  # fully qualified name -> milli, sorted
    #: consumesCounters: (counter set, ((counter, milli), ...)) — a partitionable device (KEP-4815)
    counters: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()


@dataclass
class Slice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node: str
    devices: list[Device]
    file: str = ""
    #: sharedCounters: counter set -> ((counter, milli), ...), in the order the slice lists them
    counter_sets: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]
    extended_resource: str
    config: tuple[Any, ...]


@dataclass(frozen=True)
class SubRequest:
    """One way to satisfy a request: an ``exactly`` request, or one ``firstAvailable`` entry."""

    name: str  # the request's name, or "request/sub-request"
    device_class: str
    selectors: tuple[str, ...]
    mode: str
    count: int
    admin: bool


@dataclass(frozen=True)
class Request:
    name: str
    alternatives: tuple[SubRequest, ...]  # one for ``exactly``, in order for ``firstAvailable``


@dataclass(frozen=True)
class Constraint:
    attribute: str  # fully qualified
    requests: frozenset[str]  # empty: every request


@dataclass(frozen=True)
class ClaimSpec:
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...]
    config: tuple[Any, ...]


@dataclass
class Claim:
    namespace: str
    name: str
    spec: ClaimSpec
    uid: str = ""
    deleting: bool = False
    #: status.allocation: the node (from its nodeSelector; "" when it names none) and the devices as
    #: (request, driver, pool, device)
    allocated: bool = False
    node: str = ""
    devices: tuple[tuple[str, str, str, str], ...] = ()
    reserved_for: tuple[str, ...] = ()  # pod names (status.reservedFor, resource: pods)
    #: PodGroup names (status.reservedFor, resource: podgroups — KEP-5729's claims of a PodGroup)
    reserved_groups: tuple[str, ...] = ()
    template: str = ""  # a claim corral instantiates from this template (not yet created)
    file: str = ""
    raw_allocation: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _refuse(o: Obj, path: str, what: str) -> None:
    raise o.error(
        f"{what}: corral does not allocate these; remove the field or schedule without corral", path
    )


def _qualify(driver: str, key: str) -> str:
    return key if "/" in key else f"{driver}/{key}"


def _scalar(o: Obj, kind: str, v: Any, path: str) -> Any:
    if kind == "int":
        return v if isinstance(v, int) and not isinstance(v, bool) else o.integer(v, path)
    if kind == "bool":
        return o.boolean(v, path, False)
    return o.string(v, path)


def _attr_value(o: Obj, raw: Any, path: str) -> Any:
    """An attribute's value; the list forms (``ints``, ``bools``, ``strings``, ``versions``) are CEL lists
    (a tuple here, so that devices stay hashable)."""
    m = o.mapping(raw, path)
    for kind in ("int", "bool", "string", "version"):
        if kind in m:
            return _scalar(o, kind, m[kind], f"{path}.{kind}")
        if f"{kind}s" in m:
            items = o.listof(m[f"{kind}s"], f"{path}.{kind}s")
            return tuple(_scalar(o, kind, v, f"{path}.{kind}s[{i}]") for i, v in enumerate(items))
    raise o.error("expected one of int, bool, string, version (or their lists)", path)


def _device(o: Obj, raw: Any, driver: str, path: str) -> Device:
    d = o.mapping(raw, path)
    body = o.mapping(d.get("basic"), f"{path}.basic") if "basic" in d else d  # v1beta1
    base = f"{path}.basic" if "basic" in d else path
    for key, what in (
        ("taints", "device taints"),
        ("bindsToNode", "devices bound to a node at allocation (bindsToNode)"),
        ("bindingConditions", "devices with binding conditions"),
        ("bindingFailureConditions", "devices with binding conditions"),
        ("nodeName", "per-device node selection"),
        ("nodeSelector", "per-device node selection"),
        ("allNodes", "per-device node selection"),
        ("nodeAllocatableResources", "devices that feed node allocatable (nodeAllocatableResources)"),
    ):
        if body.get(key):
            _refuse(o, f"{base}.{key}", what)
    if o.boolean(body.get("allowMultipleAllocations"), f"{base}.allowMultipleAllocations", False):
        _refuse(o, f"{base}.allowMultipleAllocations", "devices shared by consumable capacity")
    attrs = {
        _qualify(driver, str(k)): _attr_value(o, v, f"{base}.attributes.{k}")
        for k, v in o.mapping(body.get("attributes"), f"{base}.attributes").items()
    }
    cap = {}
    for k, v in o.mapping(body.get("capacity"), f"{base}.capacity").items():
        value = v.get("value") if isinstance(v, dict) else v
        cap[_qualify(driver, str(k))] = int(
            round(parse_quantity(value, where=o.ident, field=f"{base}.capacity.{k}"))
        )
    name = o.string(d.get("name"), f"{path}.name")
    if not name:
        raise o.error("missing device name", f"{path}.name")
    counters: list[tuple[str, tuple[tuple[str, int], ...]]] = []
    for i, c in enumerate(o.listof(body.get("consumesCounters"), f"{base}.consumesCounters")):
        cp = f"{base}.consumesCounters[{i}]"
        c = o.mapping(c, cp)
        if c.get("compatibilityGroups"):
            _refuse(o, f"{cp}.compatibilityGroups", "co-allocation groups of partitionable devices")
        counter_set = o.string(c.get("counterSet"), f"{cp}.counterSet")
        if not counter_set:
            raise o.error("missing counterSet", f"{cp}.counterSet")
        if any(s == counter_set for s, _ in counters):
            raise o.error(f"counter set {counter_set!r} is consumed twice", cp)
        counters.append((counter_set, _counters(o, c.get("counters"), f"{cp}.counters")))
    return Device(name, tuple(sorted(attrs.items())), tuple(sorted(cap.items())), tuple(counters))


def _counters(o: Obj, raw: Any, path: str) -> tuple[tuple[str, int], ...]:
    """A map of counters (``name: {value: quantity}``) in milli, sorted by name."""
    out = []
    for k, v in sorted(o.mapping(raw, path).items()):
        value = o.mapping(v, f"{path}.{k}").get("value")
        if value is None:
            raise o.error("a counter needs value", f"{path}.{k}.value")
        out.append((str(k), int(round(parse_quantity(value, where=o.ident, field=f"{path}.{k}.value")))))
    return tuple(out)


def _counter_sets(o: Obj, raw: Any) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    out: list[tuple[str, tuple[tuple[str, int], ...]]] = []
    for i, c in enumerate(o.listof(raw, "spec.sharedCounters")):
        cp = f"spec.sharedCounters[{i}]"
        c = o.mapping(c, cp)
        name = o.string(c.get("name"), f"{cp}.name")
        if not name:
            raise o.error("missing counter set name", f"{cp}.name")
        if any(n == name for n, _ in out):
            raise o.error(f"counter set {name!r} appears twice", f"{cp}.name")
        out.append((name, _counters(o, c.get("counters"), f"{cp}.counters")))
    return tuple(out)


def parse_slice(o: Obj) -> Slice:
    spec = o.section("spec")
    driver = o.string(spec.get("driver"), "spec.driver")
    if not driver:
        raise o.error("missing driver", "spec.driver")
    for key, what in (
        ("allNodes", "devices reachable from every node"),
        ("nodeSelector", "devices reachable from several nodes"),
        ("perDeviceNodeSelection", "per-device node selection"),
        ("partitionTypeAttribute", "partitionable devices (partitionTypeAttribute)"),
    ):
        if spec.get(key):
            _refuse(o, f"spec.{key}", what)
    node = o.string(spec.get("nodeName"), "spec.nodeName")
    if not node:
        raise o.error("a slice must name its node (corral allocates node-local devices)", "spec.nodeName")
    pool = o.mapping(spec.get("pool"), "spec.pool")
    devices = [
        _device(o, d, driver, f"spec.devices[{i}]")
        for i, d in enumerate(o.listof(spec.get("devices"), "spec.devices"))
    ]
    return Slice(
        name=o.name,
        driver=driver,
        pool=o.string(pool.get("name"), "spec.pool.name") or node,
        generation=o.integer(pool.get("generation", 0), "spec.pool.generation", minimum=0),
        slice_count=o.integer(pool.get("resourceSliceCount", 1), "spec.pool.resourceSliceCount", minimum=1),
        node=node,
        devices=devices,
        file=o.file,
        counter_sets=_counter_sets(o, spec.get("sharedCounters")),
    )


def _selectors(o: Obj, raw: Any, path: str) -> tuple[str, ...]:
    out = []
    for i, s in enumerate(o.listof(raw, path)):
        cel = o.mapping(o.mapping(s, f"{path}[{i}]").get("cel"), f"{path}[{i}].cel")
        expr = o.string(cel.get("expression"), f"{path}[{i}].cel.expression")
        if not expr:
            raise o.error("a selector needs a CEL expression", f"{path}[{i}].cel.expression")
        out.append(expr)
    return tuple(out)


def parse_class(o: Obj) -> DeviceClass:
    spec = o.section("spec")
    return DeviceClass(
        name=o.name,
        selectors=_selectors(o, spec.get("selectors"), "spec.selectors"),
        extended_resource=o.string(spec.get("extendedResourceName"), "spec.extendedResourceName"),
        config=tuple(o.listof(spec.get("config"), "spec.config")),
    )


def _sub(o: Obj, r: dict, name: str, path: str) -> SubRequest:
    if r.get("capacity"):
        _refuse(o, f"{path}.capacity", "consumable capacity requests")
    if r.get("derivedAttributes"):
        _refuse(o, f"{path}.derivedAttributes", "derived attributes")
    mode = o.string(r.get("allocationMode"), f"{path}.allocationMode") or EXACT
    if mode not in (EXACT, ALL):
        raise o.error(f"allocationMode must be {EXACT} or {ALL}, got {mode!r}", f"{path}.allocationMode")
    count = o.integer(r.get("count", 1), f"{path}.count", minimum=1)
    if mode == ALL and "count" in r:
        raise o.error("count is only allowed with allocationMode ExactCount", f"{path}.count")
    if count > MAX_RESULTS:
        raise o.error(
            f"count {count} exceeds Kubernetes' limit of {MAX_RESULTS} devices a claim", f"{path}.count"
        )
    klass = o.string(r.get("deviceClassName"), f"{path}.deviceClassName")
    if not klass:
        raise o.error("missing deviceClassName", f"{path}.deviceClassName")
    return SubRequest(
        name=name,
        device_class=klass,
        selectors=_selectors(o, r.get("selectors"), f"{path}.selectors"),
        mode=mode,
        count=count,
        admin=o.boolean(r.get("adminAccess"), f"{path}.adminAccess", False),
    )


def _claim_spec(o: Obj, raw: Any, path: str) -> ClaimSpec:
    devices = o.mapping(o.mapping(raw, path).get("devices"), f"{path}.devices")
    requests = []
    for i, r in enumerate(o.listof(devices.get("requests"), f"{path}.devices.requests")):
        rp = f"{path}.devices.requests[{i}]"
        r = o.mapping(r, rp)
        name = o.string(r.get("name"), f"{rp}.name")
        if not name:
            raise o.error("missing request name", f"{rp}.name")
        if r.get("firstAvailable"):
            subs = []
            for j, s in enumerate(o.listof(r["firstAvailable"], f"{rp}.firstAvailable")):
                sp = f"{rp}.firstAvailable[{j}]"
                s = o.mapping(s, sp)
                subs.append(_sub(o, s, f"{name}/{o.string(s.get('name'), f'{sp}.name')}", sp))
            requests.append(Request(name, tuple(subs)))
        elif "exactly" in r:
            requests.append(
                Request(name, (_sub(o, o.mapping(r["exactly"], f"{rp}.exactly"), name, f"{rp}.exactly"),))
            )
        else:  # v1beta1: the request's own fields
            requests.append(Request(name, (_sub(o, r, name, rp),)))
    constraints = []
    for i, c in enumerate(o.listof(devices.get("constraints"), f"{path}.devices.constraints")):
        cp = f"{path}.devices.constraints[{i}]"
        c = o.mapping(c, cp)
        if c.get("distinctAttribute"):
            _refuse(o, f"{cp}.distinctAttribute", "distinct-attribute constraints")
        attr = o.string(c.get("matchAttribute"), f"{cp}.matchAttribute")
        if not attr or "/" not in attr:
            raise o.error(
                "matchAttribute must be a fully qualified attribute name (domain/id)", f"{cp}.matchAttribute"
            )
        names = frozenset(
            o.string(n, f"{cp}.requests") for n in o.listof(c.get("requests"), f"{cp}.requests")
        )
        constraints.append(Constraint(attr, names))
    if not requests:
        raise o.error("a claim needs at least one device request", f"{path}.devices.requests")
    return ClaimSpec(
        tuple(requests), tuple(constraints), tuple(o.listof(devices.get("config"), f"{path}.devices.config"))
    )


def parse_template(o: Obj) -> ClaimSpec:
    return _claim_spec(o, o.mapping(o.section("spec").get("spec"), "spec.spec"), "spec.spec")


def parse_claim(o: Obj) -> Claim:
    status = o.section("status")
    claim = Claim(
        namespace=o.namespace,
        name=o.name,
        spec=_claim_spec(o, o.raw.get("spec"), "spec"),
        uid=o.string(o.meta.get("uid"), "metadata.uid"),
        deleting=bool(o.meta.get("deletionTimestamp")),
        file=o.file,
    )
    alloc = o.mapping(status.get("allocation"), "status.allocation")
    if alloc:
        claim.allocated = True
        claim.raw_allocation = alloc
        results = o.mapping(alloc.get("devices"), "status.allocation.devices").get("results")
        devs = []
        for i, r in enumerate(o.listof(results, "status.allocation.devices.results")):
            rp = f"status.allocation.devices.results[{i}]"
            r = o.mapping(r, rp)
            devs.append(
                (
                    o.string(r.get("request"), f"{rp}.request"),
                    o.string(r.get("driver"), f"{rp}.driver"),
                    o.string(r.get("pool"), f"{rp}.pool"),
                    o.string(r.get("device"), f"{rp}.device"),
                )
            )
        claim.devices = tuple(devs)
        claim.node = _selector_node(o, alloc.get("nodeSelector"))
    claim.reserved_for = tuple(
        o.string(o.mapping(r, "status.reservedFor").get("name"), "status.reservedFor[].name")
        for r in o.listof(status.get("reservedFor"), "status.reservedFor")
        if isinstance(r, dict) and r.get("resource", "pods") == "pods"
    )
    claim.reserved_groups = tuple(
        o.string(r.get("name"), "status.reservedFor[].name")
        for r in o.listof(status.get("reservedFor"), "status.reservedFor")
        if isinstance(r, dict) and r.get("resource") == "podgroups"
    )
    return claim


def _selector_node(o: Obj, raw: Any) -> str:
    """The node an allocation's nodeSelector names (``matchFields metadata.name In [node]``, what
    kube-scheduler writes for node-local devices); "" for any other selector."""
    sel = o.mapping(raw, "status.allocation.nodeSelector")
    for term in o.listof(sel.get("nodeSelectorTerms"), "status.allocation.nodeSelector.nodeSelectorTerms"):
        for req in (term or {}).get("matchFields") or []:
            if isinstance(req, dict) and req.get("key") == "metadata.name" and req.get("operator") == "In":
                values = req.get("values") or []
                if len(values) == 1:
                    return str(values[0])
    return ""
