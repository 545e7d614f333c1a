"""The check of ``benchmarks/bench_topology.py`` that judges "every gang that fits is placed": each gang in
job order, on the free capacity left by the placements made before it (``at_turn``). On a small tree of
the benchmark's shape the scheduler's own decisions pass it, and it reports a gang left out while room
was there, and a placement that leaves its HyperNode or overcommits a node."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from corral.framework.decisions import Bind
from corral.manifests.build import build_cluster

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_topology.py"


@pytest.fixture(scope="module")
def run():
    spec = importlib.util.spec_from_file_location("bench_topology_under_test", BENCH)
    bt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bt)
    bt.NODES = 48  # 72 rails of 2 nodes, 4 blocks of 12
    docs, pending = bt.generate(16, 0.3, 0)
    decisions, _, _ = bt.timed_cycle(build_cluster(("bench", d) for d in docs))

    def check(binds):
        return bt.at_turn(build_cluster(("bench", d) for d in docs), pending, binds)

    return check, decisions.binds, pending


def test_scheduler_decisions_pass(run):
    check, binds, _pending = run
    could, missed, faults = check(binds)
    placed = {b.pod.split("/")[1].rsplit("-", 1)[0] for b in binds}
    assert placed and could == len(placed) and not missed and not faults


def test_gang_left_out_is_a_miss(run):
    check, binds, pending = run
    hard = next(p[0] for p in pending if p[3] == "hard" and any(f"/{p[0]}-" in b.pod for b in binds))
    _, missed, _ = check([b for b in binds if f"/{hard}-" not in b.pod])
    assert hard in missed


def test_placement_outside_its_hypernode_is_a_fault(run):
    check, binds, pending = run
    tier1 = next(
        p[0]
        for p in pending
        if p[3] == "hard" and p[4] == 1 and p[2] == 8 and any(f"/{p[0]}-" in b.pod for b in binds)
    )
    mine = [b for b in binds if f"/{tier1}-" in b.pod]
    far = f"node-{(int(mine[0].node.split('-')[1]) + 24) % 48:05d}"  # on no rail with the other pod
    moved = [Bind(b.pod, far, b.cycle) if b is mine[-1] else b for b in binds]
    _, _, faults = check(moved)
    assert any(tier1 in f and "not inside one HyperNode" in f for f in faults)
