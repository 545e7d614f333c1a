"""``enqueue`` (SPEC.md §3.1, Volcano ``actions/enqueue`` with its overcommit check).

Pending podgroups, queue by queue in QueueOrder and job by job in JobOrder, are admitted (phase Inqueue)
when the plugins' JobEnqueueable votes allow it (a queue's capability, via proportion or capacity) and
their minResources fit in the cluster's allocatable capacity times ``overcommit-factor`` (default 1.2)
minus what is already used and already admitted but not started. A job without minResources is always
admitted. A job that is not admitted stays Pending with a reason.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable

import numpy as np

from corral.framework import skipcache
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
        index = session.index if not session.report_reasons else None
        kept = _kept_pending(session, index, budget) if index is not None else None
        if kept is not None:
            budget, pending = kept
        else:
            pending = []
            for uid in session.job_uids():
                job = cluster.jobs[uid]
                if job.phase is PodGroupPhase.INQUEUE and job.ready_count() < job.min_member \
                        and job.min_resources is not None:
                    budget = budget - job.min_resources
                elif job.phase is PodGroupPhase.PENDING and job.tasks and not job.invalid_reason:
                    pending.append(job)
            pending = skipcache.hopeless_for_enqueue(session, pending, budget, EPS)
        queues = cluster.queues
        queue_key, job_key = session.queue_key(), session.job_sort_key()
        # with nothing to report and skipping on, a podgroup the budget refuses is passed over without
        # asking the plugins: it would be refused whatever they say (JobValid and JobEnqueueable have no
        # side effect) and the budget only moves when a podgroup is admitted
        fast = skipcache.enabled() and not session.report_reasons and not delegated
        if not fast:
            pending.sort(key=job_key)
        by_queue: dict[str, list] = {}
        for job in pending:
            by_queue.setdefault(job.queue, []).append(job)
        for name in sorted(by_queue, key=lambda n: queue_key(queues[n])):
            jobs = by_queue[name]
            turns = _within_budget(jobs, job_key, lambda: budget) if fast else iter(jobs)
            for job in turns:
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
                session.set_phase(job, PodGroupPhase.INQUEUE)
                session.job_enqueued(job)


def _kept_pending(session: Session, index, budget: np.ndarray) -> tuple[np.ndarray, list] | None:
    """What the walk over every job above computes (the budget left by admitted podgroups not started
    yet, then the podgroups to admit without those the budget refuses whatever comes first:
    ``skipcache.hopeless_for_enqueue``), from the session's job index: the admitted podgroups are the
    index's few, in the same (uid) order, so the budget has the same bits; the podgroups to admit that
    the budget refuses are found by one comparison over the index's kept matrix of their minResources,
    and only the others are walked. Jobs the session changed since it opened are tested one by one.
    None when a podgroup to admit has no minResources (the filter then keeps every podgroup: walk them)."""
    jobs = session.cluster.jobs
    fresh = session.touched_jobs | session.moved_jobs
    if index.no_min or any(jobs[u].min_resources is None for u in fresh if u in jobs):
        return None
    for uid in index.candidates(session, "inqueue"):
        job = jobs[uid]
        if job.phase is PodGroupPhase.INQUEUE and job.ready_count() < job.min_member \
                and job.min_resources is not None:
            budget = budget - job.min_resources
    hopeless = index.hopeless(budget, EPS)
    pending = []
    for uid in sorted((index.sets["enqueue"] - hopeless) | fresh):
        job = jobs.get(uid)
        if job is None or job.phase is not PodGroupPhase.PENDING or not job.tasks or job.invalid_reason:
            continue
        if uid in fresh and job.min_resources.any() and (job.min_resources > budget + EPS).any():
            continue
        pending.append(job)
    return budget, pending


def _within_budget(jobs: list, job_key: Callable, budget: Callable[[], np.ndarray]):
    """``jobs`` in JobOrder (``job_key``), those whose minResources fit ``budget()`` at their turn only
    (the budget is read again after each job handed out: it shrinks only when one is admitted, and a job
    that does not fit it would be refused anyway). The order is a heap, popped only as long as some job
    left fits the budget (one vector test per change of the budget), so a backlog the budget cannot
    admit is neither sorted nor walked job by job."""
    if not jobs:
        return
    width = len(budget())
    needs = np.concatenate([j.min_resources if j.min_resources is not None else np.zeros(width)
                            for j in jobs]).reshape(len(jobs), width)
    free = ~needs.any(axis=1)                      # no minResources: always within the budget
    heap = [(job_key(j), i) for i, j in enumerate(jobs)]
    heapq.heapify(heap)
    gone = np.zeros(len(jobs), dtype=bool)
    seen, fit, left = None, None, 0
    while heap:
        current = budget()
        if current is not seen:
            seen = current
            fit = (free | ~(needs > current + EPS).any(axis=1)) & ~gone
            left = int(fit.sum())
        if not left:
            return
        _, i = heapq.heappop(heap)
        gone[i] = True
        if fit[i]:
            left -= 1
            yield jobs[i]


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
