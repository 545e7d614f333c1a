"""KAI-Scheduler's objects onto corral's model: ``Topology`` levels as topology domains, a PodGroup's
topology constraint and sub-groups, the queue label and GPU-sharing annotations of pods.

Decisions, each following KAI's code (kai-scheduler/KAI-Scheduler):
- **Topology** (``kai.scheduler/v1alpha1``, plugin ``pkg/scheduler/plugins/topology``): a node belongs to
  a topology when it carries every level's label; its domain at level *i* is the values of levels 0..*i*
  (``calcDomainId``), so rack ``r1`` of block ``b1`` and of block ``b2`` are two domains. Each domain
  becomes a hypernode of family *topology name*; the narrowest level is tier 1, the widest tier *n*, and
  the topology's root (every node of the topology) tier *n*+1.
- **A topology constraint** (``topologyConstraint`` of the PodGroup or of a sub-group) applies only when it
  names its ``topology`` (``subgroup_info.FromPodGroup`` / ``getJobTopology``): without one it is accepted
  and not acted on (``corral validate`` says so). A named topology that does not exist, or a level that is
  neither a nodeLabel nor an alias of it, leaves the job unschedulable with that reason (KAI: "Requested
  topology X does not exist", the constraint configuration error). ``requiredTopologyLevel``: every pod in
  one domain of that level (hard, highest tier = that level's); ``preferredTopologyLevel``: domains from
  that level up are tried narrowest first (soft when nothing is required, the cluster being the last
  resort; KAI's ``calculateRelevantDomainLevels``).
- **Sub-groups** (:mod:`corral.model.subgroups`): a leaf without ``minMember``, a parent that is not a
  sub-group, or a parent cycle is refused (KAI cannot build the sub-group tree either). A pod of a
  PodGroup with sub-groups that names no leaf sub-group (label ``kai.scheduler/subgroup-name``) is never
  scheduled, as KAI keeps it aside (``InvalidSubGroupTasks``); ``corral validate`` names it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from corral.errors import InputError
from corral.model.hypernodes import HyperNode
from corral.model.objects import TaskStatus
from corral.model.subgroups import SUBGROUP_LABEL, SubGroup, SubGroupConstraint, SubGroupTree

if TYPE_CHECKING:
    from corral.manifests.records import PodGroupRec, TopologyRec
    from corral.model.cluster import Cluster
    from corral.model.nodes import Nodes
    from corral.model.objects import Job, Task

__all__ = [
    "KAI_NON_PREEMPTIBLE_PRIORITY",
    "SUBGROUP_LABEL",
    "apply_podgroup",
    "join_subgroup",
    "subgroup_of",
    "topology_domains",
]

#: KAI: a PodGroup without ``preemptibility`` is non-preemptible from this priority up (the PodGroup
#: CRD: "values below 100 are considered preemptible"; KAI's e2e ``NonPreemptiblePriorityThreshold``)
KAI_NON_PREEMPTIBLE_PRIORITY = 100


def _short(label: str) -> str:
    return label.rpartition("/")[2] or label


def topology_domains(recs: list[TopologyRec], nodes: Nodes) -> tuple[dict[str, HyperNode], dict]:
    """Every KAI Topology's domains as hypernodes (by name), and the topologies' levels by name."""
    out: dict[str, HyperNode] = {}
    levels: dict[str, list[tuple[str, str]]] = {}
    for rec in sorted(recs, key=lambda r: r.name):
        if rec.name in levels:
            raise InputError(
                "duplicate topology", file=rec.file or None, obj=f"Topology {rec.name}", field="metadata.name"
            )
        levels[rec.name] = rec.levels
        n = len(rec.levels)
        member = np.ones(len(nodes), dtype=bool)
        values: list[list[str]] = []
        for label, _alias in rec.levels:
            col = [lb.get(label) for lb in nodes.labels]
            member &= np.array([v is not None for v in col], dtype=bool)
            values.append([v or "" for v in col])
        root = HyperNode(rec.name, n + 1, family=rec.name)
        root.mask = member.copy()
        out[f"{rec.name}:"] = root
        for i in range(n):
            groups: dict[tuple[str, ...], list[int]] = {}
            for row in np.flatnonzero(member).tolist():
                groups.setdefault(tuple(values[j][row] for j in range(i + 1)), []).append(row)
            for key, rows in groups.items():
                path = "/".join(
                    f"{rec.levels[j][1] or _short(rec.levels[j][0])}={key[j]}" for j in range(i + 1)
                )
                hn = HyperNode(f"{rec.name}:{path}", n - i, family=rec.name)
                mask = np.zeros(len(nodes), dtype=bool)
                mask[rows] = True
                hn.mask = mask
                out[hn.name] = hn
    return out, levels


def _level_tier(levels: list[tuple[str, str]], level: str) -> int | None:
    """The tier of ``level`` (a nodeLabel or an alias) in a topology of these levels; None: no such level."""
    for i, (label, alias) in enumerate(levels):
        if level in (label, alias):
            return len(levels) - i
    return None


def _resolve(
    cluster: Cluster, who: str, topology: str, required: str, preferred: str
) -> tuple[str, int | None, int, str]:
    """``(mode, highest tier, lowest tier, problem)`` of one constraint ("" mode: none)."""
    if not topology or not (required or preferred):
        return "", None, 0, ""
    levels = cluster.topologies.get(topology)
    if levels is None:
        return "", None, 0, f"{who}: requested topology {topology!r} does not exist"
    req = _level_tier(levels, required) if required else None
    pref = _level_tier(levels, preferred) if preferred else None
    for kind, level, tier in (("required", required, req), ("preferred", preferred, pref)):
        if level and tier is None:
            return (
                "",
                None,
                0,
                (f"{who}: {kind} topology level {level!r} is not a level of topology {topology!r}"),
            )
    if req is not None:
        low = pref if pref is not None and pref <= req else req
        return "hard", req, low, ""
    return "soft", None, pref or 0, ""


def _note_inert(cluster: Cluster, obj: str, path: str, topology: str, required: str, preferred: str) -> None:
    if (required or preferred) and not topology:
        cluster.notes.warn(
            obj,
            "",
            f"{path} names no topology, so it is not acted on (KAI applies a constraint only "
            f"with its topology); set {path}.topology to a Topology's name",
        )


def apply_podgroup(cluster: Cluster, job: Job, pg: PodGroupRec) -> None:
    """Set ``job``'s topology constraint and sub-groups from a KAI PodGroup record."""
    obj = f"PodGroup {job.uid}"
    _note_inert(
        cluster, obj, "spec.topologyConstraint", pg.topology_name, pg.required_level, pg.preferred_level
    )
    mode, tier, low, problem = _resolve(
        cluster, "the podgroup", pg.topology_name, pg.required_level, pg.preferred_level
    )
    if pg.preemptibility:
        job.preemptable = pg.preemptibility == "preemptible"
    else:  # KAI: a priority of 100 or more makes it non-preemptible (set once the priority is known)
        job.kai_priority_preemptible = True
    if problem and not job.invalid_reason:
        job.invalid_reason = problem
    if mode:
        job.topology_mode, job.topology_tier, job.topology_low_tier = mode, tier, low
        job.topology_family = pg.topology_name
    if pg.subgroups:
        _subgroups(cluster, job, pg, obj)


