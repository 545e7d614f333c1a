"""Assemble a :class:`~corral.model.Cluster` from snapshot objects (SPEC.md §1.1).

Decisions where the spec is silent (each is how Volcano behaves unless noted):
- A queue named "default" always exists (Volcano creates it); a parent named "root" that no object
  defines is created implicitly as the hierarchy's root.
- A pod whose podgroup is missing, or a podgroup naming a missing queue or a queue with child queues
  (only leaf queues hold work, SPEC.md §3.2), is *valid input that cannot be honoured*: its job carries
  ``invalid_reason`` and is reported unschedulable (never admitted nor placed), not rejected.
- A missing parent queue, a queue cycle, a HyperNode cycle or a HyperNode member naming a missing
  HyperNode is bad input (:class:`InputError`), because no sane reading of the tree exists.
- Pods of other schedulers that hold a node are fixed load on it; pending ones are ignored.
- A node that does not advertise ``pods`` has no pod-count limit.
- A job's priority is its PodGroup's priorityClassName value, else the highest priority of its pods.
- Node annotations are kept (``Nodes.annotations``, one dict per row) for plugins that read them
  (gpushare). A node that gives its GPU memory per device (label or annotation
  ``volcano.sh/gpu-memory-per-device``, e.g. ``8Gi``) but no ``volcano.sh/gpu-memory`` allocatable
  advertises ``per-device × nvidia.com/gpu`` (else ``volcano.sh/gpu-number``) of it, so pods asking for
  GPU memory pass the actions' resource fit (gpushare, SPEC.md §3.2).
"""

from __future__ import annotations

import gc
import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, overload

import numpy as np

from corral.dra.pods import inventory_of
from corral.errors import InputError
from corral.manifests.fieldcheck import check_pending_pod
from corral.manifests.kai import (
    KAI_NON_PREEMPTIBLE_PRIORITY,
    SUBGROUP_LABEL,
    apply_podgroup,
    join_subgroup,
    topology_domains,
)
from corral.manifests.kinds import KAI_QUEUE_LABEL, PREEMPTABLE_KEY, TASK_SPEC_KEY, parse_object
from corral.manifests.load import SourcedObject, read_objects
from corral.manifests.native import apply_native, finish_native, join_native
from corral.manifests.native_assembly import composite_redirect, native_records, report_read
from corral.manifests.records import HyperNodeRec, NodeRec, PodGroupRec, PodRec, QueueRec, TopologyRec
from corral.manifests.selectors import LabelSelector
from corral.manifests.workloads import expand_workloads
from corral.model.cluster import Cluster, PodDisruptionBudget, PriorityClass
from corral.model.hypernodes import HyperNode, HyperNodeTree
from corral.model.nodes import Nodes
from corral.model.notes import Notes
from corral.model.objects import OCCUPYING_STATES, Job, PodClass, PodGroupPhase, Queue, Task, TaskStatus
from corral.model.patterns import compile_name_pattern
from corral.model.quantity import MILLI, parse_quantity
from corral.model.resources import GPU, PODS, ResourceIndex
from corral.model.subjobs import resolve_subgroups

__all__ = [
    "DEFAULT_SCHEDULERS",
    "GPU_MEMORY",
    "GPU_MEMORY_PER_DEVICE",
    "GPU_NUMBER",
    "assemble_cluster",
    "build_cluster",
    "load_snapshot",
    "parse_objects",
]

log = logging.getLogger("corral")

DEFAULT_SCHEDULERS = ("corral", "volcano", "kai-scheduler")
SYSTEM_CRITICAL = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
#: Volcano's GPU-share resources, and corral's per-device node label/annotation (gpushare).
GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
GPU_MEMORY_PER_DEVICE = "volcano.sh/gpu-memory-per-device"


def load_snapshot(paths: Iterable[str | Path], schedulers: Sequence[str] = DEFAULT_SCHEDULERS) -> Cluster:
    """Read files/directories and build the cluster; raises :class:`InputError` on bad input. The
    garbage collector is paused over the reading too: parsing a large snapshot creates hundreds of
    thousands of containers and frees none (measured at 10,000 nodes: the JSON read takes 0.8 s of CPU
    paused, 1.9 s not)."""
    with _gc_paused():
        return build_cluster(read_objects(paths), schedulers)


