"""Hand-checked timelines of the baseline policies (``fifo``, ``sjf``, ``srtf``, ``las``) in the simulator,
each against the default (greedy) configuration on the same three jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.errors import ConfigError
from corral.framework.config import load_config_file, parse_config
from corral.model.annotations import EXPECTED_RUNTIME
from corral.registry import REGISTRY
from corral.sim.jobspec import GPU, JobSpec, RoleSpec
from tests.sim.test_engine import by_name, engine


def job(name: str, submit: float, duration: float, gpus: float, estimate: float | None = None) -> JobSpec:
    notes = {} if estimate is None else {EXPECTED_RUNTIME: f"{estimate:g}s"}
    return JobSpec(
        name,
        submit,
        duration,
        "default",
        (RoleSpec("", 1, {GPU: gpus, "cpu": 1.0}),),
        source=f"test row {name}",
        annotations=notes,
    )


def config(*first: str, **args):
    """The default shape with the given baseline plugins at the head of the first tier."""
    head = [{"name": n, **({"arguments": args[n]} if n in args else {})} for n in first]
    return parse_config(
        {
            "actions": "enqueue, allocate, backfill",
            "tiers": [
                {
                    "plugins": [
                        *head,
                        {"name": "priority"},
                        {"name": "gang", "enablePreemptable": False},
                        {"name": "conformance"},
                    ]
                },
                {
                    "plugins": [
                        {"name": "drf", "enablePreemptable": False},
                        {"name": "predicates"},
                        {"name": "proportion"},
                        {"name": "nodeorder"},
                    ]
                },
            ],
        },
        REGISTRY,
        "test",
    )


def starts(result, names="abc"):
    r = by_name(result)
    return [(r[n].first_start, r[n].end) for n in names]


def test_strict_fifo_blocks_behind_the_head():
    # a holds 6 of 8 GPUs until 100. b (8 GPUs) cannot start; greedy lets c (2 GPUs) pass it at the
    # cycle at 10, strict FIFO keeps c behind b until b has run (100-150).
    jobs = [job("a", 0, 100, 6), job("b", 1, 50, 8), job("c", 2, 30, 2)]
    greedy = engine(jobs, nodes=1, config=config()).run()
    assert starts(greedy) == [(0, 100), (100, 150), (10, 40)]
    fifo = engine(jobs, nodes=1, config=config("fifo")).run()
    assert starts(fifo) == [(0, 100), (100, 150), (150, 180)]


def test_fifo_head_past_its_minimum_keeps_placing():
    # one job of two 4-GPU pods with minMember 1: once ready it no longer holds the line, but its
    # second pod still goes where it fits. a is strictly older than b (both wait for the cycle at 10):
    # with equal submit times FIFO would not tell them apart and gang's JobOrder would put the ready a
    # behind b for its next allocate turn (Volcano allocateResources).
    elastic = JobSpec(
        "a", 1, 100, "default", (RoleSpec("", 2, {GPU: 4, "cpu": 1.0}),), min_member=1, source="test row a"
    )
    result = engine([elastic, job("b", 2, 10, 2)], nodes=1, config=config("fifo")).run()
    r = by_name(result)
    assert r["a"].first_start == 10 and r["b"].first_start == 110
    sample = next(c for c in result.cluster if c.time == 10)
    assert sample.gpu_used == 8


def test_sjf_picks_the_short_job():
    # a runs 0-100 on the only node; b (500 s) and c (50 s) wait. Greedy takes the older, b; SJF c.
    jobs = [job("a", 0, 100, 8, 100), job("b", 1, 500, 8, 500), job("c", 2, 50, 8, 50)]
    assert starts(engine(jobs, nodes=1, config=config()).run()) == [(0, 100), (100, 600), (600, 650)]
    assert starts(engine(jobs, nodes=1, config=config("sjf")).run()) == [(0, 100), (150, 650), (100, 150)]


def test_jobs_without_estimate_go_after_those_with_one():
    jobs = [job("a", 0, 100, 8, 100), job("b", 1, 50, 8), job("c", 2, 500, 8, 500)]
    assert starts(engine(jobs, nodes=1, config=config("sjf")).run()) == [(0, 100), (600, 650), (100, 600)]


def _failure_run(cfg, jobs, **options):
    eng = engine(jobs, nodes=1, config=cfg, **options)
    eng.node_down(900, "n-000", 5)
    return eng.run()


def test_srtf_counts_the_work_already_kept():
    # a (1000 s) checkpoints every 100 s and loses its node at 900 for 5 s: it keeps 900 s of work and
    # has 100 s left. b (300 s) waits. SJF sees 1000 vs 300 and runs b first; SRTF sees 100 vs 300.
    jobs = [job("a", 0, 1000, 8, 1000), job("b", 10, 300, 8, 300)]
    sjf = _failure_run(config("sjf"), jobs, checkpoint_interval=100)
    assert starts(sjf, "ab") == [(0, 1310), (910, 1210)]
    srtf = _failure_run(config("srtf"), jobs, checkpoint_interval=100)
    assert starts(srtf, "ab") == [(0, 1010), (1010, 1310)]


def test_las_demotes_the_job_that_received_most():
    # a ran 900 s on 8 GPUs (2 GPU-hours) before its node failed: above the 1 GPU-hour threshold, it
    # is in the second queue. b (submitted later, no service yet) goes first under LAS; greedy keeps
    # the older a first.
    jobs = [job("a", 0, 1000, 8), job("b", 10, 100, 8)]
    greedy = _failure_run(config(), jobs)
    assert starts(greedy, "ab") == [(0, 1910), (1910, 2010)]
    las = _failure_run(config("las"), jobs)
    assert starts(las, "ab") == [(0, 2010), (910, 1010)]
    # with the threshold above a's 2 GPU-hours both are in the first queue: FIFO inside it.
    high = _failure_run(config("las", las={"thresholds": "3"}), jobs)
    assert starts(high, "ab") == [(0, 1910), (1910, 2010)]


@pytest.mark.parametrize("bad", ["", "x", "2,1", "0", "-1", "inf"])
def test_las_thresholds_are_checked_at_load(bad):
    with pytest.raises(ConfigError):
        config("las", las={"thresholds": bad})


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "docs" / "examples" / "baselines").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_documented_baseline_configs_load(path):
    assert load_config_file(path, REGISTRY).actions
