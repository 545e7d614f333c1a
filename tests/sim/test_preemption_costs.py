"""The preemption cost model (sim/preemption.py): a checkpoint when the scheduler stops a gang, a restore
time on every resume by job size, and the accounting researchers report (preemptions, queueing time with
every wait after a preemption, GPU-time spent restoring)."""

from __future__ import annotations

from typing import Any

import pytest

from corral.errors import ConfigError
from corral.framework.config import parse_config
from corral.registry import REGISTRY
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.engine import Engine, SimOptions
from corral.sim.jobspec import GPU, JobSpec, RoleSpec
from corral.sim.preemption import preemption_options

PREEMPT = parse_config(
    {
        "actions": "allocate, preempt",
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
    "preempt.yaml",
)


def _job(name: str, submit: float, duration: float, priority: int) -> JobSpec:
    role = RoleSpec("", 1, {GPU: 8, "cpu": 1.0, "memory": 2.0**30})
    return JobSpec(name, submit, duration, "default", (role,), priority=priority, source=f"t {name}")


def _run(**options: Any) -> dict[str, Any]:
    jobs = [_job("low", 0, 3600, 1), _job("high", 1000, 600, 100)]
    cluster = from_spec(ClusterSpec((NodeShape("n", 1, gpus=8),))).instantiate(j.queue for j in jobs)
    result = Engine(cluster, jobs, PREEMPT, options=SimOptions(schedule_period=10.0, **options)).run()
    return {r.job: r for r in result.jobs}


def test_a_preempted_job_loses_its_progress_without_a_checkpoint_and_keeps_it_with_one() -> None:
    lost, kept = _run(), _run(checkpoint_on_preempt=True)
    assert lost["low"].preemptions == kept["low"].preemptions == 1 and lost["low"].restarts == 1
    assert lost["high"].first_start == kept["high"].first_start
    # the 1,000 s it ran before the preemption are redone without the checkpoint
    assert lost["low"].jct - kept["low"].jct == pytest.approx(1000.0, abs=20.0)
    assert kept["low"].gpu_hours_lost == 0.0 and lost["low"].gpu_hours_lost > 2.0


def test_every_resume_pays_the_restore_time_of_its_size_band() -> None:
    base = _run(checkpoint_on_preempt=True)
    slow = _run(checkpoint_on_preempt=True, resume_overhead=((4.0, 10.0), (8.0, 40.0), (float("inf"), 60.0)))
    assert slow["low"].jct - base["low"].jct == pytest.approx(40.0)  # 8 GPUs: the 40 s band
    assert slow["low"].restore_gpu_hours == pytest.approx(40.0 * 8 / 3600)
    assert slow["high"].restore_gpu_hours == 0.0  # its first run restores nothing


def test_queue_time_counts_every_wait_after_a_preemption() -> None:
    rec = _run(checkpoint_on_preempt=True)["low"]
    assert rec.first_start == 0.0 and rec.wait == 0.0
    # it ran 3,600 s in all, so every other second of its JCT it waited — after being preempted
    assert rec.queue_time == pytest.approx(rec.jct - 3600.0)
    assert rec.queue_time > 600.0


def test_the_settings_are_checked() -> None:
    got = preemption_options(
        {
            "preemption": {
                "checkpoint": True,
                "resumeOverhead": [{"upToGpus": 8, "overhead": "40s"}, {"overhead": "1m"}],
            }
        }
    )
    assert got == {"checkpoint_on_preempt": True, "resume_overhead": ((8.0, 40.0), (float("inf"), 60.0))}
    assert preemption_options({}) == {}
    for bad, field in (
        ({"checkpoint": "yes"}, "simulation.preemption.checkpoint"),
        ({"resumeOverhead": [{"overhead": "soon"}]}, "simulation.preemption.resumeOverhead[0].overhead"),
        (
            {"resumeOverhead": [{"upToGpus": 8, "overhead": "1s"}, {"upToGpus": 4, "overhead": "1s"}]},
            "simulation.preemption.resumeOverhead[1].upToGpus",
        ),
        ({"restart": 1}, "simulation.preemption.restart"),
    ):
        with pytest.raises(ConfigError) as info:
            preemption_options({"preemption": bad}, "s.yaml")
        assert info.value.field == field
