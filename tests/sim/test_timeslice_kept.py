"""``timeslice`` under ``srtf`` and ``las`` with keys kept across cycles (issue 29: baselines as fast as
the default) is a speed change only. A waiting job's remaining time or attained service is its own, so
its key is kept; a running job's moves with the clock (``running_keys_move``), so its key is taken again
in every session; the waiting jobs are ranked from the lines kept beside the job index
(framework/memo/lines.py). On congested simulations (two queues, gangs of 1-4 pods, a node failure,
injected evictions, checkpoints and restore times) every cycle's decisions and every record are the same
as with no key kept at all (every key computed afresh whenever asked), with the job index off, and with
skipping off; ``CORRAL_CHECK_INDEX=1``'s checks (the kept lines and the ranking against a fresh sort)
hold at every session."""

from __future__ import annotations

import json
from typing import Any

import pytest

from corral.framework.config import parse_config
from corral.framework.memo import ClusterHistory
from corral.framework.memo.orderkeys import OrderKeys
from corral.registry import REGISTRY
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.engine import Engine, SimOptions
from corral.sim.estimates import EstimateModel
from corral.sim.synthetic import synthetic
from tests.framework.test_skipcache import record_cycles

_ORDERS: dict[str, dict[str, Any]] = {
    "srtf": {"name": "srtf"},
    "las": {"name": "las", "arguments": {"thresholds": "0.5,2"}},
}


def _config(order: str, **args: Any) -> Any:
    raw: dict[str, Any] = {
        "actions": "allocate, timeslice, backfill",
        "tiers": [
            {
                "plugins": [
                    _ORDERS[order],
                    {"name": "priority"},
                    {"name": "gang", "enablePreemptable": False},
                    {"name": "conformance"},
                ]
            },
            {"plugins": [{"name": "predicates"}, {"name": "binpack"}]},
        ],
        "configurations": [{"name": "timeslice", "arguments": {"interval": "60s", **args}}],
    }
    return parse_config(raw, REGISTRY, "timeslice.yaml")


def _run(monkeypatch, order: str, args: dict[str, Any], **history: bool) -> tuple[list[str], str]:
    cycles = record_cycles(monkeypatch)
    jobs = synthetic(
        11, n_jobs=160, arrival_rate=1 / 20, queues={"a": 2, "b": 1}, gang_sizes={1: 8, 2: 4, 4: 2}
    )
    cluster = from_spec(ClusterSpec((NodeShape("n", 4, gpus=8),), tiers=(2,))).instantiate(["a", "b"])
    eng = Engine(
        cluster,
        jobs,
        _config(order, **args),
        options=SimOptions(
            schedule_period=10.0,
            until=3 * 3600,
            checkpoint_interval=600,
            checkpoint_on_preempt=True,
            resume_overhead=((8.0, 40.0), (float("inf"), 60.0)),
            estimates=EstimateModel("exact"),
        ),
        history=ClusterHistory(tracked=True, **history),
    )
    eng.node_down(3000.0, cluster.nodes.names[1], duration=1200.0)
    eng.evict(6000.0, [jobs[4].name, jobs[7].name])
    result = eng.run()
    meta = dict(result.meta)
    meta.pop("wall_time")
    meta.pop("pending_reasons")
    records = [{k: v for k, v in r.__dict__.items() if k != "reason"} for r in result.jobs]
    return cycles, json.dumps({"jobs": records, "meta": meta}, sort_keys=True, default=str)


def _no_kept_keys(monkeypatch) -> None:
    """Every JobOrder key computed afresh whenever it is asked for: the reference."""

    def keyed(self, jobs, context, compute, touched, changed, *, moving=None):
        return compute

    monkeypatch.setattr(OrderKeys, "keyed", keyed)


