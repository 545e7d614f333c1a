"""The devices of a cluster and the claims of its pods (Dynamic Resource Allocation), built once when a
snapshot is assembled and kept on the cluster (``Cluster.dra``) across cycles.

Devices. Every device of every ResourceSlice is one row of flat arrays (its node row, its id
``(driver, pool, device)``, its CEL view). A pool is gathered as kube-scheduler's ``GatherPools`` does:
the slices of the newest ``pool.generation`` only; a pool with fewer slices than
``pool.resourceSliceCount`` is *incomplete*, one with a device name twice is *invalid*; neither gives
devices (and a request for ``All`` devices on a node with such a pool fails there). On each node the
devices are offered in pool order — by driver, then pool name (kube-scheduler walks a Go map, whose
order is random; corral's is fixed so that the same input gives the same devices) — then slice name,
then the order the slice lists them.

Partitionable devices (KEP-4815, e.g. the MIG partitions of a GPU and the whole GPU): a pool's slices
define counter sets (``sharedCounters``), and a device consumes from them (``consumesCounters``). Every
counter of a valid pool is a *slot* with what it holds; a device in use consumes its amounts from its
slots, and a device is allocatable only while no slot would go above what it holds (kube-scheduler's
``checkAvailableCounters``: what is available is the set's value less what allocated devices consume,
and the devices being allocated for the pod's claims count too). A pool that defines a counter set twice
or whose device consumes a set or counter the pool does not define is *invalid*.

Claims. A pod's ``spec.resourceClaims[]`` entry names a ResourceClaim (``resourceClaimName``) or a
ResourceClaimTemplate (``resourceClaimTemplateName``). For a template, the claim Kubernetes generated is
the one ``status.resourceClaimStatuses`` names; when the snapshot has none yet, corral instantiates the
claim the resourceclaim controller will create, named ``<pod>-<entry>`` (the controller adds a random
suffix), and allocates it: the decisions then report it with its template. A missing claim or template,
or a claim being deleted, leaves the pod unschedulable with a reason (kube-scheduler's PreEnqueue waits
for it).

Resources. Each DeviceClass is also a resource name: ``spec.extendedResourceName`` when set (e.g.
``nvidia.com/gpu``), else ``deviceclass/<class>`` — the key Volcano's capacity plugin reads in queue
quotas (``capacity.DynamicResourceAllocationEnable``, Volcano 1.15). A node advertises, under that name,
how many of its devices the class selects; a pod asks, under that name, for the devices of its claims
(ExactCount: ``count``; the first alternative of ``firstAvailable``; ``All``: none, the number is known
only once a node is chosen). A claim used by several pods is charged once, to its first consumer (the
first pod of ``status.reservedFor`` the snapshot holds, else the first by namespace and name), as
Volcano deduplicates shared claims. These vectors make queue quota, fairness, the simulator's GPU
accounting and the actions' resource fit see DRA devices; which device a pod gets is the ``dra``
plugin's (:mod:`corral.plugins.dra`), whose books are exact where the vectors are only a bound.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.dra.cel import CelEnv
from corral.dra.objects import ALL, Claim, ClaimSpec, Device, DeviceClass, Slice, SubRequest
from corral.errors import InputError

__all__ = ["ClaimRef", "Inventory", "build_inventory", "resource_name"]

#: the pod annotation-free marker of a claim corral instantiated from a template
DEVICECLASS_PREFIX = "deviceclass/"


def resource_name(klass: DeviceClass | None, name: str) -> str:
    """The resource name the devices of class ``name`` count as (module docstring)."""
    if klass is not None and klass.extended_resource:
        return klass.extended_resource
    return f"{DEVICECLASS_PREFIX}{name}"


@dataclass(frozen=True)
class ClaimRef:
    """One ``spec.resourceClaims[]`` entry of a pod: ``entry`` is its name, ``claim`` the claim key."""

    entry: str
    claim: str


@dataclass
class Inventory:
    env: CelEnv
    classes: dict[str, DeviceClass]
    claims: dict[str, Claim]
    node_names: list[str]
    dev_node: np.ndarray  # device -> node row
    dev_id: list[tuple[str, str, str]]  # (driver, pool, device)
    devices: list[Device]  # as the slices give them
    domains: tuple[str, ...]  # every attribute and capacity domain, and every driver, of the slices
    node_devices: list[list[int]]  # per node row, in allocation order
    node_bad_pool: dict[int, str]  # node row -> why some pool of it is incomplete or invalid
    #: partitionable devices: per counter slot (driver, pool, counter set, counter) what it holds (milli),
    #: and per device the (slot, milli) it consumes when allocated (empty for other devices)
    counter_cap: np.ndarray
    dev_counters: list[tuple[tuple[int, int], ...]]
    pod_claims: dict[str, tuple[ClaimRef, ...]] = field(default_factory=dict)  # pod uid -> its claims
    missing: dict[str, str] = field(default_factory=dict)  # pod uid -> why a claim cannot be had
    consumers: dict[str, list[str]] = field(default_factory=dict)  # claim key -> pod uids
    #: claim key -> (node row, ((request name, device index), ...)): allocations in force, from the
    #: snapshot's status.allocation and from the binds of earlier cycles
    allocations: dict[str, tuple[int, tuple[tuple[str, int], ...]]] = field(default_factory=dict)
    #: claims allocated in the snapshot that some pod outside corral's view may use: never freed
    pinned: set[str] = field(default_factory=set)
    #: claim key -> (name, uid) of the scheduling.k8s.io PodGroup whose claim it is (KEP-5729: reserved
    #: for the group, not its pods); kept here, not on the claim records the watch cache reuses
    groups: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: devices charged as resources (milli, by resource name): to a pod's request, to a node's allocatable
    pod_extra: dict[str, dict[str, float]] = field(default_factory=dict)
    node_extra: dict[str, dict[str, float]] = field(default_factory=dict)
    #: extended resource name -> per node row, the devices (milli) of the classes that stand for it
    extended_counts: dict[str, np.ndarray] = field(default_factory=dict)
    #: pod uid -> what its claims add to its class (equivalence of predicate masks)
    pod_key: dict[str, Any] = field(default_factory=dict)
    _match: dict[SubRequest, tuple[np.ndarray, str]] = field(default_factory=dict)
    _by_expression: dict[str, tuple[np.ndarray, str]] = field(default_factory=dict)

    def counters_used(self, in_use: np.ndarray) -> np.ndarray:
        """Per counter slot, what the devices in use consume (milli)."""
        used = np.zeros(len(self.counter_cap), dtype=np.int64)
        if used.size:
            for d in np.flatnonzero(in_use).tolist():
                for slot, milli in self.dev_counters[d]:
                    used[slot] += milli
        return used

    def counters_fit(self, devs: list[int] | tuple[int, ...], used: np.ndarray) -> bool:
        """Whether ``devs`` (not in use) can be allocated together on top of ``used``: no counter set
        over-committed."""
        extra: dict[int, int] = {}
        for d in devs:
            for slot, milli in self.dev_counters[d]:
                extra[slot] = extra.get(slot, 0) + milli
        return all(used[slot] + milli <= self.counter_cap[slot] for slot, milli in extra.items())

    def device_index(self) -> dict[tuple[str, str, str], int]:
        return {d: i for i, d in enumerate(self.dev_id)}

    def match(self, sub: SubRequest) -> tuple[np.ndarray, str]:
        """``(mask over devices that the class and the request select, a CEL runtime error met or "")``."""
        got = self._match.get(sub)
        if got is None:
            klass = self.classes.get(sub.device_class)
            mask = np.zeros(len(self.dev_id), dtype=bool)
            error = ""
            if klass is not None:
                mask[:] = True
                for e in klass.selectors + sub.selectors:
                    selected, err = self._expression(e)
                    mask &= selected
                    error = error or err
            got = self._match[sub] = (mask, error)
        return got

    def view(self, i: int) -> dict[str, Any]:
        """Device ``i`` as the CEL environment's ``device`` (built only when an expression is evaluated:
        signatures make that rare). Every domain of the snapshot is a key, empty when the device has
        nothing in it, as Kubernetes' lazy maps answer."""
        d = self.devices[i]
        attrs: dict[str, dict[str, Any]] = {dom: {} for dom in self.domains}
        caps: dict[str, dict[str, Any]] = {dom: {} for dom in self.domains}
        for k, v in d.attributes:
            dom, ident = k.split("/", 1)
            attrs[dom][ident] = v
        for k, q in d.capacity:
            dom, ident = k.split("/", 1)
            caps[dom][ident] = q
        return {
            "driver": self.dev_id[i][0],
            "attributes": attrs,
            "capacity": caps,
            "allowMultipleAllocations": False,
        }

    def attribute(self, i: int, name: str) -> Any:
        """The value of fully qualified attribute ``name`` of device ``i``, or None."""
        for k, v in self.devices[i].attributes:
            if k == name:
                return v
        return None

    def _expression(self, expression: str) -> tuple[np.ndarray, str]:
        """The devices one selector selects, and the first runtime error it met: evaluated once per
        distinct signature of what it reads (:mod:`corral.dra.cel`)."""
        got = self._by_expression.get(expression)
        if got is None:
            fields = self.env.fields(expression)
            out = np.zeros(len(self.dev_id), dtype=bool)
            error = ""
            for i, d in enumerate(self.devices):
                driver = self.dev_id[i][0]
                sig = tuple(
                    driver
                    if f == "driver"
                    else d.attributes
                    if f == "attributes"
                    else d.capacity
                    if f == "capacity"
                    else False
                    for f in fields
                )
                r = self.env.matches(expression, sig, self.view, i)
                if r is True:
                    out[i] = True
                elif r is not False and not error:
                    error = f"{r} (device {'/'.join(self.dev_id[i])}, selector {expression!r})"
            got = self._by_expression[expression] = (out, error)
        return got


