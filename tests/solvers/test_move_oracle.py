"""The CP-SAT move oracle on small hand-computed instances (corral.solvers.move_oracle), and the
consolidate planner measured against it."""

from __future__ import annotations

import numpy as np

from corral.actions.common.consolidate_plan import Budget, MovePlanner, Pool, Unit
from corral.manifests.build import build_cluster
from corral.solvers.move_oracle import move_cost, solve_moves
from tests.solvers.test_oracle import NOW, Snap


def _scattered() -> Snap:
    """n1: a 4-GPU pod (1 h) + 2 + 2 GPU pods (2 h each); n2: a 4-GPU pod (10 h); n3: a 6-GPU pod."""
    return (
        Snap()
        .node("n1")
        .node("n2")
        .node("n3")
        .gang("a", ["n1"], 4, hours=1.0)
        .gang("b", ["n1"], 2, hours=2.0)
        .gang("c", ["n2"], 4, hours=10.0)
        .gang("d", ["n3"], 6, hours=5.0)
        .gang("big", [None], 8)
    )


def test_oracle_moves_cheapest_and_prices_like_move_cost() -> None:
    cluster = build_cluster(("t", d) for d in _scattered().docs)
    res = solve_moves(cluster, cluster.jobs["t/big"], now=NOW, time_limit=10)
    assert res.status == "OPTIMAL" and res.placed
    # free: n1 2, n2 4, n3 2. Emptying n1 moves a (4 GPU-h) to n2 and b (4 GPU-h) to n3: 8 GPU-h;
    # emptying n2 moves c (40 GPU-h) — dearer
    assert sorted(t.key for t in res.moved) == ["t/a-0", "t/b-0"]
    assert abs(res.cost - 8.0) < 1e-6
    assert abs(move_cost(cluster, res.moved, NOW) - res.cost) < 1e-6


def test_oracle_refuses_when_nothing_can_land() -> None:
    snap = Snap().node("n1").node("n2").gang("a", ["n1"], 6).gang("b", ["n2"], 6).gang("p", [None], 4)
    cluster = build_cluster(("t", d) for d in snap.docs)
    res = solve_moves(cluster, cluster.jobs["t/p"], now=NOW, time_limit=10)
    assert res.status == "INFEASIBLE" and not res.placed


def test_oracle_kill_costs_more_than_a_move() -> None:
    snap = Snap().node("n1").node("n2").gang("a", ["n1"], 4).gang("b", ["n2"], 4).gang("big", [None], 8)
    cluster = build_cluster(("t", d) for d in snap.docs)
    moves = solve_moves(cluster, cluster.jobs["t/big"], now=NOW, time_limit=10, kill_factor=2.0)
    assert moves.placed and len(moves.moved) == 1 and not moves.killed


def test_oracle_keeps_max_jobs() -> None:
    cluster = build_cluster(("t", d) for d in _scattered().docs)
    res = solve_moves(cluster, cluster.jobs["t/big"], now=NOW, time_limit=10, max_jobs=1)
    # one job only: c moves alone (n2 then holds 8 free)... c has nowhere: n1 2, n3 2 free — so
    # with one job nothing fits
    assert not res.placed


def _planner(cluster, job_uid: str, max_jobs: int = -1, budget: Budget | None = None) -> MovePlanner:
    job = cluster.jobs[job_uid]
    gang = [t for t in job.tasks if t.node < 0]
    units = []
    jobs = [j for j in cluster.jobs.values() if j is not job]
    for k, j in enumerate(jobs):
        pods = [t for t in j.tasks if t.node >= 0]
        if pods:
            gpus = sum(float(t.request[cluster.resources.pos("nvidia.com/gpu")]) for t in pods) / 1000.0
            hours = (NOW - pods[0].start_time) / 3600.0
            units.append(Unit(pods, gpus * hours, k, True, len(units)))
    live = ~cluster.nodes.down
    return MovePlanner(
        np.asarray(cluster.nodes.future_idle, dtype=float).copy(),
        gang,
        live.copy(),
        lambda t: live,
        units,
        lambda k, pods: True,
        max_jobs,
        budget=budget,
    )


def test_planner_takes_two_cheap_pods_over_one_dear() -> None:
    cluster = build_cluster(("t", d) for d in _scattered().docs)
    plan = _planner(cluster, "t/big").plan()
    assert plan is not None
    assert sorted(t.key for t, _ in plan.moves) == ["t/a-0", "t/b-0"]
    assert abs(plan.cost - 8.0) < 1e-6
    rows = {t.key: r for t, r in plan.moves}
    names = cluster.nodes.names
    assert names[rows["t/a-0"]] == "n2" and names[rows["t/b-0"]] == "n3"
    assert [names[r] for _, r in plan.gang] == ["n1"]