def _subgroups(cluster: Cluster, job: Job, pg: PodGroupRec, obj: str) -> None:
    """KAI's ``spec.subGroups`` of ``pg`` as ``job``'s sub-group tree: a leaf needs ``minMember``, a
    sub-group with children counts them by ``minSubGroup`` (the other field is noted as unused); each
    sub-group's topology constraint resolved; the job's minimum is every leaf's minimum when all are
    required, else the tree's fewest pods."""
    file = pg.file or None
    groups = _linked_subgroups(pg, file, obj)
    for i, s in enumerate(pg.subgroups):
        g = groups[s.name]
        path = f"spec.subGroups[{i}]"
        if g.leaf and s.min_member is None:
            raise InputError(
                f"sub-group {s.name!r} has no sub-groups under it, so it needs minMember (KAI requires it)",
                file=file,
                obj=obj,
                field=f"{path}.minMember",
            )
        if g.leaf and s.min_subgroup is not None:
            cluster.notes.warn(obj, "", f"{path}.minSubGroup is not used: {s.name!r} has no sub-groups")
        if not g.leaf and s.min_member is not None:
            cluster.notes.warn(
                obj,
                "",
                f"{path}.minMember is not used: {s.name!r} has sub-groups (KAI counts them by minSubGroup)",
            )
        _note_inert(
            cluster, obj, f"{path}.topologyConstraint", s.topology_name, s.required_level, s.preferred_level
        )
        mode, tier, low, problem = _resolve(
            cluster, f"sub-group {s.name}", s.topology_name, s.required_level, s.preferred_level
        )
        if problem and not job.invalid_reason:
            job.invalid_reason = problem
        if mode:
            g.constraint = SubGroupConstraint(s.name, mode, s.topology_name, tier or 0, low or None)
    if pg.min_member_given:
        cluster.notes.warn(
            obj, "", "spec.minMember is not used: the podgroup has subGroups (KAI counts them by minSubGroup)"
        )
    tree = SubGroupTree(groups, pg.min_subgroup)
    job.subgroup_tree = tree
    leaves = tree.leaves()
    if tree.all_required():
        job.min_task_member = {n: groups[n].min_member or 0 for n in leaves}
        job.min_member = sum(job.min_task_member.values())
    else:
        job.subgroups = tree
        job.min_task_member = {}
        job.min_member = tree.fewest_pods()


