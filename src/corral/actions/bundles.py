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

**Work-weighted cost (corral's choice).** Given ``age`` (:func:`run_hours`), the global cost counts
*work*, not resources: each pod's request weighted by the hours it has run so far (at least
:data:`MIN_RUN` so a brand-new pod is not free). The seed's cost treats a gang that started ten
minutes ago like one that has run for three days; what an eviction really destroys is the work done
(the restarted pods run it again), so the ROI — the same formula, with ``global_r`` in work — prefers
the victims that lose the least work. Without ``age`` every pod weighs 1 (the seed's formula on
resources). :func:`work_cost` is the same measure for a whole victim set (a job the set breaks costs
everything it holds, any other victim only itself).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from corral.model import ALLOCATED_STATES, Job, Task, TaskStatus

__all__ = ["Bundle", "make_bundles", "sort_bundles", "run_hours", "work_cost", "ROI_THRESHOLD",
           "MIN_RUN", "SAFE", "WHOLE", "WorkCost"]

ROI_THRESHOLD = 0.05
SAFE, WHOLE = 0, 1
#: The least run time a pod is charged with, seconds: a pod that has just started is not free to evict.
MIN_RUN = 60.0
_READY = ALLOCATED_STATES | {TaskStatus.SUCCEEDED}

Age = Callable[[Task], float]


class RunHours:
    """A pod's weight in the work-weighted cost: the hours it has run at ``now`` (since
    ``status.startTime``, else its creation; a pod placed in this cycle has run 0), at least ``floor``
    seconds. Called on one pod, or :meth:`many` on a list."""

    def __init__(self, now: float, floor: float = MIN_RUN) -> None:
        self.now, self.floor = now, floor

    def _start(self, t: Task) -> float:
        return t.start_time if t.start_time is not None else (t.creation or self.now)

    def __call__(self, t: Task) -> float:
        return max(self.now - self._start(t), self.floor) / 3600.0

    def many(self, tasks: list[Task]) -> np.ndarray:
        starts = np.array([self._start(t) for t in tasks], dtype=float)
        return np.maximum(self.now - starts, self.floor) / 3600.0


def run_hours(now: float, floor: float = MIN_RUN) -> RunHours:
    """:class:`RunHours` at ``now``."""
    return RunHours(now, floor)


def _weighted(tasks, age: Age | None, size: int) -> np.ndarray:
    out = np.zeros(size)
    for t in tasks:
        out += t.request * (age(t) if age is not None else 1.0)
    return out


def _held(job: Job) -> list[Task]:
    return [t for t in job.tasks if t.status in ALLOCATED_STATES]


def work_cost(victims: list[Task], need: np.ndarray, age: Age | None) -> float:
    """The cost of evicting ``victims`` together, in the ROI's cost measure (Σ_r global_r / need_r over
    the resources where ``need`` is positive): a healthy job the set breaks costs every pod it holds,
    any other victim (surplus, or of a job broken already) only itself."""
    return WorkCost(need, age).total(victims)


@dataclass
class Bundle:
    job: Job
    kind: int                       # SAFE or WHOLE
    tasks: list[Task]
    global_cost: np.ndarray         # what breaking it destroys: the bundle (SAFE) or the whole job (WHOLE),
                                    # in work (request x hours run) when the bundle has an ``age``; empty
                                    # when a :class:`WorkCost` measures the cost
    roi: float = 0.0
    local: np.ndarray = field(default_factory=lambda: np.zeros(0))
    age: Age | None = None
    cost: float = 0.0               # Σ_r global_cost_r / need_r: the ROI's denominator
    costs: "WorkCost | None" = None

    def shrink(self, tasks: list[Task], need: np.ndarray) -> None:
        """Keep only ``tasks`` (what the victim plugins allowed) and score again; a SAFE bundle's cost
        is what it still evicts."""
        self.tasks = tasks
        if self.kind == SAFE and self.costs is None:
            self.global_cost = _weighted(tasks, self.age, len(need))
        self.score(need)

    def score(self, need: np.ndarray) -> None:
        if self.costs is not None:
            _score_all([self], need, self.costs)
            return
        self.local = sum((t.request for t in self.tasks), np.zeros_like(need))
        dims = need > 0
        gain = float(np.sum(np.minimum(self.local[dims], need[dims]) / need[dims]))
        self.cost = cost = float(np.sum(self.global_cost[dims] / need[dims]))
        self.roi = gain / cost if cost > 0 else (float("inf") if gain > 0 else 0.0)