def test_planner_never_lands_a_pod_on_its_own_node_nor_nowhere() -> None:
    snap = Snap().node("n1").node("n2").gang("a", ["n1"], 6).gang("b", ["n2"], 6).gang("p", [None], 4)
    cluster = build_cluster(("t", d) for d in snap.docs)
    assert _planner(cluster, "t/p").plan() is None


def test_planner_keeps_max_jobs() -> None:
    cluster = build_cluster(("t", d) for d in _scattered().docs)
    assert _planner(cluster, "t/big", max_jobs=1).plan() is None
    assert _planner(cluster, "t/big", max_jobs=2).plan() is not None


def _young_spanning() -> Snap:
    """n1: a 4-GPU pod (1 h), 4 GPUs free; n2: a 3-GPU pod (10 h); n3: a 7-GPU pod (10 h); a young
    gang w of 1-GPU pods on n2 and n3, whose leaving opens no 8-GPU slot anywhere."""
    return (
        Snap()
        .node("n1")
        .node("n2")
        .node("n3")
        .gang("a", ["n1"], 4, hours=1.0)
        .gang("c", ["n2"], 3, hours=10.0)
        .gang("d", ["n3"], 7, hours=10.0)
        .gang("w", ["n2", "n3"], 1, hours=0.01)
        .gang("big", [None], 8)
    )


def test_planner_spends_no_move_set_on_a_job_whose_leaving_opens_no_slot() -> None:
    # the young gang w across two nodes is the cheapest unit, but moving it alone opens no slot: with a
    # budget of one move set, that set goes to emptying n1 (a moves to n2)
    cluster = build_cluster(("t", d) for d in _young_spanning().docs)
    plan = _planner(cluster, "t/big", budget=Budget(1)).plan()
    assert plan is not None and [t.key for t, _ in plan.moves] == ["t/a-0"]


def test_planner_bounds_are_below_every_nodes_step() -> None:
    for snap in (_scattered(), _young_spanning()):
        cluster = build_cluster(("t", d) for d in snap.docs)
        planner = _planner(cluster, "t/big")
        fresh = planner._fresh()
        for p in planner.at:
            step = planner._first(fresh, p)
            if step is None:
                continue
            assert planner.bound(p) <= sum(u.cost for u in step) + 1e-9
            assert planner.bound(p, jobs=True) <= len({u.job for u in step})


def _cap_binds() -> Snap:
    """The scenario ``consolidate_job_cap_repacks_jobs_first``: 18 GPUs free on six nodes, a gang of two
    8-GPU pods; within two jobs only the young gangs j3 (on n4, n5) and j4 (on n2, n4, n2), lifted
    together and packed again, open two nodes cheaply."""
    return (
        Snap()
        .node("n1")
        .node("n2")
        .node("n3")
        .node("n4")
        .node("n5")
        .node("n6")
        .gang("j0", ["n1", "n3"], 1, hours=20.0)
        .gang("j1", ["n1"], 4, hours=12.0)
        .gang("j2", ["n3"], 4, hours=3.0)
        .gang("j3", ["n4", "n5"], 2, hours=3.0)
        .gang("j4", ["n2", "n4", "n2"], 4, hours=5.0)
        .gang("j5", ["n6"], 4, hours=48.0)
        .gang("big", [None, None], 8)
    )


def test_planner_places_where_the_oracle_does_when_the_job_cap_binds() -> None:
    cluster = build_cluster(("t", d) for d in _cap_binds().docs)
    res = solve_moves(cluster, cluster.jobs["t/big"], now=NOW, time_limit=10, max_jobs=2)
    assert res.status == "OPTIMAL" and res.placed
    plan = _planner(cluster, "t/big", max_jobs=2).plan()
    assert plan is not None and plan.jobs <= 2
    moved = [t for t, _ in plan.moves]
    assert len({t.job.uid for t in moved}) <= 2
    assert abs(move_cost(cluster, moved, NOW) - res.cost) < 1e-6  # j3 and j4 whole: 12 + 60 GPU-h
    assert abs(res.cost - 72.0) < 1e-6
    # without the cap the greedy's own plan (three jobs) is found as before
    free = _planner(cluster, "t/big").plan()
    assert free is not None and free.jobs == 3


def test_pool_without_single_pod_units() -> None:
    # every movable job a gang of two pods: the single-pod units are none, with the node columns' width
    cluster = build_cluster(("t", d) for d in _young_spanning().docs)
    planner = _planner(cluster, "t/big")
    wide = [u for u in planner.units if len(u.pods) > 1]
    pool = Pool(wide, planner.base)
    singles, rows, req = pool.singles
    assert singles == [] and rows.shape == (0,) and req.shape == (0, planner.base.shape[1])
