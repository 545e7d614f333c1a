"""Clusters for the simulator (SPEC.md §1.3): a generator spec or a snapshot, and the checks a workload
must pass against the cluster before a run starts.

A **generator spec** is a YAML mapping (the format is written up in ``docs/simulator.md``)::

    nodes:                       # node shapes; nodes are named <name>-000, <name>-001, ...
    - {name: gpu, count: 64, gpus: 8, cpu: 96, memory: 768Gi, pods: 110, labels: {pool: a100}}
    topology: {tiers: [8, 4]}    # tier 1: groups of 8 nodes; tier 2: groups of 4 tier-1 groups
    queues:                      # optional: the only queues jobs may name (plus "default")
    - {name: research, weight: 2, capability: {nvidia.com/gpu: 256}}
    queue_weights: {prod: 3}     # without ``queues``: weights of the queues the workload names

A **snapshot** (SPEC.md §1.1, read by :func:`corral.manifests.load_snapshot`) contributes its nodes,
queues and hypernodes; its pods and podgroups are ignored. Nodes that advertise
``alibabacloud.com/gpu-count`` but no ``nvidia.com/gpu`` (the Alibaba GPU-2023 node list) get that count
as ``nvidia.com/gpu``, so the Alibaba pod traces run on the Alibaba nodes. A cluster that publishes its
GPUs by Dynamic Resource Allocation (ResourceSlices, and a DeviceClass with ``extendedResourceName:
nvidia.com/gpu``) and advertises no ``nvidia.com/gpu`` gets the class's devices per node as
``nvidia.com/gpu``.

Contract: every fault of a spec or snapshot is one :class:`~corral.errors.InputError` naming the file
and the field; :func:`load_cluster` returns a :class:`~corral.sim.cluster_template.ClusterTemplate` a run
instantiates afresh. The checks a workload passes against the cluster before a run are in
:mod:`corral.sim.checks`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from corral.errors import InputError
from corral.inputs import load_text_documents
from corral.manifests import load_snapshot
from corral.model import Cluster, HyperNode, HyperNodeTree, Nodes, Queue
from corral.model.quantity import MILLI, parse_quantity
from corral.model.resources import CPU, GPU, MEMORY, PODS, ResourceIndex
from corral.sim.cluster_keys import SPEC_KEYS, default_queue, machine_shapes, memory_hint, quota_queues
from corral.sim.cluster_template import ClusterTemplate
from corral.sim.machines import detect_machines

__all__ = [
    "GPU_ALIASES",
    "ClusterSpec",
    "NodeShape",
    "QueueSpec",
    "build_cluster",
    "from_spec",
    "load_cluster",
]

#: Node resources read as ``nvidia.com/gpu`` when a snapshot's nodes do not advertise it.
GPU_ALIASES = ("alibabacloud.com/gpu-count",)
_WHERE = "cluster spec"


@dataclass(frozen=True)
class NodeShape:
    """``count`` identical nodes named ``<name>-<index>``. ``cpu`` in cores, ``memory`` in bytes (or a
    quantity such as ``768Gi``), ``gpus`` in devices, ``pods`` the pod slots of each node."""

    name: str
    count: int
    gpus: int = 8
    cpu: float = 96.0
    memory: float | str = "768Gi"
    pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class QueueSpec:
    """A queue of a generated cluster. ``capability``/``guarantee``/``deserved`` map resource names to
    plain amounts (GPUs in devices, cpu in cores, memory in bytes or a quantity)."""

    name: str
    weight: float = 1.0
    capability: Mapping[str, Any] | None = None
    guarantee: Mapping[str, Any] | None = None
    deserved: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ClusterSpec:
    """A generated cluster: node shapes, HyperNode tiers and (optionally) an explicit queue list."""

    nodes: tuple[NodeShape, ...]
    tiers: tuple[int, ...] = ()
    queues: tuple[QueueSpec, ...] | None = None
    queue_weights: Mapping[str, float] = field(default_factory=dict)
    name: str = "generated"
    default_queue: str | None = None

    @classmethod
    def from_mapping(cls, raw: Any, file: str = _WHERE) -> ClusterSpec:
        """Validate a parsed YAML mapping; every fault is an InputError naming ``file`` and the field."""
        if not isinstance(raw, Mapping):
            raise InputError(f"expected a mapping, got {type(raw).__name__}", file=file)
        _only(raw, SPEC_KEYS, file, "")
        shapes = raw.get("nodes")
        machines, machine_tiers = machine_shapes(raw.get("machines"), file)
        if shapes is None and machines:
            shapes = []
        if not isinstance(shapes, list) or not (shapes or machines):
            raise InputError("expected a non-empty list of node shapes", file=file, field="nodes")
        nodes = tuple(_shape(s, file, f"nodes[{i}]") for i, s in enumerate(shapes))
        nodes += tuple(_shape(s, file, f"machines ({s['name']})") for s in machines)
        names = [s.name for s in nodes]
        if len(set(names)) != len(names):
            raise InputError("node shape names must be unique", file=file, field="nodes")
        topology = raw.get("topology") or {}
        if not isinstance(topology, Mapping):
            raise InputError("expected a mapping with 'tiers'", file=file, field="topology")
        _only(topology, ("tiers",), file, "topology.")
        tiers = topology.get("tiers") or list(machine_tiers)
        if not isinstance(tiers, list):
            raise InputError("expected a list of group sizes", file=file, field="topology.tiers")
        tiers = tuple(_int(t, file, f"topology.tiers[{i}]", 1) for i, t in enumerate(tiers))
        queues = None
        quotas = quota_queues(raw.get("queue_quotas"), file)
        if raw.get("queues") is not None or quotas:
            if not isinstance(raw.get("queues") or [], list):
                raise InputError("expected a list of queues", file=file, field="queues")
            queues = tuple(_queue(q, file, f"queues[{i}]") for i, q in enumerate(raw.get("queues") or []))
            queues += tuple(_queue(q, file, f"queue_quotas ({q['name']})") for q in quotas)
            if len({q.name for q in queues}) != len(queues):
                raise InputError("queue names must be unique", file=file, field="queues")
        weights = raw.get("queue_weights") or {}
        if not isinstance(weights, Mapping):
            raise InputError("expected a mapping of queue -> weight", file=file, field="queue_weights")
        weights = {
            str(k): _num(v, file, f"queue_weights.{k}", 0.0, open_low=True) for k, v in weights.items()
        }
        default = default_queue(
            raw.get("default_queue"), None if queues is None else [q.name for q in queues], file
        )
        return cls(nodes, tiers, queues, weights, str(raw.get("name") or "generated"), default)

    def describe(self) -> str:
        parts = [f"{s.count} x {s.name} ({s.gpus} GPU, {s.cpu:g} cpu, {s.memory})" for s in self.nodes]
        text = f"{self.name}: " + ", ".join(parts)
        if self.tiers:
            text += f"; hypernode tiers {list(self.tiers)}"
        return text


# ------------------------------------------------------------------------------------------ parsing


def _only(raw: Mapping, allowed: Sequence[str], file: str, prefix: str) -> None:
    for key in raw:
        if key not in allowed:
            raise InputError(
                f"unknown key {key!r} (allowed: {', '.join(allowed)})", file=file, field=f"{prefix}{key}"
            )


def _num(value: Any, file: str, path: str, low: float, *, open_low: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < low or (open_low and value == low):
        bound = f"> {low:g}" if open_low else f">= {low:g}"
        raise InputError(f"expected a number {bound}, got {value!r}", file=file, field=path)
    return float(value)


def _int(value: Any, file: str, path: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"expected an integer >= {low}, got {value!r}", file=file, field=path)
    return value


def _amount(name: str, value: Any, file: str, path: str) -> float:
    """A plain amount in milli-units: numbers are devices/cores/bytes, strings Kubernetes quantities."""
    if isinstance(value, str):
        return parse_quantity(value, where=file, field=path)
    return _num(value, file, path, 0.0) * MILLI


def _shape(raw: Any, file: str, path: str) -> NodeShape:
    if not isinstance(raw, Mapping):
        raise InputError("expected a mapping", file=file, field=path)
    _only(raw, ("name", "count", "gpus", "cpu", "memory", "pods", "labels"), file, f"{path}.")
    name = raw.get("name", "node")
    if not isinstance(name, str) or not name:
        raise InputError("expected a non-empty name", file=file, field=f"{path}.name")
    labels = raw.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise InputError("expected a mapping of label -> value", file=file, field=f"{path}.labels")
    shape = NodeShape(
        name=name,
        count=_int(raw.get("count"), file, f"{path}.count", 1),
        gpus=_int(raw.get("gpus", 8), file, f"{path}.gpus", 0),
        cpu=_amount(CPU, raw.get("cpu", 96), file, f"{path}.cpu") / MILLI,
        memory=raw.get("memory", "768Gi"),
        pods=_int(raw.get("pods", 110), file, f"{path}.pods", 1),
        labels={str(k): str(v) for k, v in labels.items()},
    )
    _amount(MEMORY, shape.memory, file, f"{path}.memory")
    memory_hint(shape.memory, file, f"{path}.memory")
    return shape


def _queue(raw: Any, file: str, path: str) -> QueueSpec:
    if not isinstance(raw, Mapping):
        raise InputError("expected a mapping", file=file, field=path)
    _only(raw, ("name", "weight", "capability", "guarantee", "deserved"), file, f"{path}.")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise InputError("expected a non-empty name", file=file, field=f"{path}.name")
    vectors = {}
    for key in ("capability", "guarantee", "deserved"):
        value = raw.get(key)
        if value is not None and not isinstance(value, Mapping):
            raise InputError("expected a mapping of resource -> amount", file=file, field=f"{path}.{key}")
        if value is not None:
            for res, amount in value.items():
                _amount(str(res), amount, file, f"{path}.{key}.{res}")
        vectors[key] = dict(value) if value is not None else None
    return QueueSpec(
        name=name, weight=_num(raw.get("weight", 1), file, f"{path}.weight", 0.0, open_low=True), **vectors
    )


# ----------------------------------------------------------------------------------------- building


def _vector(
    resources: ResourceIndex, amounts: Mapping[str, Any] | None, fill: float, file: str, path: str
) -> np.ndarray | None:
    if amounts is None:
        return None
    vec = np.full(len(resources), fill)
    for name, value in amounts.items():
        pos = resources.get(str(name))
        if pos is None:
            raise InputError(
                f"no node offers resource {name!r} (resources: {', '.join(resources.names)})",
                file=file,
                field=f"{path}.{name}",
            )
        vec[pos] = _amount(str(name), value, file, f"{path}.{name}")
    return vec


def build_cluster(spec: ClusterSpec, file: str = _WHERE) -> Cluster:
    """The nodes, HyperNode tree and explicit queues of ``spec`` as a :class:`Cluster` without pods.
    Nodes are named ``<shape>-<index>`` (zero-padded) and sorted by name; tier-1 hypernodes group
    ``tiers[0]`` consecutive nodes, tier k groups ``tiers[k-1]`` consecutive tier-(k-1) hypernodes. A
    queue named ``default`` always exists (Volcano creates it)."""
    resources = ResourceIndex([GPU])
    names, rows, labels = [], [], []
    for shape in spec.nodes:
        width = max(3, len(str(shape.count - 1)))
        vec = resources.zeros()
        vec[resources.pos(CPU)] = shape.cpu * MILLI
        vec[resources.pos(MEMORY)] = _amount(MEMORY, shape.memory, file, f"nodes.{shape.name}.memory")
        vec[resources.pos(PODS)] = shape.pods * MILLI
        vec[resources.pos(GPU)] = shape.gpus * MILLI
        for i in range(shape.count):
            name = f"{shape.name}-{i:0{width}d}"
            names.append(name)
            rows.append(vec)
            labels.append({"kubernetes.io/hostname": name, **shape.labels})
    order = sorted(range(len(names)), key=names.__getitem__)
    if len(set(names)) != len(names):
        raise InputError("two node shapes produce the same node name", file=file, field="nodes")
    nodes = Nodes(
        resources,
        [names[i] for i in order],
        np.array([rows[i] for i in order]),
        [labels[i] for i in order],
        [()] * len(names),
        [False] * len(names),
    )
    cluster = Cluster(resources=resources, nodes=nodes, hypernodes=_tree(nodes, spec.tiers))
    for i, q in enumerate(spec.queues or ()):
        where = f"queues[{i}]"
        cluster.queues[q.name] = Queue(
            name=q.name,
            weight=q.weight,
            source="volcano",
            capability=_vector(resources, q.capability, np.inf, file, f"{where}.capability"),
            guarantee=_vector(resources, q.guarantee, 0.0, file, f"{where}.guarantee"),
            deserved=_vector(resources, q.deserved, 0.0, file, f"{where}.deserved"),
        )
    cluster.queues.setdefault("default", Queue(name="default", source="implicit"))
    cluster.account()
    return cluster


def _tree(nodes: Nodes, tiers: Sequence[int]) -> HyperNodeTree:
    """Tier by tier, consecutive groups of the level below (the last group of a tier may be smaller)."""
    hns: dict[str, HyperNode] = {}
    below: list[tuple[str, np.ndarray]] = []
    for row, name in enumerate(nodes.names):
        mask = np.zeros(len(nodes), dtype=bool)
        mask[row] = True
        below.append((name, mask))
    for tier, size in enumerate(tiers, start=1):
        level = []
        count = math.ceil(len(below) / size)
        width = max(3, len(str(count - 1)))
        for g in range(count):
            members = below[g * size : (g + 1) * size]
            name = f"t{tier}-{g:0{width}d}"
            kind = "Node" if tier == 1 else "HyperNode"
            mask = np.logical_or.reduce([m for _, m in members])
            hn = HyperNode(
                name,
                tier,
                [(kind, "exact", m) for m, _ in members],
                children=[] if tier == 1 else [m for m, _ in members],
                mask=mask,
            )
            for child, _ in members if tier > 1 else ():
                hns[child].parent = name
            hns[name] = hn
            level.append((name, mask))
        below = level
    return HyperNodeTree(hns)


def from_spec(spec: ClusterSpec, file: str = _WHERE) -> ClusterTemplate:
    cluster = build_cluster(spec, file)
    return ClusterTemplate(
        cluster, spec.queues is not None, spec.describe(), dict(spec.queue_weights), spec.default_queue
    )


def load_cluster(path: str | Path) -> ClusterTemplate:
    """A generator spec (a YAML mapping with ``nodes`` or ``machines``, no ``apiVersion``), a machine
    list (:mod:`corral.sim.machines`, recognised by its first line) or a snapshot (files or a
    directory of Kubernetes objects). Unreadable or malformed input is an InputError naming the file."""
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or directory", file=str(path))
    if p.is_file() and p.suffix.lower() in (".yaml", ".yml", ".json"):
        docs = load_text_documents(p)  # bounded: size, encoding, depth, aliases, numbers
        if (
            len(docs) == 1
            and isinstance(docs[0], Mapping)
            and "apiVersion" not in docs[0]
            and ("nodes" in docs[0] or "machines" in docs[0])
        ):
            return from_spec(ClusterSpec.from_mapping(docs[0], str(path)), str(path))
    if p.is_file() and detect_machines(p):
        spec = ClusterSpec.from_mapping({"name": p.name, "machines": {"file": str(p)}}, str(path))
        return from_spec(spec, str(path))
    return _from_snapshot(p)


def _from_snapshot(path: Path) -> ClusterTemplate:
    snap = load_snapshot([path])
    if not len(snap.nodes):
        raise InputError("the snapshot has no nodes", file=str(path))
    snap = _with_dra_gpus(_with_gpu_alias(snap))
    cluster = Cluster(
        resources=snap.resources,
        nodes=snap.nodes,
        queues=snap.queues,
        hypernodes=snap.hypernodes,
        priority_classes=snap.priority_classes,
    )
    cluster.account()
    explicit = any(q.source != "implicit" for q in cluster.queues.values())
    gpu = cluster.resources.get(GPU)
    gpus = 0.0 if gpu is None else cluster.total_allocatable()[gpu] / MILLI
    text = (
        f"snapshot {path}: {len(cluster.nodes)} nodes, {gpus:g} GPUs, "
        f"{len(cluster.hypernodes.hypernodes)} hypernodes"
    )
    return ClusterTemplate(cluster, explicit, text)


def _with_dra_gpus(snap: Cluster) -> Cluster:
    """Count the GPUs a DRA cluster publishes as ResourceSlices — the devices of a DeviceClass whose
    ``extendedResourceName`` is ``nvidia.com/gpu`` — as the nodes' ``nvidia.com/gpu`` when no node
    advertises that resource (the trace's jobs ask for ``nvidia.com/gpu``; Kubernetes serves such
    requests from the class's devices, KEP-5004)."""
    dra = snap.dra
    counts = dra.extended_counts.get(GPU) if dra is not None else None
    res = snap.resources
    if counts is None or (GPU in res and snap.nodes.allocatable[:, res.pos(GPU)].any()):
        return snap
    rows = [snap.nodes.index[n] for n in dra.node_names]
    per_node = np.zeros(len(snap.nodes))
    per_node[rows] = counts
    return _add_column(snap, GPU, per_node)


def _with_gpu_alias(snap: Cluster) -> Cluster:
    """Copy an alias column (``alibabacloud.com/gpu-count``) into ``nvidia.com/gpu`` when no node
    advertises the latter."""
    res = snap.resources
    if GPU in res and snap.nodes.allocatable[:, res.pos(GPU)].any():
        return snap
    alias = next((a for a in GPU_ALIASES if a in res), None)
    if alias is None:
        return snap
    return _add_column(snap, GPU, snap.nodes.allocatable[:, res.pos(alias)])


def _add_column(snap: Cluster, name: str, values: np.ndarray) -> Cluster:
    """``snap``'s nodes, queues, hypernodes and priority classes with the allocatable of resource
    ``name`` set to ``values`` (the column added when the snapshot has none)."""
    res = snap.resources
    new = ResourceIndex([*res.names, name])
    alloc = np.zeros((len(snap.nodes), len(new)))
    for n in res.names:
        alloc[:, new.pos(n)] = snap.nodes.allocatable[:, res.pos(n)]
    alloc[:, new.pos(name)] = values
    old = snap.nodes
    # Nodes takes the flags as a sequence of bools (and makes its own array of them)
    nodes = Nodes(new, old.names, alloc, old.labels, old.taints, old.unschedulable)
    queues = {}
    for qname, q in snap.queues.items():
        q = copy.copy(q)
        for attr in ("capability", "deserved", "guarantee"):
            vec = getattr(q, attr)
            if vec is not None:
                wide = np.full(len(new), np.inf if attr == "capability" else 0.0)
                wide[: len(vec)] = vec
                setattr(q, attr, wide)
        queues[qname] = q
    return Cluster(
        resources=new,
        nodes=nodes,
        queues=queues,
        hypernodes=snap.hypernodes,
        priority_classes=snap.priority_classes,
    )