@contextmanager
def _gc_paused() -> Iterator[None]:
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def build_cluster(
    objects: Iterable[SourcedObject], schedulers: Sequence[str] = DEFAULT_SCHEDULERS
) -> Cluster:
    """The model of ``objects``, with what the reading noted (warnings, expanded workloads) as
    ``cluster.notes``: the objects' own, then the assembly's. Python's cyclic garbage collector is
    paused while building: the build allocates hundreds of thousands of small objects and frees none,
    so every collection it would trigger is wasted work (about 40 % of the build on large snapshots)."""
    notes = Notes()
    with _gc_paused():
        cluster = assemble_cluster(parse_objects(objects, notes, schedulers), schedulers)
    notes.extend(cluster.notes.warnings)
    cluster.notes = notes
    return cluster


def parse_objects(
    objects: Iterable[SourcedObject],
    notes: Notes | None = None,
    schedulers: Sequence[str] = DEFAULT_SCHEDULERS,
) -> dict[str, list]:
    """Kind -> parsed records of every known object (:func:`~corral.manifests.kinds.parse_object`),
    after the workloads users submit are expanded into what their controllers make
    (:func:`~corral.manifests.workloads.expand_workloads`); warnings and expansions go to ``notes``
    (a pending pod of one of ``schedulers`` is checked for the placement constraints corral does not
    evaluate, :func:`~corral.manifests.fieldcheck.check_pending_pod`)."""
    notes = Notes() if notes is None else notes
    by_kind: dict[str, list] = defaultdict(list)
    skipped: dict[str, list[str]] = defaultdict(list)
    for file, raw in expand_workloads(list(objects), notes):
        parsed = parse_object(file, raw, notes)
        if parsed is not None:
            by_kind[parsed[0]].append(parsed[1])
            rec = parsed[1]
            if parsed[0] == "Pod" and not rec.node_name and rec.scheduler in schedulers:
                check_pending_pod(raw, f"Pod {rec.namespace}/{rec.name}", file, notes)
        else:
            skipped[f"{raw.get('kind')} ({raw.get('apiVersion')})"].append(_name_of(raw))
    report_read(by_kind, notes)
    if skipped:
        log.warning("%s", skipped_line(skipped))
    return by_kind


def assemble_cluster(
    records: dict[str, list],
    schedulers: Sequence[str] = DEFAULT_SCHEDULERS,
    hypernodes: HyperNodeTree | None = None,
) -> Cluster:
    """The cluster from parsed records; the one assembly step of snapshots and of ``corral run``'s cache
    (which passes the ``hypernodes`` tree of its previous cycle when no Node or HyperNode changed)."""
    by_kind: dict[str, list] = defaultdict(list, records)
    hypernodes = native_records(by_kind, hypernodes)  # Kubernetes' own gang API (manifests/native.py)
    dra = inventory_of(by_kind, set(schedulers))  # devices charged to pods and nodes (corral.dra)
    resources = _resource_index(by_kind, dra)
    nodes = _nodes(by_kind["Node"], resources, dra.node_extra if dra is not None else None)
    cluster = Cluster(resources=resources, nodes=nodes, dra=dra)
    for name, value, default in by_kind["PriorityClass"]:
        cluster.priority_classes[name] = PriorityClass(name, value, default)
    for ns, name, sel, min_av, max_un in by_kind["PodDisruptionBudget"]:
        cluster.pdbs.append(PodDisruptionBudget(f"{ns}/{name}", ns, sel, min_av, max_un))
    cluster.queues = _queues(by_kind["Queue"], resources)
    cluster.hypernodes = (
        hypernodes
        if hypernodes is not None
        else _hypernodes(by_kind["HyperNode"], nodes, by_kind["Topology"])
    )
    cluster.topologies = {r.name: r.levels for r in by_kind["Topology"]}
    _jobs_and_tasks(cluster, by_kind["PodGroup"], by_kind["Pod"], set(schedulers))
    cluster.account()
    if cluster.off_nodes:
        log.warning("%s", off_nodes_line(cluster.off_nodes))
    return cluster


