"""Unit tests of the min-cost flow network (seed 004): the lower-bound transformation with its
penalised bypass, the unscheduled aggregators, aggregator flows split back onto groups, and the
vectorised arc loading."""

from __future__ import annotations

import numpy as np
import pytest

from corral.solvers.flow_network import FlowNetwork, solve

INT = np.int64


def _net(
    supply, lower, wait, penalty, group_job, group_count, n_nodes, an, ga, node_cap, gn=None
) -> FlowNetwork:
    an_agg, an_node, an_cap, an_cost = (np.array(x, INT) for x in zip(*an)) if an else [np.zeros(0, INT)] * 4
    ga_group, ga_agg, ga_cost = (np.array(x, INT) for x in zip(*ga)) if ga else [np.zeros(0, INT)] * 3
    net = FlowNetwork(
        n_nodes,
        np.array(supply, INT),
        np.array(lower, INT),
        np.array(wait, INT),
        np.array(penalty, INT),
        np.array(group_job, INT),
        np.array(group_count, INT),
        1 + int(max(ga_agg, default=0)),
        ga_group,
        ga_agg,
        ga_cost,
        an_agg=an_agg,
        an_node=an_node,
        an_cap=an_cap,
        an_cost=an_cost,
        an_kind=np.zeros(len(an_agg), INT),
        node_cap=np.array(node_cap, INT),
    )
    if gn:
        net.gn_group, net.gn_node, net.gn_cap, net.gn_cost, net.gn_kind = (np.array(x, INT) for x in zip(*gn))
    return net


def test_unscheduled_aggregator_keeps_round_feasible() -> None:
    # one job of 3 pods, one aggregator with room for 2: 2 placed, 1 waits
    net = _net([3], [0], [10], [10], [0], [3], 2, [(0, 0, 1, 0), (0, 1, 1, 0)], [(0, 0, 0)], [5, 5])
    sol = solve(net)
    assert sol.placed.tolist() == [2]
    assert sorted(sol.unit_node.tolist()) == [0, 1]
    assert sol.cost == 10


def test_lower_bound_forces_the_gang_before_cheaper_single_pods() -> None:
    # a gang of 2 (k = 2) and a single pod of higher waiting cost compete for 2 slots; the penalty per
    # missing gang pod (u x k) makes the gang whole
    an = [(0, 0, 1, 0), (0, 1, 1, 0)]
    ga = [(0, 0, 0), (1, 0, 0)]
    net = _net([2, 1], [2, 0], [10, 15], [20, 15], [0, 1], [2, 1], 2, an, ga, [1, 1])
    sol = solve(net)
    assert sol.placed.tolist() == [2, 0]
    plain = _net([2, 1], [0, 0], [10, 15], [20, 15], [0, 1], [2, 1], 2, an, ga, [1, 1])
    assert solve(plain).placed.tolist() == [1, 1]  # without the bound the gang is left partial


def test_bypass_when_gang_cannot_fit() -> None:
    # k = 3 but only 2 slots: the round stays feasible, the bypass carries the shortfall
    net = _net([3], [3], [10], [30], [0], [3], 2, [(0, 0, 1, 0), (0, 1, 1, 0)], [(0, 0, 0)], [1, 1])
    sol = solve(net)
    assert sol.placed.tolist() == [2]
    assert sol.cost == 30


def test_inactive_jobs_supply_nothing() -> None:
    net = _net(
        [1, 1], [0, 0], [10, 10], [10, 10], [0, 1], [1, 1], 1, [(0, 0, 2, 0)], [(0, 0, 0), (1, 0, 0)], [2]
    )
    sol = solve(net, np.array([True, False]))
    assert sol.placed.tolist() == [1, 0]


def test_aggregator_flow_is_split_onto_groups_in_order() -> None:
    # two groups share one aggregator with three nodes; units pair in group order with nodes in order
    an = [(0, 0, 1, 0), (0, 1, 1, 0), (0, 2, 1, 0)]
    net = _net([2, 1], [0, 0], [10, 10], [10, 10], [0, 1], [2, 1], 3, an, [(0, 0, 0), (1, 0, 0)], [1, 1, 1])
    sol = solve(net)
    pairs = sorted(zip(sol.unit_group.tolist(), sol.unit_node.tolist()))
    assert pairs == [(0, 0), (0, 1), (1, 2)]


def test_cheaper_node_wins_and_direct_arcs() -> None:
    an = [(0, 0, 1, 5), (0, 1, 1, 0)]
    net = _net([1], [0], [100], [100], [0], [1], 2, an, [(0, 0, 3)], [1, 1], gn=[(0, 0, 1, 0, 0)])
    sol = solve(net)
    assert sol.unit_node.tolist() == [0] and sol.cost == 0  # the direct (preferred) arc


def test_uses_vectorised_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    from ortools.graph.python import min_cost_flow

    calls = {"one": 0}
    original = min_cost_flow.SimpleMinCostFlow.add_arc_with_capacity_and_unit_cost

    def one(self, *a):  # pragma: no cover - must not be called
        calls["one"] += 1
        return original(self, *a)

    monkeypatch.setattr(
        min_cost_flow.SimpleMinCostFlow, "add_arc_with_capacity_and_unit_cost", one, raising=False
    )
    net = _net([1], [0], [10], [10], [0], [1], 1, [(0, 0, 1, 0)], [(0, 0, 0)], [1])
    solve(net)
    assert calls["one"] == 0


def test_hypernode_tree_units_stay_below_their_entry() -> None:
    # aggregator 0 (cluster) -> aggregator 1 (a leaf holding node 0); node 1 hangs off the cluster.
    # Group 0 enters the leaf, group 1 the cluster: group 0 must land on node 0, group 1 on node 1.
    an = [(0, 1, 1, 0), (1, 0, 1, 0)]
    net = _net([1, 1], [0, 0], [10, 10], [10, 10], [0, 1], [1, 1], 2, an, [(0, 1, 0), (1, 0, 0)], [1, 1])
    net.aa_src, net.aa_dst = np.array([0], INT), np.array([1], INT)
    sol = solve(net)
    assert sorted(zip(sol.unit_group.tolist(), sol.unit_node.tolist())) == [(0, 0), (1, 1)]
    assert (
        net.arcs == 4 * 2 + 2 + 2 + 0 + 2 + 2 + 1
    )  # J->A, J->U, A->U, U->sink; A->G; G->X; X->N; N->sink; X->X


def test_solver_resolves_without_reloading_arcs() -> None:
    # one Solver, solved again with a job inactive and without the lower bounds: the same answers as
    # fresh networks, and the arcs are loaded once
    from corral.solvers.flow_network import Solver

    an = [(0, 0, 1, 0), (0, 1, 1, 0)]
    ga = [(0, 0, 0), (1, 0, 0)]
    net = _net([2, 1], [2, 0], [10, 15], [20, 15], [0, 1], [2, 1], 2, an, ga, [1, 1])
    solver = Solver(net)
    first = solver.solve()
    plain = solver.solve(bounded=False)
    alone = solver.solve(np.array([False, True]))
    again = solver.solve()
    assert (first.placed.tolist(), plain.placed.tolist(), alone.placed.tolist()) == ([2, 0], [1, 1], [0, 1])
    assert again.placed.tolist() == first.placed.tolist() and again.cost == first.cost
    assert (
        plain.cost == solve(net, bounded=False).cost
        and alone.cost == solve(net, np.array([False, True])).cost
    )
    assert solver.solves == 4 and solver.mcf.num_arcs() == solver.n_arcs == net.arcs