def _pool_counters(group: list[Slice]) -> tuple[dict[str, dict[str, int]], str]:
    """The counter sets of one pool (``sharedCounters`` of any of its slices) and why the pool is invalid
    ("" when it is not): a counter set named twice, or a device consuming a counter set or counter the
    pool does not define (the API server's validation asks for both)."""
    sets: dict[str, dict[str, int]] = {}
    for s in group:
        for name, counters in s.counter_sets:
            if name in sets:
                return {}, f"counter set {name} is defined twice"
            sets[name] = dict(counters)
    for s in group:
        for d in s.devices:
            for name, counters in d.counters:
                have = sets.get(name)
                if have is None:
                    return {}, f"device {d.name} consumes counter set {name}, which the pool does not define"
                missing = [c for c, _ in counters if c not in have]
                if missing:
                    return {}, f"device {d.name} consumes counter {missing[0]} absent from counter set {name}"
    return sets, ""


def _pools(
    slices: list[Slice], rows: dict[str, int]
) -> tuple[list[list[tuple[Slice, int]]], dict[int, str], dict[tuple[str, str], dict[str, dict[str, int]]]]:
    """Per node row, the (slice, device position) pairs it offers in allocation order; the rows with an
    incomplete or invalid pool; the counter sets of every valid pool."""
    pools: dict[tuple[str, str], list[Slice]] = defaultdict(list)
    for s in slices:
        key = (s.driver, s.pool)
        have = pools[key]
        if have and s.generation < have[0].generation:
            continue
        if have and s.generation > have[0].generation:
            have.clear()
        have.append(s)
    out: list[list[tuple[Slice, int]]] = [[] for _ in rows]
    bad: dict[int, str] = {}
    counter_sets: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    for (driver, pool), group in sorted(pools.items()):
        group.sort(key=lambda s: s.name)
        names = [d.name for s in group for d in s.devices]
        reason = ""
        if len(group) != group[0].slice_count:
            reason = (
                f"resource pool {driver}/{pool} is incomplete ({len(group)} of {group[0].slice_count} slices)"
            )
        elif len(set(names)) != len(names):
            reason = f"resource pool {driver}/{pool} is invalid (a device name appears twice)"
        else:
            sets, why = _pool_counters(group)
            if why:
                reason = f"resource pool {driver}/{pool} is invalid ({why})"
            elif sets:
                counter_sets[(driver, pool)] = sets
        for s in group:
            row = rows.get(s.node)
            if row is None:
                continue
            if reason:
                bad.setdefault(row, reason)
                continue
            out[row].extend((s, i) for i in range(len(s.devices)))
    return out, bad, counter_sets


