"""What the cycle's plugins ask of the cluster as a whole — every job's and queue's holding, every
queue's requests, the admitted podgroups not started yet, whether any pod has required anti-affinity —
answered by the Session (:class:`Queries`, a base of :class:`~corral.framework.session.Session`) from
the front end's kept job index when there is one, by a walk over the jobs otherwise. Plugins ask the
session; the index and its exact sums stay inside the framework (the sums are exact and rounded once,
:func:`~corral.framework.memo.jobindex.exact_sum`, so the index and the walk give the same bits)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.framework.memo.jobindex import JobIndex, exact_sum, scores_others
from corral.model import ALLOCATED_STATES, Cluster, Job, Task, TaskStatus

if TYPE_CHECKING:
    from corral.framework.ledger import Ledger

__all__ = ["HOLDING", "Queries", "exact_sum", "holding", "job_usage", "queue_requests", "queue_usage"]

#: States counted as held by a job or queue when a session opens: placed (not Releasing: it is on its
#: way out; not nominated by an earlier cycle: see ``Session.open_nominations``). Nominations made in
#: the session are added by the allocate events. A pod bound to a node the cluster does not have (node
#: row -1) is left out: nothing it holds can be seen or freed, so it must not fill its queue.
HOLDING = ALLOCATED_STATES


def holding(task: Task) -> bool:
    return task.status in HOLDING and task.managed and task.node >= 0


class Queries:
    """The Session's cluster-wide queries, each computed once per session (callers must not modify the
    vectors in place; they replace them)."""

    cluster: Cluster
    index: JobIndex | None
    ledger: Ledger
    _memo: dict[str, Any]

    def _once(self, name: str, compute: Callable[[], Any]) -> Any:
        got = self._memo.get(name)
        if got is None:
            got = self._memo[name] = compute()
        return got

    def job_usage(self) -> dict[str, np.ndarray]:
        """What each job holds, for the jobs that hold something (:func:`job_usage`)."""
        return self._once("job_usage", lambda: job_usage(self.cluster, self.index))

    def queue_usage(self) -> dict[str, np.ndarray]:
        """What each leaf queue holds (:func:`queue_usage`)."""
        return self._once("queue_usage", lambda: queue_usage(self.cluster, self.job_usage(), self.index))

    def queue_requests(self) -> dict[str, np.ndarray]:
        """Everything each queue's jobs ask for, held plus waiting (:func:`queue_requests`)."""
        return self._once("queue_requests", lambda: queue_requests(self.cluster, self.index))

    def admitted_unstarted(self) -> list[Job]:
        """The admitted podgroups that have not reached their minimum yet (Inqueue, or Pending with
        an admission), in no particular order (callers sum exactly); from the index's ``inqueue`` set
        and the jobs the session changed since it opened, or a walk."""
        jobs = self.cluster.jobs
        if self.index is not None:
            walk = [jobs[u] for u in self.index.candidates(self.ledger.since_open(), "inqueue")]
        else:
            walk = list(jobs.values())
        return [j for j in walk if j.admitted_unstarted()]

    def anti_affinity_possible(self) -> bool:
        """May some pod of the cluster have required inter-pod anti-affinity (True when unknown: no
        index)? A plugin can then skip indexing placed pods until a pod with terms of its own asks."""
        if self.index is None or self.index.sets["anti"]:
            return True
        return any(t.affinity is not None and t.affinity.pod_anti_affinity for t in self.cluster.foreign)

    def pods_scoring_others(self) -> list[Task]:
        """The pods of the cluster, placed or not, whose inter-pod terms score other pods
        (:func:`~corral.framework.memo.jobindex.scores_others`), in job order then the pods of other
        schedulers: from the index's ``scoring`` set when there is one, by a walk otherwise."""

        def compute() -> list[Task]:
            jobs = self.cluster.jobs
            uids = sorted(self.index.sets["scoring"]) if self.index is not None else sorted(jobs)
            tasks = [t for u in uids for t in jobs[u].tasks] + list(self.cluster.foreign)
            return [t for t in tasks if scores_others(t)]

        return self._once("pods_scoring_others", compute)


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
