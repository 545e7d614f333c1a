"""The simulator's parts behind their own doors: the metrics observer the engine calls (sim/metrics.py,
``RunMetrics``), the cycle plan (sim/cycle_clock.py, ``CycleClock``) and the step's dispatch table."""

from __future__ import annotations

from typing import Any

from corral.framework.config import parse_config
from corral.registry import REGISTRY
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.cycle_clock import BEAT, FOLLOW, STALL_CYCLES, CycleClock
from corral.sim.engine import Engine, SimOptions
from corral.sim.jobspec import GPU, JobSpec, RoleSpec

HOOKS = ("submitted", "started", "evicted", "stopped", "completed")


def _job(name: str, submit: float, duration: float, gpus: int = 8) -> JobSpec:
    role = RoleSpec("", 1, {GPU: gpus, "cpu": 1.0, "memory": 2.0**30})
    return JobSpec(name, submit, duration, "default", (role,), source=f"t {name}")


def _engine(jobs: list[JobSpec], **options: Any) -> Engine:
    cluster = from_spec(ClusterSpec((NodeShape("n", 1, gpus=8),))).instantiate(j.queue for j in jobs)
    config = parse_config({"actions": "enqueue, allocate"}, REGISTRY, "t.yaml")
    return Engine(cluster, jobs, config, options=SimOptions(schedule_period=10.0, **options))


def _record_hooks(engine: Engine) -> list[tuple[float, str, str]]:
    """Every hook call of the engine's observer as (time, hook, job), the hooks still doing their work."""
    calls: list[tuple[float, str, str]] = []
    for hook in HOOKS:
        real = getattr(engine.metrics, hook)

        def spy(sim: Any, *rest: Any, _hook: str = hook, _real: Any = real) -> None:
            calls.append((engine.now, _hook, sim.spec.name))
            _real(sim, *rest)

        setattr(engine.metrics, hook, spy)
    return calls


def test_the_engine_tells_its_observer_what_happens_to_each_job() -> None:
    engine = _engine([_job("a", 0, 100), _job("b", 5, 100)])
    engine.evict(50, ["a"])  # a restarts from nothing (no checkpoints): 50 s lost
    calls = _record_hooks(engine)
    result = engine.run()
    assert [c for c in calls if c[2] == "a"] == [
        (0.0, "submitted", "a"),
        (0.0, "started", "a"),
        (50.0, "evicted", "a"),
        (50.0, "stopped", "a"),
        (50.0, "started", "a"),  # its pod leaves at once and the cycle at 50 s places it again
        (150.0, "completed", "a"),
    ]
    assert [c[1] for c in calls if c[2] == "b"] == ["submitted", "started", "completed"]
    # what the observer counted is what the result shows, and the book ends with every job done
    assert engine.metrics.evictions == result.cluster[-1].evictions == 1
    assert engine.metrics.restarts == result.cluster[-1].restarts == 1
    assert sorted(engine.book.done) == ["default/a", "default/b"] and not engine.book.active
    assert engine.metrics.demand == 0.0


def test_an_observer_that_only_reads_leaves_the_run_as_it_was() -> None:
    plain = _engine([_job("a", 0, 100), _job("b", 5, 100, gpus=4)]).run()
    watched = _engine([_job("a", 0, 100), _job("b", 5, 100, gpus=4)])
    calls = _record_hooks(watched)
    got = watched.run()
    assert calls and got.jobs == plain.jobs and got.cluster == plain.cluster and got.queues == plain.queues


def test_step_dispatches_each_kind_to_its_handler() -> None:
    engine = _engine([_job("a", 0, 100)])
    seen: list[Any] = []
    engine._handlers = [lambda payload, k=k: seen.append((k, payload)) for k in range(len(engine._handlers))]
    assert engine.step()  # the submission of job 0 (the sample at 0 s comes after it)
    assert seen == [(5, 0)]  # SUBMIT is kind 5, its payload the job's index


# ---------------------------------------------------------------------------------------- the clock


def test_a_change_plans_one_cycle_at_the_next_period_boundary() -> None:
    clock = CycleClock(10.0, None)
    assert clock.wake(13.0, waiting=True) == 20.0
    assert clock.wake(14.0, waiting=True) is None  # one is planned already
    assert clock.begin(20.0, None, waiting=True)
    assert clock.end(20.0, bound=True, changed=False, follow=False, waiting=True) == []
    assert not clock.begin(20.0, None, waiting=True)  # nothing changed since: skipped
    assert clock.wake(20.0, waiting=True) == 30.0  # never the last cycle's instant again
    assert CycleClock(10.0, None).wake(13.0, waiting=False) is None  # nothing waits


def test_a_follow_up_runs_once_per_instant_and_the_heartbeat_once_per_beat() -> None:
    clock = CycleClock(10.0, 60.0)
    clock.wake(0.0, waiting=True)
    assert clock.begin(0.0, None, waiting=True)
    # the follow-up at once, beside the next period's cycle (planned once); the heartbeat is planned
    first = clock.end(0.0, bound=True, changed=True, follow=True, waiting=True)
    assert first == [(0.0, FOLLOW), (10.0, None), (60.0, BEAT)]
    assert clock.begin(0.0, FOLLOW, waiting=True)  # the follow-up: the first cycle changed things
    # a second follow-up at the same instant is refused; the next cycle and the heartbeat are planned
    assert clock.end(0.0, bound=True, changed=True, follow=True, waiting=True) == []
    assert clock.cycle_at == 10.0
    assert clock.begin(10.0, None, waiting=True)
    assert clock.end(10.0, bound=False, changed=False, follow=False, waiting=True) == []
    assert clock.begin(60.0, BEAT, waiting=True)  # a beat runs a cycle though nothing changed
    assert clock.end(60.0, bound=False, changed=False, follow=False, waiting=True) == [(120.0, BEAT)]


def test_a_policy_that_changes_state_without_binding_stalls_the_clock() -> None:
    clock = CycleClock(10.0, 30.0)
    now = 0.0
    for _ in range(STALL_CYCLES):
        assert clock.stalled is None
        clock.wake(now, waiting=True)
        assert clock.begin(clock.cycle_at or now, None, waiting=True)
        now = clock.last
        planned = clock.end(now, bound=False, changed=True, follow=False, waiting=True)
        clock.cycle_at = clock.beat_at = None  # as if the planned events ran without a cycle
        assert planned or clock.stalled is not None
    assert clock.stalled == now
    assert clock.wake(now + 1, waiting=True) is None
    clock.event()  # another event does not restart a stalled policy's cycles
    assert clock.wake(now + 1, waiting=True) is None
