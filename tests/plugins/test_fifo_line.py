"""The ``fifo`` plugin's lines kept across cycles (framework/memo/lines.py) are a speed change only: on
congested simulations under strict FIFO and strict SJF (two queues, gang restarts, a node failure and
injected evictions) the kept lines equal a fresh sort at every session (the index check), and every
cycle's decisions, reasons included, and every record are the same with the kept lines (job index on)
and with the lines sorted at each session (index off), and with skipping off altogether."""

from __future__ import annotations

import json

import pytest

from corral.framework.config import parse_config
from corral.framework.memo import ClusterHistory
from corral.framework.memo import lines as baselines_line
from corral.registry import REGISTRY
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.engine import Engine, SimOptions
from corral.sim.estimates import EstimateModel
from corral.sim.synthetic import synthetic
from tests.framework.test_skipcache import record_cycles


def _config(*order: str) -> dict:
    return {
        "actions": "enqueue, allocate, backfill",
        "tiers": [
            {
                "plugins": [
                    *({"name": n} for n in order),
                    {"name": "priority"},
                    {"name": "gang", "enablePreemptable": False},
                    {"name": "conformance"},
                ]
            },
            {"plugins": [{"name": "predicates"}, {"name": "proportion"}, {"name": "binpack"}]},
        ],
    }


def _run(
    monkeypatch, order: tuple[str, ...], restart: str, reasons: bool = True, **history: bool
) -> tuple[list[str], str]:
    """The cycles and records; without reasons unless ``reasons`` (a job skipped as known to fail keeps
    its last reason: see tests/framework/test_skipcache.py)."""
    cycles = record_cycles(monkeypatch, reasons)
    jobs = synthetic(
        5, n_jobs=240, arrival_rate=1 / 10, queues={"a": 2, "b": 1}, gang_sizes={1: 8, 2: 4, 4: 2}
    )
    cluster = from_spec(ClusterSpec((NodeShape("n", 4, gpus=8),), tiers=(2,))).instantiate(["a", "b"])
    eng = Engine(
        cluster,
        jobs,
        parse_config(_config(*order), REGISTRY),
        options=SimOptions(
            schedule_period=5.0,
            checkpoint_interval=600,
            until=5 * 3600,
            restart_policy=restart,
            eviction_grace=30.0,
            estimates=EstimateModel("exact"),
        ),
        history=ClusterHistory(tracked=True, **history),
    )
    eng.node_down(3600.0, cluster.nodes.names[1], duration=1800.0)
    eng.evict(7200.0, [jobs[5].name, jobs[9].name])
    result = eng.run()
    meta = dict(result.meta)
    meta.pop("wall_time")
    if not reasons:
        meta.pop("pending_reasons")
    records = [{k: v for k, v in r.__dict__.items() if reasons or k != "reason"} for r in result.jobs]
    return cycles, json.dumps({"jobs": records, "meta": meta}, sort_keys=True, default=str)


@pytest.mark.parametrize("order,restart", [(("fifo",), "job"), (("sjf", "fifo"), "pods")])
def test_kept_lines_change_no_decision(monkeypatch, order, restart):
    used = []
    real = baselines_line.kept_lines

    def spying(session):
        got = real(session)
        used.append(got is not None)
        return got

    monkeypatch.setattr("corral.plugins.baselines.kept_lines", spying)
    kept_cycles, kept = _run(monkeypatch, order, restart, skip=True, check_index=True)
    assert len(kept_cycles) > 100 and any(used), "the kept lines should be used"
    assert json.loads(kept)["meta"]["pending_reasons"], "the workload should leave a backlog"
    used.clear()
    walk_cycles, walk = _run(monkeypatch, order, restart, skip=True, keep_index=False)
    assert used and not any(used), "without the index the lines are sorted at each session"
    assert kept_cycles == walk_cycles
    assert kept == walk
    off = _run(monkeypatch, order, restart, False, skip=False)
    assert off == _run(monkeypatch, order, restart, False, skip=True)
