"""An exact oracle for moves (issue 33): which running pods to move — evict and place again at once — so
that one waiting gang fits, at the least work lost; to measure ``consolidate`` against. OR-Tools CP-SAT,
beside the eviction oracle of :mod:`corral.solvers.oracle` (same domains, same work measure).

What is modelled
----------------
* **Movable pods** — running or bound pods of other jobs, managed by corral, preemptable, not in
  ``kube-system`` nor of a system-critical priority class, not sharing a GPU, of a job without a hard
  topology constraint or sub-groups (what ``consolidate`` may move), optionally narrowed by
  ``movable(task)``.
* **Domain** — as :func:`corral.solvers.oracle.allowed_domains`: one HyperNode of an allowed tier for a
  hard topology constraint (every allowed one is considered), else the whole cluster.
* **Placement** — the gang's waiting pods by class (role, request), an integer per class and node, up
  to minMember and every role minimum; the moved pods by class (request and node eligibility), an
  integer per class and node counting those that land there: as many land as move. Per node and per
  resource column: what lands ≤ future idle + what the pods leaving it hold. A pod may land on the
  node it leaves: for a pod of a job moved whole that is a restart in place, which its job's cost
  already counts (``consolidate`` does the same: evicted and nominated on its own node); a pod moved
  alone gains nothing by it and no optimum makes it.
* **Cost** (:func:`move_cost`) — a pod moved while its job keeps minMember loses its own work (GPUs ×
  hours since it started or the job's last checkpoint); a healthy job whose moved pods exceed its
  surplus moves whole — every running pod of it must move (or be killed) — and loses all its pods'
  work. Role minimums are not modelled.
* **Kills** (``kill_factor``, off by default) — a pod may instead be evicted without a place: it costs
  its work times ``kill_factor`` plus one hour of its GPUs (it waits to be scheduled again), on top of
  what its job loses, so a kill always costs more than the same move.

Ties go to fewer pods moved. Not modelled: PodDisruptionBudgets, min-runtime, victim filters,
inter-pod affinity, the preemptor queue's gates — rules that only narrow what ``consolidate`` may
move; ``bench_consolidate`` generates none of them, so there both solve the same problem: the same
movable pods, the same domains and job cap, the same cost for a pod moved alone and for a job moved
whole (restart in place included), the same gang minimum at every point (a job below its minimum
moves whole) and no kills.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.model import ALLOCATED_STATES, Cluster, Job, Task
from corral.model.resources import EPS
from corral.solvers.oracle import allowed_domains
from corral.solvers.oracle_work import (
    VICTIM_STATES,
    _gpus,
    _healthy,
    _needed,
    _running,
    _scale,
    pod_work,
    waiting_pods,
)

__all__ = ["MoveResult", "movable_pods", "move_cost", "solve_moves"]

_CRITICAL = {"system-cluster-critical", "system-node-critical"}


@dataclass
class MoveResult:
    """The move oracle's answer for one gang."""

    status: str  # OPTIMAL | FEASIBLE | INFEASIBLE | UNKNOWN | NOTHING_TO_DO | NO_DOMAIN
    placed: bool
    moved: list[Task] = field(default_factory=list)
    killed: list[Task] = field(default_factory=list)
    cost: float = 0.0  # GPU-hours lost by the moves (kills priced as the module doc says)
    domain: str | None = None
    bound: float = 0.0  # the solver's lower bound on the cost, GPU-hours
    candidates: int = 0
    wall: float = 0.0


def movable_pods(cluster: Cluster, job: Job, movable: Callable[[Task], bool] | None = None) -> list[Task]:
    """The pods the oracle may move for ``job`` (module doc), sorted by node and name."""
    out = []
    for t in cluster.tasks.values():
        v = t.job
        if (
            t.status not in VICTIM_STATES
            or t.node < 0
            or v is None
            or v is job
            or not t.managed
            or not t.preemptable
            or not v.preemptable
            or t.namespace == "kube-system"
            or t.priority_class in _CRITICAL
            or t.gpu_share is not None
            or v.topology_mode == "hard"
            or v.subgroup_policies
            or v.subgroups is not None
        ):
            continue
        if movable is None or movable(t):
            out.append(t)
    out.sort(key=lambda t: (t.node, t.name))
    return out


def move_cost(cluster: Cluster, moved: Iterable[Task], now: float) -> float:
    """GPU-hours lost by moving ``moved`` (module doc): per job, its moved pods' own work while it
    keeps minMember, else (it moves whole) all its running pods' work."""
    by_job: dict[int, list[Task]] = {}
    for t in moved:
        by_job.setdefault(id(t.job), []).append(t)
    total = 0.0
    for pods in by_job.values():
        job = pods[0].job
        if _healthy(job) and job.ready_count() - len(pods) < job.min_member:
            total += sum(pod_work(cluster, t, now) for t in _running(job))
        else:
            total += sum(pod_work(cluster, t, now) for t in pods)
    return total / 3600.0


