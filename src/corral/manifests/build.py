"""Assemble a :class:`~corral.model.Cluster` from snapshot objects (SPEC.md §1.1).

Two stages: :func:`parse_objects` reads every object into a record (:mod:`corral.manifests.kinds`);
:func:`assemble_cluster` builds the model from the records in public steps, each a function of its
arguments that ``corral run``'s incremental model (:mod:`corral.kube.model`) may call again on its own:
:func:`~corral.manifests.node_assembly.assemble_nodes` (node rows),
:func:`~corral.manifests.queue_assembly.assemble_queues` (the queue tree),
:func:`~corral.manifests.node_assembly.assemble_hypernodes` (the topology tree over the rows) and
:func:`~corral.manifests.job_assembly.assemble_jobs_and_tasks` (jobs and tasks); this module is their
face. :func:`build_cluster` and :func:`load_snapshot` run both stages.

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
from typing import Any

from corral.dra.pods import inventory_of
from corral.manifests.fieldcheck import check_pending_pod
from corral.manifests.job_assembly import assemble_jobs_and_tasks
from corral.manifests.kinds import parse_object
from corral.manifests.load import SourcedObject, read_objects
from corral.manifests.native_assembly import native_records, report_read
from corral.manifests.node_assembly import (
    GPU_MEMORY,
    GPU_MEMORY_PER_DEVICE,
    GPU_NUMBER,
    assemble_hypernodes,
    assemble_nodes,
)
from corral.manifests.queue_assembly import assemble_queues
from corral.manifests.workloads import expand_workloads
from corral.model.cluster import Cluster, PodDisruptionBudget, PriorityClass
from corral.model.hypernodes import HyperNodeTree
from corral.model.notes import Notes
from corral.model.resources import ResourceIndex

__all__ = [
    "DEFAULT_SCHEDULERS",
    "GPU_MEMORY",
    "GPU_MEMORY_PER_DEVICE",
    "GPU_NUMBER",
    "assemble_cluster",
    "assemble_hypernodes",
    "assemble_jobs_and_tasks",
    "assemble_nodes",
    "assemble_queues",
    "build_cluster",
    "load_snapshot",
    "parse_objects",
]

log = logging.getLogger("corral")

DEFAULT_SCHEDULERS = ("corral", "volcano", "kai-scheduler")


def load_snapshot(paths: Iterable[str | Path], schedulers: Sequence[str] = DEFAULT_SCHEDULERS) -> Cluster:
    """Read files/directories and build the cluster; raises :class:`InputError` on bad input. The
    garbage collector is paused over the reading too: parsing a large snapshot creates hundreds of
    thousands of containers and frees none (the saving: docs/kubernetes.md, "Performance at scale")."""
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
    nodes = assemble_nodes(by_kind["Node"], resources, dra.node_extra if dra is not None else None)
    cluster = Cluster(resources=resources, nodes=nodes, dra=dra)
    for name, value, default in by_kind["PriorityClass"]:
        cluster.priority_classes[name] = PriorityClass(name, value, default)
    for ns, name, sel, min_av, max_un in by_kind["PodDisruptionBudget"]:
        cluster.pdbs.append(PodDisruptionBudget(f"{ns}/{name}", ns, sel, min_av, max_un))
    cluster.queues = assemble_queues(by_kind["Queue"], resources)
    cluster.hypernodes = (
        hypernodes
        if hypernodes is not None
        else assemble_hypernodes(by_kind["HyperNode"], nodes, by_kind["Topology"])
    )
    cluster.topologies = {r.name: r.levels for r in by_kind["Topology"]}
    cluster.namespace_labels = dict(by_kind["Namespace"])
    assemble_jobs_and_tasks(cluster, by_kind["PodGroup"], by_kind["Pod"], set(schedulers))
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
