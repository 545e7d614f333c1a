"""The ``timeslice`` action in the simulator (actions/timeslice.py, issue 29): a stopped job's room goes
to the job that outranks it at the same instant, the stopped job resumes from its checkpoint after its
restore time, and under ``las`` a cycle comes every ``interval`` while jobs wait, so that a running job
demoted by the service it received gives way although no event happened."""

from __future__ import annotations

from typing import Any

import pytest

from corral.errors import ConfigError
from corral.framework.config import parse_config
from corral.registry import REGISTRY
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.engine import Engine, SimOptions
from corral.sim.estimates import estimate_model
from corral.sim.jobspec import GPU, JobSpec, RoleSpec


def _config(order: dict[str, Any], actions: str = "allocate, timeslice, backfill", **args: Any) -> Any:
    raw: dict[str, Any] = {
        "actions": actions,
        "tiers": [
            {"plugins": [order, {"name": "priority"}, {"name": "gang", "enablePreemptable": False}]},
            {"plugins": [{"name": "predicates"}, {"name": "binpack"}]},
        ],
    }
    if args:
        raw["configurations"] = [{"name": "timeslice", "arguments": args}]
    return parse_config(raw, REGISTRY, "timeslice.yaml")


def _job(name: str, submit: float, duration: float) -> JobSpec:
    role = RoleSpec("", 1, {GPU: 8, "cpu": 1.0, "memory": 2.0**30})
    return JobSpec(name, submit, duration, "default", (role,), source=f"t {name}")


def _run(config: Any, jobs: list[JobSpec], **options: Any) -> dict[str, Any]:
    cluster = from_spec(ClusterSpec((NodeShape("n", 1, gpus=8),))).instantiate(j.queue for j in jobs)
    result = Engine(cluster, jobs, config, options=SimOptions(schedule_period=10.0, **options)).run()
    return {r.job: r for r in result.jobs}


def test_srtf_stops_the_longer_job_and_the_short_one_starts_at_once() -> None:
    jobs = [_job("long", 0, 1000), _job("short", 100, 50)]
    got = _run(
        _config({"name": "srtf"}),
        jobs,
        estimates=estimate_model({"estimates": {"model": "exact"}}),
        checkpoint_on_preempt=True,
        resume_overhead=((8.0, 40.0),),
    )
    short, long = got["short"], got["long"]
    assert short.first_start == 100.0 and short.end == 150.0  # bound in the cycle that stopped "long"
    assert long.preemptions == 1 and long.gpu_hours_lost == 0.0
    # 100 s before the stop, then from 150 s: 40 s restoring and the remaining 900 s
    assert long.end == pytest.approx(150.0 + 40.0 + 900.0)
    assert long.queue_time == pytest.approx(50.0)


def test_without_timeslice_srtf_only_orders_the_waiting_jobs() -> None:
    jobs = [_job("long", 0, 1000), _job("short", 100, 50)]
    got = _run(
        _config({"name": "srtf"}, "allocate, backfill"),
        jobs,
        estimates=estimate_model({"estimates": {"model": "exact"}}),
    )
    assert got["short"].first_start == 1000.0 and got["long"].preemptions == 0


def test_las_demotes_a_running_job_without_any_event() -> None:
    # 8 GPUs: "long" passes 1 GPU-hour after 450 s, while "small" (submitted at 10 s, behind it in the
    # first queue) waits; no job ends or arrives until 10,000 s, so only the interval's cycles see it
    jobs = [_job("long", 0, 10_000), _job("small", 10, 100)]
    got = _run(_config({"name": "las", "arguments": {"thresholds": "1"}}, interval="60s"), jobs)
    assert 450.0 <= got["small"].first_start <= 520.0
    assert got["long"].preemptions == 1


def test_the_minimum_lease_holds_a_run_for_its_length() -> None:
    jobs = [_job("long", 0, 10_000), _job("small", 10, 100)]
    config = _config({"name": "las", "arguments": {"thresholds": "1"}}, interval="60s", minLease="30m")
    got = _run(config, jobs)
    assert 1800.0 <= got["small"].first_start <= 1870.0


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"minLease": "soon"}, "minLease"),
        ({"starvationFactor": -1}, "starvationFactor"),
        ({"lease": 1}, "lease"),
    ],
)
def test_bad_arguments_are_refused_with_their_path(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        _config({"name": "las"}, **args)
    assert field in str(err.value)


def test_mode_quota_refuses_per_queue() -> None:
    with pytest.raises(ConfigError, match="perQueue"):
        _config({"name": "las"}, actions="timeslice", mode="quota", perQueue=True)
    assert _config({"name": "las"}, actions="timeslice", mode="quota").actions