def solve_moves(
    cluster: Cluster,
    job: Job,
    *,
    now: float,
    time_limit: float = 10.0,
    kill_factor: float | None = None,
    node_mask: Callable[[Task], np.ndarray] | None = None,
    movable: Callable[[Task], bool] | None = None,
    workers: int = 1,
    max_jobs: int | None = None,
) -> MoveResult:
    """The moves of least work lost with which ``job`` fits in one allowed domain (module doc).
    ``cluster`` is read only; ``node_mask(task)``: where a pod (waiting or moved) may go;
    ``max_jobs``: most jobs whose pods move (``consolidate``'s ``maxMovedJobs``; None: no limit)."""
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    missing, role_missing = _needed(job)
    if missing == 0 and not role_missing:
        return MoveResult("NOTHING_TO_DO", True, wall=time.perf_counter() - t0)
    domains = allowed_domains(cluster, job)
    if not domains:
        return MoveResult("NO_DOMAIN", False, wall=time.perf_counter() - t0)
    live = ~cluster.nodes.down & ~cluster.nodes.unschedulable

    def where(t: Task) -> np.ndarray:
        return live & node_mask(t) if node_mask is not None else live.copy()

    m = _Model(cp_model.CpModel(), cluster, job, movable, where, kill_factor)
    doms = [(name, mask, m.model.new_bool_var(f"d{j}")) for j, (name, mask) in enumerate(domains)]
    m.model.add_exactly_one(d for _, _, d in doms)
    m.capacity(live, doms)
    m.counts(missing, role_missing, max_jobs)
    cost = _cost_terms(m.model, cluster, m.pods, m.move, m.kill, m.gone, now, kill_factor)
    weight = len(m.pods) + 1
    m.model.minimize(weight * sum(cost) + sum(m.gone))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = max(int(workers), 1)
    code = solver.solve(m.model)
    res = MoveResult(solver.status_name(code), False, candidates=len(m.pods))
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        res.placed = True
        res.moved = [t for i, t in enumerate(m.pods) if solver.value(m.move[i])]
        res.killed = [t for i, t in enumerate(m.pods) if m.kill[i] is not None and solver.value(m.kill[i])]
        res.cost = math.floor(solver.objective_value / weight + 1e-9) / 3600.0
        res.bound = math.floor(solver.best_objective_bound / weight + 1e-9) / 3600.0
        res.domain = next(name for name, _, d in doms if solver.value(d))
    elif code == cp_model.INFEASIBLE:
        res.bound = math.inf
    res.wall = time.perf_counter() - t0
    return res