def _victim_order(need: np.ndarray) -> Callable[[Task], tuple]:
    """Within a job: largest coverage of the need first, lowest priority, least waste, youngest."""
    dims = [(int(i), float(need[i])) for i in np.flatnonzero(need > 0)]

    def key(t: Task) -> tuple:
        cover = waste = 0.0
        for i, n in dims:
            r = float(t.request[i])
            cover += min(r, n) / n
            waste += max(r - n, 0.0) / n
        return (-cover, t.priority, waste, -(t.start_time or t.creation), t.name)
    return key


def make_bundles(jobs: dict[int, tuple[Job, list[Task]]], need: np.ndarray, age: Age | None = None,
                 costs: "WorkCost | None" = None, ordered: bool = False) -> list[Bundle]:
    """SAFE and WHOLE bundles of each victim job's local pods (``jobs``: id -> (job, local pods)); with
    ``age`` (:func:`run_hours`) the global cost is work-weighted; with ``costs`` (a :class:`WorkCost`
    for the same need) that measures it, caching what it can across calls. ``ordered``: each job's pods
    come sorted by ``costs.order_key`` already."""
    out: list[Bundle] = []
    order = costs.order_key if costs is not None else _victim_order(need)
    n = len(need)
    none = np.zeros(0)
    for job, local in jobs.values():
        local = list(local) if ordered and costs is not None else sorted(local, key=order)
        healthy, ready, counts, enforce = costs.state(job) if costs is not None else _state(job)
        held = _weighted(_held(job), age, n) if costs is None else none
        surplus = ready - job.min_member
        if not healthy:
            out.append(Bundle(job, SAFE, local, _weighted(local, age, n) if costs is None else none, age=age,
                              costs=costs))
            continue
        role_surplus: dict[str, int] = {}
        if enforce:
            role_surplus = {r: counts.get(r, 0) - k for r, k in job.min_task_member.items()}
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
            out.append(Bundle(job, SAFE, safe, _weighted(safe, age, n) if costs is None else none, age=age,
                              costs=costs))
        if core:
            out.append(Bundle(job, WHOLE, core, held, age=age, costs=costs))
    if costs is None:
        for b in out:
            b.score(need)
    elif out:
        _score_all(out, need, costs)
    return out


def _score_all(bundles: list[Bundle], need: np.ndarray, costs: "WorkCost") -> None:
    """:meth:`Bundle.score` of many bundles at once (one array of their pods' requests)."""
    dims = need > 0
    lens = [len(b.tasks) for b in bundles]
    requests = costs.requests([t for b in bundles for t in b.tasks])
    local = np.add.reduceat(requests, np.cumsum([0] + lens[:-1]), axis=0)
    gains = (np.minimum(local[:, dims], need[dims]) / need[dims]).sum(axis=1).tolist()
    for b, row, gain in zip(bundles, local, gains):
        b.local = row
        cost = sum(costs.pod(t) for t in b.tasks) if b.kind == SAFE else costs.held(b.job)
        b.cost = cost
        b.roi = gain / cost if cost > 0 else (float("inf") if gain > 0 else 0.0)


