"""The simulator's forecast (``simulation.forecast``) with the job-speed model on (``simulation.speed``):
expected run times are work, so a gang slowed by its spread is expected to end when it will, and a job
the plan starts runs at the rate of the placement the plan gives it (sim/forecast.py, ``PlanSpeed``)."""

from __future__ import annotations

from typing import Any

import pytest

from corral.registry import default_config
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.engine import Engine, SimOptions
from corral.sim.estimates import EstimateModel
from corral.sim.jobspec import GPU, JobSpec, RoleSpec
from corral.sim.speed import SpeedModel


def _spec(name: str, submit: float, duration: float, pods: int) -> JobSpec:
    role = RoleSpec("", pods, {GPU: 8, "cpu": 1.0, "memory": 2.0**30})
    return JobSpec(name, submit, duration, "default", (role,), source=f"t {name}")


def _sim(speed: SpeedModel | None) -> dict[str, Any]:
    # two nodes of 8 GPUs: a 2-pod gang spans both (level 1), which the model slows by a factor of 2
    jobs = [_spec("gang", 0, 1000, 2), _spec("next", 10, 500, 2), _spec("last", 20, 100, 1)]
    cluster = from_spec(ClusterSpec((NodeShape("n", 2, gpus=8),))).instantiate(j.queue for j in jobs)
    options = SimOptions(
        schedule_period=10.0, estimates=EstimateModel("exact", 1.0, 0), forecast_every=10.0, speed=speed
    )
    return {r.job: r for r in Engine(cluster, jobs, default_config(), options=options).run().jobs}


def test_the_forecast_runs_jobs_at_the_speed_models_rate() -> None:
    got = _sim(SpeedModel({"default": ((1, 2.0),)}))
    gang, nxt, last = got["gang"], got["next"], got["last"]
    # the gang does 1000 s of work at rate 1/2: it ends at 2000; "next" (also spread) runs 1000 s
    assert gang.end == pytest.approx(2000.0) and nxt.first_start == pytest.approx(2000.0)
    assert last.first_start == pytest.approx(3000.0)
    # forecast at 10 s: the gang's work left (995 s) at its rate; at 20 s: "next" placed by the plan
    # on both nodes runs its 500 s at 1/2 (at rate 1 the forecasts would say 1000 s and 1500 s)
    assert nxt.expected_start == pytest.approx(2000.0) and nxt.expected_at == pytest.approx(10.0)
    assert last.expected_start == pytest.approx(3000.0) and last.expected_at == pytest.approx(20.0)


def test_without_the_model_the_forecast_is_unchanged() -> None:
    got = _sim(None)
    assert got["next"].expected_start == pytest.approx(1000.0) == got["next"].first_start
    assert got["last"].expected_start == pytest.approx(1500.0) == got["last"].first_start
