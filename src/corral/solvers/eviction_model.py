"""The CP-SAT model of the eviction oracle (:func:`corral.solvers.oracle.solve_gang_eviction`; what it
models is that module's docstring), built in named steps by :class:`EvictionModel`:

* **building** — the gang's waiting pods by class (role, request), the nodes each class may use, the
  victims on those nodes (at most ``max_rank``) and the integer unit of each requested column;
* **constraints** — one domain chosen (:meth:`EvictionModel.domains`); per node and column, the pods
  placed there within its future idle plus what the evicted victims there hold
  (:meth:`~EvictionModel.capacity`); enough pods for minMember and every role minimum
  (:meth:`~EvictionModel.counts`); a healthy job losing more than its surplus is broken
  (:meth:`~EvictionModel.breaks`); reclaim's queue slack or queue rule (:meth:`~EvictionModel.slack`,
  :func:`queue_rule`);
* **objective** — the work of the broken jobs, then the pods evicted (:meth:`~EvictionModel.objective`);
* **solution reading** — the victims, the domain and the gang's placement (:meth:`~EvictionModel.read`).

The order in which variables and constraints are made is the model's (and so the solver's search):
it is kept as it was when the oracle was one function.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.model import Cluster, Job, Task
from corral.model.resources import EPS
from corral.solvers.oracle_work import _healthy, _role_surplus, _running, _scale, pod_work, waiting_pods

if TYPE_CHECKING:
    from ortools.sat.python.cp_model import CpModel, CpSolver, IntVar

__all__ = ["EvictionModel", "queue_rule"]


class EvictionModel:
    """The model being built for one gang (module doc). ``eligible``: nodes of the allowed domains
    that take pods; ``node_mask(task)``: a waiting pod's extra node eligibility."""

    def __init__(
        self,
        model: CpModel,
        cluster: Cluster,
        job: Job,
        eligible: np.ndarray,
        node_mask: Callable[[Task], np.ndarray] | None,
    ) -> None:
        self.model, self.cluster = model, cluster
        classes: dict[tuple, list[Task]] = {}
        for t in sorted(waiting_pods(job), key=lambda t: (-t.priority, t.creation, t.name)):
            classes.setdefault((t.role, tuple(np.round(t.request, 6))), []).append(t)
        self.klist = list(classes.values())
        self.cols = (
            np.flatnonzero(np.any([k[0].request for k in self.klist], axis=0))
            if self.klist
            else np.zeros(0, int)
        )
        self.masks = []
        for pods in self.klist:
            m = eligible.copy()
            if node_mask is not None:
                m &= node_mask(pods[0])
            self.masks.append(m)
        self.rows = np.flatnonzero(np.any(self.masks, axis=0)) if self.masks else np.zeros(0, int)
        self.eligible = eligible
        self.victims: list[Task] = []
        self.by_node: dict[int, list[int]] = {}
        self.units: dict[Any, int] = {}  # column (as numpy gives it) -> unit
        self.evict: list[Any] = []
        self.count: dict[tuple[int, int], Any] = {}
        self.use_dom: list[tuple[str, np.ndarray, Any]] = []

    def take(self, victims: list[Task], rank: Callable[[Job], float] | None, max_rank: float | None) -> None:
        """The victims on a node some class may use (whose job's ``rank``, default its priority, is at
        most ``max_rank``), the integer unit per requested column, and the evict switches."""
        self.victims = [
            v
            for v in victims
            if self.eligible[v.node]
            and any(m[v.node] for m in self.masks)
            and (max_rank is None or (rank(v.job) if rank else v.job.priority) <= max_rank)
        ]
        for i, v in enumerate(self.victims):
            self.by_node.setdefault(v.node, []).append(i)
        for c in self.cols:
            vals = [k[0].request[c] for k in self.klist] + [v.request[c] for v in self.victims]
            self.units[c] = _scale(vals)
        self.evict = [self.model.new_bool_var(f"e{i}") for i in range(len(self.victims))]

    # -- constraints ----------------------------------------------------------------------------------
    def domains(self, domains: list[tuple[str, np.ndarray]]) -> None:
        """One switch per domain, exactly one chosen (none to choose when there is one)."""
        if len(domains) > 1:
            for name, m in domains:
                self.use_dom.append((name, m, self.model.new_bool_var(f"d_{name}")))
            self.model.add_exactly_one(d for _, _, d in self.use_dom)

    def capacity(self) -> None:
        """Per node: the gang's pods placed there, by class, within its future idle plus what the
        evicted victims there hold, in every requested column; placed only inside the chosen domain."""
        for r in self.rows:
            self._node(int(r))

    def _node(self, r: int) -> None:
        model, units, victims = self.model, self.units, self.victims
        free = self.cluster.nodes.future_idle
        vic = self.by_node.get(r, [])
        cap_int = {}  # column -> (free now, freed by evicting every victim), in units
        for c in self.cols:
            u = units[c]
            freed = sum(victims[i].request[c] for i in vic)
            cap_int[c] = (math.floor((free[r, c] + EPS) / u), int(round(freed / u)))
        node_vars = []
        for k, pods in enumerate(self.klist):
            if not self.masks[k][r]:
                continue
            req = pods[0].request
            ub = len(pods)
            for c in self.cols:
                q = int(round(req[c] / units[c]))
                if q > 0:
                    ub = min(ub, max(cap_int[c][0] + cap_int[c][1], 0) // q)
            if ub <= 0:
                continue
            x = model.new_int_var(0, ub, f"x{k}_{r}")
            self.count[(k, r)] = x
            node_vars.append((k, x))
        if not node_vars:
            return
        for c in self.cols:
            u = units[c]
            placed = [(x, int(round(self.klist[k][0].request[c] / u))) for k, x in node_vars]
            placed = [(x, q) for x, q in placed if q > 0]
            if not placed:
                continue
            base, _ = cap_int[c]
            freed_terms = [(self.evict[i], int(round(victims[i].request[c] / u))) for i in vic]
            model.add(sum(q * x for x, q in placed) <= base + sum(q * e for e, q in freed_terms if q))
        if self.use_dom:
            doms = [d for _, m, d in self.use_dom if m[r]]
            for k, x in node_vars:
                model.add(x <= len(self.klist[k]) * sum(doms))

    def counts(self, missing: int, role_missing: Mapping[str, int]) -> None:
        """How many pods, per class, overall (``missing`` to reach minMember) and per role."""
        model = self.model
        totals = []
        for k, pods in enumerate(self.klist):
            xs = [x for (kk, _), x in self.count.items() if kk == k]
            tot = sum(xs) if xs else 0
            if xs:
                model.add(tot <= len(pods))
            totals.append(tot)
        model.add(sum(totals) >= missing)
        for role, n in role_missing.items():
            model.add(sum(tot for k, tot in enumerate(totals) if self.klist[k][0].role == role) >= n)

    def breaks(self, now: float, break_gangs: bool) -> list[Any]:
        """The victims' jobs: per healthy job a switch — it drops below its minimums and restarts whole
        — and its cost, all its running pods' work (seed 000: surplus pods and pods of jobs broken
        already are free); ``break_gangs`` false: no healthy job may break. The cost terms."""
        model, evict, victims = self.model, self.evict, self.victims
        jobs: dict[int, tuple[Job, list[int]]] = {}
        for i, v in enumerate(victims):
            jobs.setdefault(id(v.job), (v.job, []))[1].append(i)
        cost_terms = []
        for vj, idx in jobs.values():
            if not _healthy(vj):
                continue
            whole = int(round(sum(pod_work(self.cluster, t, now) for t in _running(vj))))
            b = model.new_bool_var(f"b_{vj.uid}")
            if not break_gangs:
                model.add(b == 0)
            surplus = vj.ready_count() - vj.min_member
            n = len(idx)
            if surplus < n:
                model.add(sum(evict[i] for i in idx) <= surplus + n * b)
            roles = _role_surplus(vj)
            if roles is not None:
                for role, s in roles.items():
                    ri = [i for i in idx if victims[i].role == role]
                    if s < len(ri):
                        model.add(sum(evict[i] for i in ri) <= s + len(ri) * b)
            cost_terms.append(whole * b)
        return cost_terms

    def slack(self, queue_slack: Mapping[str, np.ndarray]) -> None:
        """Reclaim: the victims of each queue free at most its slack (victim queues keep their share)."""
        victims, evict = self.victims, self.evict
        for name, idx in _victims_by_queue(self.cluster, victims, queue_slack).items():
            slack = queue_slack[name]
            for c in range(len(self.cluster.resources)):
                reqs = [victims[i].request[c] for i in idx]
                if not any(r > 0 for r in reqs) or not np.isfinite(slack[c]):
                    continue
                u = _scale(reqs)
                limit = max(math.floor((slack[c] + EPS) / u), 0)
                self.model.add(
                    sum(
                        int(round(victims[i].request[c] / u)) * evict[i]
                        for i in idx
                        if victims[i].request[c] > 0
                    )
                    <= limit
                )

    # -- objective, solution -------------------------------------------------------------------------
    def objective(self, cost_terms: list[Any], hint: Sequence[Task] | None) -> int:
        """Minimise the work, then the pods evicted (the work weighs more than all the pods); ``hint``:
        a known-feasible victim set to start from. The work's weight."""
        weight = len(self.victims) + 1
        self.model.minimize(weight * sum(cost_terms) + sum(self.evict))
        if hint:
            chosen = {id(t) for t in hint}
            for i, v in enumerate(self.victims):
                self.model.add_hint(self.evict[i], id(v) in chosen)
        return weight

    def read(
        self, solver: CpSolver, domains: list[tuple[str, np.ndarray]]
    ) -> tuple[list[Task], str, list[tuple[Task, int]]]:
        """The solution: the victims, the domain chosen and the gang's placement (pod, node row)."""
        victims = [v for i, v in enumerate(self.victims) if solver.value(self.evict[i])]
        if self.use_dom:
            domain = next(name for name, _, d in self.use_dom if solver.value(d))
        else:
            domain = domains[0][0]
        placement: list[tuple[Task, int]] = []
        for k, pods in enumerate(self.klist):
            queue = list(pods)
            for (kk, r), x in sorted(self.count.items(), key=lambda kv: kv[0][1]):
                if kk != k:
                    continue
                for _ in range(solver.value(x)):
                    placement.append((queue.pop(0), r))
        return victims, domain, placement


def _victims_by_queue(cluster: Cluster, victims: list[Task], queues: Mapping) -> dict[str, list[int]]:
    """The indexes of ``victims`` under each queue of ``queues`` (a victim counts for its queue and every
    ancestor the mapping names)."""
    out: dict[str, list[int]] = {}
    for i, v in enumerate(victims):
        for name in cluster.queue_chain(v.job.queue):
            if name in queues:
                out.setdefault(name, []).append(i)
    return out


def queue_rule(
    model: CpModel,
    cluster: Cluster,
    victims: list[Task],
    evict: list[IntVar],
    limits: Mapping[str, tuple[np.ndarray, np.ndarray]],
) -> None:
    """The queue rule of proportion/capacity, exactly for each queue alone: the victims of a queue
    (those of it and its descendants) pass, in their best order (the largest last), when in some
    resource what they free less one of them (the pod that crosses the line) stays below the queue's
    ``above``, and in every resource what they free stays within its ``keep``. (In a queue tree one
    order must suit every queue of a side at once: then this is a relaxation.)"""
    for name, idx in _victims_by_queue(cluster, victims, limits).items():
        above, keep = limits[name]
        cols = [c for c in range(len(above)) if any(victims[i].request[c] > 0 for i in idx)]
        units = {c: _scale(victims[i].request[c] for i in idx) for c in cols}
        amount = {c: [(i, int(round(victims[i].request[c] / units[c]))) for i in idx] for c in cols}
        for c in cols:
            if np.isfinite(keep[c]):
                model.add(
                    sum(q * evict[i] for i, q in amount[c]) <= max(math.floor((keep[c] + EPS) / units[c]), 0)
                )
        if any(a > EPS for c, a in enumerate(above) if c not in units):
            continue  # above its line in a resource no victim frees: the line never binds
        # lim: the most (in units) the victims may free less the crossing pod: k * u < above - EPS
        lims = {c: math.ceil((above[c] - EPS) / units[c]) - 1 for c in cols if np.isfinite(above[c])}
        lims = {c: v for c, v in lims.items() if v >= 0}
        if not lims:
            for i in idx:
                model.add(evict[i] == 0)
            continue
        cross = [model.new_bool_var(f"x_{name}_{i}") for i in idx]
        for z, i in zip(cross, idx):
            model.add_implication(z, evict[i])
        model.add(sum(cross) <= 1)
        which = {c: model.new_bool_var(f"y_{name}_{c}") for c in lims}
        for i in idx:
            model.add(sum(which.values()) >= 1).only_enforce_if(evict[i])
        for c, lim in lims.items():
            model.add(sum(q * (evict[i] - z) for (i, q), z in zip(amount[c], cross)) <= lim).only_enforce_if(
                which[c]
            )
