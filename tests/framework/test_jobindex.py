"""The kept job index (framework/memo/jobindex.py) is a speed change only: at every session open of congested
simulations under several configurations (queues with capacity, preemption and reclaim, no enqueue, gang
restarts, node failures, injected evictions) it equals an index built afresh, and the decisions are
byte-identical with the index (skipping on) and without it (skipping off). Its exact sums round as
``math.fsum`` does, whatever the order the amounts were added and taken away in."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.framework.config import parse_config
from corral.framework.memo import ClusterHistory, jobindex
from corral.registry import REGISTRY, default_config
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.engine import Engine, SimOptions
from corral.sim.synthetic import synthetic
from tests.framework.test_skipcache import record_cycles

CONFIGS = {
    "default": None,
    "capacity-preempt": {
        "actions": "enqueue, allocate, preempt, reclaim, backfill",
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
            {
                "plugins": [
                    {"name": "drf"},
                    {"name": "predicates"},
                    {"name": "capacity"},
                    {"name": "nodeorder"},
                ]
            },
        ],
    },
    "reservation": {
        "actions": "elect, enqueue, reserve, allocate, backfill",
        "tiers": [
            {
                "plugins": [
                    {"name": "priority"},
                    {"name": "gang"},
                    {"name": "conformance"},
                    {"name": "reservation", "arguments": {"lockMode": "multi-node"}},
                ]
            },
            {
                "plugins": [
                    {"name": "drf"},
                    {"name": "predicates"},
                    {"name": "proportion"},
                    {"name": "nodeorder"},
                ]
            },
        ],
    },
    "flow-las": {
        "actions": "enqueue, flow, backfill",
        "configurations": [{"name": "flow", "arguments": {"gangMode": "lowerbound"}}],
        "tiers": [
            {"plugins": [{"name": "las"}, {"name": "priority"}, {"name": "gang"}]},
            {"plugins": [{"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}]},
        ],
    },
    "no-enqueue": {
        "actions": "allocate, backfill",
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang"}]},
            {"plugins": [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}]},
        ],
    },
}


def _run(
    monkeypatch, config, restart: str, disturb: bool, reasons: bool = False, **history: bool
) -> tuple[list[str], str]:
    """The simulation's cycles and records; ``history`` sets the speed paths' switches."""
    cycles = record_cycles(monkeypatch, reasons)  # a skipped job keeps its last reason: see test_skipcache
    jobs = synthetic(
        11, n_jobs=220, arrival_rate=1 / 12, queues={"a": 2, "b": 1}, gang_sizes={1: 8, 2: 4, 4: 2}
    )
    cluster = from_spec(ClusterSpec((NodeShape("n", 4, gpus=8),), tiers=(2,))).instantiate(["a", "b"])
    cfg = default_config() if config is None else parse_config(config, REGISTRY)
    eng = Engine(
        cluster,
        jobs,
        cfg,
        options=SimOptions(
            checkpoint_interval=600, until=5 * 3600, restart_policy=restart, eviction_grace=30.0
        ),
        history=ClusterHistory(tracked=True, **history),
    )
    if disturb:
        eng.node_down(3600.0, cluster.nodes.names[1], duration=1800.0)
        eng.evict(7200.0, [jobs[5].name, jobs[9].name])
    result = eng.run()
    meta = dict(result.meta)
    meta.pop("wall_time")
    if not reasons:
        meta.pop("pending_reasons")
    records = [{k: v for k, v in r.__dict__.items() if reasons or k != "reason"} for r in result.jobs]
    return cycles, json.dumps({"jobs": records, "meta": meta}, sort_keys=True, default=str)


@pytest.mark.parametrize(
    "name,restart,disturb",
    [
        ("default", "job", True),
        ("capacity-preempt", "pods", True),
        ("reservation", "job", True),
        ("flow-las", "pods", False),
        ("no-enqueue", "job", False),
    ],
)
def test_kept_index_equals_fresh_build_and_decisions_unchanged(monkeypatch, name, restart, disturb):
    # every session open compares the kept index with a fresh build
    cycles_on, on = _run(monkeypatch, CONFIGS[name], restart, disturb, True, skip=True, check_index=True)
    # skipping on, no index: every job walked
    cycles_walk, walk = _run(monkeypatch, CONFIGS[name], restart, disturb, True, skip=True, keep_index=False)
    assert len(cycles_on) > 40
    assert json.loads(on)["meta"]["pending_reasons"], "the workload should leave a backlog"
    assert cycles_on == cycles_walk  # reasons included
    assert on == walk
    # neither index nor skipping: decisions and records the same
    off = _run(monkeypatch, CONFIGS[name], restart, disturb, skip=False)[1]
    assert off == _run(monkeypatch, CONFIGS[name], restart, disturb, skip=True)[1]


def test_enqueue_walks_the_kept_order_not_the_backlog(monkeypatch):
    """With the index, enqueue's job order comes from the kept order (built once, then updated) and the
    JobOrder key is computed for the changed jobs only, not for every waiting podgroup each cycle."""
    built = {"n": 0}
    real = jobindex.JobIndex.enqueue_order

    def counting(self, context, key, jobs):
        calls = {"n": 0}

        def counted(job):
            calls["n"] += 1
            return key(job)

        got = real(self, context, counted, jobs)
        built["n"] = max(built["n"], calls["n"]) if self._order else built["n"]
        counting.calls.append(calls["n"])
        return got

    counting.calls = []
    monkeypatch.setattr(jobindex.JobIndex, "enqueue_order", counting)
    _run(monkeypatch, None, "job", False, skip=True)
    assert counting.calls, "enqueue should use the kept order in the simulator"
    # after the first build, a cycle computes keys only for the podgroups that changed
    assert sum(counting.calls[1:]) < sum(1 for _ in counting.calls[1:]) * 5


def test_no_index_where_changes_are_not_tracked():
    cluster = from_spec(ClusterSpec((NodeShape("n", 2, gpus=8),))).instantiate(["default"])
    assert ClusterHistory(tracked=False, skip=True).open(cluster) is None
    assert ClusterHistory(tracked=True, skip=True).open(cluster) is not None
    assert ClusterHistory(tracked=True, skip=False).open(cluster) is None
    assert ClusterHistory(tracked=True, skip=True, keep_index=False).open(cluster) is None


amounts = st.floats(min_value=-1e18, max_value=1e18, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(amounts, min_size=3, max_size=3), min_size=0, max_size=30), st.randoms())
def test_exact_sums_round_as_fsum_in_any_order(rows, rnd):
    """Kept sums (added in any order, some added and taken away again) read as the correctly rounded
    column sums the walking path computes with fsum."""
    vecs = [np.array(r, dtype=float) for r in rows]
    want = jobindex.exact_sum(vecs, 3)
    acc = [0, 0, 0]
    order = list(range(len(vecs)))
    rnd.shuffle(order)
    extra = np.array([rnd.uniform(-1e6, 1e6) for _ in range(3)])
    for i in order[: len(order) // 2]:
        acc = [a + b for a, b in zip(acc, jobindex._scaled(vecs[i]))]
    acc = [a + b for a, b in zip(acc, jobindex._scaled(extra))]
    for i in order[len(order) // 2 :]:
        acc = [a + b for a, b in zip(acc, jobindex._scaled(vecs[i]))]
    acc = [a - b for a, b in zip(acc, jobindex._scaled(extra))]
    got = np.array([a / jobindex._SCALE for a in acc])
    assert got.tobytes() == want.tobytes() or np.array_equal(got, want)
    for col in range(3):
        assert got[col] == math.fsum(v[col] for v in vecs)


def test_multi_cycle_scenarios_keep_a_correct_index(tmp_path):
    """``corral schedule --cycles N`` keeps the index between its cycles: in every scenario of more than
    one cycle, the kept index equals a fresh build at each session open."""
    import yaml

    from tests.scenarios.test_scenarios import CASES, run_case

    ran = 0
    for path in CASES:
        case = yaml.safe_load(path.read_text())
        if int(case.get("cycles", 1)) > 1:
            folder = tmp_path / path.stem
            folder.mkdir()
            run_case(case, folder, skip=True, check_index=True)
            ran += 1
    assert ran >= 10