def build_inventory(
    node_names: list[str],
    slices: list[Slice],
    classes: list[DeviceClass],
    claims: list[Claim],
    templates: dict[tuple[str, str], ClaimSpec],
) -> Inventory:
    """The inventory of a snapshot's DRA objects (pods are added by :func:`corral.dra.pods.attach_pods`)."""
    env = CelEnv()
    by_class, by_claim = _compiled(env, classes, claims, templates)
    rows = {n: i for i, n in enumerate(node_names)}
    per_node, bad, pool_sets = _pools(slices, rows)
    devs = _Devices(len(node_names))
    for row, offered in enumerate(per_node):
        for s, i in offered:
            devs.add(row, s, i, pool_sets)
    domains: set[str] = set()
    for s in slices:
        domains.add(s.driver)
        for d in s.devices:
            domains.update(k.split("/", 1)[0] for k, _ in d.attributes + d.capacity)
    return Inventory(
        env=env,
        classes=by_class,
        claims=by_claim,
        node_names=list(node_names),
        dev_node=np.asarray(devs.node, dtype=np.int64),
        dev_id=devs.ids,
        devices=devs.devices,
        domains=tuple(sorted(domains)),
        node_devices=devs.node_devices,
        node_bad_pool=bad,
        counter_cap=np.asarray(devs.counter_cap, dtype=np.int64),
        dev_counters=devs.counters,
    )


