"""The work measure and the gang rules the exact oracles share (:mod:`corral.solvers.oracle`,
:mod:`corral.solvers.move_oracle`): the seed 000 cost model — a pod's work is its GPUs times the hours
it has run since it started or its job's last checkpoint; a healthy job pushed below its minimums
loses all its running pods' work —, the waiting pods a gang still needs, and the integer unit of a
resource column."""

from __future__ import annotations

import math
from collections.abc import Iterable

from corral.model import ALLOCATED_STATES, Cluster, Job, Task, TaskStatus
from corral.model.resources import GPU
from corral.model.work import checkpoint, run_hours

__all__ = ["VICTIM_STATES", "pod_work", "waiting_pods", "work_lost"]

#: Pods that can be victims (as in ``corral.actions.common.evict``): running, or bound by an earlier cycle.
VICTIM_STATES = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})
_READY = ALLOCATED_STATES | {TaskStatus.SUCCEEDED}
_HAVE = _READY | {TaskStatus.PIPELINED}


def _gpus(cluster: Cluster, task: Task) -> float:
    col = cluster.resources.get(GPU)
    return 0.0 if col is None else float(task.request[col]) / 1000.0


def pod_work(cluster: Cluster, task: Task, now: float) -> float:
    """GPU-seconds ``task`` has run since it started or its job's last checkpoint (0 without GPUs)."""
    return _gpus(cluster, task) * run_hours(task, now, checkpoint(task.job)) * 3600.0


def _running(job: Job) -> list[Task]:
    return [t for t in job.tasks if t.status in VICTIM_STATES]


def _role_surplus(job: Job) -> dict[str, int] | None:
    """Per role: ready pods above minTaskMember, when role limits bind (None otherwise)."""
    if not job.min_task_member or job.elastic:
        return None
    counts: dict[str, int] = {}
    for t in job.tasks:
        if t.status in _READY:
            counts[t.role] = counts.get(t.role, 0) + 1
    return {r: counts.get(r, 0) - n for r, n in job.min_task_member.items()}


def _healthy(job: Job) -> bool:
    if job.ready_count() < job.min_member:
        return False
    roles = _role_surplus(job)
    return roles is None or all(s >= 0 for s in roles.values())


def work_lost(cluster: Cluster, victims: Iterable[Task], now: float) -> tuple[float, list[Job]]:
    """The work (GPU-hours) destroyed by evicting ``victims`` from the cluster state *before* the
    eviction, and the healthy jobs they break (running pods below minMember or a binding role below its
    minTaskMember): a broken job loses all its running pods' work; any other victim costs nothing."""
    by_job: dict[int, tuple[Job | None, list[Task]]] = {}
    for v in victims:
        by_job.setdefault(id(v.job) if v.job is not None else id(v), (v.job, []))[1].append(v)
    total = 0.0
    broken: list[Job] = []
    for job, pods in by_job.values():
        if job is not None and _healthy(job):
            left = job.ready_count() - len(pods)
            roles = _role_surplus(job)
            gone_roles: dict[str, int] = {}
            for p in pods:
                gone_roles[p.role] = gone_roles.get(p.role, 0) + 1
            if left < job.min_member or (
                roles is not None and any(roles[r] - gone_roles.get(r, 0) < 0 for r in roles)
            ):
                broken.append(job)
                total += sum(pod_work(cluster, t, now) for t in _running(job))
    return total / 3600.0, broken


def waiting_pods(job: Job) -> list[Task]:
    return [t for t in job.tasks if t.status is TaskStatus.PENDING and t.managed and not t.best_effort]


def _needed(job: Job) -> tuple[int, dict[str, int]]:
    have = sum(1 for t in job.tasks if t.status in _HAVE)
    missing = max(job.min_member - have, 0)
    roles: dict[str, int] = {}
    if job.min_task_member:
        counts: dict[str, int] = {}
        for t in job.tasks:
            if t.status in _HAVE:
                counts[t.role] = counts.get(t.role, 0) + 1
        for r, n in job.min_task_member.items():
            if n - counts.get(r, 0) > 0:
                roles[r] = n - counts.get(r, 0)
    return missing, roles


def _scale(values: Iterable[float]) -> int:
    """The largest integer unit (gcd, in milli-units) dividing every value: keeps CP-SAT coefficients
    small and, since all sums are sums of these values, keeps capacity checks exact after flooring."""
    g = 0
    for v in values:
        iv = int(round(v))
        if iv:
            g = math.gcd(g, abs(iv))
    return g or 1
