"""The Firmament-style min-cost flow network of the ``flow`` action (seed 004, SPEC.md §3.6), built from
arrays and solved by OR-Tools' C++ ``SimpleMinCostFlow``; arcs are loaded with the vectorised
``add_arcs_with_capacity_and_unit_cost`` (never one Python call per arc).

Vertices, in index order::

    sink | J_j gang aggregator | A_j job aggregator | U_j unscheduled aggregator | G_g job-class group
         | X_a equivalence-class / HyperNode aggregators | N_i cluster nodes

Arcs::

    J_j -> A_j   capacity n_j - k_j            (the arc of lower bound k_j, after the transformation)
    J_j -> U_j   capacity n_j - k_j, cost u_j  (pods left waiting)
    A_j -> U_j   capacity k_j,       cost p_j  (the penalised bypass of the lower bound)
    U_j -> sink  capacity n_j
    A_j -> G_g   capacity count_g
    G_g -> X_a | N_i                           (given by the caller: aggregators, preferred nodes)
    X_a -> N_i                                 (given by the caller: capacity = pods of the class that fit)
    N_i -> sink  capacity = free pod slots

The lower bound ``k_j`` of the arc J_j -> A_j (seed 004 "Using Min-Capacity as part of Flow Graph") is
removed by the standard supply/demand transformation: J_j supplies n_j - k_j, A_j supplies k_j and the
arc keeps the capacity n_j - k_j; the bypass A_j -> U_j keeps every round feasible when a gang cannot
fit, at the price ``p_j`` per missing pod. With every ``k_j = 0`` the network is the plain one of the
seed's "roll back after the fact" approach. Costs are integers (OR-Tools solves integer networks
exactly); the caller scales them.

After the solve, the flow through each aggregator is split back onto the groups that fed it: all groups
of an aggregator share one equivalence class, so any pairing is feasible; groups are paired in their
index order with the aggregator's node flows in node order (a job's pods land on neighbouring nodes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from corral.errors import CorralError

__all__ = ["FlowNetwork", "FlowSolution", "Solver", "solve"]

_I64 = np.int64


@dataclass
class FlowNetwork:
    """The round's network as arrays. ``kind`` of a group/aggregator arc to a node: 0 now, 1 pipelined
    (capacity being released)."""

    n_nodes: int  # cluster nodes
    job_supply: np.ndarray  # n_j
    job_lower: np.ndarray  # k_j
    job_wait_cost: np.ndarray  # u_j per pod left waiting
    job_penalty: np.ndarray  # p_j per pod missing below k_j
    group_job: np.ndarray  # job index of each group
    group_count: np.ndarray  # pods in each group
    n_aggs: int = 0
    # group -> aggregator arcs
    ga_group: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    ga_agg: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    ga_cost: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    # group -> node arcs (preferred or nominated nodes)
    gn_group: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    gn_node: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    gn_cap: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    gn_cost: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    gn_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    # aggregator -> node arcs
    an_agg: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    an_node: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    an_cap: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    an_cost: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    an_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    node_cap: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    # aggregator -> aggregator arcs (a class's HyperNode tree, parent to child; the parent's index is
    # always the smaller), uncapacitated, cost 0
    aa_src: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    aa_dst: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))

    @property
    def arcs(self) -> int:
        return (
            4 * len(self.job_supply)
            + len(self.group_job)
            + len(self.ga_group)
            + len(self.gn_group)
            + len(self.an_agg)
            + self.n_nodes
            + len(self.aa_src)
        )


@dataclass
class FlowSolution:
    """Per placed pod unit: its group, node and kind (0 now, 1 pipelined); ``placed`` per job; the
    optimal cost."""

    unit_group: np.ndarray
    unit_node: np.ndarray
    unit_kind: np.ndarray
    placed: np.ndarray
    cost: int


class Solver:
    """One network loaded into one OR-Tools ``SimpleMinCostFlow`` (arcs once, by the vectorised loader),
    solved again as often as needed with other jobs active or without the lower bounds: a re-solve only
    changes the capacities of the arcs that depend on the active jobs and the supplies
    (``set_arc_capacities``, ``set_nodes_supplies``), never reloads the arcs."""

    _PARTS = ("ja", "ju", "au", "us", "ag", "gx", "gn", "xn", "ns", "xx")

    def __init__(self, net: FlowNetwork) -> None:
        self.net = net
        n_jobs, n_groups = len(net.job_supply), len(net.group_job)
        jobs = np.arange(n_jobs, dtype=_I64)
        self.J, self.A, U = 1 + jobs, 1 + n_jobs + jobs, 1 + 2 * n_jobs + jobs
        G0 = 1 + 3 * n_jobs
        X0 = G0 + n_groups
        N0 = X0 + net.n_aggs
        self.n_vertices = N0 + net.n_nodes
        tails, heads, self.starts = _arc_ends(net, self.J, self.A, U, G0, X0, N0)
        costs = _arc_costs(net)
        self.n_arcs = len(tails)
        from ortools.graph.python.min_cost_flow import SimpleMinCostFlow  # only where the flow action runs

        self.mcf = SimpleMinCostFlow()
        self.mcf.add_arcs_with_capacity_and_unit_cost(tails, heads, self._caps(None, True), costs)
        self._loaded = True
        self.solves = 0

    def _caps(self, active: np.ndarray | None, bounded: bool) -> np.ndarray:
        net = self.net
        n_jobs = len(net.job_supply)
        on = np.ones(n_jobs, bool) if active is None else active
        n = np.where(on, net.job_supply, 0).astype(_I64)
        k = np.minimum(np.where(on & bounded, net.job_lower, 0), n).astype(_I64)
        gcap = np.where(on[net.group_job], net.group_count, 0).astype(_I64)
        ga_cap = gcap[net.ga_group] if len(net.ga_group) else np.zeros(0, _I64)
        self._n, self._k = n, k
        return np.concatenate(
            [
                n - k,
                n - k,
                k,
                n,
                gcap,
                ga_cap,
                net.gn_cap * (gcap[net.gn_group] > 0),
                net.an_cap,
                net.node_cap,
                np.full(len(net.aa_src), int(n.sum()), _I64),
            ]
        ).astype(_I64)

    def solve(self, active: np.ndarray | None = None, *, bounded: bool = True) -> FlowSolution:
        """Solve with the jobs of ``active`` (a boolean mask over jobs; default all): an inactive job
        supplies nothing; ``bounded=False`` drops the lower bounds (the plain network). Raises
        ``CorralError`` if OR-Tools does not report an optimum (it always should: the unscheduled
        aggregators make every round feasible)."""
        mcf, net = self.mcf, self.net
        if self._loaded and active is None and bounded:
            n, k = self._n, self._k
        else:
            mcf.set_arc_capacities(np.arange(self.n_arcs, dtype=np.int32), self._caps(active, bounded))
            n, k = self._n, self._k
        self._loaded = False
        supply = np.zeros(self.n_vertices, _I64)
        supply[self.J] = n - k
        supply[self.A] = k
        supply[0] = -int(n.sum())
        mcf.set_nodes_supplies(np.arange(self.n_vertices, dtype=np.int32), supply)
        status = mcf.solve()
        self.solves += 1
        if status != mcf.OPTIMAL:
            raise CorralError(
                f"min-cost flow solver returned status {status} (network of {self.n_vertices} "
                f"vertices, {self.n_arcs} arcs)"
            )
        flows = mcf.flows(np.arange(self.n_arcs, dtype=_I64))
        part = {name: flows[self.starts[i] : self.starts[i + 1]] for i, name in enumerate(self._PARTS)}
        ug, un, uk = _split(net, part["gx"], part["gn"], part["xn"], part["xx"])
        placed = (
            np.bincount(net.group_job[ug], minlength=len(net.job_supply))
            if ug.size
            else np.zeros(len(net.job_supply), _I64)
        )
        return FlowSolution(ug, un, uk, placed.astype(_I64), int(mcf.optimal_cost()))


def _arc_ends(
    net: FlowNetwork, J: np.ndarray, A: np.ndarray, U: np.ndarray, G0: int, X0: int, N0: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every arc's tail and head, in the blocks of ``Solver._PARTS`` (the module docstring's arcs;
    vertex 0 is the sink, ``J``/``A``/``U`` the jobs' vertices, ``G0``/``X0``/``N0`` the first group,
    aggregator and node vertex), and where each block starts (the last entry: the arc count)."""
    n_jobs, n_groups = len(net.job_supply), len(net.group_job)
    sink = 0
    n_aa = len(net.aa_src)
    sizes = [
        n_jobs,
        n_jobs,
        n_jobs,
        n_jobs,
        n_groups,
        len(net.ga_group),
        len(net.gn_group),
        len(net.an_agg),
        net.n_nodes,
        n_aa,
    ]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(_I64)
    tails = np.concatenate(
        [
            J,
            J,
            A,
            U,
            A[net.group_job],
            G0 + net.ga_group,
            G0 + net.gn_group,
            X0 + net.an_agg,
            N0 + np.arange(net.n_nodes, dtype=_I64),
            X0 + net.aa_src,
        ]
    ).astype(_I64)
    heads = np.concatenate(
        [
            A,
            U,
            U,
            np.full(n_jobs, sink, _I64),
            G0 + np.arange(n_groups, dtype=_I64),
            X0 + net.ga_agg,
            N0 + net.gn_node,
            N0 + net.an_node,
            np.full(net.n_nodes, sink, _I64),
            X0 + net.aa_dst,
        ]
    ).astype(_I64)
    return tails, heads, starts


