"""Skipping jobs known to fail is a speed change only (actions/common/skipping.py): the decisions of the whole
scenario suite (reasons included) and of a congested simulation are byte-identical with skipping on and
off. In the simulator a skipped job keeps the wait reason of its last attempt (its reason is not worked
out again while nothing it depends on changed), so there the comparison covers every decision and every
record field but the reason texts."""

from __future__ import annotations

import json

import yaml

import corral.sim.engine as engine_module
from corral.framework.cycle import run_cycle
from corral.framework.memo import ClusterHistory
from corral.registry import REGISTRY, default_config
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.engine import Engine, SimOptions
from corral.sim.synthetic import synthetic
from tests.scenarios.test_scenarios import CASES, suite_decisions


def test_scenario_suite_decisions_identical_with_and_without_skipping(tmp_path):
    on = suite_decisions(tmp_path / "on", skip=True)
    off = suite_decisions(tmp_path / "off", skip=False)
    assert len(on) == len(CASES) > 100
    different = [name for name in on if on[name] != off[name]]
    assert not different, f"decisions differ with skipping on/off: {different[:5]}"


def record_cycles(monkeypatch, reasons: bool = False) -> list[str]:
    """The simulator's cycles' decisions, each as sorted JSON, appended to the list returned as the
    simulation runs; without the ``unschedulable`` reasons unless ``reasons`` (see the module
    docstring)."""
    cycles: list[str] = []

    def recording(*args, **kwargs):
        decisions = run_cycle(*args, **kwargs)
        got = decisions.to_json(1)
        if not reasons:
            got.pop("unschedulable")
        cycles.append(json.dumps(got, sort_keys=True))
        return decisions

    monkeypatch.setattr(engine_module, "run_cycle", recording)
    return cycles


def _congested(monkeypatch, skip: bool) -> tuple[list[str], str]:
    """A backlog of gangs of 1-4 pods on 4 nodes x 8 GPUs: most cycles run with dozens waiting."""
    cycles = record_cycles(monkeypatch)
    jobs = synthetic(
        7, n_jobs=260, arrival_rate=1 / 15, queues={"a": 2, "b": 1}, gang_sizes={1: 8, 2: 4, 4: 2}
    )
    cluster = from_spec(ClusterSpec((NodeShape("n", 4, gpus=8),), tiers=(2,))).instantiate(["a", "b"])
    eng = Engine(
        cluster,
        jobs,
        default_config(),
        options=SimOptions(checkpoint_interval=600, until=6 * 3600),
        history=ClusterHistory(tracked=True, skip=skip),
    )
    result = eng.run()
    meta = dict(result.meta)
    meta.pop("wall_time")
    meta["pending_reasons"] = sorted(meta["pending_reasons"])  # the jobs, not the texts
    records = [{k: v for k, v in r.__dict__.items() if k != "reason"} for r in result.jobs]
    body = json.dumps(
        {
            "jobs": records,
            "meta": meta,
            "cluster": [s.__dict__ for s in result.cluster],
            "queues": [s.__dict__ for s in result.queues],
        },
        sort_keys=True,
        default=str,
    )
    return cycles, body


def test_congested_simulation_identical_with_and_without_skipping(monkeypatch):
    cycles_on, on = _congested(monkeypatch, skip=True)
    cycles_off, off = _congested(monkeypatch, skip=False)
    assert len(cycles_on) > 50
    assert json.loads(on)["meta"]["pending_reasons"], "the workload should leave a backlog"
    assert cycles_on == cycles_off
    assert on == off


def test_skipping_actually_skips(monkeypatch):
    """The congested run tries far fewer placements with skipping on (the switch is real)."""
    from corral.actions.allocate import AllocateAction

    tried = {"n": 0}
    real = AllocateAction.place_tasks

    def counting(self, *args, **kwargs):
        tried["n"] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(AllocateAction, "place_tasks", counting)
    _congested(monkeypatch, skip=True)
    with_skip = tried["n"]
    tried["n"] = 0
    _congested(monkeypatch, skip=False)
    assert with_skip < tried["n"] / 2, (with_skip, tried["n"])


def test_a_pod_replaced_by_a_smaller_one_is_not_skipped(tmp_path):
    """The live scheduler builds a changed job's pods anew: a remembered job whose pod was replaced (a
    new uid, a smaller request, the same states) is tried again, not skipped on the old pod's class."""
    from corral.manifests.build import load_snapshot
    from corral.model.clock import parse_time
    from tests.scenarios.expand import T0, expand

    def snapshot(gpu: int, uid: str):
        docs = expand(
            {"nodes": [{"name": "n1"}], "jobs": [{"name": "j", "pods": [{"count": 1, "gpu": gpu}]}]}
        )
        for d in docs:
            if d["kind"] == "Pod":
                d["metadata"]["uid"] = uid
        path = tmp_path / f"{uid}.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        return load_snapshot([path])

    now = parse_time(T0)
    history = ClusterHistory(skip=True)  # as corral run keeps it: a new cluster object each cycle
    first = snapshot(16, "old")
    assert not run_cycle(first, default_config(), REGISTRY, now, 1, history=history).binds
    assert "default/j" in history.skip_memory.blocked
    second = snapshot(4, "new")
    got = run_cycle(second, default_config(), REGISTRY, now + 1, 2, history=history).binds
    assert [b.pod for b in got] == ["default/j-0"]
