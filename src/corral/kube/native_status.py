"""The status conditions kube-scheduler writes on Kubernetes' own PodGroups (``scheduling.k8s.io``), for
the decisions of a cycle: listed in the JSON decisions (``conditions``, SPEC.md §4) and written by
``corral run``'s applier (:mod:`corral.kube.podgroups`).

As kube-scheduler's pod group scheduling cycle writes them (``scheduleOnePodGroup`` and
``updatePodGroupCondition``, pkg/scheduler, 1.36–1.37; the condition is ``PodGroupScheduled`` in
``v1alpha2``, ``PodGroupInitiallyScheduled`` from ``v1alpha3``):

- a group placed to its gang minimum: ``<condition>=True``, reason ``Scheduled``;
- a group that cannot be placed: ``<condition>=False``, reason ``Unschedulable``, the reason as message —
  never once the condition is True (kube-scheduler does not regress it: "Once this condition
  transitions to True, it serves as a terminal state");
- a group whose pods corral evicts for another: ``DisruptionTarget=True``, reason
  ``PreemptionByScheduler``, the action and the preemptor as message.

Under a composite (one job for the tree, :mod:`corral.manifests.native_composite`) the conditions go to
each PodGroup of the tree, as kube-scheduler writes them (the root composite's status stays empty): when
the tree is placed, every PodGroup at its minimum is Scheduled; while it cannot be, every PodGroup not yet
Scheduled is Unschedulable with the tree's reason.

A condition is listed only when it changes what the group says (as read from its status, then as
written by earlier cycles), so a waiting backlog costs no records cycle after cycle. 1.35's groups
(``v1alpha1`` Workloads) have no status: kube-scheduler writes none, corral neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral.model import ALLOCATED_STATES, TaskStatus

if TYPE_CHECKING:
    from corral.framework.decisions import Decisions
    from corral.model import Cluster, Job

__all__ = ["DISRUPTION", "PodGroupCondition", "native_conditions"]

DISRUPTION = "DisruptionTarget"
_READY = frozenset(ALLOCATED_STATES) | {TaskStatus.SUCCEEDED}


@dataclass(frozen=True)
class PodGroupCondition:
    podgroup: str
    type: str
    status: str
    reason: str
    message: str
    cycle: int


@dataclass
class _Target:
    """A PodGroup that gets conditions: its job, its group, its pods' role ("" all) and minimum."""

    job: Job
    native: Any
    role: str
    minimum: int


def _targets(cluster: Cluster) -> dict[str, _Target]:
    out: dict[str, _Target] = {}
    for uid, native in cluster.native_groups.items():
        job = cluster.jobs.get(uid)
        if job is None:
            continue
        if native.composite is not None:
            for leaf, group in native.composite.leaves.items():
                if group.condition:
                    minimum = native.composite.nodes[leaf][2]
                    out[f"{job.namespace}/{leaf}"] = _Target(job, group, leaf, minimum)
        elif native.condition:
            out[uid] = _Target(job, native, "", job.min_member)
    return out


def _gang_ready(job: Job, decided: set[str]) -> bool:
    """Is ``job`` at its gang minimum with the cycle's binds (``decided``) counted: its sub-group tree when
    some groups are optional (a composite's ``minGroupCount``), else its minimum and role minimums."""
    counts: dict[str, int] = {}
    for t in job.tasks:
        if t.key in decided or t.status in _READY:
            counts[t.role] = counts.get(t.role, 0) + 1
    if job.subgroups is not None:
        return bool(job.subgroups.satisfied(counts))
    enough = all(counts.get(role, 0) >= n for role, n in job.min_task_member.items())
    return enough and sum(counts.values()) >= job.min_member


def native_conditions(cluster: Cluster, decisions: Decisions, cycle: int) -> list[PodGroupCondition]:
    """The conditions ``decisions`` set on the cluster's native PodGroups; remembered in each group's
    :class:`~corral.manifests.native.NativeGroup` so that later cycles list only changes."""
    if not cluster.native_groups:
        return []
    targets = _targets(cluster)
    owner: dict[str, str] = {}
    for uid, target in targets.items():
        owner.update({t.key: uid for t in target.job.tasks if not target.role or t.role == target.role})
    if not owner:
        return []
    evicted: dict[str, tuple[str, str]] = {}
    for e in decisions.evictions:
        victim = owner.get(e.pod)
        if victim is not None and victim not in evicted:
            evicted[victim] = (e.action, e.preemptor)
    decided = {b.pod for b in decisions.binds}
    placed: dict[str, int] = {}  # by target
    jobs_placed: dict[str, int] = {}  # by job
    for b in decisions.binds:
        into = owner.get(b.pod)
        if into is not None:
            placed[into] = placed.get(into, 0) + 1
            job_uid = targets[into].job.uid
            jobs_placed[job_uid] = jobs_placed.get(job_uid, 0) + 1
    waiting = {u.podgroup: u.reason for u in decisions.unschedulable}
    out: list[PodGroupCondition] = []
    for uid in sorted(targets):
        target = targets[uid]
        job, native = target.job, target.native
        new: list[tuple[str, str, str, str]] = []
        if uid in evicted:
            action, preemptor = evicted[uid]
            new.append((DISRUPTION, "True", "PreemptionByScheduler", f"evicted by {action} for {preemptor}"))
        mine = [t for t in job.tasks if not target.role or t.role == target.role]
        before = sum(1 for t in mine if t.key not in decided and t.status in _READY)
        job_ready = jobs_placed.get(job.uid, 0) and _gang_ready(job, decided)
        if job_ready and placed.get(uid) and before + placed[uid] >= target.minimum:
            new.append((native.condition, "True", "Scheduled", ""))
        elif job.uid in waiting and native.conditions.get(native.condition) != "True":
            new.append((native.condition, "False", "Unschedulable", waiting[job.uid]))
        for ctype, status, reason, message in new:
            if native.conditions.get(ctype) == status and (
                status == "True" or native.messages.get(ctype) == message
            ):
                continue  # the group says so already
            native.conditions[ctype], native.messages[ctype] = status, message
            out.append(PodGroupCondition(uid, ctype, status, reason, message, cycle))
    return out
