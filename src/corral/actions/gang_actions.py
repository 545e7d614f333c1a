"""The two gang-aware eviction actions (seed 000, SPEC.md §3.3): what each may evict, in which order,
and how its plans rank across domains. The shared machinery is :class:`~corral.actions.gang_evict.GangEvictAction`."""

from __future__ import annotations

import numpy as np

from corral.actions.bundles import Bundle, WorkCost
from corral.actions.gang_evict import GangEvictAction, Plan, needed_tasks
from corral.actions.reclaim import queue_rules, reclaim_filter
from corral.framework.session import Session
from corral.model import Job, Task

__all__ = ["GangPreemptAction", "GangReclaimAction"]


class GangPreemptAction(GangEvictAction):
    name = "gangpreempt"

    def allowed(self, session: Session, job: Job, victim: Task) -> bool:
        return victim.job.queue == job.queue and victim.job.priority < job.priority

    def policy(self, session: Session):
        return lambda a, b: (a.job.priority > b.job.priority) - (a.job.priority < b.job.priority)

    def across_rank(self, plan: Plan) -> float:
        """Across domains too, victim priority before anything else: the plan whose highest victim
        priority is lower wins (as preempt ranks nodes)."""
        return float(plan.worst.priority) if plan.worst is not None else float("-inf")

    def victim_rank(self, job: Job) -> float:
        return float(job.priority)

    def plugin_filter(self, session: Session, task: Task, pods: list[Task]) -> list[Task]:
        return session.preemptable(task, pods)


class GangReclaimAction(GangEvictAction):
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

    def policy(self, session: Session):
        """VictimQueueOrder; where no plugin answers it, the reverse of QueueOrder (the queue allocate
        would serve last — with proportion or capacity, the one furthest above its share — gives first);
        bundles of queues no plugin tells apart are left to the ROI."""
        queues = session.cluster.queues
        victim_order, queue_order = session.fns("VictimQueueOrder"), session.fns("QueueOrder")
        known: dict[tuple[str, str], int] = {}      # the queues' shares do not change while a gang is planned

        def order(qa, qb) -> int:
            for fn in victim_order:
                r = fn(qa, qb)
                if r:
                    return r
            for fn in queue_order:
                r = fn(qa, qb)
                if r:
                    return -r
            return 0

        def cmp(a: Bundle, b: Bundle) -> int:
            na, nb = a.job.queue, b.job.queue
            if na == nb:
                return 0
            r = known.get((na, nb))
            if r is None:
                r = known[(na, nb)] = order(queues[na], queues[nb])
            return r
        return cmp

    def victim_caps(self, session: Session, costs: WorkCost) -> dict[str, float] | None:
        """The queue rule's limit: a victim queue gives up at most what it holds above its reclaim
        floor (an upper bound: see ``QueuePlugin.reclaim_floor``), in each resource (the smallest over
        the queue plugins), measured in units of the need."""
        caps: dict[str, float] = {}
        for rule in queue_rules(session):
            plugin = rule.__self__
            if not hasattr(plugin, "reclaim_floor"):          # hierarchical drf: no amount to bound
                continue
            for name in plugin.queues:
                slack = np.maximum(plugin.allocated[name] - plugin.reclaim_floor[name], 0.0)
                cap = float(slack @ costs.inv)
                caps[name] = min(cap, caps.get(name, cap))
        return caps or None

    def plugin_filter(self, session: Session, task: Task, pods: list[Task]) -> list[Task]:
        """Reclaimable over the ordered list, then — whatever tier they sit in, as in ``reclaim`` — the
        queue rule of proportion/capacity (a victim only while its queue stays at or above its
        deserved share, counted cumulatively along the list)."""
        return reclaim_filter(session, task, pods)
