"""The incremental model of ``corral run``: the cluster of the watch cache kept from cycle to cycle, with
only what changed built again.

The snapshot loader builds a cluster in two steps: each object is parsed into a record
(:func:`corral.manifests.kinds.parse_object`, done by the watch cache once per version of an object), and
the records are assembled (:func:`corral.manifests.build.assemble_cluster`). Assembling 50,000 pods takes
longer than the scheduling cycle itself, so a cycle does not assemble again what did not change:

- **Full assembly** (the snapshot loader's, :meth:`LiveModel.adopt` keeps its pieces): on the first cycle,
  and whenever a Queue, PriorityClass, PodDisruptionBudget, HyperNode, KAI Topology or — while some pod
  has a namespaceSelector (:mod:`corral.kube.namespaces`) — Namespace changes what it reads as, a Node
  is added or removed, the set of resource names changes, the served schedulers change, or the last full
  assembly had to leave an object out (an assembly error: the culprit search needs every object). An
  object whose new version reads as the old one (a Node's status heartbeat) changes nothing.
- **Nodes** whose labels, taints, allocatable or annotations changed: the node rows and the HyperNode tree
  are built again by the loader's ``assemble_nodes`` and ``assemble_hypernodes`` (tasks keep their rows: the node names
  are the same), a few milliseconds per thousand nodes.
- **Incremental** (:meth:`LiveModel.advance`): a changed Pod or PodGroup rebuilds the job it belongs to
  (its PodGroup and every pod naming it; a pod without podgroup is its own job; a pod of another
  scheduler is alone) through the loader's own ``assemble_jobs_and_tasks`` on a cluster that holds only that
  job, so the jobs and tasks it makes are the ones a full assembly makes. The node columns move by what
  the replaced tasks held (:meth:`~corral.model.Cluster.charge`), the dicts of tasks and jobs keep the
  loader's order (pods by namespace and name; podgroups by namespace and name, then the other jobs by
  their first pod). An assembly error (a duplicate uid, a pod named as a podgroup) falls back to the full
  assembly, which leaves the culprit out and logs it once.
- **Dynamic Resource Allocation**: while any pod has resource claims (or a claim is allocated), the
  device books (:mod:`corral.dra`) span every claim, pod and slice: a change is a full assembly unless
  it is only of pods and podgroups the books do not read (a pod without claims that no claim is
  reserved for, a podgroup without claims), whose jobs are rebuilt on the books as they are.

Warnings: what the loader's assembly warns about (a KAI podgroup's inert topology constraint or unused
``minMember``, a pod naming no leaf sub-group) is kept with the bucket whose assembly made it (a full
assembly's by the PodGroup or Pod it names) and made again only when that bucket is rebuilt; each
cycle's cluster carries them as ``Cluster.notes`` (:meth:`LiveModel.notes`), as a full assembly would.

A cycle changes the cluster it runs on (task states, node columns, podgroup phases and annotations, node
locks). Before every cycle :meth:`LiveModel.advance` puts back what each task, job and node held when
built, so every cycle starts from the cache's state, as a freshly assembled cluster would, and a new
:class:`~corral.model.Cluster` object holds the pieces (nothing a cycle keeps on the cluster outlives it).

Node columns are moved by sums and differences; that is exact (the same bits as the loader's summation
in any order) while every amount is a whole number of milli-units below 2**50, which quantities of real
clusters are. A task with any other amount makes the cycle recompute the columns from every task
(:meth:`~corral.model.Cluster.account`, the loader's way).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.errors import InputError
from corral.kube.builtstate import BuiltState
from corral.kube.jobfacts import JobFacts
from corral.kube.modelrecords import Bucket, ModelRecords, key_of_record
from corral.kube.namespaces import relabel
from corral.manifests.build import assemble_hypernodes, assemble_jobs_and_tasks, assemble_nodes
from corral.manifests.native import native_topologies, topology_family, workload_podgroups
from corral.model import Cluster, Job, Task, TaskStatus
from corral.model.notes import Note, Notes

__all__ = ["LiveModel"]

_EXACT = float(2**50)  # amounts below this (whole milli-units) sum exactly in float64
_INCREMENTAL = ("Pod", "PodGroup", "Node")
_WAITING = frozenset({TaskStatus.PENDING, TaskStatus.PIPELINED})


def _exact(requests: list[np.ndarray]) -> bool:
    if not requests:
        return True
    m = np.stack(requests)
    return bool(np.all(np.abs(m) < _EXACT) and np.all(m == np.floor(m)))


@dataclass
class _Built:
    """What one bucket built: its job (none for a pod of another scheduler) and its tasks."""

    jobs: list[Job] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    #: what the loader's assembly warned about for them (a KAI pod naming no leaf sub-group, ...)
    notes: list[Note] = field(default_factory=list)


class LiveModel(ModelRecords):
    """Cluster pieces kept across cycles, the records they were built from, and their state as built."""

    def __init__(self) -> None:
        self.ready = False
        self.schedulers: tuple[str, ...] = ()
        self.last = ""  # "full" | "incremental" | "unchanged"
        self.reason = "first build"  # why the next build assembles everything
        self.rebuilt = 0  # buckets rebuilt by the last incremental step
        self.pending = 0  # pods of served schedulers waiting for a node
        self.state = BuiltState()  # the state as built of every task, job and node
        self.version = 0  # bumped by every build that changed a job (full or incremental)
        self.facts = JobFacts()  # what the applier and the runner ask of every job, kept

    # -- adopting a full assembly --------------------------------------------------------------------
    def adopt(
        self,
        cluster: Cluster,
        rows: Sequence[tuple[Any, str, dict, tuple[str, Any]]],
        dropped: set[tuple[str, str]],
        schedulers: Sequence[str],
    ) -> None:
        """Keep the pieces of ``cluster``, assembled by the loader from ``rows`` (``(type, key, dict,
        (kind, record))``) less ``dropped``, and the state of every task, job and node as built."""
        self.schedulers = tuple(schedulers)
        self.served = set(schedulers)
        self.dropped = bool(dropped)
        self.dra = cluster.dra
        #: pods (namespace, name) some claim is reserved for: the device books read them
        self.dra_reserved = (
            {(c.namespace, n) for c in cluster.dra.claims.values() for n in c.reserved_for}
            if cluster.dra is not None
            else set()
        )
        self._adopt_records(rows)
        self.fixed = self._fixed()
        self.resources, self.nodes = cluster.resources, cluster.nodes
        self.queues, self.hypernodes = cluster.queues, cluster.hypernodes
        self.topologies, self.kai_gpu_shared = cluster.topologies, cluster.kai_gpu_shared
        self.namespace_labels = cluster.namespace_labels  # a Namespace change assembles everything
        self.native_groups: dict[str, Any] = dict(cluster.native_groups)
        self.priority_classes, self.pdbs = cluster.priority_classes, cluster.pdbs
        self.jobs: dict[str, Job] = dict(cluster.jobs)
        self.tasks: dict[str, Task] = dict(cluster.tasks)
        self.foreign: list[Task] = list(cluster.foreign)
        self._adopt_buckets(cluster)
        self._adopt_notes(cluster.notes.warnings)
        self.pod_order = sorted((rec.namespace, rec.name) for rec in self.pods.values())
        self.group_order = sorted((rec.namespace, rec.name) for rec in self.groups.values())
        self.exact = _exact([t.request for t in cluster.tasks.values()])
        self.pending = sum(map(_waiting, cluster.tasks.values()))
        self.state = BuiltState()
        for t in self.task_of.values():
            self.state.keep_task(t)
        for job in self.jobs.values():
            self.state.keep_job(job)
        self.state.keep_nodes(self.nodes)
        self.state.dra_built = dict(cluster.dra.allocations) if cluster.dra is not None else {}
        self.facts.reset(self.jobs.values())
        self.ready = True
        self.last, self.rebuilt = "full", 0
        self.version += 1

    def _adopt_buckets(self, cluster: Cluster) -> None:
        """What each bucket of ``cluster`` built (its jobs and tasks), and each pod's task."""
        self.built: dict[Bucket, _Built] = {}
        for job in cluster.jobs.values():
            self.built.setdefault(("job", job.uid), _Built()).jobs.append(job)
        self.task_of: dict[str, Task] = {}  # pod key -> task
        for task in cluster.tasks.values():
            self.task_of[task.key] = task
            b = ("job", task.job.uid) if task.job is not None else ("pod", task.key)
            self.built.setdefault(b, _Built()).tasks.append(task)

    def _adopt_notes(self, notes: Iterable[Note]) -> None:
        """Keep the full assembly's warnings by the bucket whose rebuild makes them again: a PodGroup's
        by its job, a Pod's by its pod's bucket; any other (a composite tree's) until the next full
        assembly."""
        self.assembly_notes: list[Note] = []  # warnings of no bucket
        self.bucket_notes: dict[Bucket, list[Note]] = {}  # bucket -> its warnings (only buckets with any)
        for n in notes:
            kind, _, key = n.obj.partition(" ")
            b: Bucket | None = None
            if kind == "PodGroup" and key in self.groups:
                b = ("job", key)
            elif kind == "Pod":
                b = self.bucket_of.get(key)
            if b is None:
                self.assembly_notes.append(n)
            else:
                self.bucket_notes.setdefault(b, []).append(n)

    def notes(self) -> Notes:
        """The assembly's warnings for the cluster as last built (as a full assembly makes them; the
        reader's per-object warnings are the watch cache's)."""
        out = Notes()
        out.extend(self.assembly_notes)
        for ns in self.bucket_notes.values():
            out.extend(ns)
        return out

    def _fixed(self) -> set[str]:
        """The resource names of nodes and queues (and cpu, memory, pods), and those DRA devices count as."""
        fixed = set(self.queued)
        for rec in self.node_recs.values():
            fixed.update(rec.allocatable)
        if self.dra is not None:  # the device books as assembled (corral.dra.inventory)
            for extra in (*self.dra.node_extra.values(), *self.dra.pod_extra.values()):
                fixed.update(extra)
        return fixed

    # -- a cycle --------------------------------------------------------------------------------------
    def advance(self, delta: Sequence[tuple[Any, str, Any]], schedulers: Sequence[str]) -> Cluster | None:
        """The cluster of the next cycle: the state as built put back, and ``delta`` (``(type, key,
        (kind, record) or None)`` of every object changed since the last build) applied. None when a
        full assembly is needed (the model is then stale until :meth:`adopt`)."""
        if not self.ready:
            return None
        if tuple(schedulers) != self.schedulers:
            self._full("the served schedulers changed")
            return None
        self._restore()
        changes = [
            (r, key, None if rec is None else rec[1])
            for r, key, rec in delta
            if self.records.get((r.name, key)) != (None if rec is None else rec[1])
        ]
        if not self.selector_pods and any(r.kind == "Namespace" for r, _, _ in changes):
            self.namespace_labels, changes = relabel(self.records, self.namespace_labels, changes)
        if not changes:
            self.last, self.rebuilt = "unchanged", 0
            return self._result()
        if self.dra is not None and not self._beside_dra(changes):  # the device books (corral.dra)
            self._full("Dynamic Resource Allocation is assembled whole")
            return None
        if self.dropped:
            self._full("objects were left out: the culprit search needs every object")
            return None
        if self.composites or any(
            getattr(getattr(rec, "native", None), "parent", "")
            for r, _, rec in changes
            if r.kind == "PodGroup"
        ):
            self._full("composite pod groups are assembled whole")
            return None
        if any(getattr(rec, "claim_refs", ()) for r, _, rec in changes if r.kind == "Pod"):
            self._full("a pod with resource claims changed")
            return None
        other = next((r.kind for r, _, _ in changes if r.kind not in _INCREMENTAL), None)
        if other is not None:
            self._full(f"a {other} changed")
            return None
        if any(_new_topology(rec, self.topologies) for r, _, rec in changes if r.kind == "PodGroup"):
            self._full("a PodGroup constrains a node label the topology has no domains of")
            return None
        nodes = [c for c in changes if c[0].kind == "Node"]
        try:
            why = self._refresh_nodes(nodes) if nodes else ""
            if not why and len(nodes) < len(changes):
                why = self._apply([c for c in changes if c[0].kind != "Node"])
        except InputError as exc:  # an assembly error: the full assembly names the culprit
            why = f"an assembly error ({exc.describe()})"
        if why:
            self._full(why)
            return None
        self.last = "incremental"
        self.version += 1
        return self._result()

    def _beside_dra(self, changes: list[tuple[Any, str, Any]]) -> bool:
        """Whether ``changes`` are only of pods and podgroups the device books do not read, before and
        after: pods without claims that no claim is reserved for, podgroups without claims."""
        for r, key, rec in changes:
            for x in (self.records.get((r.name, key)), rec):
                if x is None:
                    continue
                if r.kind == "Pod":
                    if x.claim_refs or (x.namespace, x.name) in self.dra_reserved:
                        return False
                elif r.kind == "PodGroup":
                    native = x.native
                    if native is not None and (native.claims or native.composite is not None):
                        return False
                else:
                    return False
        return True

    def _full(self, why: str) -> None:
        """Mark the model stale: the next cycle needs a full assembly, for ``why``."""
        self.ready, self.reason = False, why

    def _restore(self) -> None:
        """Put back the state as built of what the last cycle changed (:mod:`corral.kube.builtstate`)."""
        self.state.restore(self.nodes, self.dra)

    def _result(self) -> Cluster:
        """The cluster of a cycle, with the assembly's warnings."""
        cluster = self._cluster()
        cluster.notes = self.notes()
        self.state.handed_out()
        return cluster

    def _cluster(self) -> Cluster:
        return Cluster(
            resources=self.resources,
            nodes=self.nodes,
            tasks=self.tasks,
            jobs=self.jobs,
            queues=self.queues,
            hypernodes=self.hypernodes,
            priority_classes=self.priority_classes,
            pdbs=self.pdbs,
            foreign=self.foreign,
            topologies=self.topologies,
            kai_gpu_shared=self.kai_gpu_shared,
            # copies: what a cycle's decisions set on a group (kube.native_status) does not outlive it
            native_groups={u: n.copy() for u, n in self.native_groups.items()},
            dra=self.dra,
            namespace_labels=self.namespace_labels,
        )

    def _refresh_nodes(self, changes: list[tuple[Any, str, Any]]) -> str:
        """Nodes whose labels, taints, allocatable or annotations changed: the node columns and the
        HyperNode tree built again by the loader's functions; tasks keep their rows (the set of node
        names is the same). A node added or removed, or a change of the resource names, assembles
        everything."""
        for r, key, rec in changes:
            old = self.records.get((r.name, key))
            if old is None or rec is None or old.name != rec.name:
                return "a node was added or removed"
        for r, key, rec in changes:
            self.records[(r.name, key)] = rec
            self.node_recs[key] = rec
        self.fixed = self._fixed()
        if {n for n, c in self.names.items() if c > 0} | self.fixed != set(self.resources.names):
            return "the set of resource names changed"
        nodes = assemble_nodes(list(self.node_recs.values()), self.resources)
        if nodes.names != self.nodes.names:
            return "the node rows changed"
        for target, built in zip((nodes.used, nodes.releasing, nodes.pipelined), self.state.columns):
            np.copyto(target, built)
        self.nodes = nodes
        self.state.keep_nodes(nodes)
        labels = native_topologies(list(self.groups.values()))  # domains of native groups' node labels
        self.hypernodes = assemble_hypernodes(self.hyper_recs, nodes, self.topo_recs + labels)
        self.rebuilt = 0
        return ""

    def _apply(self, changes: list[tuple[Any, str, Any]]) -> str:
        """Records and buckets updated, the changed buckets rebuilt; why not when only a full assembly
        can tell (the set of resource names changes, two objects read as one pod or podgroup)."""
        dirty: set[Bucket] = set()
        for r, key, rec in changes:
            old = self.records.pop((r.name, key), None)
            moved = (
                old is None or rec is None or key_of_record(old) != key_of_record(rec)
            )  # the set of keys changes
            if r.kind == "Pod":
                if old is not None:
                    dirty.add(self._drop_pod(old))
                    if moved:
                        self._order(self.pod_order, old, False)
                if rec is not None:
                    if not self._add_pod(rec):
                        return f"two objects read as pod {key_of_record(rec)}"
                    dirty.add(self.bucket_of[key_of_record(rec)])
                    if moved:
                        self._order(self.pod_order, rec, True)
            else:
                if old is not None:
                    self._drop_group(old)
                    if moved:
                        self._order(self.group_order, old, False)
                    dirty.add(("job", key_of_record(old)))
                if rec is not None:
                    if not self._add_group(rec):
                        return f"two objects read as podgroup {key_of_record(rec)}"
                    if moved:
                        self._order(self.group_order, rec, True)
                    dirty.add(("job", key_of_record(rec)))
            if rec is not None:
                self.records[(r.name, key)] = rec
        if {n for n, c in self.names.items() if c > 0} | self.fixed != set(self.resources.names):
            return "the set of resource names changed"
        self.rebuilt = len(dirty)
        return self._rebuild(dirty)

    def _rebuild(self, dirty: set[Bucket]) -> str:
        """Rebuild the ``dirty`` buckets; the node columns move by what their tasks held before and after."""
        cluster = self._cluster()
        before: list[tuple[str, str]] = []  # (uid, pod key) of the replaced tasks
        after: list[tuple[str, str]] = []
        jobs_before: set[str] = set()
        jobs_after: set[str] = set()
        fresh: list[Task] = []
        foreign_moved = False
        for b in sorted(dirty):
            old = self.built.pop(b, None)
            self.bucket_notes.pop(b, None)
            if old is not None:
                self.pending -= sum(map(_waiting, old.tasks))
                for t in old.tasks:
                    cluster.charge(t, -1)
                    del self.task_of[t.key]
                    self.state.drop_task(t.key)
                    before.append((t.uid, t.key))
                    foreign_moved = foreign_moved or not t.managed
                jobs_before.update(j.uid for j in old.jobs)
            new = self._build(b)
            if new is None:
                return f"the pods of {b[1]} make another job"
            for t in new.tasks:
                if t.key in self.task_of:
                    return f"two objects read as pod {t.key}"
                self.task_of[t.key] = t
                self.state.keep_task(t)
                after.append((t.uid, t.key))
            fresh.extend(new.tasks)
            self.pending += sum(map(_waiting, new.tasks))
            for j in new.jobs:
                jobs_after.add(j.uid)
                self.jobs[j.uid] = j  # in place when the uid was there
                self.state.keep_job(j)
            if new.tasks or new.jobs:
                self.built[b] = new
            if new.notes:
                self.bucket_notes[b] = new.notes
        for uid in jobs_before - jobs_after:
            del self.jobs[uid]
            self.state.drop_job(uid)
        self.facts.replace(jobs_before, [self.jobs[u] for u in jobs_after])
        why = self._place_tasks(sorted(before) == sorted(after), fresh, foreign_moved)
        if why:
            return why
        if jobs_before != jobs_after or any(b[0] == "job" and b[1] not in self.groups for b in dirty):
            self._order_jobs()  # a job ordered by its first pod may move
        self._charge(fresh)
        return ""

    def _place_tasks(self, same: bool, fresh: list[Task], foreign_moved: bool) -> str:
        """The rebuilt tasks into the dict of tasks: in the old places when the pods are the ``same``, else
        the dict made again in the loader's order (why not, when two pods share a uid)."""
        if same:
            for t in fresh:  # the same pods: new tasks take the old places
                self.tasks[t.uid] = t
            if foreign_moved or any(not t.managed for t in fresh):
                self.foreign = [t for t in self.tasks.values() if not t.managed]
            return ""
        ordered = [
            self.task_of[k] for k in (f"{ns}/{name}" for ns, name in self.pod_order) if k in self.task_of
        ]
        self.tasks = {t.uid: t for t in ordered}
        if len(self.tasks) != len(ordered):
            return "a duplicate pod uid"  # the full assembly names the culprit
        self.foreign = [t for t in ordered if not t.managed]
        return ""

    def _charge(self, fresh: list[Task]) -> None:
        """Add what the ``fresh`` tasks hold to the node columns (the replaced ones were taken off), or,
        when a sum might not be exact, recompute the columns from every task; keep them as built."""
        self.exact = self.exact and _exact([t.request for t in fresh])
        cluster = self._cluster()
        nodes = self.nodes
        if self.exact:
            for t in fresh:
                cluster.charge(t, +1)
            if max(float(nodes.used.max(initial=0.0)), float(nodes.pipelined.max(initial=0.0))) >= 4 * _EXACT:
                self.exact = False
        if not self.exact:
            cluster.account()
        self.state.keep_columns(nodes)

    def _build(self, b: Bucket) -> _Built | None:
        """The jobs and tasks of bucket ``b``: the loader's assembly on a cluster of that bucket alone."""
        part = Cluster(
            resources=self.resources,
            nodes=self.nodes,
            queues=self.queues,
            hypernodes=self.hypernodes,  # tier names of highestTierName
            priority_classes=self.priority_classes,
            topologies=self.topologies,
            dra=self.dra,  # the device books as assembled (what a pod with claims asks and may wait for)
            namespace_labels=self.namespace_labels,  # what namespaceSelectors match
        )
        pods = [self.pods[k] for k in self.members.get(b, ())]
        groups = [self.groups[b[1]]] if b[0] == "job" and b[1] in self.groups else []
        if not groups and any(p.workload_ref is not None for p in pods):  # a 1.35 Workload's group
            groups = workload_podgroups(self.workloads, pods)
        assemble_jobs_and_tasks(part, groups, pods, self.served)
        self.native_groups.pop(b[1], None)
        self.native_groups.update(part.native_groups)
        self.kai_gpu_shared = self.kai_gpu_shared or part.kai_gpu_shared
        if any(uid != b[1] for uid in part.jobs) or (b[0] == "pod" and part.jobs):
            return None
        return _Built(list(part.jobs.values()), list(part.tasks.values()), list(part.notes.warnings))

    def _order_jobs(self) -> None:
        """The loader's order: podgroup jobs by namespace and name, then the others by their first pod."""
        jobs = self.jobs
        out: dict[str, Job] = {}
        for ns, name in self.group_order:
            uid = f"{ns}/{name}"
            if uid in jobs:
                out[uid] = jobs[uid]
        if len(out) != len(jobs):
            for ns, name in self.pod_order:
                t = self.task_of.get(f"{ns}/{name}")
                if t is not None and t.job is not None and t.job.uid not in out:
                    out[t.job.uid] = t.job
        self.jobs = out


def _new_topology(rec: Any, topologies: dict[str, Any]) -> bool:
    """A native PodGroup record whose topology key has no domains in the model yet."""
    native = getattr(rec, "native", None)
    return bool(
        native is not None and native.topology_key and topology_family(native.topology_key) not in topologies
    )


def _waiting(t: Task) -> bool:
    """A pod of a served scheduler waiting for a node (``corral_pending_pods``)."""
    return t.managed and t.status in _WAITING