def _name_of(raw: dict) -> str:
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    ns, name = meta.get("namespace"), meta.get("name", "?")
    return f"{ns}/{name}" if ns else str(name)


def skipped_line(skipped: dict[str, list[str]], shown: int = 3) -> str:
    """One line naming the objects a snapshot holds that corral does not serve (by kind, a few names)."""
    from corral.terminal import plain  # kinds and names come from input: shown, never obeyed

    def short(text: str) -> str:
        text = plain(text)
        return text if len(text) <= 60 else f"{text[:50]}... ({len(text)} characters)"

    parts = []
    for what, names in sorted(skipped.items()):
        more = f", +{len(names) - shown} more" if len(names) > shown else ""
        parts.append(f"{len(names)} {short(what)}: {', '.join(short(n) for n in names[:shown])}{more}")
    return "skipped objects corral does not serve: " + "; ".join(parts)


def off_nodes_line(pods: Sequence[tuple[str, str]], shown: int = 3) -> str:
    """One line naming the served pods bound to nodes the snapshot does not hold (a few of them)."""
    from corral.terminal import plain  # names come from input: shown, never obeyed

    more = f", +{len(pods) - shown} more" if len(pods) > shown else ""
    listed = ", ".join(f"{plain(pod)[:120]} on {plain(node)[:120]!r}" for pod, node in pods[:shown])
    return f"pods bound to nodes not in the snapshot, left out of queue usage: {len(pods)} ({listed}{more})"


def _resource_index(by_kind: dict[str, list], dra: Any = None) -> ResourceIndex:
    names: set[str] = set()
    if dra is not None:  # the resource names DRA devices count as (corral.dra.inventory)
        for extra in (*dra.node_extra.values(), *dra.pod_extra.values()):
            names.update(extra)
    for rec in by_kind["Node"]:
        names.update(rec.allocatable)
    for rec in by_kind["Pod"]:
        names.update(rec.requests)
    for rec in by_kind["Queue"]:
        for d in (rec.capability, rec.deserved, rec.guarantee):
            names.update(d or ())
    for rec in by_kind["PodGroup"]:
        names.update(rec.min_resources or ())
    return ResourceIndex(sorted(names))


def _nodes(
    recs: list[NodeRec], resources: ResourceIndex, extra: dict[str, dict[str, float]] | None = None
) -> Nodes:
    recs = sorted(recs, key=lambda r: r.name)
    seen = set()
    for r in recs:
        if r.name in seen:
            raise InputError(
                "duplicate node", file=r.file or None, obj=f"Node {r.name}", field="metadata.name"
            )
        seen.add(r.name)
    alloc = np.zeros((len(recs), len(resources)))
    pods = resources.pos(PODS)
    for i, r in enumerate(recs):
        for k, v in r.allocatable.items():
            alloc[i, resources.pos(k)] = v
        for k, v in (extra.get(r.name) or {}).items() if extra else ():  # DRA devices (corral.dra)
            alloc[i, resources.pos(k)] += v
        if PODS not in r.allocatable:
            alloc[i, pods] = np.inf
        _gpu_memory(r, resources, alloc[i])
    nodes = Nodes(
        resources,
        [r.name for r in recs],
        alloc,
        [r.labels for r in recs],
        [r.taints for r in recs],
        [r.unschedulable for r in recs],
    )
    # model.Nodes does not declare this attribute (gpushare reads it with getattr): the model's to declare
    nodes.annotations = [r.annotations for r in recs]
    return nodes


