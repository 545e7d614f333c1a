"""``reclaim`` (SPEC.md §3.2; Volcano ``actions/reclaim/reclaim.go``): across queues, by fairness.

A queue that is not Overused takes resources back for its starving jobs (JobStarving), pod by pod while
the job is still starving; a pod its queue may not reclaim for (Preemptive: proportion, within what it
deserves in every resource the pod asks for; capacity, within deserved in one of them and within its
real capability in all) or that cannot make room is passed over for the next; the job's evictions
commit at the end only if it is pipelined. Victims are running pods of *other*, reclaimable queues that
pass the plugins' Reclaimable filters — proportion and capacity allow a victim while its queue,
counting the victims allowed before it, still holds more than it deserves in some resource (Volcano's
``!allocated.LessEqual(deserved)``), on the victim's leaf queue and, with capacity's
``ancestorReclaimLevel``, that many ancestors below the lowest common ancestor with the reclaimer (see
:mod:`corral.plugins.queues`), counting cumulatively along the candidates in the victim order — and the
VictimFilter. A gang the victims push below a minimum is evicted whole (:mod:`corral.actions.common.broken`). The queue rules (proportion, capacity, hierarchical drf) apply whatever tier they
sit in: under the tier semantics an earlier tier (``conformance`` and ``gang`` in tier 1, as in
Volcano's default configuration) would otherwise decide alone (SPEC.md §3.2); a queue plugin configured
with ``enableReclaimable: false`` is left out.

Victim order (Volcano ``BuildVictimsPriorityQueue``): PDB-safe pods first, then VictimQueueOrder (where
no plugin answers, the reverse of QueueOrder: the queue that would be served last gives first), then the
victim job's priority, lowest first, then JobOrder and TaskOrder reversed; the reprieve goes the other
way. The node ranking is preempt's.

Topology (where corral goes further than Volcano): Volcano's reclaim dry-runs every node the
reclaimer's predicates pass (``topologyAwareReclaim`` over ``PredicateForPreemptAction``), whatever
``networkTopology`` its job or sub-groups carry, so a reclaimed gang may be nominated across domains its
constraint forbids. corral's reclaim holds them as its preempt does: the job's pods inside one domain
of its own topology at a time (purpose Evict), each sub-group with its own topology inside one of its
domains within that job domain (:func:`~corral.actions.common.eviction.job_domains`).

Best-effort pods (no requests but their pod slot) may reclaim, as in Volcano, but only from best-effort
victims, as in preempt: a pod that asks for no resources has no fair-share claim on another queue's
GPUs or CPUs, and evicting a pod that holds them to free a pod slot would hand them to nobody.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from corral.actions.common.evict import Evictor, reversed_key
from corral.actions.common.eviction import EvictionAction
from corral.framework.session import Session
from corral.model import Job, Task

__all__ = ["ReclaimAction", "reclaim_filter"]


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

    def victim_order(self, session: Session) -> Callable[[Task], Any]:
        """Volcano's ``BuildVictimsPriorityQueue`` for reclaim: VictimQueueOrder first (where no plugin
        answers, the reverse of QueueOrder), then the victim job's priority, lowest first, then JobOrder
        reversed, then TaskOrder reversed inside a job; then the pod's name."""
        queues = session.cluster.queues
        qkey, jkey, tkey = (
            session.victim_queue_key(),
            reversed_key(session.job_key()),
            reversed_key(session.task_key()),
        )
        return lambda t: (qkey(queues[t.job.queue]), t.job.priority, jkey(t.job), tkey(t), t.name)

    def filter(self, session: Session, task: Task, job: Job, pods: list[Task]) -> list[Task]:
        # the queue rule counts cumulatively along this list: the pods the Evictor takes first (the
        # victim order) are the ones it allows
        pods = sorted(pods, key=self.victim_order(session))
        return self._job_filter(session, job, reclaim_filter(session, task, pods))


def reclaim_filter(session: Session, task: Task, pods: list[Task]) -> list[Task]:
    """The victims of ``pods`` (in this order) that Reclaimable allows for ``task`` and that the queue
    rule of proportion/capacity allows too, whatever tier those plugins sit in (counted cumulatively
    along the list)."""
    allowed = session.reclaimable(task, pods)
    for rule in session.queue_rules():
        ok = rule(task, allowed)
        if ok is not None:
            keep = {id(t) for t in ok}
            allowed = [t for t in allowed if id(t) in keep]
    return allowed
