"""``consolidate`` in the simulator: a move restarts the moved job (its progress since the last
checkpoint lost, counted apart as GPU-hours lost to moves), the report counts the moves, and the gang
it made room for starts earlier than without it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from corral.framework.config import parse_config
from corral.registry import REGISTRY
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.engine import Engine, SimOptions
from corral.sim.jobspec import GPU, JobSpec, RoleSpec
from corral.sim.report import summarize


def _config(actions: str) -> Any:
    return parse_config(
        {
            "actions": actions,
            "tiers": [
                {
                    "plugins": [
                        {"name": "priority"},
                        {"name": "gang", "enablePreemptable": False},
                        {"name": "conformance"},
                    ]
                },
                {"plugins": [{"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}]},
            ],
        },
        REGISTRY,
        "consolidate.yaml",
    )


def _job(name: str, submit: float, duration: float, gpus: int) -> JobSpec:
    role = RoleSpec("", 1, {GPU: gpus, "cpu": 1.0, "memory": 2.0**30})
    return JobSpec(name, submit, duration, "default", (role,), source=f"t {name}")


def _run(actions: str) -> tuple[dict[str, Any], dict[str, Any]]:
    # two 4-GPU jobs land on two 8-GPU nodes (node order spreads them); the 8-GPU job fits only once
    # one of them moves (or ends, after 10 hours)
    jobs = [_job("a", 0, 36000, 4), _job("b", 1, 36000, 4), _job("big", 600, 600, 8)]
    cluster = from_spec(ClusterSpec((NodeShape("n", 2, gpus=8),))).instantiate(j.queue for j in jobs)
    result = Engine(cluster, jobs, _config(actions), options=SimOptions(schedule_period=10.0)).run()
    return {r.job: r for r in result.jobs}, summarize(result)


def test_a_move_starts_the_gang_early_and_the_report_counts_what_it_cost() -> None:
    without, plain = _run("allocate")
    moved, report = _run("allocate, consolidate")
    assert without["big"].first_start >= 36000  # waits for a job to end
    assert moved["big"].first_start < 1000  # starts once one pod has moved
    assert plain["moves"] == 0 and report["moves"] == 1
    assert sum(r.moves for r in moved.values()) == 1
    victim = next(r for r in moved.values() if r.moves)
    assert victim.restarts == 1 and victim.gpu_hours_lost_to_moves > 0.0
    assert report["gpu_hours_lost_to_moves"] == pytest.approx(victim.gpu_hours_lost_to_moves, rel=1e-5)
    assert report["gpu_hours_lost"] >= report["gpu_hours_lost_to_moves"]


def test_a_moved_pod_keeps_its_new_node_until_it_is_placed_there() -> None:
    # the move of the 600 s cycle nominates the moved pod on the other node; while it takes 30 s to
    # leave, a 4-GPU job of higher priority arrives (605 s) that would fit in that room: the nomination
    # holds it for the moved pod, which restarts at once instead of waiting for a job to end
    jobs = [
        _job("a", 0, 36000, 4),
        _job("b", 1, 36000, 4),
        _job("big", 600, 600, 8),
        dataclasses.replace(_job("c", 605, 36000, 4), priority=100),
    ]
    cluster = from_spec(ClusterSpec((NodeShape("n", 2, gpus=8),))).instantiate(j.queue for j in jobs)
    options = SimOptions(schedule_period=10.0, eviction_grace=30.0)
    result = Engine(cluster, jobs, _config("allocate, consolidate"), options=options).run()
    got = {r.job: r for r in result.jobs}
    (moved,) = [r for r in got.values() if r.moves]
    assert got["big"].first_start is not None and got["big"].first_start < 700
    assert moved.end is not None and moved.end < 36000 + 700  # restarted by 700 s, not after c
    assert got["c"].first_start is not None and got["c"].first_start >= (got["big"].end or 0)  # not before
