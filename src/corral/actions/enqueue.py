"""``enqueue`` (SPEC.md §3.1, Volcano ``actions/enqueue`` with its overcommit check).

Pending podgroups, queue by queue in QueueOrder and job by job in JobOrder, are admitted (phase Inqueue)
when the plugins' JobEnqueueable votes allow it (a queue's capability, via proportion or capacity) and
their minResources fit in the cluster's allocatable capacity times ``overcommit-factor`` (default 1.2)
minus what is already used and already admitted but not started. A job without minResources is always
admitted. A job that is not admitted stays Pending with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corral.framework.config import arg
from corral.framework.plugin import Action
from corral.framework.session import Session
from corral.model import PodGroupPhase
from corral.model.resources import EPS, admission_refusal

__all__ = ["EnqueueAction"]


@dataclass(frozen=True)
class EnqueueArgs:
    overcommit_factor: float = arg("overcommit-factor", 1.2, "admit up to this multiple of the cluster",
                                   minimum=1.0)


class EnqueueAction(Action):
    name = "enqueue"
    Args = EnqueueArgs

    def execute(self, session: Session) -> None:
        cluster = session.cluster
        res = cluster.resources
        total = cluster.total_allocatable()
        finite = np.isfinite(total)
        budget = np.where(finite, total * self.args.overcommit_factor, np.inf)
        budget = budget - cluster.nodes.used[~cluster.nodes.down].sum(axis=0)
        delegated = session.plugin("overcommit") is not None    # the plugin checks the cluster's size
        pending = []
        for uid in sorted(cluster.jobs):
            job = cluster.jobs[uid]
            if job.phase is PodGroupPhase.INQUEUE and job.ready_count() < job.min_member \
                    and job.min_resources is not None:
                budget = budget - job.min_resources
            elif job.phase is PodGroupPhase.PENDING and job.tasks and not job.invalid_reason:
                pending.append(job)
        queues = cluster.queues
        queue_key, job_key = session.queue_key(), session.job_key()
        pending.sort(key=job_key)
        by_queue: dict[str, list] = {}
        for job in pending:
            by_queue.setdefault(job.queue, []).append(job)
        for name in sorted(by_queue, key=lambda n: queue_key(queues[n])):
            for job in by_queue[name]:
                reason = session.job_valid(job)
                if reason:
                    session.unschedulable(job, reason)
                    continue
                need = job.min_resources if job.min_resources is not None else np.zeros(len(res))
                if not session.job_enqueueable(job):
                    session.unschedulable(job, lambda job=job, need=need: _refusal(session, job, need))
                    continue
                short = need > budget + EPS
                if need.any() and short.any() and not delegated:
                    session.unschedulable(job, lambda need=need, left=budget.copy(): admission_refusal(
                        res, need, left, self.args.overcommit_factor))
                    continue
                budget = budget - need
                job.phase = PodGroupPhase.INQUEUE
                session.job_enqueued(job)


def _refusal(session: Session, job, need: np.ndarray) -> str:
    """The reason of the first plugin that explains its JobEnqueueable rejection (``enqueue_refusal``),
    else the queue's capability."""
    for p in session.plugins():
        explain = getattr(p, "enqueue_refusal", None)
        why = explain(job) if callable(explain) else None
        if why:
            return why
    return (f"not admitted: queue {job.queue!r} capability cannot hold minResources "
            f"({session.cluster.resources.describe(need)})")
