"""Victim bundles for gang-aware eviction (seed 000 §3.2, SPEC.md §3.3).

Each victim job's pods inside the domain split into a SAFE bundle — surplus above minMember and above
every role's minTaskMember (role limits ignored for elastic jobs, whose minMember is below the sum of the
role minimums), or all of them when the job is already broken (fewer ready pods than minMember, or a
role below its minimum) — and a WHOLE bundle, its core. A SAFE bundle costs what it evicts, a WHOLE
bundle everything its job holds. Bundles sort: SAFE before WHOLE; then victim priority (preempt) or the
victim queue order (reclaim); then the ROI (local gain over global cost, measured against what the
preemptor needs, over the resources where ``need`` is positive — the caller leaves the pod slot out;
differences under 0.05 defer);
then the reverse of JobOrder (the job that would be scheduled last goes first); then creation time,
newest first — the seed says oldest first; corral evicts the job that has run least, which loses the
least work.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from corral.model import ALLOCATED_STATES, Job, Task, TaskStatus

__all__ = ["Bundle", "make_bundles", "sort_bundles", "ROI_THRESHOLD", "SAFE", "WHOLE"]

ROI_THRESHOLD = 0.05
SAFE, WHOLE = 0, 1
_READY = ALLOCATED_STATES | {TaskStatus.SUCCEEDED}


@dataclass
class Bundle:
    job: Job
    kind: int                       # SAFE or WHOLE
    tasks: list[Task]
    global_cost: np.ndarray         # what breaking it destroys: the bundle (SAFE) or the whole job (WHOLE)
    roi: float = 0.0
    local: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def shrink(self, tasks: list[Task], need: np.ndarray) -> None:
        """Keep only ``tasks`` (what the victim plugins allowed) and score again; a SAFE bundle's cost
        is what it still evicts."""
        self.tasks = tasks
        if self.kind == SAFE:
            self.global_cost = sum((t.request for t in tasks), np.zeros_like(need))
        self.score(need)

    def score(self, need: np.ndarray) -> None:
        self.local = sum((t.request for t in self.tasks), np.zeros_like(need))
        dims = need > 0
        gain = float(np.sum(np.minimum(self.local[dims], need[dims]) / need[dims]))
        cost = float(np.sum(self.global_cost[dims] / need[dims]))
        self.roi = gain / cost if cost > 0 else (float("inf") if gain > 0 else 0.0)


def _victim_order(need: np.ndarray) -> Callable[[Task], tuple]:
    """Within a job: largest coverage of the need first, lowest priority, least waste, youngest."""
    dims = need > 0

    def key(t: Task) -> tuple:
        cover = float(np.sum(np.minimum(t.request[dims], need[dims]) / need[dims]))
        waste = float(np.sum(np.maximum(t.request[dims] - need[dims], 0) / need[dims]))
        return (-cover, t.priority, waste, -(t.start_time or t.creation), t.name)
    return key


def make_bundles(jobs: dict[int, tuple[Job, list[Task]]], need: np.ndarray) -> list[Bundle]:
    """SAFE and WHOLE bundles of each victim job's local pods (``jobs``: id -> (job, local pods))."""
    out: list[Bundle] = []
    order = _victim_order(need)
    for job, local in jobs.values():
        local = sorted(local, key=order)
        ready = [t for t in job.tasks if t.status in _READY]
        held = sum((t.request for t in job.tasks if t.status in ALLOCATED_STATES), np.zeros_like(need))
        surplus = len(ready) - job.min_member
        if surplus < 0 or not _roles_ok(job, ready):
            out.append(Bundle(job, SAFE, local, sum((t.request for t in local), np.zeros_like(need))))
            continue
        enforce = bool(job.min_task_member) and not job.elastic
        role_surplus: dict[str, int] = {}
        if enforce:
            counts: dict[str, int] = {}
            for t in ready:
                counts[t.role] = counts.get(t.role, 0) + 1
            role_surplus = {r: counts.get(r, 0) - n for r, n in job.min_task_member.items()}
        safe, core = [], []
        for t in local:
            role_ok = not enforce or role_surplus.get(t.role, 1 << 30) > 0
            if surplus > 0 and role_ok:
                safe.append(t)
                surplus -= 1
                if enforce and t.role in role_surplus:
                    role_surplus[t.role] -= 1
            else:
                core.append(t)
        if safe:
            out.append(Bundle(job, SAFE, safe, sum((t.request for t in safe), np.zeros_like(need))))
        if core:
            out.append(Bundle(job, WHOLE, core, held))
    for b in out:
        b.score(need)
    return out


def _roles_ok(job: Job, ready: list[Task]) -> bool:
    if not job.min_task_member or job.elastic:
        return True
    counts: dict[str, int] = {}
    for t in ready:
        counts[t.role] = counts.get(t.role, 0) + 1
    return all(counts.get(r, 0) >= n for r, n in job.min_task_member.items())


def sort_bundles(bundles: list[Bundle], policy: Callable[[Bundle, Bundle], int],
                 job_order: Callable[[Job, Job], int]) -> list[Bundle]:
    """The seed's comparator: kind, policy (priority or victim queue order), ROI beyond the threshold,
    reverse job order, newest first, then name; the same bundles in any input order sort alike."""
    def cmp(a: Bundle, b: Bundle) -> int:
        if a.kind != b.kind:
            return a.kind - b.kind
        r = policy(a, b)
        if r:
            return r
        if abs(a.roi - b.roi) > ROI_THRESHOLD:
            return -1 if a.roi > b.roi else 1
        r = -job_order(a.job, b.job)
        if r:
            return r
        if a.job.creation != b.job.creation:
            return -1 if a.job.creation > b.job.creation else 1
        return (a.job.uid > b.job.uid) - (a.job.uid < b.job.uid)
    # the ROI threshold makes the comparator intransitive (1.0 ~ 0.97 ~ 0.94, yet 1.0 > 0.94), so the
    # result could depend on the input order: start from a canonical one
    canonical = sorted(bundles, key=lambda b: (b.job.uid, b.kind))
    return sorted(canonical, key=functools.cmp_to_key(cmp))
