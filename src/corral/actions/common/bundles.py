"""Victim jobs and the cost model of gang-aware eviction (seed 000 §3.2, SPEC.md §3.3).

Each candidate victim job's pods split into a **SAFE** part — as many pods as the job has above its
minMember and above every role's minTaskMember (role limits ignored for an elastic job, whose minMember
is below the sum of its role minimums), or all of its pods when the job is *already broken* (fewer ready
pods than a minimum) — and a **WHOLE** part, its core. Which pods are "the surplus" is a convention: any
that many may go and the job stays at its minimums, so the planner (:mod:`corral.actions.common.gang_plan`)
chooses them where they help.

**Cost model** (the seed's: "SAFE bundle ... Cost: Zero (Free to evict)"). Evicting pods that leave
their job at or above its minimums loses no work: the job goes on running. A healthy job pushed below
a minimum restarts: it loses the work of all its running pods, each pod's request (measured in units of
what the preemptor needs, over the resources it requests) times the hours it has run since it last
started or since the job's last checkpoint (:mod:`corral.model.work`). A job already broken has lost
that work already: its pods cost nothing more. Plans of equal work rank by the pods they evict.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corral.model import ALLOCATED_STATES, Job, Task, TaskStatus
from corral.model.work import checkpoint, run_hours

__all__ = ["CostModel", "VictimJob"]

_READY = ALLOCATED_STATES | {TaskStatus.SUCCEEDED}
_BIG = 1 << 30


@dataclass
class VictimJob:
    """A candidate victim job: how many pods it may lose without breaking (``surplus``, and per role
    ``roles`` when role minimums bind; unlimited when it is broken already), what breaking it loses
    (``held``, work) and its rank by the action's policy (lower gives first)."""

    job: Job
    healthy: bool
    surplus: int
    roles: dict[str, int] | None
    held: float
    rank: float
    order: int = 0  # its position in the bundle order (ties)

    def breaks(self, pods: list[Task]) -> bool:
        """Does evicting ``pods`` (of this job) push it below a minimum?"""
        if not self.healthy or len(pods) > self.surplus:
            return self.healthy and bool(pods)
        if self.roles:
            gone: dict[str, int] = {}
            for p in pods:
                gone[p.role] = gone.get(p.role, 0) + 1
            return any(gone.get(r, 0) > s for r, s in self.roles.items())
        return False


class CostModel:
    """The work lost by a set of victims for one preemptor gang, at ``now``, with pods measured against
    ``need`` (its waiting pods' request; the pod slot left out)."""

    def __init__(self, now: float, need: np.ndarray) -> None:
        self.now = now
        dims = need > 0
        self.inv = np.where(dims, 1.0 / np.where(dims, need, 1.0), 0.0)

    def pod_work(self, t: Task, since: float | None) -> float:
        return float(t.request @ self.inv) * run_hours(t, self.now, since)

    def victim(self, job: Job, rank: float) -> VictimJob:
        """The state of a victim job (its ready pods and roles in one pass)."""
        ready = 0
        counts: dict[str, int] = {}
        held = []
        for t in job.tasks:
            if t.status in _READY:
                ready += 1
                counts[t.role] = counts.get(t.role, 0) + 1
            if t.status in ALLOCATED_STATES:
                held.append(t)
        enforce = bool(job.min_task_member) and not job.elastic
        roles = {r: counts.get(r, 0) - n for r, n in job.min_task_member.items()} if enforce else None
        healthy = ready >= job.min_member and (roles is None or min(roles.values(), default=0) >= 0)
        since = checkpoint(job)
        work = sum(self.pod_work(t, since) for t in held)
        if not healthy:
            return VictimJob(job, False, _BIG, None, 0.0, rank)
        return VictimJob(job, True, ready - job.min_member, roles, work, rank)

    @staticmethod
    def price(victims: list[Task], jobs: dict[int, VictimJob]) -> tuple[bool, float, list[VictimJob]]:
        """(breaks a healthy gang, work lost, the jobs broken) of evicting ``victims`` together."""
        by_job: dict[int, list[Task]] = {}
        for v in victims:
            by_job.setdefault(id(v.job), []).append(v)
        broken = [jobs[k] for k, pods in by_job.items() if k in jobs and jobs[k].breaks(pods)]
        return bool(broken), sum(j.held for j in broken), broken
