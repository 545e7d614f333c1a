"""The reservation of seed 001 (plugin ``reservation``, actions ``elect``/``reserve``): configuration
rules, the pieces of the plan, the simulator's estimate model and per-job reasons. Behaviour over whole
snapshots lives in the scenario cases ``reservation_*``; the invariants in ``test_reservation_properties``."""

from __future__ import annotations

import numpy as np
import pytest

from corral.errors import ConfigError
from corral.framework.config import parse_config
from corral.framework.reservation import lock_label_value, parse_lock_nodes
from corral.registry import REGISTRY
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.engine import Engine, SimOptions
from corral.sim.estimates import EstimateModel, estimate_model
from corral.sim.jobspec import JobSpec, RoleSpec


def config(actions: str, plugin: bool = True, **args) -> dict:
    first = [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]
    if plugin:
        first.append({"name": "reservation", "arguments": args})
    return {
        "actions": actions,
        "tiers": [{"plugins": first}, {"plugins": [{"name": "predicates"}, {"name": "nodeorder"}]}],
    }


@pytest.mark.parametrize(
    "order",
    [
        "elect, enqueue, reserve, allocate, backfill",
        "enqueue, elect, allocate, backfill, reserve",
        "elect, enqueue, reserve, flow, backfill",
    ],
)
def test_both_volcano_orders_are_accepted(order: str) -> None:
    cfg = parse_config(config(order), REGISTRY, "sched.yaml")
    assert next(a.name for a in cfg.actions) in ("elect", "enqueue")


@pytest.mark.parametrize(
    "order, plugin, rule",
    [
        ("enqueue, reserve, elect, allocate", True, "reserve must come after elect"),
        ("enqueue, allocate, elect, reserve", True, "elect must come before allocate"),
        ("enqueue, flow, elect, reserve", True, "elect must come before flow"),
        ("elect, enqueue, reserve, allocate", False, "need the reservation plugin"),
        ("enqueue, reserve, allocate", True, "reserve needs elect before it"),
    ],
)
def test_impossible_orders_are_config_errors(order: str, plugin: bool, rule: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(config(order, plugin), REGISTRY, "sched.yaml")
    text = str(err.value)
    assert "sched.yaml" in text and rule in text and "actions" in text


def test_bad_arguments_name_file_and_field() -> None:
    with pytest.raises(ConfigError, match=r"sched\.yaml.*lockNodes"):
        parse_config(config("elect, reserve, allocate", lockNodes="lots"), REGISTRY, "sched.yaml")
    with pytest.raises(ConfigError, match="lockMode"):
        parse_config(config("elect, reserve, allocate", lockMode="rack"), REGISTRY, "sched.yaml")
    with pytest.raises(ConfigError, match="timeout"):
        parse_config(config("elect, reserve, allocate", timeout="soon"), REGISTRY, "sched.yaml")


def test_volcano_switches_accepted() -> None:
    raw = config("elect, reserve, allocate")
    raw["tiers"][0]["plugins"][3].update(enableTargetJob=True, enableReservedNodes=False)
    cfg = parse_config(raw, REGISTRY, "sched.yaml")
    assert cfg.plugin("reservation").switches == {"enableTargetJob": True, "enableReservedNodes": False}


def test_lock_nodes_and_label() -> None:
    assert parse_lock_nodes("", 10) == 0
    assert parse_lock_nodes("3", 10) == 3
    assert parse_lock_nodes("25%", 10) == 3
    with pytest.raises(ValueError):
        parse_lock_nodes("150%", 10)
    assert lock_label_value("team-a/big.job") == "team-a.big.job"


def test_estimate_models() -> None:
    exact = EstimateModel("exact")
    assert exact.estimate("a", 3600) == 3600
    noisy = EstimateModel("noisy", 2.0, 7)
    got = [noisy.estimate(f"job-{i}", 1000) for i in range(200)]
    assert all(500 <= g <= 2000 for g in got)
    assert min(got) < 800 and max(got) > 1250  # spread is used, both ways
    assert got == [noisy.estimate(f"job-{i}", 1000) for i in range(200)]  # same seed, same draws
    assert EstimateModel("noisy", 2.0, 8).estimate("job-0", 1000) != got[0]
    assert estimate_model({"estimates": {"model": "noisy", "spread": 3}}) == EstimateModel("noisy", 3.0, 0)
    assert estimate_model({}) is None
    for bad in ({"model": "psychic"}, {"model": "noisy", "spread": 0.5}, {"seed": -1}, {"colour": 1}):
        with pytest.raises(ConfigError, match=r"sim\.yaml.*simulation\.estimates"):
            estimate_model({"estimates": bad}, "sim.yaml")


def test_simulation_section_in_config_file() -> None:
    raw = config("elect, enqueue, reserve, allocate")
    raw["simulation"] = {"estimates": {"model": "exact"}}
    cfg = parse_config(raw, REGISTRY, "sim.yaml")
    assert estimate_model(cfg.simulation, "sim.yaml") == EstimateModel("exact")


def _jobs() -> list[JobSpec]:
    gpu = lambda n, c=1: (RoleSpec("", c, {"nvidia.com/gpu": n, "cpu": 1, "memory": 2**30}),)  # noqa: E731
    jobs = [
        JobSpec("fill-a", 0, 1000, "default", gpu(6)),
        JobSpec("fill-b", 0, 3000, "default", gpu(6)),
        JobSpec("big", 10, 500, "default", gpu(8, 2)),
    ]
    jobs += [JobSpec(f"small-{i}", 20 + 30 * i, 4000, "default", gpu(2)) for i in range(6)]
    return jobs


def _run(res_args: dict | None, estimates: EstimateModel | None):
    actions = (
        "elect, enqueue, reserve, allocate, backfill"
        if res_args is not None
        else "enqueue, allocate, backfill"
    )
    cfg = parse_config(config(actions, res_args is not None, **(res_args or {})), REGISTRY, "sim")
    tpl = from_spec(ClusterSpec((NodeShape("gpu", 2, gpus=8, cpu=32, memory="256Gi"),), name="2 x 8"))
    return Engine(
        tpl.instantiate(["default"]),
        _jobs(),
        cfg,
        options=SimOptions(schedule_period=10, estimates=estimates),
    ).run()


def test_simulator_reservation_starts_big_job_sooner_and_records_reason() -> None:
    plain = {r.job: r for r in _run(None, None).jobs}
    locked = {r.job: r for r in _run({"lockMode": "cluster", "plan": False}, None).jobs}
    assert locked["big"].wait < plain["big"].wait
    held = [r for r in locked.values() if "locked for default/" in r.reason]
    assert held, "some small job's record says a lock held it back"
    assert all(r.status == "completed" for r in locked.values())


def test_simulator_plan_backfills_only_what_ends_in_time() -> None:
    exact = {r.job: r for r in _run({"lockMode": "cluster"}, EstimateModel("exact")).jobs}
    strict = {r.job: r for r in _run({"lockMode": "cluster", "plan": False}, EstimateModel("exact")).jobs}
    # fill-a ends at 1000: the target is planned then; small jobs (4000 s) may not start before it
    assert exact["big"].first_start == strict["big"].first_start
    for name, rec in exact.items():
        if name.startswith("small"):
            assert rec.first_start >= exact["big"].first_start
    assert np.isfinite(exact["big"].wait)