def _gpu_memory(r: NodeRec, resources: ResourceIndex, row: np.ndarray) -> None:
    """Fill ``volcano.sh/gpu-memory`` allocatable from the per-device label/annotation when absent."""
    col = resources.get(GPU_MEMORY)
    per = r.annotations.get(GPU_MEMORY_PER_DEVICE, r.labels.get(GPU_MEMORY_PER_DEVICE))
    if col is None or GPU_MEMORY in r.allocatable or not per:
        return
    count = r.allocatable.get(GPU) or r.allocatable.get(GPU_NUMBER) or 0.0
    section = "annotations" if GPU_MEMORY_PER_DEVICE in r.annotations else "labels"
    row[col] = parse_quantity(
        per, where=f"Node {r.name}", field=f"metadata.{section}.{GPU_MEMORY_PER_DEVICE}"
    ) * int(count // MILLI)


@overload
def _vec(resources: ResourceIndex, amounts: dict[str, float], fill: float) -> np.ndarray: ...
@overload
def _vec(resources: ResourceIndex, amounts: dict[str, float] | None, fill: float) -> np.ndarray | None: ...
def _vec(resources: ResourceIndex, amounts: dict[str, float] | None, fill: float) -> np.ndarray | None:
    """The vector of ``amounts`` by resource name, ``fill`` elsewhere; None for None."""
    if amounts is None:
        return None
    vec = np.full(len(resources), fill)
    for k, v in amounts.items():
        vec[resources.pos(k)] = v
    return vec


def _queues(recs: list[QueueRec], resources: ResourceIndex) -> dict[str, Queue]:
    queues: dict[str, Queue] = {}
    files = {r.name: r.file or None for r in recs}  # errors about a queue name the file it came from
    for r in sorted(recs, key=lambda r: r.name):
        if r.name in queues:
            raise InputError("duplicate queue", file=r.file, obj=f"Queue {r.name}", field="metadata.name")
        queues[r.name] = Queue(
            name=r.name,
            weight=r.weight,
            capability=_vec(resources, r.capability, np.inf),
            deserved=_vec(resources, r.deserved, 0.0),
            guarantee=_vec(resources, r.guarantee, 0.0),
            deserved_set=None
            if r.deserved is None
            else _vec(resources, dict.fromkeys(r.deserved, 1.0), 0.0) > 0,
            reclaimable=r.reclaimable,
            parent=r.parent,
            priority=r.priority,
            state=r.state,
            preempt_min_runtime=r.preempt_min_runtime,
            reclaim_min_runtime=r.reclaim_min_runtime,
            annotations=r.annotations,
            creation=r.creation,
            source=r.source,
        )
    hierarchical = any(q.parent for q in queues.values())
    if hierarchical and "root" not in queues:
        queues["root"] = Queue(name="root", source="implicit")
    if "default" not in queues:
        queues["default"] = Queue(name="default", source="implicit", parent="root" if hierarchical else None)
    for q in queues.values():
        if q.parent == q.name:
            raise InputError(
                "a queue cannot be its own parent",
                file=files.get(q.name),
                obj=f"Queue {q.name}",
                field="spec.parent",
            )
        if q.parent and q.parent not in queues:
            raise InputError(
                f"parent queue {q.parent!r} does not exist",
                file=files.get(q.name),
                obj=f"Queue {q.name}",
                field="spec.parent",
            )
    for name in sorted(queues):
        seen = [name]
        cur = queues[name].parent
        while cur:
            if cur in seen:
                cycle = " -> ".join(seen[seen.index(cur) :] + [cur])
                raise InputError(
                    f"queue cycle: {cycle}", file=files.get(name), obj=f"Queue {name}", field="spec.parent"
                )
            seen.append(cur)
            cur = queues[cur].parent
    for name in sorted(queues):
        parent = queues[name].parent
        if parent:
            queues[parent].children.append(name)
    return queues


def _hypernodes(
    recs: list[HyperNodeRec], nodes: Nodes, topologies: Sequence[TopologyRec] = ()
) -> HyperNodeTree:
    """Volcano's HyperNodes, resolved to node masks, and the domains of KAI's Topology objects
    (:func:`~corral.manifests.kai.topology_domains`) in one tree, told apart by family."""
    hns: dict[str, HyperNode] = {}
    files = {r.name: r.file or None for r in recs}
    for r in recs:
        if r.name in hns:
            raise InputError(
                "duplicate hypernode", file=r.file, obj=f"HyperNode {r.name}", field="metadata.name"
            )
        # the model keeps the members untyped (object); they are read back here from the records
        hns[r.name] = HyperNode(r.name, r.tier, list(r.members), tier_name=r.tier_name)
    members = {r.name: r.members for r in recs}
    names = sorted(hns)  # computed once: membership resolution is linear
    no_labels: dict[str, dict] = {n: {} for n in hns}
    for hn in hns.values():
        for mtype, kind, value in members[hn.name]:
            if mtype != "HyperNode":
                continue
            for child in _match_names(names, kind, value, no_labels):
                if child == hn.name:
                    raise InputError(
                        "a hypernode cannot contain itself",
                        file=files.get(hn.name),
                        obj=f"HyperNode {hn.name}",
                        field="spec.members",
                    )
                hn.children.append(child)
                hns[child].parent = hn.name
            if kind == "exact" and value not in hns:
                raise InputError(
                    f"member hypernode {value!r} does not exist",
                    file=files.get(hn.name),
                    obj=f"HyperNode {hn.name}",
                    field="spec.members",
                )
    state: dict[str, int] = {}

    def resolve(name: str, path: list[str]) -> np.ndarray:
        hn = hns[name]
        if state.get(name) == 2:
            return hn.mask
        if state.get(name) == 1:
            cycle = " -> ".join(path[path.index(name) :] + [name])
            raise InputError(
                f"hypernode cycle: {cycle}",
                file=files.get(name),
                obj=f"HyperNode {name}",
                field="spec.members",
            )
        state[name] = 1
        mask = np.zeros(len(nodes), dtype=bool)
        for mtype, kind, value in members[name]:
            if mtype == "Node":
                if isinstance(value, LabelSelector):  # labelMatch: through the nodes' label index
                    mask |= nodes.selector_mask(value.requirements)  # (one pass per label key)
                elif kind == "exact":
                    i = nodes.index.get(value)
                    if i is not None:
                        mask[i] = True
                else:  # regexMatch
                    mask |= nodes.regex_mask(value)
        for child in hn.children:
            mask |= resolve(child, path + [name])
        hn.mask = mask
        state[name] = 2
        return mask

    for name in sorted(hns):
        resolve(name, [])
    if topologies:
        hns.update(topology_domains(list(topologies), nodes)[0])
    return HyperNodeTree(hns)


def _match_names(
    names: list[str], kind: str, value: str | LabelSelector, labels: dict[str, dict]
) -> list[str]:
    if isinstance(value, LabelSelector):  # labelMatch
        return [n for n in names if value.matches(labels[n])]
    if kind == "exact":
        return [value] if value in labels else []
    matches = compile_name_pattern(value)  # regexMatch; RE2: linear time (corral.model.patterns)
    return [n for n in names if matches(n)]


def _pod_priority(cluster: Cluster, rec: PodRec) -> int:
    if rec.priority is not None:
        return rec.priority
    if rec.priority_class:
        pc = cluster.priority_classes.get(rec.priority_class)
        if pc is not None:
            return pc.value
        if rec.priority_class in SYSTEM_CRITICAL:
            return SYSTEM_CRITICAL[rec.priority_class]
    return _global_default(cluster)


def _global_default(cluster: Cluster) -> int:
    """The value of the globalDefault PriorityClass (the first by name if several), else 0; one pass
    without sorting, as it runs for every pod without a priority."""
    defaults = [pc for pc in cluster.priority_classes.values() if pc.global_default]
    return min(defaults, key=lambda p: p.name).value if defaults else 0


def _task_status(rec: PodRec, node: int) -> TaskStatus:
    if rec.phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if rec.phase == "Failed":
        return TaskStatus.FAILED
    if rec.node_name:
        if rec.deleting:
            return TaskStatus.RELEASING
        return TaskStatus.RUNNING if rec.phase == "Running" else TaskStatus.BOUND
    if rec.deleting:
        return TaskStatus.FAILED  # a pending pod being deleted holds nothing and will not run
    return TaskStatus.PIPELINED if rec.nominated else TaskStatus.PENDING


def _preemptable(labels: dict[str, str], annotations: dict[str, str]) -> bool:
    value = annotations.get(PREEMPTABLE_KEY, labels.get(PREEMPTABLE_KEY, "true"))
    return value.strip().lower() != "false"


def _request(
    resources: ResourceIndex, requests: dict[str, float], seen: dict
) -> tuple[np.ndarray, bool, bytes]:
    """``(vector, best effort, its bytes)`` of a pod's requests; pods repeat a handful of request
    shapes, so each shape is worked out once per build (``seen``) and every pod gets its own copy."""
    key = tuple(requests.items())
    got = seen.get(key)
    if got is None:
        req = np.zeros(len(resources))
        for k, v in requests.items():
            req[resources.pos(k)] = v
        best_effort = not req.any()
        req[resources.pos(PODS)] = 1000.0
        got = seen[key] = (req, best_effort, req.tobytes())
    return got[0].copy(), got[1], got[2]


def _task(cluster: Cluster, rec: PodRec, seen: dict | None = None) -> Task:
    resources, nodes = cluster.resources, cluster.nodes
    dra_key = None
    requests = rec.requests
    if cluster.dra is not None and rec.uid in cluster.dra.pod_key:  # its claims' devices (corral.dra)
        dra_key = cluster.dra.pod_key[rec.uid]
        extra = cluster.dra.pod_extra.get(rec.uid)
        if extra:
            requests = dict(requests)
            for k, v in extra.items():
                requests[k] = requests.get(k, 0.0) + v
    req, best_effort, req_bytes = _request(resources, requests, {} if seen is None else seen)
    best_effort = best_effort and rec.gpu_share is None  # a pod sharing a GPU asks for part of one
    node = nodes.index.get(rec.node_name, -1) if rec.node_name else -1
    status = _task_status(rec, node)
    nominated = nodes.index.get(rec.nominated, -1) if rec.nominated else -1
    if status is TaskStatus.PIPELINED and nominated < 0:
        status = TaskStatus.PENDING
    role = rec.annotations.get(TASK_SPEC_KEY, rec.labels.get(TASK_SPEC_KEY, ""))
    affinity = rec.affinity
    sub = rec.labels.get(SUBGROUP_LABEL)
    klass = PodClass(
        request=req_bytes,
        node_selector=tuple(sorted(rec.node_selector.items())) if rec.node_selector else (),
        affinity=affinity,
        tolerations=rec.tolerations,
        namespace=rec.namespace if affinity is not None and affinity.has_pod_terms else "",
        # "" (not None) for a GPU-sharing pod without a sub-group: the classes of old snapshots' keys
        subgroup=(sub or "") if sub is not None or rec.gpu_share is not None else None,
        gpu_share=rec.gpu_share,
        claims=dra_key,
    )
    return Task(
        uid=rec.uid,
        name=rec.name,
        namespace=rec.namespace,
        request=req,
        role=role,
        priority=_pod_priority(cluster, rec),
        status=status,
        node=node,
        nominated=nominated,
        labels=rec.labels,
        annotations=rec.annotations,
        node_selector=rec.node_selector,
        affinity=affinity,
        tolerations=rec.tolerations,
        creation=rec.creation,
        start_time=rec.start_time,
        preemptable=_preemptable(rec.labels, rec.annotations),
        preempt_never=rec.preempt_never,
        priority_class=rec.priority_class,
        best_effort=best_effort,
        klass=klass,
        gpu_share=rec.gpu_share,
    )


def _job_from_group(cluster: Cluster, pg: PodGroupRec) -> Job:
    resources = cluster.resources
    job = Job(
        uid=f"{pg.namespace}/{pg.name}",
        name=pg.name,
        namespace=pg.namespace,
        queue=pg.queue,
        min_member=pg.min_member,
        min_task_member=pg.min_task_member,
        min_resources=_vec(resources, pg.min_resources, 0.0),
        priority_class=pg.priority_class,
        creation=pg.creation,
        annotations=pg.annotations,
        labels=pg.labels,
        topology_mode=pg.topology_mode,
        topology_tier=pg.topology_tier,
        topology_tier_name=pg.topology_tier_name,
        subgroup_policies=pg.subgroup_policies,
        preemptable=_preemptable(pg.labels, pg.annotations) if pg.preemptible is None else pg.preemptible,
    )
    try:
        job.phase = PodGroupPhase(pg.phase)
    except ValueError:
        job.phase = PodGroupPhase.PENDING
    if pg.queue not in cluster.queues:
        job.invalid_reason = f"queue {pg.queue!r} does not exist"
    if pg.kai:
        apply_podgroup(cluster, job, pg)
    if pg.native is not None:
        apply_native(cluster, job, pg)
    return job


def _jobs_and_tasks(
    cluster: Cluster, groups: list[PodGroupRec], pods: list[PodRec], schedulers: set[str]
) -> None:
    for pg in sorted(groups, key=lambda g: (g.namespace, g.name)):
        job = _job_from_group(cluster, pg)
        if job.uid in cluster.jobs:
            raise InputError(
                "duplicate podgroup", file=pg.file or None, obj=f"PodGroup {job.uid}", field="metadata.name"
            )
        cluster.jobs[job.uid] = job
    shapes: dict = {}
    redirect = composite_redirect(groups)  # a PodGroup under a composite: its root's job
    for rec in sorted(pods, key=lambda p: (p.namespace, p.name)):
        task = _task(cluster, rec, shapes)
        if task.uid in cluster.tasks:  # foreign tasks are in cluster.tasks too
            raise InputError("duplicate pod", file=rec.file, obj=f"Pod {task.key}", field="metadata.uid")
        if rec.scheduler not in schedulers:
            if task.node >= 0 and task.status in (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.RELEASING):
                task.managed = False
                task.preemptable = False
                cluster.foreign.append(task)
                cluster.tasks[task.uid] = task
            continue
        if rec.gpu_share is not None:
            cluster.kai_gpu_shared = True
        group = rec.group
        if group:
            uid = f"{rec.namespace}/{group}"
            uid = redirect.get(uid, uid) if redirect else uid
            existing = cluster.jobs.get(uid)
            if existing is not None:
                job = existing
            else:
                job = Job(
                    uid=uid,
                    name=group,
                    namespace=rec.namespace,
                    creation=rec.creation,
                    invalid_reason=f"podgroup {uid} does not exist",
                )
                cluster.jobs[uid] = job
            if job.uid not in cluster.native_groups and not join_subgroup(cluster, job, task):
                continue  # (a native composite's sub-groups are joined by join_native below)
        else:
            uid = f"{rec.namespace}/{rec.name}"
            queue = rec.labels.get(KAI_QUEUE_LABEL) or "default"
            job = Job(
                uid=uid,
                name=rec.name,
                namespace=rec.namespace,
                queue=queue,
                creation=rec.creation,
                min_resources=task.request.copy(),
                synthetic=True,
                invalid_reason="" if queue in cluster.queues else f"queue {queue!r} does not exist",
            )
            if uid in cluster.jobs:
                raise InputError(
                    "a pod without podgroup has the name of a podgroup",
                    file=rec.file or None,
                    obj=f"Pod {uid}",
                    field="metadata.name",
                )
            cluster.jobs[uid] = job
        task.job = job
        if rec.claims or rec.native_group or rec.workload_ref is not None:
            join_native(cluster, job, rec, task)
        job.tasks.append(task)
        cluster.tasks[task.uid] = task
        if task.node < 0 and rec.node_name and task.status in OCCUPYING_STATES:
            cluster.off_nodes.append((task.key, rec.node_name))  # holds nothing corral can see
    for job in cluster.jobs.values():
        _finish_job(cluster, job)
        if job.subgroup_policies or job.topology_tier_name:
            resolve_subgroups(cluster, job)


def _finish_job(cluster: Cluster, job: Job) -> None:
    queue = cluster.queues.get(job.queue)
    if queue is not None and not job.invalid_reason:
        job.invalid_reason = queue.not_leaf_reason()  # only leaf queues hold work (SPEC.md §3.2)
    if job.priority_class and job.priority_class in cluster.priority_classes:
        job.priority = cluster.priority_classes[job.priority_class].value
    elif job.tasks:
        job.priority = max(t.priority for t in job.tasks)
    else:
        job.priority = _global_default(cluster)
    if job.min_resources is None:
        job.min_resources = np.zeros(len(cluster.resources))
    if job.synthetic and job.tasks and job.tasks[0].status is not TaskStatus.PENDING:
        job.phase = PodGroupPhase.RUNNING
    if job.kai_priority_preemptible and job.priority >= KAI_NON_PREEMPTIBLE_PRIORITY:
        job.preemptable = False  # KAI: unset preemptibility follows the priority
    if not job.preemptable:
        for t in job.tasks:
            t.preemptable = False
    if cluster.native_groups:
        finish_native(cluster, job)
