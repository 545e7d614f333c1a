"""Job order keys kept across cycles (issue "cycles that cost what changed"): a cycle does not recompute
the JobOrder key of every waiting job, only of the jobs whose pods changed since the key was computed.
Used by :meth:`corral.framework.session.Session.job_sort_key`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral.model import Cluster, Job, TaskStatus

__all__ = ["forget_keys", "kept_keys"]


def forget_keys(cluster: Cluster, *uids: set[str]) -> None:
    """Drop the kept order keys of jobs whose pods changed (a closing session's and the events')."""
    memo = cluster.__dict__.get("_order_keys")
    if memo is not None:
        kept = memo[1]
        for group in uids:
            for uid in group:
                kept.pop(uid, None)


def kept_keys(
    cluster: Cluster, context: tuple[Any, ...], compute: Callable[[Job], tuple[Any, ...]], touched: set[str]
) -> Callable[[Job], tuple[Any, ...]]:
    """Job order keys kept across cycles on the cluster, when every JobOrder plugin says its key is a
    function of the job's own pods and fields (its priority and minMember are checked too) plus a context (``job_order_key_context()``): a job's key
    is computed again only when its pods' states (status, nomination) or the context changed, so a
    cycle does not recompute the key of every waiting job. A job with a nominated pod is not kept (a
    nomination from an earlier cycle counts for its job only once the session places it again)."""
    memo = cluster.__dict__.get("_order_keys")
    if memo is None or memo[0] != context:
        memo = cluster.__dict__["_order_keys"] = (context, {})
    kept: dict[str, tuple[Any, ...]] = memo[1]
    if len(kept) > 2 * len(cluster.jobs) + 64:
        jobs = cluster.jobs
        for uid in [u for u in kept if u not in jobs]:
            del kept[uid]
    pipelined = TaskStatus.PIPELINED
    changed = cluster.changed_jobs

    if changed is not None:
        # the cluster tracks its jobs' changes: a job's pods changed only if the events since the last
        # session closed (``changed``) or this session's operations (``touched``) name it, and a
        # closing session forgets the keys of both (``forget_keys``)
        def tracked(job: Job) -> tuple[Any, ...]:
            uid = job.uid
            got = kept.get(uid)
            if (
                got is not None
                and got[0] is job
                and uid not in changed
                and uid not in touched
                and got[1][0] == job.priority
                and got[1][1] == job.min_member
            ):
                return got[2]
            got = compute(job)
            if all(t.status is not pipelined for t in job.tasks):
                kept[uid] = (job, (job.priority, job.min_member), got)
            return got

        return tracked

    def key(job: Job) -> tuple[Any, ...]:
        state = (job.priority, job.min_member, [(t.status, t.nominated) for t in job.tasks])
        got = kept.get(job.uid)
        if got is not None and got[0] is job and got[1] == state:
            return got[2]
        got = compute(job)
        if all(s is not pipelined for s, _ in state[2]):
            kept[job.uid] = (job, state, got)
        return got

    return key
