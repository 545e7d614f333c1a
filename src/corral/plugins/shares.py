"""Helpers shared by the fairness plugins: what each job and queue holds, kept current by the session's
allocate/deallocate events (Volcano's ``AllocateFunc``/``DeallocateFunc`` event handlers)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from corral.model import ALLOCATED_STATES, Cluster, Task, TaskStatus

__all__ = ["HOLDING", "holding", "job_usage", "queue_usage", "queue_requests", "once_per_session"]

#: States counted as held by a job or queue when a session opens: placed (not Releasing: it is on its
#: way out; not nominated by an earlier cycle: see ``Session.open_nominations``). Nominations made in
#: the session are added by the allocate events.
HOLDING = ALLOCATED_STATES


def holding(task: Task) -> bool:
    return task.status in HOLDING and task.managed


def once_per_session(session: Any, fn: Callable[[Cluster], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """``fn(session.cluster)`` computed once per session and shared by the plugins that open with it
    (drf and the queue plugins both need every job's usage; proportion and the queue plugins every
    queue's requests). Callers must not modify the vectors in place (they replace them)."""
    memo = session.__dict__.setdefault("_shares_memo", {})
    got = memo.get(fn.__name__)
    if got is None:
        got = memo[fn.__name__] = fn(session.cluster)
    return got


def job_usage(cluster: Cluster) -> dict[str, np.ndarray]:
    """What each job holds, for the jobs that hold something: a job missing from the answer holds
    nothing (readers use a zero vector), so the jobs waiting in a backlog cost no vector each."""
    out: dict[str, np.ndarray] = {}
    n = len(cluster.resources)
    held = [(job.uid, t.request) for job in cluster.jobs.values() for t in job.tasks
            if t.status in HOLDING and t.managed]
    for uid, req in held:                # summed in task order, as the events add them
        vec = out.get(uid)
        if vec is None:
            vec = out[uid] = np.zeros(n)
        vec += req
    return out


def queue_usage(cluster: Cluster, jobs: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """What each queue holds, leaf queues only (parents are summed by the hierarchical plugins)."""
    jobs = job_usage(cluster) if jobs is None else jobs
    out = {name: np.zeros(len(cluster.resources)) for name in cluster.queues}
    all_jobs = cluster.jobs
    for uid, vec in jobs.items():
        job = all_jobs.get(uid)
        if job is not None and job.queue in out:
            out[job.queue] += vec
    return out


def queue_requests(cluster: Cluster) -> dict[str, np.ndarray]:
    """Everything each queue's jobs ask for: held plus waiting (Volcano proportion's ``request``).
    Summed row by row in job and task order in one reduction (the same sums as adding them one at a
    time: a reduction along the first axis adds rows in order)."""
    by_queue: dict[str, list] = {name: [] for name in cluster.queues}
    for job in cluster.jobs.values():
        got = by_queue.get(job.queue)
        if got is not None:
            got.append(job)
    asking = HOLDING | {TaskStatus.PENDING, TaskStatus.PIPELINED}
    n = len(cluster.resources)
    out = {}
    for name, jobs in by_queue.items():
        rows = [t.request for job in jobs for t in job.tasks if t.status in asking and t.managed]
        out[name] = np.add.reduce(np.concatenate(rows).reshape(len(rows), n), axis=0) + 0.0 if rows \
            else np.zeros(n)
    return out