@pytest.mark.parametrize(
    "order,args",
    [
        ("srtf", {}),
        ("las", {"starvationFactor": 2, "minLease": "60s"}),
        ("las", {"perQueue": True, "minLease": "120s"}),
    ],
)
def test_kept_keys_and_lines_change_no_decision(monkeypatch, order, args):
    kept_cycles, kept = _run(monkeypatch, order, args, skip=True, check_index=True)
    got = json.loads(kept)
    assert len(kept_cycles) > 100, "the workload should keep the cluster busy"
    assert sum(r["preemptions"] for r in got["jobs"]) > 5, "timeslice should stop running jobs"
    walk_cycles, walk = _run(monkeypatch, order, args, skip=True, keep_index=False)
    off_cycles, off = _run(monkeypatch, order, args, skip=False)
    with monkeypatch.context() as patched:
        _no_kept_keys(patched)
        ref_cycles, ref = _run(patched, order, args, skip=False)
    assert kept_cycles == ref_cycles and kept == ref
    assert walk_cycles == ref_cycles and walk == ref
    assert off_cycles == ref_cycles and off == ref


def test_the_running_jobs_clock_leaves_keys_untaken(monkeypatch):
    """Under ``srtf`` the kept running jobs' clock spares the keys of running jobs that surely rank
    before the best waiting job (actions/common/timeslice_running.py), and changes no decision: the
    run with it equals the run where every running job is keyed (the clock off)."""
    from corral.actions import timeslice
    from corral.actions.common import timeslice_running

    spared: list[int] = []
    real = timeslice_running.after

    def spying(session, kept, top_key, now):
        got = real(session, kept, top_key, now)
        spared.append(len(kept.jobs) - (len(kept.jobs) if got is None else len(got)))
        return got

    monkeypatch.setattr(timeslice, "after", spying)
    on_cycles, on = _run(monkeypatch, "srtf", {}, skip=True, check_index=True)
    assert sum(spared) > 100, "the clock should spare the keys of running jobs"
    monkeypatch.setattr(timeslice, "after", lambda session, kept, top_key, now: None)
    off_cycles, off = _run(monkeypatch, "srtf", {}, skip=True)
    assert on_cycles == off_cycles and on == off


def test_the_clock_check_catches_a_wrong_clock(monkeypatch):
    """``CORRAL_CHECK_INDEX=1``: a running job left out by the clock must rank before the waiting job."""
    from corral.plugins.baselines import SrtfPlugin

    real = SrtfPlugin.key_clock
    monkeypatch.setattr(SrtfPlugin, "key_clock", lambda self, job: None if real(self, job) is None else -1e9)
    with pytest.raises(AssertionError, match="left out by the clock"):
        _run(monkeypatch, "srtf", {}, skip=True, check_index=True)


def test_las_keys_held_until_their_threshold_crossing(monkeypatch):
    """Under ``las`` a running job's key is kept until its attained service reaches the next threshold
    (``KeyHorizon``), and changes no decision: the run equals the run with every running job's key
    taken again at each use (no horizon)."""
    from corral.plugins.baselines import LasPlugin

    spans: list[float] = []
    real = LasPlugin.key_until

    def spying(self, job):
        got = real(self, job)
        spans.append(got - self.session.now)
        return got

    monkeypatch.setattr(LasPlugin, "key_until", spying)
    args = {"starvationFactor": 2, "minLease": "60s"}
    on_cycles, on = _run(monkeypatch, "las", args, skip=True, check_index=True)
    assert sum(1 for s in spans if 60 < s < float("inf")) > 20, "running keys should be held for a while"
    monkeypatch.setattr(LasPlugin, "key_until", lambda self, job: self.session.now)
    off_cycles, off = _run(monkeypatch, "las", args, skip=True)
    assert on_cycles == off_cycles and on == off


def test_the_horizon_check_catches_a_late_horizon(monkeypatch):
    """``CORRAL_CHECK_INDEX=1``: a key reused past its real change is caught."""
    from corral.plugins.baselines import LasPlugin

    monkeypatch.setattr(LasPlugin, "key_until", lambda self, job: float("inf"))
    with pytest.raises(AssertionError, match="changed before its horizon"):
        _run(monkeypatch, "las", {}, skip=True, check_index=True)
