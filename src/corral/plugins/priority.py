"""``priority`` (Volcano ``plugins/priority``): higher-priority jobs and tasks first; a preemptor may
evict only pods of lower priority — across jobs by job priority, inside one job by pod priority.

JobStarving is Volcano's ``jobStarvingFn`` of this plugin: a job starves while its ready pods (placed,
bound, running or succeeded) plus its pipelined ones are fewer than all its pods
(``ReadyTaskNum()+WaitingTaskNum() < len(Tasks)``), so a configuration without ``gang`` still preempts
and reclaims for its waiting pods. Beside ``gang`` in one tier the two answers are ANDed and gang's
(fewer than minMember) decides, since it implies this one."""

from __future__ import annotations

from typing import Any

from corral.framework.extension import JobStarving, KeyedJobOrder, Preemptable, TaskOrder, UnifiedEvictable
from corral.framework.plugin import Plugin
from corral.model import ALLOCATED_STATES, Job, Task, TaskStatus

__all__ = ["PriorityPlugin"]

#: Volcano's ``ReadyTaskNum`` (Allocated, Bound, Running, Succeeded) plus ``WaitingTaskNum`` (Pipelined).
_HELD = ALLOCATED_STATES | {TaskStatus.SUCCEEDED, TaskStatus.PIPELINED}


class PriorityPlugin(Plugin, KeyedJobOrder, TaskOrder, JobStarving, Preemptable, UnifiedEvictable):
    name = "priority"
    #: starving: some pod neither placed nor nominated, a function of the pods alone
    starving_moves_with_clock = False

    def job_order_key(self, job: Job) -> int:
        """A sort key giving the order of ``job_order`` (Session.job_sort_key)."""
        return -job.priority

    def job_order_key_context(self) -> tuple[Any, ...]:
        """The key is a function of the job alone (Session.job_sort_key may keep it across cycles)."""
        return ()

    def job_starving(self, job: Job) -> bool:
        """True while some pod of the job is neither placed nor nominated (counted over all its pods,
        as Volcano counts ``len(ji.Tasks)``)."""
        return sum(1 for t in job.tasks if t.status in _HELD) < len(job.tasks)

    def task_order(self, a: Task, b: Task) -> int:
        return (b.priority > a.priority) - (b.priority < a.priority)

    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task] | None:
        pj = preemptor.job
        out = []
        for t in candidates:
            if t.job is not None and pj is not None and t.job is not pj:
                if t.job.priority < pj.priority:
                    out.append(t)
            elif t.priority < preemptor.priority:
                out.append(t)
        return out

    def unified_evictable(self, preemptor: Task, candidates: list[Task], action: str) -> list[Task] | None:
        """Gang-preempt: only jobs of lower priority (as Preemptable); gang-reclaim and consolidate: every
        candidate."""
        if action.endswith("reclaim") or action == "consolidate":  # a move loses no priority order (KAI)
            return list(candidates)
        return self.preemptable(preemptor, candidates)
