"""``enqueue`` (SPEC.md §3.1, Volcano ``actions/enqueue`` with its overcommit check).

Pending podgroups, queue by queue in QueueOrder and job by job in JobOrder, are admitted (phase Inqueue)
when the plugins' JobEnqueueable votes allow it (a queue's capability, via proportion or capacity) and
their minResources fit in the cluster's allocatable capacity times ``overcommit-factor`` (default 1.2)
minus what is already used and already admitted but not started. A job without minResources is always
admitted. A job that is not admitted stays Pending with a reason.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.actions.common import skipping as skipcache
from corral.framework.config import arg
from corral.framework.extension import Vote
from corral.framework.memo.jobindex import JobIndex
from corral.framework.plugin import Action
from corral.framework.session import Session
from corral.model import Job, PodGroupPhase
from corral.model.resources import EPS, admission_refusal

__all__ = ["EnqueueAction"]


@dataclass(frozen=True)
class EnqueueArgs:
    overcommit_factor: float = arg(
        "overcommit-factor", 1.2, "admit up to this multiple of the cluster", minimum=1.0
    )


class EnqueueAction(Action):
    name = "enqueue"
    Args = EnqueueArgs

    def execute(self, session: Session) -> None:
        cluster = session.cluster
        res = cluster.resources
        budget = cluster.admission_room(self.args.overcommit_factor)
        delegated = session.plugin("overcommit") is not None  # the plugin checks the cluster's size
        # with nothing to report and skipping on, a podgroup the budget refuses is passed over without
        # asking the plugins: it would be refused whatever they say (JobValid and JobEnqueueable have no
        # side effect) and the budget only moves when a podgroup is admitted
        fast = session.history.skip and not session.report_reasons and not delegated
        budget, pending, context = _pending(session, budget, fast)
        queues = cluster.queues
        queue_key, job_key = session.queue_key(), session.job_sort_key()
        by_queue = _queue_turns(session, context, job_key, pending, fast, lambda: budget)
        # plugins whose rejection of a podgroup holds for every later one of its queue in JobOrder
        # (``strict_line``: fifo's line). With nothing to report, once one of them rejected a podgroup,
        # the later ones it rejects are passed over without a reason (they keep their last one) and
        # without JobValid: refused either way, and a podgroup given no reason is not looked at again
        strict = [p for p in session.implementers("JobEnqueueable") if p.strict_line]
        strict = strict if fast else []
        for name in sorted(by_queue, key=lambda n: queue_key(queues[n])):
            turns = by_queue[name]()
            blocked = False
            for job in turns:
                if blocked and not session.job_enqueueable(job):
                    continue  # behind a strict line's block: refused again, keeps its last reason
                reason = session.job_valid(job)
                if reason:
                    session.ledger.unschedulable(job, reason)
                    continue
                need = job.min_resources if job.min_resources is not None else np.zeros(len(res))
                if not session.job_enqueueable(job):
                    session.ledger.unschedulable(job, functools.partial(_refusal, session, job, need))
                    blocked = blocked or any(p.job_enqueueable(job) is Vote.REJECT for p in strict)
                    continue
                short = need > budget + EPS
                if need.any() and short.any() and not delegated:
                    session.ledger.unschedulable(
                        job,
                        functools.partial(
                            admission_refusal, res, need, budget.copy(), self.args.overcommit_factor
                        ),
                    )
                    continue
                budget = budget - need
                session.ledger.set_phase(job, PodGroupPhase.INQUEUE)
                session.job_enqueued(job)


def _pending(
    session: Session, budget: np.ndarray, fast: bool
) -> tuple[np.ndarray, list[Any], tuple[Any, ...] | None]:
    """The budget left once the admitted podgroups not started yet are counted, the podgroups to admit
    (in uid order, without those the budget refuses whatever comes first) and, when the session's job
    index keeps their JobOrder, the order's context (then ``pending`` holds only the podgroups the
    session changed: the kept order has the others)."""
    index = session.index if not session.report_reasons else None
    context = session.job_order_context() if fast and index is not None else None
    kept = (
        _kept_pending(session, index, budget, fresh_only=context is not None) if index is not None else None
    )
    if kept is not None:
        return kept[0], kept[1], context
    cluster = session.cluster
    pending = []
    for uid in session.job_uids():
        job = cluster.jobs[uid]
        if job.admitted_unstarted():
            budget = budget - job.min_resources
        elif job.awaiting_admission():
            pending.append(job)
    return budget, skipcache.hopeless_for_enqueue(session, pending, budget, EPS), None


def _queue_turns(
    session: Session,
    context: tuple[Any, ...] | None,
    job_key: Callable[..., Any],
    pending: list[Any],
    fast: bool,
    budget: Callable[[], np.ndarray],
) -> dict[str, Callable[..., Any]]:
    """Per queue with podgroups to admit, a function giving them in JobOrder: from the job index's kept
    order (only the ones the budget admits and those passed over before them are walked, not the whole
    backlog), else sorted here; when ``fast``, only those within ``budget()`` at their turn."""
    if context is not None and session.index is not None:  # a kept order comes with the index
        return _kept_turns(session, session.index, context, job_key, pending, budget)
    if not fast:
        pending.sort(key=job_key)
    by_queue: dict[str, list[Any]] = {}
    for job in pending:
        by_queue.setdefault(job.queue, []).append(job)
    if fast:
        return {
            name: functools.partial(_within_budget, jobs, job_key, budget) for name, jobs in by_queue.items()
        }
    return {name: functools.partial(iter, jobs) for name, jobs in by_queue.items()}


def _kept_pending(
    session: Session, index: JobIndex, budget: np.ndarray, *, fresh_only: bool = False
) -> tuple[np.ndarray, list[Any]] | None:
    """What the walk over every job above computes (the budget left by admitted podgroups not started
    yet, then the podgroups to admit without those the budget refuses whatever comes first:
    ``skipcache.hopeless_for_enqueue``), from the session's job index: the admitted podgroups are the
    index's few, in the same (uid) order, so the budget has the same bits; the podgroups to admit that
    the budget refuses are found by one comparison over the index's kept matrix of their minResources,
    and only the others are walked. Jobs the session changed since it opened are tested one by one.
    None when a podgroup to admit has no minResources (the filter then keeps every podgroup: walk them)."""
    jobs = session.cluster.jobs
    fresh = session.ledger.touched_jobs | session.ledger.moved_jobs
    if index.no_min or any(jobs[u].min_resources is None for u in fresh if u in jobs):
        return None
    for uid in index.candidates(session.ledger.since_open(), "inqueue"):
        job = jobs[uid]
        if job.admitted_unstarted():
            budget = budget - job.min_resources
    if fresh_only:
        # the kept order walks the others (``_kept_turns``): only the session's changes, and the
        # podgroups with a nominated pod, are tested here
        walk = sorted(fresh | (index.sets["enqueue"] & index.sets["pipelined"]))
        fresh = set(walk)
    else:
        hopeless = index.hopeless(budget, EPS)
        walk = sorted((index.sets["enqueue"] - hopeless) | fresh)
    pending = []
    for uid in walk:
        waiting = jobs.get(uid)
        if waiting is None or not waiting.awaiting_admission():
            continue
        if uid in fresh and not _fits(waiting, budget):
            continue
        pending.append(waiting)
    return budget, pending


def _kept_turns(
    session: Session,
    index: JobIndex,
    context: tuple[Any, ...],
    job_key: Callable[..., Any],
    fresh: list[Any],
    budget: Callable[[], np.ndarray],
) -> dict[str, Callable[..., Any]]:
    """Per queue, a function giving its podgroups to admit in JobOrder, those within ``budget()`` at
    their turn only: what ``_within_budget`` gives for the queue's share of the whole list, from the
    index's kept order (:meth:`~corral.framework.jobindex.JobIndex.enqueue_order`) merged with the
    podgroups the session changed and those with a nominated pod (``fresh``, tested one by one). The
    walk stops once no podgroup left fits the budget (counted over the index's matrix of minResources
    whenever the budget moves), so a backlog the budget cannot admit is not walked job by job."""
    jobs = session.cluster.jobs
    loose = session.ledger.touched_jobs | session.ledger.moved_jobs | index.sets["pipelined"]
    order = index.enqueue_order(context, job_key, jobs)
    extra: dict[str, list[tuple[Any, ...]]] = {}
    for job in fresh:
        extra.setdefault(job.queue, []).append((job_key(job), job.uid))
    for got in extra.values():
        got.sort()
    return {
        name: functools.partial(
            _kept_walk, index, jobs, name, order.get(name, []), extra.get(name, []), loose, budget
        )
        for name in set(order) | set(extra)
        if order.get(name) or extra.get(name)
    }


def _kept_walk(
    index: JobIndex,
    jobs: dict[Any, Any],
    queue: str,
    kept: list[Any],
    extra: list[Any],
    loose: set[str],
    budget: Callable[[], np.ndarray],
) -> Iterator[Job]:
    """The podgroups of ``kept`` (index rows; those in ``loose`` left to ``extra``) and ``extra`` (tested
    one by one), merged in JobOrder, within the budget at their turn (see :func:`_kept_turns`)."""
    rows = index.row_of
    size = len(index.row_uid)
    open_rows = index.row_queue[:size] == index.queue_code.get(queue, -2)
    for uid in loose:
        r = rows.get(uid)
        if r is not None:
            open_rows[r] = False  # walked as an extra, or not at all
    pending_extra = {uid for _, uid in extra}
    seen: np.ndarray | None = None
    fit: list[bool] = []
    left = 0
    for entry in heapq.merge(kept, [(k, uid, 1) for k, uid in extra]):
        uid = entry[1]
        is_kept = len(entry) == 2
        if is_kept and uid in loose:
            continue  # a kept entry the session changed: walked as an extra
        current = budget()
        if current is not seen:
            seen = current
            mask = index.fitting(current, EPS)
            left = int((mask & open_rows).sum()) + sum(1 for u in pending_extra if _fits(jobs[u], current))
            fit = mask.tolist()
        if not left:
            return
        job = jobs[uid]
        if is_kept:
            r = rows[uid]
            open_rows[r] = False
            ok = fit[r]
        else:
            pending_extra.discard(uid)
            ok = _fits(job, current)
        if ok:
            left -= 1
            yield job


def _fits(job: Job, budget: np.ndarray) -> bool:
    need = job.min_resources
    return need is None or not need.any() or not (need > budget + EPS).any()


def _within_budget(
    jobs: list[Any], job_key: Callable[..., Any], budget: Callable[[], np.ndarray]
) -> Iterator[Job]:
    """``jobs`` in JobOrder (``job_key``), those whose minResources fit ``budget()`` at their turn only
    (the budget is read again after each job handed out: it shrinks only when one is admitted, and a job
    that does not fit it would be refused anyway). The order is a heap, popped only as long as some job
    left fits the budget (one vector test per change of the budget), so a backlog the budget cannot
    admit is neither sorted nor walked job by job."""
    if not jobs:
        return
    width = len(budget())
    needs = np.concatenate(
        [j.min_resources if j.min_resources is not None else np.zeros(width) for j in jobs]
    ).reshape(len(jobs), width)
    free = ~needs.any(axis=1)  # no minResources: always within the budget
    heap = [(job_key(j), i) for i, j in enumerate(jobs)]
    heapq.heapify(heap)
    gone = np.zeros(len(jobs), dtype=bool)
    seen: np.ndarray | None = None
    fit = np.zeros(len(jobs), dtype=bool)
    left = 0
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


def _refusal(session: Session, job: Job, need: np.ndarray) -> str:
    """The reason of the first plugin that explains its JobEnqueueable rejection (EnqueueReason), else
    the queue's capability."""
    why = session.enqueue_refusal(job)
    if why:
        return why
    return (
        f"not admitted: queue {job.queue!r} capability cannot hold minResources "
        f"({session.cluster.resources.describe(need)})"
    )
