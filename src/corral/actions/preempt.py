"""``preempt`` (SPEC.md §3.2, seed 003; Volcano ``actions/preempt``): inside a queue, by priority.

Starving jobs (JobStarving: not yet pipelined) in QueueOrder and JobOrder try, task by task in TaskOrder,
to make room: the :class:`~corral.actions.common.evict.Evictor` finds the best node and the minimal victims
among running pods of the same queue whose job has strictly lower priority (SPEC.md §5 — pods of the
preemptor's own job are never victims: corral does not preempt inside a job), that pass the plugins'
Preemptable (or UnifiedEvictable) filters and the VictimFilter. The victims are evicted, the task is
nominated onto the node (pipelined), lower-priority nominations on that node are cleared (also one that
``allocate`` made earlier in this cycle: it is no longer emitted when the session closes). The job's
Statement commits only when the job is pipelined (gang: minMember placed or nominated); otherwise every
eviction made for it is undone — a gang never breaks other pods for a start it cannot make. A pod with
``preemptionPolicy: Never`` neither preempts nor reclaims (SPEC.md §1.1).

Arguments: ``minCandidateNodesPercentage`` (10) of the nodes, at least ``minCandidateNodesAbsolute``
(100) and at most ``maxCandidateNodesAbsolute`` (100): how many candidate nodes are dry-run per pod
(Volcano's clamp; Volcano's floor is 1, but it counts nodes *with* a plan while corral counts dry runs,
most promising first, so corral keeps kube-scheduler's floor of 100: one failed dry run must not end the
search).

Topology (where corral goes further than Volcano): Volcano's preempt passes over every starving job
that carries a ``networkTopology``, its own or a sub-group's (``job.ContainsNetworkTopology()``, a TODO
that names volcano-sh/volcano#4374), leaving such jobs to gang preemption. corral's preempt serves them
and keeps their constraints: a job with its own ``networkTopology`` (or a KAI required level) makes room
inside one of its domains — its search space with purpose Evict, each dry-run, the one where it
becomes pipelined at the least cost by the gang-eviction cost model kept
(:func:`~corral.actions.common.eviction.cheapest_domain`; KAI's solver grows one victim set in its
victim order until the job fits, with no per-domain rule); each Volcano sub-group with its own topology makes room
inside one of its domains within that one job domain, the same for every sub-group, as ``allocate``
places the job (:func:`~corral.actions.common.eviction.job_domains`). KAI sub-groups' required levels
narrow every pod's nodes through the Predicate (``plugins/subgroup_topology.py``).

Best-effort pods (no requests but their pod slot) preempt too, with only best-effort victims (Volcano:
"BestEffort pod is not supported to preempt unBestEffort pod"); a job whose only waiting pods are
best-effort reaches the eviction actions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.actions.common.evict import Evictor
from corral.actions.common.eviction import EvictionAction
from corral.framework.session import Session
from corral.model import Job, Task

__all__ = ["PreemptAction"]


class PreemptAction(EvictionAction):
    name = "preempt"

    def allowed_key(self, job: Job) -> tuple[Any, ...]:
        # the preemptor's own pods have its priority, so they are never allowed: queue and priority decide
        return (job.queue, job.priority)

    def allowed(self, session: Session, evictor: Evictor, job: Job) -> np.ndarray:
        return np.fromiter(
            (
                t.job is not None
                and t.job is not job
                and t.job.queue == job.queue
                and t.job.priority < job.priority
                and t.preemptable
                for t in evictor.tasks
            ),
            bool,
            len(evictor.tasks),
        )

    def filter(self, session: Session, task: Task, job: Job, pods: list[Task]) -> list[Task]:
        return self._job_filter(session, job, session.preemptable(task, pods))
