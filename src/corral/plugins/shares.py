"""Helpers shared by the fairness plugins: what each job and queue holds, kept current by the session's
allocate/deallocate events (Volcano's ``AllocateFunc``/``DeallocateFunc`` event handlers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from corral.framework.memo.jobindex import exact_sum
from corral.model import ALLOCATED_STATES, Cluster, Task, TaskStatus

__all__ = ["HOLDING", "holding", "job_usage", "once_per_session", "queue_requests", "queue_usage"]

#: States counted as held by a job or queue when a session opens: placed (not Releasing: it is on its
#: way out; not nominated by an earlier cycle: see ``Session.open_nominations``). Nominations made in
#: the session are added by the allocate events. A pod bound to a node the cluster does not have (node
#: row -1) is left out: nothing it holds can be seen or freed, so it must not fill its queue.
HOLDING = ALLOCATED_STATES


def holding(task: Task) -> bool:
    return task.status in HOLDING and task.managed and task.node >= 0


def once_per_session(session: Any, fn: Callable[..., dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """``fn(session.cluster, session.index)`` computed once per session and shared by the plugins that
    open with it (drf and the queue plugins both need every job's usage; proportion and the queue plugins
    every queue's requests). Callers must not modify the vectors in place (they replace them)."""
    memo = session.__dict__.setdefault("_shares_memo", {})
    got = memo.get(fn.__name__)
    if got is None:
        got = memo[fn.__name__] = fn(session.cluster, getattr(session, "index", None))
    return got


def job_usage(cluster: Cluster, index: Any = None) -> dict[str, np.ndarray]:
    """What each job holds, for the jobs that hold something: a job missing from the answer holds
    nothing (readers use a zero vector), so the jobs waiting in a backlog cost no vector each. With the
    session's kept job index (:mod:`corral.framework.jobindex`) the vectors are the index's, computed
    the same way when their job last changed."""
    if index is not None:
        return dict(index.holding)
    out: dict[str, np.ndarray] = {}
    n = len(cluster.resources)
    held = [
        (job.uid, t.request)
        for job in cluster.jobs.values()
        for t in job.tasks
        if t.status in HOLDING and t.managed and t.node >= 0
    ]
    for uid, req in held:  # summed in task order, as the events add them
        vec = out.get(uid)
        if vec is None:
            vec = out[uid] = np.zeros(n)
        vec += req
    return out


def queue_usage(
    cluster: Cluster, jobs: dict[str, np.ndarray] | None = None, index: Any = None
) -> dict[str, np.ndarray]:
    """What each queue holds, leaf queues only (parents are summed by the hierarchical plugins): the
    jobs' usage vectors summed exactly and rounded once (:func:`corral.framework.jobindex.exact_sum`),
    so the kept sums of the job index give the same bits."""
    if index is not None:
        got = index.queue_held()
        if got is not None:
            return got
    jobs = job_usage(cluster) if jobs is None else jobs
    rows: dict[str, list[np.ndarray]] = {name: [] for name in cluster.queues}
    all_jobs = cluster.jobs
    for uid, vec in jobs.items():
        job = all_jobs.get(uid)
        if job is not None and job.queue in rows:
            rows[job.queue].append(vec)
    n = len(cluster.resources)
    return {name: exact_sum(vecs, n) for name, vecs in rows.items()}


def queue_requests(cluster: Cluster, index: Any = None) -> dict[str, np.ndarray]:
    """Everything each queue's jobs ask for: held plus waiting (Volcano proportion's ``request``), the
    pods' requests summed exactly and rounded once (the same bits as the job index's kept sums)."""
    if index is not None:
        got = index.queue_asked()
        if got is not None:
            return got
    by_queue: dict[str, list[Any]] = {name: [] for name in cluster.queues}
    for job in cluster.jobs.values():
        got_jobs = by_queue.get(job.queue)
        if got_jobs is not None:
            got_jobs.append(job)
    waiting = {TaskStatus.PENDING, TaskStatus.PIPELINED}
    n = len(cluster.resources)
    return {
        name: exact_sum(
            [
                t.request
                for job in jobs
                for t in job.tasks
                if (t.status in waiting and t.managed) or holding(t)
            ],
            n,
        )
        for name, jobs in by_queue.items()
    }