def _linked_subgroups(pg: PodGroupRec, file: str | None, obj: str) -> dict[str, SubGroup]:
    """The sub-groups of ``pg`` by name with their children; a missing parent or a cycle is an error."""
    groups = {s.name: SubGroup(s.name, s.parent, s.min_member, s.min_subgroup) for s in pg.subgroups}
    for i, s in enumerate(pg.subgroups):
        if s.parent and s.parent not in groups:
            raise InputError(
                f"parent sub-group {s.parent!r} of {s.name!r} does not exist",
                file=file,
                obj=obj,
                field=f"spec.subGroups[{i}].parent",
            )
        if s.parent:
            groups[s.parent].children.append(s.name)
    for i, s in enumerate(pg.subgroups):
        seen, cur = [s.name], s.parent
        while cur:
            if cur in seen:
                raise InputError(
                    f"sub-group cycle: {' -> '.join(seen + [cur])}",
                    file=file,
                    obj=obj,
                    field=f"spec.subGroups[{i}].parent",
                )
            seen.append(cur)
            cur = groups[cur].parent
    return groups


def join_subgroup(cluster: Cluster, job: Job, task: Task) -> bool:
    """Give ``task`` (a pod of ``job``) its leaf sub-group as its role; False when it names none, so it
    is left out of the job (a note says so; a pod that holds a node stays as fixed load on it)."""
    sub = subgroup_of(job, task.labels)
    if sub is None:
        cluster.notes.warn(
            f"Pod {task.key}",
            "",
            f"metadata.labels.{SUBGROUP_LABEL} {task.labels.get(SUBGROUP_LABEL, '')!r} names "
            f"no leaf sub-group of PodGroup {job.uid}, so the pod is not scheduled (as KAI); label it with "
            "one of: " + ", ".join(job.subgroup_tree.leaves()),
        )
        if task.node >= 0 and task.status in (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.RELEASING):
            task.managed = task.preemptable = False  # it holds its node: fixed load
            cluster.foreign.append(task)
            cluster.tasks[task.uid] = task
        return False
    if sub:
        task.role = sub
    return True


def subgroup_of(job: Job, labels: dict[str, str]) -> str | None:
    """The leaf sub-group a pod of ``job`` joins: its label's value, "" when the job has no sub-groups,
    None when the label names no leaf (KAI leaves the pod unscheduled)."""
    tree = job.subgroup_tree
    if tree is None:
        return ""
    name = labels.get(SUBGROUP_LABEL, "").lower()
    return name if name in tree.groups and tree.groups[name].leaf else None
