"""The two gang-aware eviction actions (seed 000 §3.4, SPEC.md §3.3): which pods each may evict, and
the policy that ranks its victims. The search is :class:`~corral.actions.common.gang_evict.GangEvictAction`."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from corral.actions.common.gang_evict import GangEvictAction, needed_tasks
from corral.framework.extension import QueueLimit
from corral.framework.session import Session
from corral.model import Job, Task

__all__ = ["GangPreemptAction", "GangReclaimAction"]


class GangPreemptAction(GangEvictAction):
    """Victims: jobs of strictly lower priority in the preemptor's queue; lower priority gives first."""

    name = "gangpreempt"

    def allowed(self, session: Session, job: Job, victim: Task) -> bool:
        return victim.job.queue == job.queue and victim.job.priority < job.priority

    def rank(self, session: Session) -> Callable[[Job], float]:
        return lambda j: float(j.priority)


class GangReclaimAction(GangEvictAction):
    """Victims: jobs of other, reclaimable queues, for a gang whose queue is not Overused and may
    reclaim (Preemptive); the queue that VictimQueueOrder — or, where no plugin answers it, the
    reverse of QueueOrder — puts first gives first. The queue rule of proportion/capacity applies
    whatever tier it sits in, as in ``reclaim``."""

    name = "gangreclaim"

    def may_start(self, session: Session, job: Job) -> bool:
        queue = session.cluster.queues[job.queue]
        if session.overused(queue):
            return False
        tasks = needed_tasks(session, job)
        return bool(tasks) and session.preemptive(queue, tasks[0])

    def allowed(self, session: Session, job: Job, victim: Task) -> bool:
        q = session.cluster.queues.get(victim.job.queue)
        return victim.job.queue != job.queue and q is not None and q.reclaimable

    def rank(self, session: Session) -> Callable[[Job], float]:
        """Each queue's place in the victim queue order (queues no plugin tells apart share one)."""
        queues = session.cluster.queues
        victim_order, queue_order = session.fns("VictimQueueOrder"), session.fns("QueueOrder")

        def cmp(a: str, b: str) -> int:
            for fn in victim_order:
                r = fn(queues[a], queues[b])
                if r:
                    return r
            for fn in queue_order:
                r = fn(queues[a], queues[b])
                if r:
                    return -r
            return 0

        names = sorted(sorted(queues), key=functools.cmp_to_key(cmp))
        level: dict[str, float] = {}
        for i, name in enumerate(names):
            level[name] = level[names[i - 1]] if i and cmp(names[i - 1], name) == 0 else float(i)
        return lambda j: level[j.queue]

    def evictable(self, session: Session, task: Task, pods: list[Task], final: bool = True) -> list[Task]:
        """UnifiedEvictable, then — over a plan's victims — the queue rule of proportion/capacity
        whatever tier it sits in. The rule is cumulative, so it is asked only about a plan's victims,
        in plan order — smallest first, each queue's largest pod last, the one allowed to cross the
        line —, whichever point carries it (UnifiedEvictable too); the candidates are not cut by it
        (the action lists them with ``Session.listing_victims`` set): the plan keeps within it,
        :meth:`limits`."""
        rules = session.queue_rules() if final else ()
        if final:  # plan order for the cumulative rule, whichever point carries it
            total = np.maximum(session.cluster.total_allocatable(), 1.0)
            pods = sorted(pods, key=lambda t: float((t.request / total).sum()))
        allowed = session.unified_evictable(task, pods, self.name)
        for rule in rules:
            keep = {id(t) for t in rule(task, allowed) or ()}
            allowed = [t for t in allowed if id(t) in keep]
        return allowed

    def limits(self, session: Session) -> dict[str, QueueLimit] | None:
        """The queue rules' amounts per victim queue (:class:`QueueLimit`: held less its reclaim line,
        held less its guarantee where capacity keeps it; ``Session.queue_limits``), for the plan to
        keep within; with two such plugins, the tighter of the two in each resource."""
        return session.queue_limits()

    def chain(self, session: Session, job: Job) -> Callable[[str], list[str]] | None:
        """The queues a victim's eviction draws on: its side of the queue tree below the lowest common
        ancestor with the gang's queue (as the queue rule checks)."""
        return session.victim_side(job.queue)
