"""Expected start times (sim/forecast.py): a forward run of the scheduling core with no new arrivals."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from corral.cli import app, schedule_snapshot
from corral.errors import ConfigError
from corral.framework.config import parse_config
from corral.model.clock import parse_time
from corral.registry import DEFAULT_CONFIG, REGISTRY
from corral.sim.forecast import forecast_settings
from tests.scenarios.expand import expand

NOW = "2026-01-01T02:00:00Z"


def _snapshot(tmp: Path, jobs: list[dict[str, Any]], nodes: int = 2, hypernodes: Any = None) -> Path:
    case = {"nodes": [{"name": f"n{i + 1}"} for i in range(nodes)], "jobs": jobs, "hypernodes": hypernodes}
    path = tmp / "snap.yaml"
    path.write_text(yaml.safe_dump_all(expand(case)))
    return path


def _config(**forecast: Any) -> Any:
    raw = copy.deepcopy(DEFAULT_CONFIG)
    if forecast:
        raw["forecast"] = forecast
    return parse_config(raw, REGISTRY, "c.yaml")


def _running(name: str, node: str, runtime: str | None, started: str = "2026-01-01T01:30:00Z") -> dict:
    job: dict[str, Any] = {
        "name": name,
        "pods": [{"count": 1, "gpu": 8, "nodes": [node], "started": started}],
    }
    if runtime:
        job["annotations"] = {"corral.io/expected-runtime": runtime}
    return job


def _estimates(path: Path, config: Any) -> dict[str, Any]:
    out: list[Any] = []
    schedule_snapshot([path], config, parse_time(NOW), estimates=out)
    return {e.podgroup: e for e in out}


def test_starts_follow_expected_ends_and_chain_through_jobs_the_plan_starts(tmp_path: Path) -> None:
    """a (ends 02:30) frees n1 for c; b (ends 03:30) frees n2, but d needs both nodes and c holds n1
    for 10 h from its start at 02:30: d starts at 12:30, after c."""
    jobs = [
        _running("a", "n1", "1h"),
        _running("b", "n2", "2h"),
        {
            "name": "c",
            "created": "2026-01-01T00:01:00Z",
            "annotations": {"corral.io/expected-runtime": "10h"},
            "pods": [{"count": 1, "gpu": 8}],
        },
        {"name": "d", "created": "2026-01-01T00:02:00Z", "pods": [{"count": 2, "gpu": 8}]},
    ]
    got = _estimates(_snapshot(tmp_path, jobs), _config())
    assert set(got) == {"default/c", "default/d"}
    c, d = got["default/c"], got["default/d"]
    assert c.start == parse_time("2026-01-01T02:30:00Z") and c.basis == "after default/a finishes"
    assert c.where == "n1"
    assert d.start == parse_time("2026-01-01T12:30:00Z") and d.basis == "after default/c finishes"


def test_a_gang_that_fits_now_starts_now(tmp_path: Path) -> None:
    jobs = [_running("a", "n1", "1h"), {"name": "c", "pods": [{"count": 1, "gpu": 4}]}]
    path = _snapshot(tmp_path, jobs)
    out: list[Any] = []
    # the cycle of `corral schedule` binds c already: nothing waits afterwards
    schedule_snapshot([path], _config(), parse_time(NOW), estimates=out)
    assert out == []


def test_no_expected_end_gives_no_estimate_and_names_the_jobs(tmp_path: Path) -> None:
    jobs = [
        _running("a", "n1", None),
        _running("b", "n2", None),
        {"name": "c", "pods": [{"count": 1, "gpu": 8}]},
    ]
    c = _estimates(_snapshot(tmp_path, jobs), _config())["default/c"]
    assert c.start is None
    assert "default/a and default/b run with no expected runtime" in c.basis
    assert "forecast.defaultRuntime" in c.basis and "waiting:" in c.basis


def test_configured_defaults_by_priority_class_then_queue_then_default(tmp_path: Path) -> None:
    jobs = [
        _running("a", "n1", None),
        _running("b", "n2", None),
        {"name": "c", "pods": [{"count": 1, "gpu": 8}]},
    ]
    path = _snapshot(tmp_path, jobs)
    c = _estimates(path, _config(defaultRuntime="4h"))["default/c"]
    assert c.start == parse_time("2026-01-01T05:30:00Z")  # both started 01:30; the first end frees a node
    c = _estimates(path, _config(defaultRuntime="4h", queues={"default": "1h"}))["default/c"]
    assert c.start == parse_time("2026-01-01T02:30:00Z") and c.basis == "after default/a and default/b finish"
    jobs[0]["priority"] = 5  # PriorityClass p5: its default comes before the queue's
    path = _snapshot(tmp_path, jobs)
    c = _estimates(
        path, _config(defaultRuntime="4h", queues={"default": "1h"}, priorityClasses={"p5": "30m"})
    )
    assert (
        c["default/c"].start == parse_time(NOW) + 1.0  # a (30 min from 01:30) is past its end
        and c["default/c"].basis == "after default/a finishes (past its expected end)"
    )


def test_a_job_past_its_expected_end_ends_now(tmp_path: Path) -> None:
    jobs = [
        _running("a", "n1", "10m"),
        _running("b", "n2", "10h"),
        {"name": "c", "pods": [{"count": 1, "gpu": 8}]},
    ]
    c = _estimates(_snapshot(tmp_path, jobs), _config())["default/c"]
    assert c.start == parse_time(NOW) + 1.0  # the forecast's first cycle comes one period after the last
    assert c.basis == "after default/a finishes (past its expected end)"


def test_the_horizon_bounds_the_plan(tmp_path: Path) -> None:
    jobs = [
        _running("a", "n1", "3d"),
        _running("b", "n2", "3d"),
        {"name": "c", "pods": [{"count": 1, "gpu": 8}]},
    ]
    c = _estimates(_snapshot(tmp_path, jobs), _config(horizon="1d"))["default/c"]
    assert c.start is None and "not within the forecast horizon of 1d" in c.basis


def test_a_gang_that_never_fits_says_so(tmp_path: Path) -> None:
    jobs = [_running("a", "n1", "1h"), {"name": "c", "pods": [{"count": 3, "gpu": 8}]}]
    c = _estimates(_snapshot(tmp_path, jobs), _config())["default/c"]
    assert c.start is None and "does not start even once every running job has finished" in c.basis


def test_where_names_the_lowest_hypernode(tmp_path: Path) -> None:
    jobs = [
        _running("a", "n1", "1h"),
        _running("b", "n2", "1h"),
        {"name": "c", "pods": [{"count": 2, "gpu": 8}]},
    ]
    hyper = [
        {"name": "rack-1", "tier": 1, "nodes": ["n1", "n2"]},
        {"name": "rack-2", "tier": 1, "nodes": ["n3"]},
        {"name": "spine", "tier": 2, "hypernodes": ["rack-1", "rack-2"]},
    ]
    jobs.append(_running("z", "n3", "5h"))
    c = _estimates(_snapshot(tmp_path, jobs, nodes=3, hypernodes=hyper), _config())["default/c"]
    assert c.start == parse_time("2026-01-01T02:30:00Z") and c.where == "rack-1"


@pytest.mark.parametrize(
    "raw,field",
    [
        ({"defaultRuntime": "soon"}, "forecast.defaultRuntime"),
        ({"queues": {"q": "-1h"}}, "forecast.queues.q"),
        ({"horizon": "0s"}, "forecast.horizon"),
        ({"maxSteps": 0}, "forecast.maxSteps"),
        ({"colour": 1}, "forecast"),
        ([1], "forecast"),
    ],
)
def test_bad_settings_name_the_field(raw: Any, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        forecast_settings(raw, "c.yaml")
    assert info.value.field == field


def test_json_has_expected_starts_only_when_asked(tmp_path: Path) -> None:
    jobs = [
        _running("a", "n1", "1h"),
        _running("b", "n2", "2h"),
        {"name": "c", "pods": [{"count": 1, "gpu": 8}]},
    ]
    path = _snapshot(tmp_path, jobs)
    plain = CliRunner().invoke(app, ["schedule", str(path), "--now", NOW, "-o", "json"])
    assert plain.exit_code == 0 and "expectedStarts" not in json.loads(plain.stdout)
    res = CliRunner().invoke(app, ["schedule", str(path), "--now", NOW, "-o", "json", "--forecast"])
    assert res.exit_code == 0, res.output
    record = json.loads(res.stdout)
    assert record["binds"] == [] and record["expectedStarts"] == [
        {
            "podgroup": "default/c",
            "expectedStart": "2026-01-01T02:30:00Z",
            "basis": "after default/a finishes",
            "where": "n1",
        }
    ]
    table = CliRunner().invoke(app, ["schedule", str(path), "--now", NOW, "--forecast"])
    assert (
        table.exit_code == 0
        and "Expected starts (1)" in table.stdout
        and "after default/a finishes" in table.stdout
    )


def test_a_bad_forecast_section_is_a_clear_error(tmp_path: Path) -> None:
    raw = copy.deepcopy(DEFAULT_CONFIG)
    raw["forecast"] = {"horizon": "forever"}
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["schedule", "--forecast", "-c", str(cfg)])
    assert res.exit_code == 2 and "forecast.horizon" in res.stderr and "Traceback" not in res.output


# -- in the simulator (simulation.forecast) ---------------------------------------------------------------
def _sim(every: float | None, spread: float = 1.0) -> Any:
    from corral.registry import default_config
    from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
    from corral.sim.engine import Engine, SimOptions
    from corral.sim.estimates import EstimateModel
    from corral.sim.jobspec import GPU, JobSpec, RoleSpec

    def spec(name: str, submit: float, duration: float) -> JobSpec:
        role = RoleSpec("", 1, {GPU: 8, "cpu": 1.0, "memory": 2.0**30})
        return JobSpec(name, submit, duration, "default", (role,), source=f"t {name}")

    jobs = [spec("a", 0, 3600), spec("b", 0, 7200), spec("c", 10, 1800), spec("d", 20, 600)]
    cluster = from_spec(ClusterSpec((NodeShape("n", 1, gpus=8),))).instantiate(j.queue for j in jobs)
    model = EstimateModel("noisy" if spread > 1 else "exact", spread, 7)
    options = SimOptions(schedule_period=10.0, estimates=model, forecast_every=every)
    return {r.job: r for r in Engine(cluster, jobs, default_config(), options=options).run().jobs}


def test_the_simulator_records_the_first_forecast_and_its_error() -> None:
    records = _sim(every=3600.0)
    # one node: b after a, c after b, d after c — exact with exact estimates
    for name in ("a", "b", "c", "d"):
        r = records[name]
        assert r.expected_start == pytest.approx(r.first_start) and r.expected_at is not None
    assert records["c"].expected_start == pytest.approx(3600 + 7200)


def test_a_noisy_estimate_shows_as_error_in_the_breakdown() -> None:
    from corral.sim.breakdown import breakdown
    from corral.sim.result import SimResult

    records = _sim(every=600.0, spread=2.0)
    errors = [abs(r.expected_start - r.first_start) for r in records.values() if r.expected_start is not None]
    assert errors and max(errors) > 0
    rows = breakdown(SimResult(jobs=list(records.values())))
    assert rows[0]["start_error_median"] is not None and rows[0]["start_error_median"] > 0
    assert _sim(every=None)["c"].expected_start is None


def test_simulation_forecast_settings_are_checked() -> None:
    from corral.sim.forecast import sim_forecast_every

    assert sim_forecast_every({"forecast": {"every": "1h"}}) == 3600.0
    assert sim_forecast_every({}) is None
    for bad in ({"forecast": {"every": "soon"}}, {"forecast": {"each": "1h"}}, {"forecast": 3}):
        with pytest.raises(ConfigError):
            sim_forecast_every(bad, "s.yaml")
