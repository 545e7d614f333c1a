"""When ``timeslice`` needs the simulator's heartbeat (``ranks_move_with_clock``, issue 29): only where the
clock alone can change its answer — ``las``, a minimum lease, starvation promotion, ``minruntime``, an
order with no key to look into. Under ``srtf`` alone time between events changes nothing, so no
heartbeat cycle runs, and Lucid's pass decides exactly as with one. Under ``las`` alone the heartbeat
skips the interval boundaries before the next threshold crossing (``clock_horizon``)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from corral.actions.common.timeslice_clock import clock_dependence
from corral.actions.timeslice import ranks_move_with_clock
from corral.framework.config import load_config_file, parse_config
from corral.registry import REGISTRY
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.cycle_clock import BEAT, CycleClock
from corral.sim.engine import Engine, SimOptions
from corral.sim.estimates import estimate_model
from corral.sim.jobspec import GPU, JobSpec, RoleSpec

BASELINES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "baselines"
EXACT = estimate_model({"estimates": {"model": "exact"}})


def _config(order: list[dict[str, Any]], actions: str = "allocate, timeslice, backfill", **args: Any) -> Any:
    raw: dict[str, Any] = {
        "actions": actions,
        "tiers": [
            [*order, {"name": "priority"}, {"name": "gang", "enablePreemptable": False}],
            [{"name": "predicates"}, {"name": "binpack"}],
        ],
    }
    raw["tiers"] = [{"plugins": tier} for tier in raw["tiers"]]
    if args:
        raw["configurations"] = [{"name": "timeslice", "arguments": args}]
    return parse_config(raw, REGISTRY, "timeslice.yaml")


def _moves(config: Any) -> bool:
    action = next(a for a in config.actions if a.name == "timeslice")
    return ranks_move_with_clock(action.args, config, REGISTRY)


SRTF = {"name": "srtf"}
LAS = {"name": "las", "arguments": {"thresholds": "1"}}


@pytest.mark.parametrize(
    ("order", "args", "moves"),
    [
        ([SRTF], {}, False),  # a running job's remaining time only falls
        ([{"name": "drf"}, SRTF], {}, False),  # drf's key moves with the shares, not the clock
        ([LAS], {}, True),  # attained service crosses a threshold
        ([{**LAS, "enableJobOrder": False}, SRTF], {}, False),  # las orders nothing here
        ([SRTF], {"minLease": "5m"}, True),  # a lease ends
        ([SRTF], {"starvationFactor": 2}, True),
        ([SRTF, {"name": "minruntime", "arguments": {"defaultPreemptMinRuntime": "5m"}}], {}, True),
        ([SRTF, {"name": "reservation"}], {}, True),  # an order without a key to look into
    ],
)
def test_the_clock_moves_the_answer_only_where_it_can(
    order: list[dict[str, Any]], args: dict[str, Any], moves: bool
) -> None:
    assert _moves(_config(order, **args)) is moves


@pytest.mark.parametrize(
    ("order", "args", "dependence"),
    [
        ([SRTF], {}, "none"),
        ([LAS], {}, "horizon"),  # las names the instant of its next threshold crossing
        ([LAS], {"minLease": "5m"}, "any"),
        ([LAS, {"name": "minruntime", "arguments": {"defaultPreemptMinRuntime": "5m"}}], {}, "any"),
        ([LAS, {"name": "reservation"}], {}, "any"),
    ],
)
def test_how_the_clock_moves_the_answer(
    order: list[dict[str, Any]], args: dict[str, Any], dependence: str
) -> None:
    config = _config(order, **args)
    action = next(a for a in config.actions if a.name == "timeslice")
    assert (
        clock_dependence(action.args.min_lease, action.args.starvation_factor, config, REGISTRY) == dependence
    )


@pytest.mark.parametrize(
    ("file", "moves"),
    [
        ("srtf.yaml", False),
        ("srtf-lucid.yaml", False),
        ("tiresias.yaml", True),
        ("tiresias-lucid.yaml", True),
    ],
)
def test_the_shipped_baselines(file: str, moves: bool) -> None:
    assert _moves(load_config_file(BASELINES / file, REGISTRY)) is moves


def _job(name: str, submit: float, duration: float, gpus: int = 8) -> JobSpec:
    role = RoleSpec("", 1, {GPU: gpus, "cpu": 1.0, "memory": 2.0**30})
    return JobSpec(name, submit, duration, "default", (role,), source=f"t {name}")


def _engine(config: Any, jobs: list[JobSpec], nodes: int = 1, **options: Any) -> Engine:
    cluster = from_spec(ClusterSpec((NodeShape("n", nodes, gpus=8),))).instantiate(j.queue for j in jobs)
    opts = SimOptions(schedule_period=10.0, estimates=EXACT, checkpoint_on_preempt=True, **options)
    return Engine(cluster, jobs, config, options=opts)


def test_srtf_alone_runs_no_heartbeat_cycle() -> None:
    # "later" waits 10,000 s behind "first" with nothing happening: with a heartbeat every 60 s the wait
    # costs about 166 cycles that decide nothing; without one, a cycle at each event
    jobs = [_job("first", 0, 10_000), _job("later", 5, 20_000)]
    quiet = _engine(_config([SRTF]), jobs)
    beat = _engine(_config([SRTF]), jobs, heartbeat=60.0)
    got, forced = quiet.run(), beat.run()
    assert quiet._clock.beat is None and quiet.cycles < 10 < 150 < beat.cycles
    assert [(r.job, r.first_start, r.end) for r in got.jobs] == [
        (r.job, r.first_start, r.end) for r in forced.jobs
    ]


def test_under_srtf_a_minimum_lease_still_brings_the_cycle_that_ends_it() -> None:
    # "short" outranks "long" at once but the lease holds "long" for 30 minutes; no event follows, so
    # only a heartbeat's cycle sees the lease end
    jobs = [_job("long", 0, 10_000), _job("short", 10, 100)]
    got = {r.job: r for r in _engine(_config([SRTF], minLease="30m", interval="60s"), jobs).run().jobs}
    assert 1800.0 <= got["short"].first_start <= 1870.0 and got["long"].preemptions == 1


def _workload(seed: int) -> list[JobSpec]:
    rng = random.Random(seed)
    return [
        _job(f"j{i:02d}", rng.randrange(0, 4000, 7), rng.randrange(60, 3000), rng.choice((1, 2, 4, 8)))
        for i in range(40)
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lucids_srtf_decides_the_same_without_the_heartbeat(seed: int) -> None:
    config = load_config_file(BASELINES / "srtf-lucid.yaml", REGISTRY)
    jobs = _workload(seed)
    quiet = _engine(config, jobs, nodes=2, resume_overhead=((8.0, 40.0), (float("inf"), 60.0)))
    beat = _engine(config, jobs, nodes=2, resume_overhead=((8.0, 40.0), (float("inf"), 60.0)), heartbeat=60.0)
    got, forced = quiet.run(), beat.run()
    assert sum(r.preemptions for r in got.jobs) > 0 and quiet.cycles < beat.cycles
    assert [(r.job, r.first_start, r.end, r.preemptions) for r in got.jobs] == [
        (r.job, r.first_start, r.end, r.preemptions) for r in forced.jobs
    ]


def _beats(clock: CycleClock, now: float, horizon: float | None) -> list[tuple[float, str | None]]:
    return list(clock.end(now, bound=False, changed=False, follow=False, waiting=True, horizon=horizon))


def test_the_heartbeat_keeps_its_grid_and_skips_the_boundaries_before_the_horizon() -> None:
    clock = CycleClock(10.0, 60.0)
    assert _beats(clock, 20.0, None) == [(80.0, BEAT)]  # every interval from the first planning cycle
    assert _beats(clock, 30.0, 300.0) == [(320.0, BEAT)]  # moved to the grid's first boundary after 300
    assert clock.begin(80.0, BEAT, True) is False  # the heartbeat planned for 80 was moved: passed over
    assert _beats(clock, 90.0, 100.0) == [(140.0, BEAT)]  # an earlier horizon brings it back, on the grid
    assert _beats(clock, 100.0, float("inf")) == [] and clock.beat_at is None  # nothing but an event
    assert clock.begin(140.0, BEAT, True) is False


def test_under_las_the_crossing_is_seen_at_the_same_boundary_with_far_fewer_cycles() -> None:
    # "long" crosses 1 GPU-hour at 450 s while "small" waits; nothing else happens until 10,000 s
    jobs = [_job("long", 0, 10_000), _job("small", 10, 100)]
    config = _config([LAS], interval="60s")
    horizon = _engine(config, jobs)
    every = _engine(config, jobs, heartbeat=60.0)
    got, forced = horizon.run(), every.run()
    assert [(r.job, r.first_start, r.end) for r in got.jobs] == [
        (r.job, r.first_start, r.end) for r in forced.jobs
    ]
    assert 450.0 <= {r.job: r for r in got.jobs}["small"].first_start <= 520.0
    assert horizon.cycles < every.cycles


def test_the_shipped_tiresias_does_not_swap_two_jobs_of_equal_rank() -> None:
    # two 8-GPU jobs submitted together on one 8-GPU node: once both have passed 5 GPU-hours they tie on
    # the las queue and the arrival; gang's "not ready first" (its JobOrder) would rank the waiting one
    # first at every cycle and swap them; tiresias.yaml ranks by the order alone (enableJobOrder false)
    shipped = load_config_file(BASELINES / "tiresias.yaml", REGISTRY)
    jobs = [_job("a", 0, 5_000), _job("b", 0, 5_000)]
    opts = {"resume_overhead": ((8.0, 40.0), (float("inf"), 60.0))}
    got = _engine(shipped, jobs, **opts).run()
    assert sum(r.preemptions for r in got.jobs) <= 2 and all(r.end is not None for r in got.jobs)
    swapping = _config([{"name": "las", "arguments": {"thresholds": "5"}}], interval="60s")
    engine = _engine(swapping, jobs, until=3_000.0, **opts)
    swapped = engine.run().jobs  # swapping at every cycle: neither job would ever end
    assert sum(r.preemptions for r in swapped) > 20
    # each stop's follow-up leaves the next period's cycle planned once: two cycles a period, where
    # the follow-ups used to pile cycles up at one instant (45,000 cycles in these 3,000 s)
    assert engine.cycles <= 2 * 300 + 2