class _Model:
    """The CP-SAT model of :func:`solve_moves` being built: the gang's pods by class (role, request),
    the movable pods by class (request, where they may go), their move (and kill) switches."""

    def __init__(
        self,
        model: Any,
        cluster: Cluster,
        job: Job,
        movable: Callable[[Task], bool] | None,
        where: Callable[[Task], np.ndarray],
        kill_factor: float | None,
    ) -> None:
        self.model, self.cluster = model, cluster
        gang: dict[tuple[Any, ...], list[Task]] = {}
        for t in sorted(waiting_pods(job), key=lambda t: (-t.priority, t.creation, t.name)):
            gang.setdefault((t.role, tuple(np.round(t.request, 6))), []).append(t)
        self.gk = list(gang.values())
        self.gmask = [where(p[0]) for p in self.gk]
        self.pods = movable_pods(cluster, job, movable)
        mk: dict[tuple[Any, ...], list[int]] = {}
        self.masks: dict[tuple[Any, ...], np.ndarray] = {}
        seen: dict[object, np.ndarray] = {}
        for i, t in enumerate(self.pods):
            ck = t.klass or t.uid
            if ck not in seen:
                seen[ck] = where(t)
            key = (tuple(np.round(t.request, 6)), seen[ck].tobytes())
            self.masks.setdefault(key, seen[ck])
            mk.setdefault(key, []).append(i)
        self.mclasses = list(mk.items())
        reqs = [k[0].request for k in self.gk] + [self.pods[idx[0]].request for _, idx in self.mclasses]
        self.cols = [int(c) for c in np.flatnonzero(np.any(reqs, axis=0))] if reqs else []
        self.units = {c: _scale([r[c] for r in reqs]) for c in self.cols}
        n = len(self.pods)
        self.move: list[Any] = [model.new_bool_var(f"m{i}") for i in range(n)]
        self.kill: list[Any] = [
            model.new_bool_var(f"k{i}") if kill_factor is not None else None for i in range(n)
        ]
        self.gone: list[Any] = []
        for i in range(n):
            if self.kill[i] is None:
                self.gone.append(self.move[i])
            else:
                model.add(self.move[i] + self.kill[i] <= 1)
                self.gone.append(self.move[i] + self.kill[i])
        self.place: dict[tuple[int, int], Any] = {}
        self.land: dict[tuple[int, int], Any] = {}

    def _q(self, t: Task, c: int) -> int:
        return int(round(t.request[c] / self.units[c]))

    def capacity(self, live: np.ndarray, doms: list[tuple[str, np.ndarray, Any]]) -> None:
        """Per live node and column: the gang's pods placed there (inside the chosen domain) and the
        moved pods landing there fit in its future idle plus what the pods leaving it hold."""
        model, free = self.model, self.cluster.nodes.future_idle
        on: dict[int, list[int]] = {}
        for i, t in enumerate(self.pods):
            on.setdefault(t.node, []).append(i)
        for r in np.flatnonzero(live).tolist():
            terms: dict[int, list[tuple[Any, int]]] = {c: [] for c in self.cols}
            for k, p in enumerate(self.gk):
                if self.gmask[k][r]:
                    x = self.place[(k, r)] = model.new_int_var(0, len(p), f"x{k}_{r}")
                    inside = [d for _, m, d in doms if m[r]]
                    model.add(x <= len(p) * sum(inside)) if inside else model.add(x == 0)
                    for c in self.cols:
                        terms[c].append((x, self._q(p[0], c)))
            for j, (key, idx) in enumerate(self.mclasses):
                if self.masks[key][r]:
                    z = self.land[(j, r)] = model.new_int_var(0, len(idx), f"z{j}_{r}")
                    for c in self.cols:
                        terms[c].append((z, self._q(self.pods[idx[0]], c)))
            for c in self.cols:
                used = [(v, q) for v, q in terms[c] if q > 0]
                if used:
                    base = math.floor((free[r, c] + EPS) / self.units[c])
                    freed = [(self.gone[i], self._q(self.pods[i], c)) for i in on.get(r, [])]
                    model.add(sum(q * v for v, q in used) <= base + sum(q * g for g, q in freed if q))

    def counts(self, missing: int, role_missing: dict[str, int], max_jobs: int | None) -> None:
        """Enough of the gang's pods placed (minMember, role minimums); as many moved pods land as
        move; at most ``max_jobs`` jobs touched."""
        model = self.model
        totals = [sum(x for (kk, _), x in self.place.items() if kk == k) for k in range(len(self.gk))]
        model.add(sum(totals) >= missing)
        for role, n in role_missing.items():
            model.add(sum(tot for k, tot in enumerate(totals) if self.gk[k][0].role == role) >= n)
        for j, (_, idx) in enumerate(self.mclasses):
            model.add(sum(z for (jj, _), z in self.land.items() if jj == j) == sum(self.move[i] for i in idx))
        if max_jobs is not None and max_jobs >= 0:
            per_job: dict[int, list[int]] = {}
            for i, t in enumerate(self.pods):
                per_job.setdefault(id(t.job), []).append(i)
            touched = []
            for k, idx in enumerate(per_job.values()):
                y = model.new_bool_var(f"j{k}")
                for i in idx:
                    model.add(y >= self.gone[i])
                touched.append(y)
            model.add(sum(touched) <= max_jobs)


def _cost_terms(
    m: Any,
    cluster: Cluster,
    pods: list[Task],
    move: list[Any],
    kill: list[Any],
    gone: list[Any],
    now: float,
    kill_factor: float | None,
) -> list[Any]:
    """The objective's terms, in GPU-seconds: per healthy job a switch ``b`` (it moves whole) — then
    every running pod of it goes, and it loses all their work —, else each moved pod its own work; a
    kill more (module doc)."""
    jobs: dict[int, list[int]] = {}
    for i, t in enumerate(pods):
        jobs.setdefault(id(t.job), []).append(i)
    ids = {id(t) for t in pods}
    terms = []
    for idx in jobs.values():
        job = pods[idx[0]].job
        work = [int(round(pod_work(cluster, pods[i], now))) for i in idx]
        healthy = _healthy(job)
        if healthy:
            b = m.new_bool_var(f"b_{job.uid}")
            surplus = job.ready_count() - job.min_member
            if any(id(t) not in ids for t in _running(job)) or any(
                t.status in ALLOCATED_STATES and t.status not in VICTIM_STATES for t in job.tasks
            ):
                m.add(b == 0)
            if surplus < len(idx):
                m.add(sum(gone[i] for i in idx) <= surplus + len(idx) * b)
            for i in idx:
                m.add(gone[i] >= b)
            held = int(round(sum(pod_work(cluster, t, now) for t in _running(job))))
            terms.append(held * b)
        for i, w in zip(idx, work):
            if w > 0:
                c = m.new_int_var(0, w, f"c{i}")
                m.add(c >= w * move[i] - (w * b if healthy else 0))
                terms.append(c)
            if kill[i] is not None and kill_factor is not None:
                dear = int(round(kill_factor * w + _gpus(cluster, pods[i]) * 3600.0))
                terms.append(dear * kill[i])
    return terms
