"""``reclaim`` (SPEC.md §3.2; Volcano ``actions/reclaim``): across queues, by fairness.

A queue that is not Overused takes resources back for its starving jobs, pod by pod while Preemptive
(it stays within what it deserves), from running pods of *other* queues that are reclaimable, passing
the plugins' Reclaimable (or UnifiedEvictable) filters — proportion and capacity allow a victim while
its queue, counting the victims allowed before it, still holds more than it deserves in some resource
(Volcano's ``!allocated.LessEqual(deserved)``), on the queues below the lowest common ancestor with the
reclaimer (see :mod:`corral.plugins.queues`), counting cumulatively along the candidates in
VictimQueueOrder, lowest priority and newest first — and the VictimFilter. The queue rules (proportion,
capacity, hierarchical drf) apply whatever tier they sit in: under the tier semantics an earlier tier
(``conformance`` and ``gang`` in tier 1, as in Volcano's default configuration) would otherwise decide
alone (SPEC.md §3.2); a queue plugin configured with ``enableReclaimable: false`` is left out. Victims on a node are taken as the shared
:class:`~corral.actions.evict.Evictor` orders them (PDB-safe, lowest priority, newest first), then
reprieved; the node ranking is the same as preempt's. As in preempt, the job's evictions commit only if
the job ends up pipelined.
"""

from __future__ import annotations

import numpy as np

from corral.actions.evict import Evictor
from corral.actions.preempt import EvictionAction
from corral.framework.session import Session
from corral.model import Job, Task

__all__ = ["ReclaimAction", "queue_rules", "reclaim_filter"]


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
        # the queue rule counts cumulatively along this list: the pods the Evictor would take first
        # (lowest priority, newest first) are the ones it allows
        pods = sorted(pods, key=lambda t: (qkey(queues[t.job.queue]), t.priority, -(t.start_time or 0.0), t.name))
        return self._job_filter(session, job, reclaim_filter(session, task, pods))


def queue_rules(session: Session) -> list:
    """The Reclaimable answers of the queue rules (proportion, capacity, hierarchical drf: the plugins
    whose ``queue_rule`` is true) configured for the point."""
    return [fn for fn in session.fns("Reclaimable") if getattr(getattr(fn, "__self__", None), "queue_rule", False)]


def reclaim_filter(session: Session, task: Task, pods: list[Task]) -> list[Task]:
    """The victims of ``pods`` (in this order) that Reclaimable allows for ``task`` and that the queue
    rule of proportion/capacity allows too, whatever tier those plugins sit in (counted cumulatively
    along the list)."""
    allowed = session.reclaimable(task, pods)
    for rule in queue_rules(session):
        ok = rule(task, allowed)
        if ok is not None:
            keep = {id(t) for t in ok}
            allowed = [t for t in allowed if id(t) in keep]
    return allowed