def _state(job: Job) -> tuple[bool, int, dict[str, int], bool]:
    """(healthy, ready pods, ready pods per role, role minimums enforced) of a victim job: healthy when
    its ready pods reach minMember and every role its minTaskMember (role limits ignored for elastic
    jobs)."""
    ready = 0
    counts: dict[str, int] = {}
    for t in job.tasks:
        if t.status in _READY:
            ready += 1
            counts[t.role] = counts.get(t.role, 0) + 1
    enforce = bool(job.min_task_member) and not job.elastic
    healthy = ready >= job.min_member and (not enforce or all(counts.get(r, 0) >= n
                                                              for r, n in job.min_task_member.items()))
    return healthy, ready, counts, enforce


def sort_bundles(bundles: list[Bundle], policy: Callable[[Bundle, Bundle], int],
                 job_order: Callable[[Job, Job], int], relative: bool = False) -> list[Bundle]:
    """The seed's comparator: kind, policy (priority or victim queue order), ROI beyond the threshold,
    reverse job order, newest first, then name; the same bundles in any input order sort alike.

    With ``relative`` the threshold is a share of the larger ROI (5 %) rather than an absolute 0.05:
    corral's choice for work-weighted ROIs, which have the unit 1/hours — an absolute threshold would
    tie every gang that has run for more than a day whatever its size, and never tie young ones. On
    the seed's resource ROI (at most 1 for a gang wholly inside the domain) the two agree near 1."""
    def cmp(a: Bundle, b: Bundle) -> int:
        if a.kind != b.kind:
            return a.kind - b.kind
        r = policy(a, b)
        if r:
            return r
        if relative and a.roi != b.roi and (math.isinf(a.roi) or math.isinf(b.roi)):
            return -1 if a.roi > b.roi else 1
        limit = ROI_THRESHOLD * max(a.roi, b.roi) if relative else ROI_THRESHOLD
        if abs(a.roi - b.roi) > limit:
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