def _arc_costs(net: FlowNetwork) -> np.ndarray:
    """Every arc's unit cost, in the order of :func:`_arc_ends`."""
    n_jobs, n_groups = len(net.job_supply), len(net.group_job)
    zeros = np.zeros(n_jobs, _I64)
    return np.concatenate(
        [
            zeros,
            net.job_wait_cost,
            net.job_penalty,
            zeros,
            np.zeros(n_groups, _I64),
            net.ga_cost,
            net.gn_cost,
            net.an_cost,
            np.zeros(net.n_nodes + len(net.aa_src), _I64),
        ]
    ).astype(_I64)


def solve(net: FlowNetwork, active: np.ndarray | None = None, *, bounded: bool = True) -> FlowSolution:
    """Load ``net`` and solve it once (:meth:`Solver.solve`)."""
    return Solver(net).solve(active, bounded=bounded)


def _split(
    net: FlowNetwork, gx: np.ndarray, gn: np.ndarray, xn: np.ndarray, xx: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Units (group, node, kind) from the arc flows: direct group->node flows as they are; the units
    reaching an aggregator (from groups, in group order, after those passed down by its parent) are
    handed out in order to its node arcs (by kind, then node) and then to its children. Every unit at
    an aggregator may take any of its arcs, so any such split is a valid decomposition; parents come
    before children in index order, so one pass in index order suffices."""
    parts_g, parts_n, parts_k = [], [], []
    sel = gn > 0
    if sel.any():
        reps = gn[sel]
        parts_g.append(np.repeat(net.gn_group[sel], reps))
        parts_n.append(np.repeat(net.gn_node[sel], reps))
        parts_k.append(np.repeat(net.gn_kind[sel], reps))
    sel = gx > 0
    ia, ig, ir = net.ga_agg[sel], net.ga_group[sel], gx[sel]
    order = np.lexsort((ig, ia))
    in_agg, in_group = np.repeat(ia[order], ir[order]), np.repeat(ig[order], ir[order])
    sel = xn > 0
    oa, on, ok, orr = net.an_agg[sel], net.an_node[sel], net.an_kind[sel], xn[sel]
    order = np.lexsort((on, ok, oa))
    oa, on, ok, orr = oa[order], on[order], ok[order], orr[order]
    sel = xx > 0
    ca, cd, cf = net.aa_src[sel], net.aa_dst[sel], xx[sel]
    order = np.lexsort((cd, ca))
    ca, cd, cf = ca[order], cd[order], cf[order]
    passed: dict[int, np.ndarray] = {}
    for a in np.unique(np.concatenate([in_agg, oa, ca])).tolist():
        lo, hi = np.searchsorted(in_agg, [a, a + 1])
        units = np.concatenate([passed.pop(a, np.zeros(0, _I64)), in_group[lo:hi]])
        lo, hi = np.searchsorted(oa, [a, a + 1])
        reps = orr[lo:hi]
        used = int(reps.sum())
        if used:
            parts_g.append(units[:used])
            parts_n.append(np.repeat(on[lo:hi], reps))
            parts_k.append(np.repeat(ok[lo:hi], reps))
        lo, hi = np.searchsorted(ca, [a, a + 1])
        for child, f in zip(cd[lo:hi].tolist(), cf[lo:hi].tolist()):
            passed[child] = units[used : used + f]
            used += f
        if used != len(units):
            raise CorralError("min-cost flow solution does not conserve flow at an aggregator")
    if not parts_g:
        empty = np.zeros(0, _I64)
        return empty, empty, empty
    return (
        np.concatenate(parts_g).astype(_I64),
        np.concatenate(parts_n).astype(_I64),
        np.concatenate(parts_k).astype(_I64),
    )
