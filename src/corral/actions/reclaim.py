"""``reclaim`` (SPEC.md §3.2; Volcano ``actions/reclaim``): across queues, by fairness.

A queue that is not Overused takes resources back for its starving jobs, pod by pod while Preemptive
(it stays within what it deserves), from running pods of *other* queues that are reclaimable, passing
the plugins' Reclaimable (or UnifiedEvictable) filters — proportion and capacity allow a victim only
while its queue stays at or above its deserved share — and the VictimFilter. Victims on a node are
taken as the shared :class:`~corral.actions.evict.Evictor` orders them (PDB-safe, lowest priority,
newest first), then reprieved; the node ranking is the same as preempt's. As in preempt, the job's
evictions commit only if the job ends up pipelined.
"""

from __future__ import annotations

import numpy as np

from corral.actions.evict import Evictor
from corral.actions.preempt import EvictionAction
from corral.framework.session import Session
from corral.model import Job, Task

__all__ = ["ReclaimAction"]


class ReclaimAction(EvictionAction):
    name = "reclaim"

    def may_start(self, session: Session, job: Job) -> bool:
        return not session.overused(session.cluster.queues[job.queue])

    def may_take(self, session: Session, job: Job, task: Task) -> bool:
        return session.preemptive(session.cluster.queues[job.queue], task)

    def allowed(self, session: Session, evictor: Evictor, job: Job) -> np.ndarray:
        queues = session.cluster.queues

        def ok(t: Task) -> bool:
            v = t.job
            if v is None or v.queue == job.queue or not t.preemptable:
                return False
            q = queues.get(v.queue)
            return q is not None and q.reclaimable
        return np.fromiter((ok(t) for t in evictor.tasks), bool, len(evictor.tasks))

    def filter(self, session: Session, task: Task, job: Job, pods: list[Task]) -> list[Task]:
        queues = session.cluster.queues
        qkey = session.victim_queue_key()
        pods = sorted(pods, key=lambda t: (qkey(queues[t.job.queue]), t.priority, t.name))
        return self._job_filter(session, job, session.reclaimable(task, pods))