class WorkCost:
    """:func:`work_cost` with the per-pod and per-job sums cached, for the many evaluations of one
    domain (the plan's cost, the reprieve's savings)."""

    def __init__(self, need: np.ndarray, age: Age | None) -> None:
        self.need = need
        self._order = _victim_order(need)
        self._keys: dict[int, tuple] = {}
        self.dims = need > 0
        self.inv = np.where(self.dims, 1.0 / np.where(self.dims, need, 1.0), 0.0)
        self.age = age
        self._pod: dict[int, float] = {}
        self._size: dict[int, float] = {}
        self._held: dict[int, float] = {}
        self._state: dict[int, tuple] = {}
        self._reqs: np.ndarray | None = None       # the primed pods' requests, one row each
        self._rows_of: dict[int, int] = {}          # id(pod) -> its row there

    def prime(self, tasks: list[Task]) -> list[Task]:
        """Work out at once (one array of their requests) what :meth:`size` and :meth:`pod` give for
        many pods — the victim candidates of a gang — with the same result; return them sorted by
        :meth:`order_key` (one array sort)."""
        tasks = [t for t in tasks if id(t) not in self._size]
        if not tasks:
            return []
        reqs = np.array([t.request for t in tasks]).reshape(len(tasks), len(self.need))
        base = len(self._rows_of)
        self._reqs = reqs if self._reqs is None else np.vstack([self._reqs, reqs])
        ids = [id(t) for t in tasks]
        self._rows_of.update(zip(ids, range(base, base + len(tasks))))
        sizes = reqs @ self.inv
        self._size.update(zip(ids, sizes.tolist()))
        age = self.age
        many = getattr(age, "many", None)
        if age is None:
            pods = sizes.tolist()
        elif many is not None:
            pods = (sizes * many(tasks)).tolist()
        else:
            pods = [s * age(t) for s, t in zip(sizes.tolist(), tasks)]
        self._pod.update(zip(ids, pods))
        dims = np.flatnonzero(self.need > 0)
        n = self.need[dims].astype(float)
        cover = (np.minimum(reqs[:, dims], n) / n).sum(axis=1)
        waste = (np.maximum(reqs[:, dims] - n, 0.0) / n).sum(axis=1)
        # the key of :func:`_victim_order`, one array per part of it (the last is the first key)
        order = np.lexsort((np.array([t.name for t in tasks]), np.array([-(t.start_time or t.creation) for t in tasks]),
                            waste, np.array([t.priority for t in tasks]), -cover))
        return [tasks[i] for i in order.tolist()]

    def requests(self, tasks: list[Task]) -> np.ndarray:
        """The requests of ``tasks``, one row each (the primed pods' rows are kept)."""
        rows = self._rows_of
        if self._reqs is not None and all(id(t) in rows for t in tasks):
            return self._reqs[[rows[id(t)] for t in tasks]]
        return np.array([t.request for t in tasks]).reshape(len(tasks), len(self.need))

    def pod(self, t: Task) -> float:
        c = self._pod.get(id(t))
        if c is None:
            c = self._pod[id(t)] = self.size(t) * (self.age(t) if self.age is not None else 1.0)
        return c

    def order_key(self, t: Task) -> tuple:
        """The order of a job's pods inside its bundles (:func:`make_bundles`), cached."""
        k = self._keys.get(id(t))
        if k is None:
            k = self._keys[id(t)] = self._order(t)
        return k

    def size(self, t: Task) -> float:
        """A pod's request measured against the need (Σ_r request_r / need_r), cached."""
        c = self._size.get(id(t))
        if c is None:
            c = self._size[id(t)] = float(t.request @ self.inv)
        return c

    def held(self, job: Job) -> float:
        c = self._held.get(id(job))
        if c is None:
            c = self._held[id(job)] = sum(self.pod(t) for t in _held(job))
        return c

    def state(self, job: Job) -> tuple[bool, int, dict[str, int], bool]:
        """:func:`_state` of a victim job, cached."""
        st = self._state.get(id(job))
        if st is None:
            st = self._state[id(job)] = _state(job)
        return st

    def _breaks(self, job: Job, pods: list[Task]) -> bool:
        healthy, ready, counts, roles = self.state(job)
        if not healthy or not pods:
            return False
        if ready - len(pods) < job.min_member:
            return True
        if roles:
            gone: dict[str, int] = {}
            for p in pods:
                gone[p.role] = gone.get(p.role, 0) + 1
            return any(counts.get(r, 0) - gone.get(r, 0) < n for r, n in job.min_task_member.items())
        return False

    def job(self, job: Job | None, pods: list[Task]) -> float:
        """What evicting ``pods`` (all of ``job``) costs."""
        if job is not None and self._breaks(job, pods):
            return self.held(job)
        return sum(self.pod(t) for t in pods)

    def total(self, victims: list[Task]) -> float:
        by_job: dict[int, tuple[Job | None, list[Task]]] = {}
        for v in victims:
            by_job.setdefault(id(v.job) if v.job is not None else id(v), (v.job, []))[1].append(v)
        return sum(self.job(j, pods) for j, pods in by_job.values())

    def breaks(self, victims: list[Task]) -> bool:
        """Does evicting ``victims`` break any healthy job?"""
        by_job: dict[int, tuple[Job, list[Task]]] = {}
        for v in victims:
            if v.job is not None:
                by_job.setdefault(id(v.job), (v.job, []))[1].append(v)
        return any(self._breaks(j, pods) for j, pods in by_job.values())

    def savings(self, units: list[list[Task]]) -> list[float]:
        """For each unit (pods of one job) of a victim set made of ``units``: what sparing it alone
        saves."""
        by_job: dict[int, list[Task]] = {}
        for u in units:
            for v in u:
                by_job.setdefault(id(v.job) if v.job is not None else id(v), []).append(v)
        out = []
        for u in units:
            if not u:
                out.append(0.0)
                continue
            key = id(u[0].job) if u[0].job is not None else id(u[0])
            pods = by_job[key]
            ids = {id(t) for t in u}
            rest = [t for t in pods if id(t) not in ids]
            out.append(self.job(u[0].job, pods) - self.job(u[0].job, rest))
        return out
