"""``gang``: all-or-nothing start (Volcano ``pkg/scheduler/plugins/gang``).

JobValid rejects a gang with fewer pods than minMember (or than a role's minTaskMember); JobReady and
JobPipelined count the pods placed (and nominated) against minMember and every role minimum (role
minimums do not bind an elastic job, minMember below their sum: Volcano's ``CheckTaskReady``). A KAI
PodGroup with sub-groups is counted per leaf sub-group (its pods' role): when every sub-group is needed,
each leaf's minMember is its role minimum; when a ``minSubGroup`` makes some optional, the sub-group tree
decides (KAI ``SubGroupSet.IsMinRequirementSatisfied``, :mod:`corral.model.subgroups`); JobStarving
is "not yet ready counting nominations"; JobOrder puts jobs that are not ready before ready ones. With
``enablePreemptable``/``enableReclaimable`` (off in the default config, as in Volcano's) a victim is
allowed only while its job keeps minMember without it — for the legacy ``preempt``/``reclaim``. The
gang-level point UnifiedEvictable (asked by ``gangpreempt``/``gangreclaim`` only, not gated by those
two switches) allows every candidate.
"""

from __future__ import annotations

from typing import Any

from corral.framework.extension import (
    JobPipelined,
    JobReady,
    JobStarving,
    JobValid,
    KeyedJobOrder,
    Preemptable,
    Reclaimable,
    UnifiedEvictable,
)
from corral.framework.plugin import Plugin
from corral.model import ALLOCATED_STATES, Job, Task, TaskStatus
from corral.model.subjobs import SubJob

__all__ = ["GangPlugin"]

_READY = ALLOCATED_STATES | {TaskStatus.SUCCEEDED}
_PIPE = _READY | {TaskStatus.PIPELINED}
#: placed by this cycle (a sub-group may not be left part-placed by it; pods already running are not
#: undone: a sub-group that lost pods waits for the rest)
_PLACED_NOW = frozenset({TaskStatus.ALLOCATED, TaskStatus.PIPELINED})


def _meets(job: Job, states: frozenset[Any]) -> bool:
    if job.subgroups is not None:  # KAI sub-groups with optional members: the tree decides
        return bool(job.subgroups.satisfied(job.role_counts(states)))
    if sum(1 for t in job.tasks if t.status in states) < job.min_member:
        return False
    if job.min_task_member and not job.elastic:  # Volcano CheckTaskReady: elastic jobs skip roles
        counts = job.role_counts(states)
        if not all(counts.get(role, 0) >= n for role, n in job.min_task_member.items()):
            return False
    return not job.subgroup_policies or subgroups_meet(job, states)


def subjob_meets(sj: SubJob, states: frozenset[TaskStatus]) -> bool:
    """A sub-group holds its minimum (Volcano ``SubJobInfo.IsReady``/``IsPipelined``): at least
    ``subGroupSize`` of its pods in ``states``."""
    return sum(1 for t in sj.tasks if t.status in states) >= sj.size


def subgroups_meet(job: Job, states: frozenset[TaskStatus]) -> bool:
    """Every sub-group policy has at least ``minSubGroups`` sub-groups holding their minimum (Volcano
    ``CheckSubJobReady``/``CheckSubJobPipelined``), and no sub-group holds some pods but fewer than its
    minimum — a sub-group starts whole or not at all (Volcano commits a sub-group's statement only when
    it is ready or pipelined)."""
    held = [0] * len(job.subgroup_policies)
    for sj in job.subjobs:
        n = sum(1 for t in sj.tasks if t.status in states)
        if n >= sj.size:
            held[sj.policy] += 1
        elif n and any(t.status in _PLACED_NOW for t in sj.tasks):
            return False
    return all(h >= p.min_groups for h, p in zip(held, job.subgroup_policies))


def _subgroups_valid(job: Job) -> str | None:
    """Volcano ``CheckSubJobValid``: each policy has at least ``minSubGroups`` sub-groups."""
    count = [0] * len(job.subgroup_policies)
    for sj in job.subjobs:
        count[sj.policy] += 1
    for n, p in zip(count, job.subgroup_policies):
        if n < p.min_groups:
            return (
                f"gang: subGroupPolicy {p.name!r} has {n} sub-groups for minSubGroups {p.min_groups}; "
                f"label more pods for it or lower minSubGroups"
            )
    return None


class GangPlugin(
    Plugin,
    KeyedJobOrder,
    JobValid,
    JobReady,
    JobPipelined,
    JobStarving,
    Preemptable,
    Reclaimable,
    UnifiedEvictable,
):
    name = "gang"
    #: starving: some pod neither placed nor nominated, a function of the pods alone
    starving_moves_with_clock = False

    def job_valid(self, job: Job) -> str | None:
        valid = [t for t in job.tasks if t.status is not TaskStatus.FAILED]
        if job.subgroups is not None:
            have: dict[str, int] = {}
            for t in valid:
                have[t.role] = have.get(t.role, 0) + 1
            if not job.subgroups.satisfied(have):
                return "gang: too few pods exist for the sub-groups' minimums: " + "; ".join(
                    job.subgroups.short_of(have)
                )
            return None
        if len(valid) < job.min_member:
            return (
                f"gang: only {len(valid)} pods exist for minMember {job.min_member}; "
                f"create the missing pods or lower minMember"
            )
        if job.min_task_member:
            counts: dict[str, int] = {}
            for t in valid:
                counts[t.role] = counts.get(t.role, 0) + 1
            for role, n in sorted(job.min_task_member.items()):
                if counts.get(role, 0) < n:
                    return f"gang: role {role!r} has {counts.get(role, 0)} pods for minTaskMember {n}"
        if job.subgroup_policies:
            return _subgroups_valid(job)
        return None

    def job_ready(self, job: Job) -> bool:
        return _meets(job, _READY)

    def job_pipelined(self, job: Job) -> bool:
        return _meets(job, _PIPE)

    def job_starving(self, job: Job) -> bool:
        return not _meets(job, _PIPE)

    def job_order_key(self, job: Job) -> bool:
        """A sort key giving the order of ``job_order`` (Session.job_sort_key): not ready first."""
        return _meets(job, _READY)

    def job_order_key_context(self) -> tuple[Any, ...]:
        """The key is a function of the job's own pods (Session.job_sort_key may keep it across cycles)."""
        return ()

    def _surplus(self, candidates: list[Task]) -> list[Task]:
        left: dict[str, int] = {}
        out = []
        for t in candidates:
            job = t.job
            if job is None:
                out.append(t)
                continue
            if job.uid not in left:
                left[job.uid] = job.ready_count() - job.min_member
            if left[job.uid] > 0:
                left[job.uid] -= 1
                out.append(t)
        return out

    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task] | None:
        return self._surplus(candidates)

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        return self._surplus(candidates)

    def unified_evictable(self, preemptor: Task, candidates: list[Task], action: str) -> list[Task] | None:
        """Every candidate (Volcano's gang plugin): the gang actions' SAFE/WHOLE bundles protect
        minMember themselves, and break a gang only as a whole."""
        return list(candidates)