def _compiled(
    env: CelEnv, classes: list[DeviceClass], claims: list[Claim], templates: dict[tuple[str, str], ClaimSpec]
) -> tuple[dict[str, DeviceClass], dict[str, Claim]]:
    """The device classes and the claims by name, every CEL selector of theirs and of the templates
    compiled into ``env``; a class or claim named twice, or a selector that does not compile, is an
    InputError naming the object and the field."""
    by_class = {}
    for c in classes:
        if c.name in by_class:
            raise InputError("duplicate device class", obj=f"DeviceClass {c.name}", field="metadata.name")
        by_class[c.name] = c
        for i, e in enumerate(c.selectors):
            env.compile(e, obj=f"DeviceClass {c.name}", field=f"spec.selectors[{i}].cel.expression")
    by_claim: dict[str, Claim] = {}
    for cl in claims:
        if cl.key in by_claim:
            raise InputError(
                "duplicate claim", file=cl.file or None, obj=f"ResourceClaim {cl.key}", field="metadata.name"
            )
        by_claim[cl.key] = cl
        _compile_spec(env, cl.spec, f"ResourceClaim {cl.key}", "spec")
    for (ns, name), spec in templates.items():
        _compile_spec(env, spec, f"ResourceClaimTemplate {ns}/{name}", "spec.spec")
    return by_class, by_claim


class _Devices:
    """The device rows of the inventory as they are gathered, node by node in offer order, with the
    counter slots they consume (one slot per (driver, pool, counter set, counter), numbered as first
    consumed)."""

    def __init__(self, n_nodes: int) -> None:
        self.slots: dict[tuple[str, str, str, str], int] = {}
        self.counter_cap: list[int] = []
        self.counters: list[tuple[tuple[int, int], ...]] = []
        self.node: list[int] = []
        self.ids: list[tuple[str, str, str]] = []
        self.devices: list[Device] = []
        self.node_devices: list[list[int]] = [[] for _ in range(n_nodes)]

    def add(
        self, row: int, s: Slice, i: int, pool_sets: dict[tuple[str, str], dict[str, dict[str, int]]]
    ) -> None:
        """Device ``i`` of slice ``s`` on node ``row``; ``pool_sets``: the counter sets of every pool that
        defines some (:func:`_pools`)."""
        self.node_devices[row].append(len(self.ids))
        self.node.append(row)
        self.ids.append((s.driver, s.pool, s.devices[i].name))
        self.devices.append(s.devices[i])
        consumed = []
        for set_name, counters in s.devices[i].counters:
            for counter, milli in counters:
                key = (s.driver, s.pool, set_name, counter)
                slot = self.slots.get(key)
                if slot is None:
                    slot = self.slots[key] = len(self.counter_cap)
                    self.counter_cap.append(pool_sets[(s.driver, s.pool)][set_name][counter])
                consumed.append((slot, milli))
        self.counters.append(tuple(consumed))


def _compile_spec(env: CelEnv, spec: ClaimSpec, obj: str, base: str) -> None:
    for i, r in enumerate(spec.requests):
        for j, sub in enumerate(r.alternatives):
            for k, e in enumerate(sub.selectors):
                where = f"firstAvailable[{j}]" if len(r.alternatives) > 1 or "/" in sub.name else "exactly"
                env.compile(
                    e, obj=obj, field=f"{base}.devices.requests[{i}].{where}.selectors[{k}].cel.expression"
                )


def class_counts(inv: Inventory, names: set[str]) -> dict[str, np.ndarray]:
    """Per device class in ``names``: how many devices of each node row it selects."""
    out = {}
    n = len(inv.node_names)
    for name in sorted(names):
        sub = SubRequest(name="", device_class=name, selectors=(), mode=ALL, count=1, admin=False)
        mask, _ = inv.match(sub)
        out[name] = np.bincount(inv.dev_node[mask], minlength=n).astype(float) if mask.size else np.zeros(n)
    return out
