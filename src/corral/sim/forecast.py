"""Expected start times for waiting podgroups: a short simulation of the current state with no new
arrivals (the ``squeue --start`` of corral).

**How.** From a cluster state (a snapshot, or the state after ``corral schedule``'s cycles), the same
scheduling core runs forward in time: a cycle now; then the clock jumps to the next expected end of a
running job, that job's pods leave the cluster, and a cycle runs again — until every waiting podgroup
has started, nothing running has a known end, or the horizon is passed. A podgroup's expected start is
the instant of the cycle in which it reached its minimum of placed pods, with its basis: the jobs whose
ends opened the room ("after ns/a and ns/b finish") and where it lands (the lowest HyperNode holding its
pods, else its node, else a node count).

Decision: a forward simulation rather than the reservation planner's arithmetic, because it answers for
every waiting gang at once with every rule of the configuration — queue order, shares, capability,
topology, preemption — exactly as the cycles would apply them; the reservation plan computes a start
for one target only and ignores the queue rules. It costs one cycle per distinct expected end before the
last waiting gang starts (``max_steps`` bounds it).

**Expected ends.** A running job ends at the start of its earliest running pod plus its expected run
time: the PodGroup's ``corral.io/expected-runtime`` annotation, else its first pod's, else the default
the configuration's ``forecast`` section names for its priority class, then for its queue, then
``defaultRuntime``. A job with none of these never ends in the plan; a gang waiting only for such jobs
gets no estimate, and says so. A job already past its expected end is taken to end now. A job started by
the plan ends that long after its start. A gang evicted by the plan (preempt, reclaim) goes back to
waiting: its pods come back Pending, as Volcano's RestartJob has it, and it is estimated again.

**Job speed** (the simulator's ``simulation.speed``, :mod:`corral.sim.speed`): an expected run time is
work, the seconds a job takes at rate 1, as a trace's duration is under the model. With the model on, the
simulator's forecast (:class:`PlanSpeed`) ends a job running when it is made at ``now`` plus its work
left (expected run time less the work it has done, every run counted) over its current rate, after the
restore it may be in; a job the plan starts ends its expected run time over the rate of the placement
the plan gave it (spread, GPU type, elastic pods: the model's rate of its running pods there). Without
the model every job runs at rate 1 from the start of its earliest running pod.

**Limits.** No new arrivals; expected run times are taken as exact; pods of other schedulers never end;
nodes never fail. The estimate is as good as the run times it is given (the simulator measures its error
on a trace: ``simulation.forecast`` in docs/simulator.md).
"""

from __future__ import annotations

import copy
import gc
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.errors import ConfigError
from corral.framework.config import Config
from corral.framework.cycle import apply_decisions, run_cycle
from corral.framework.memo import ClusterHistory
from corral.model import Cluster, Job, Task, TaskStatus
from corral.model.annotations import EXPECTED_RUNTIME
from corral.model.clock import format_time, parse_duration
from corral.plugins.baselines import expected_runtime
from corral.registry import REGISTRY

if TYPE_CHECKING:
    from corral.sim.simjob import SimJob
    from corral.sim.speed import SpeedTracker

__all__ = [
    "Estimate",
    "ForecastSettings",
    "PlanSpeed",
    "clone_cluster",
    "first_estimates",
    "forecast",
    "forecast_settings",
    "sim_forecast_every",
]

_RUNNING = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})
_NAMED = 3  # jobs named in a basis before "and N more"


@dataclass(frozen=True)
class ForecastSettings:
    """The configuration's ``forecast`` section (all durations in seconds)."""

    default_runtime: float | None = None
    queues: Mapping[str, float] | None = None
    priority_classes: Mapping[str, float] | None = None
    horizon: float = 7 * 86400.0
    max_steps: int = 500


@dataclass(frozen=True)
class Estimate:
    """One waiting podgroup's expected start (``start`` None: no estimate, ``basis`` says why)."""

    podgroup: str
    start: float | None
    basis: str
    where: str = ""

    def to_json(self, fmt: Any) -> dict[str, Any]:
        return {
            "podgroup": self.podgroup,
            "expectedStart": fmt(self.start) if self.start is not None else None,
            "basis": self.basis,
            "where": self.where,
        }


_KEYS = {"defaultRuntime", "queues", "priorityClasses", "horizon", "maxSteps"}


@dataclass(frozen=True)
class PlanSpeed:
    """The job-speed model as a forecast uses it (see the module docstring): ``rate(job)``, the rate the
    job's running pods give it where they are on the plan's cluster; ``running``, per job making
    progress when the forecast is made, ``(work done, when its progress goes on, its rate)``."""

    rate: Callable[[Job], float]
    running: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)


def plan_speed(
    tracker: SpeedTracker, active: Mapping[str, SimJob], running: set[str], now: float
) -> PlanSpeed:
    """The simulator's :class:`PlanSpeed` at ``now``: its speed tracker's rates, its running jobs'
    progress."""
    made: dict[str, tuple[float, float, float]] = {}
    for uid in running:
        sim = active[uid]
        if sim.speed is not None and sim.since is not None:
            done, goes_on = tracker.progress(sim, now)
            made[uid] = (done, goes_on, sim.speed.rate)
    return PlanSpeed(lambda job: tracker.placement_of(job, active[job.uid].gpus)[0], made)


def forecast_settings(raw: Any, file: str = "") -> ForecastSettings:
    """The ``forecast`` section of a configuration, checked: durations as ``90s``, ``4h``, ``2d``."""
    if raw is None:
        return ForecastSettings()
    if not isinstance(raw, Mapping):
        raise ConfigError("expected a mapping (forecast settings)", file=file, field="forecast")
    unknown = sorted(set(map(str, raw)) - _KEYS)
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r} (allowed: {', '.join(sorted(_KEYS))})", file=file, field="forecast"
        )

    def duration(value: Any, where: str) -> float:
        try:
            seconds = parse_duration(value)
        except Exception:  # noqa: BLE001 - InputError, ValueError: one message either way
            raise ConfigError(
                f"expected a duration (e.g. 90s, 4h, 2d), got {value!r}", file=file, field=where
            ) from None
        if not seconds > 0 or not math.isfinite(seconds):
            raise ConfigError(f"expected a positive duration, got {value!r}", file=file, field=where)
        return seconds

    def table(key: str) -> dict[str, float] | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ConfigError("expected a mapping of name to duration", file=file, field=f"forecast.{key}")
        return {str(k): duration(v, f"forecast.{key}.{k}") for k, v in value.items()}

    steps = raw.get("maxSteps", 500)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 100_000:
        raise ConfigError(
            f"expected an integer from 1 to 100000, got {steps!r}", file=file, field="forecast.maxSteps"
        )
    default = raw.get("defaultRuntime")
    return ForecastSettings(
        default_runtime=None if default is None else duration(default, "forecast.defaultRuntime"),
        queues=table("queues"),
        priority_classes=table("priorityClasses"),
        horizon=duration(raw.get("horizon", "7d"), "forecast.horizon"),
        max_steps=steps,
    )


def runtime_of(job: Job, settings: ForecastSettings) -> float | None:
    """The job's expected run time: annotations first, then the configured defaults (see module doc)."""
    seconds = expected_runtime(job)
    if seconds is not None:
        return seconds
    for table, key in ((settings.priority_classes, job.priority_class), (settings.queues, job.queue)):
        if table and key in table:
            return table[key]
    return settings.default_runtime


def waiting_jobs(cluster: Cluster) -> list[Job]:
    """The podgroups still below their minimum with pods corral places (those a forecast is for)."""
    return [
        j
        for j in cluster.jobs.values()
        if any(t.managed and t.status in (TaskStatus.PENDING, TaskStatus.PIPELINED) for t in j.tasks)
        and j.ready_count() < j.min_member
    ]


class _Plan:
    """The forward run's state: the cluster, the expected ends, and what it has found so far."""

    def __init__(
        self,
        cluster: Cluster,
        config: Config,
        now: float,
        settings: ForecastSettings,
        speed: PlanSpeed | None = None,
    ) -> None:
        self.cluster, self.config, self.now, self.settings = cluster, config, now, settings
        self.speed = speed
        # the progress of the jobs running when the forecast is made: used once (a job the plan stops
        # and starts again runs its whole expected time, as without the model)
        self.progress = dict(speed.running) if speed is not None else {}
        self.ends: dict[str, float] = {}
        self.unknown: set[str] = set()  # running jobs with no expected end
        self.found: dict[str, Estimate] = {}
        self.reasons: dict[str, str] = {}
        # every change between the plan's cycles is reported to its history: the job index stays kept
        self.history = ClusterHistory(tracked=True)
        for job in cluster.jobs.values():
            self._expect_end(job, now)

    def _expect_end(self, job: Job, now: float) -> None:
        running = [t for t in job.tasks if t.status in _RUNNING]
        if not running or job.ready_count() < job.min_member:
            return
        seconds = runtime_of(job, self.settings)
        if seconds is None:
            self.unknown.add(job.uid)
            return
        started = min((t.start_time for t in running if t.start_time is not None), default=now)
        if self.speed is None:
            self.ends[job.uid] = max(started + seconds, now)
            return
        known = self.progress.pop(job.uid, None)
        if known is not None:
            done, goes_on, rate = known
            seconds, started = max(seconds - done, 0.0), max(goes_on, now)
        else:
            rate = self.speed.rate(job)
        if not rate > 0:
            self.unknown.add(job.uid)
            return
        self.ends[job.uid] = max(started + seconds / rate, now)

    def cycle(self, at: float, number: int, after: list[str], waiting: list[Job]) -> None:
        decisions = run_cycle(self.cluster, self.config, REGISTRY, at, number, history=self.history)
        apply_decisions(self.cluster, decisions, at, remove_evicted=False)
        for u in decisions.unschedulable:
            self.reasons[u.podgroup] = u.reason
        if decisions.evictions:  # a broken gang goes back to waiting, its pods Pending again
            by_key = {t.key: t for t in self.cluster.tasks.values()}
            for e in decisions.evictions:
                task = by_key.get(e.pod)
                if task is not None and task.status is TaskStatus.RELEASING:
                    self._requeue(task)
        for job in waiting:
            if job.uid not in self.found and job.ready_count() >= job.min_member:
                self.found[job.uid] = Estimate(
                    job.uid, at, _basis(after, at == self.now), _where(self.cluster, job)
                )
                self._expect_end(job, at)

    def _requeue(self, task: Task) -> None:
        self.cluster.charge(task, -1)
        task.status, task.node, task.nominated, task.start_time = TaskStatus.PENDING, -1, -1, None
        job = task.job
        self.history.changed(job.uid)
        if job.ready_count() < job.min_member:
            self.ends.pop(job.uid, None)
            self.found.pop(job.uid, None)

    def finish(self, uids: list[str]) -> None:
        """The jobs ``uids`` end: their pods leave the cluster (as the simulator's completions)."""
        cluster = self.cluster
        for uid in uids:
            job = cluster.jobs.pop(uid, None)
            self.ends.pop(uid, None)
            if job is None:
                continue
            for task in job.tasks:
                if task.status in (
                    TaskStatus.ALLOCATED,
                    TaskStatus.BOUND,
                    TaskStatus.RUNNING,
                    TaskStatus.RELEASING,
                ):
                    cluster.charge(task, -1)
                task.status = TaskStatus.SUCCEEDED
                cluster.tasks.pop(task.uid, None)
            self.history.changed(uid)


def forecast(
    cluster: Cluster,
    config: Config,
    now: float,
    settings: ForecastSettings | None = None,
    budget: float | None = None,
    speed: PlanSpeed | None = None,
) -> list[Estimate]:
    """An :class:`Estimate` for every waiting podgroup of ``cluster`` (by name), from a forward run of
    ``config`` starting at ``now``. The cluster is changed: pass one the caller no longer needs.

    ``budget`` (seconds of wall time, ``corral run --forecast-budget``): the run stops after the first
    planned cycle that ends past it; the podgroups not started by then get no estimate, and their basis
    says how far the plan got (a time budget bounds the cost on a large backlog, as ``maxSteps`` does).
    ``speed``: the simulator's job-speed model (see the module docstring); None: every job at rate 1."""
    settings = settings or ForecastSettings()
    deadline = None if budget is None else time.monotonic() + budget
    waiting = waiting_jobs(cluster)
    if not waiting:
        return []
    plan = _Plan(cluster, config, now, settings, speed)
    at, stopped = now, ""
    after = sorted(u for u, end in plan.ends.items() if end <= now)  # overdue: they end now
    plan.finish(after)
    for step in range(1, settings.max_steps + 1):
        plan.cycle(at, step, after, waiting)
        if all(j.uid in plan.found for j in waiting):
            break
        if deadline is not None and time.monotonic() > deadline:
            stopped = f"the forecast's time budget of {budget:g} s ran out, planned up to {format_time(at)}"
            break
        if not plan.ends:
            stopped = (
                "nothing running has an expected end" + _unknown_hint(plan.unknown)
                if plan.unknown
                else "it does not start even once every running job has finished"
            )
            break
        at = min(plan.ends.values())
        if at - now > settings.horizon:
            stopped = f"not within the forecast horizon of {_span(settings.horizon)}"
            break
        after = sorted(u for u, end in plan.ends.items() if end <= at)
        plan.finish(after)
    else:
        stopped = f"not within {settings.max_steps} forecast steps (forecast.maxSteps)"
    out = []
    for job in sorted(waiting, key=lambda j: j.uid):
        got = plan.found.get(job.uid)
        if got is None and job.invalid_reason:
            got = Estimate(job.uid, None, f"no estimate: it cannot run ({job.invalid_reason})")
        elif got is None:
            why = stopped or "did not start in the forecast"
            last = plan.reasons.get(job.uid)
            got = Estimate(job.uid, None, f"no estimate: {why}" + (f"; waiting: {last}" if last else ""))
        out.append(got)
    return out


def first_estimates(
    cluster: Cluster,
    config: Config,
    now: float,
    into: dict[str, tuple[float, float]],
    speed: PlanSpeed | None = None,
) -> None:
    """The simulator's forecast (``simulation.forecast.every``): a forecast of a copy of ``cluster``
    made at ``now`` (``speed``: with the simulator's job-speed model); each waiting job not yet in
    ``into`` gets ``(expected start, now)`` there."""
    if all(j.uid in into for j in waiting_jobs(cluster)):
        return
    settings = forecast_settings(config.forecast, config.source)
    for e in forecast(clone_cluster(cluster), config, now, settings, speed=speed):
        if e.start is not None and e.podgroup not in into:
            into[e.podgroup] = (e.start, now)


def clone_cluster(cluster: Cluster) -> Cluster:
    """A copy the forecast may change (the forecast keeps its own history of its cycles). The garbage collector is
    paused meanwhile, as the snapshot loader's build does: a copy frees nothing, and the collections it
    would trigger cost as much as the copy itself (measured at 50,000 pods: 2.7 s of CPU, 1.4 s paused)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        clone = copy.deepcopy(cluster)
    finally:
        if collecting:
            gc.enable()
    return clone


def sim_forecast_every(simulation: Any, file: str = "") -> float | None:
    """``simulation.forecast.every`` of a configuration (a duration), or None when not asked for."""
    section = simulation.get("forecast") if isinstance(simulation, Mapping) else None
    if section is None:
        return None
    if not isinstance(section, Mapping) or set(map(str, section)) - {"every"}:
        raise ConfigError(
            "expected a mapping with 'every' (a duration)", file=file, field="simulation.forecast"
        )
    try:
        seconds = parse_duration(section.get("every"))
    except Exception:  # noqa: BLE001 - InputError, ValueError: one message either way
        seconds = -1.0
    if not 0 < seconds < math.inf:
        raise ConfigError(
            f"expected a positive duration (e.g. 1h), got {section.get('every')!r}",
            file=file,
            field="simulation.forecast.every",
        )
    return seconds


def _basis(after: list[str], at_once: bool) -> str:
    if at_once and not after:
        return "fits now"
    if not after:
        return "after the plan's earlier starts"
    if len(after) == 1:
        return f"after {after[0]} finishes" + (" (past its expected end)" if at_once else "")
    return f"after {_listed(after)} finish" + (" (past their expected end)" if at_once else "")


def _listed(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``, ``a, b, c and 2 more``."""
    if len(names) > _NAMED:
        return f"{', '.join(names[:_NAMED])} and {len(names) - _NAMED} more"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _where(cluster: Cluster, job: Job) -> str:
    rows = sorted(
        {t.node for t in job.tasks if t.node >= 0 and t.status in (TaskStatus.ALLOCATED, *_RUNNING)}
    )
    if not rows:
        return ""
    names = cluster.nodes.names
    if len(rows) == 1:
        return names[rows[0]]
    tree = cluster.hypernodes
    tier = tree.lca_tier(np.array(rows)) if tree else None
    if tier is not None:
        for hn in tree.domains(tier):
            if hn.mask[rows].all():
                return hn.name
    return f"{len(rows)} nodes"


def _unknown_hint(unknown: set[str]) -> str:
    if not unknown:
        return ""
    return f" ({_listed(sorted(unknown))} run with no expected runtime: set {EXPECTED_RUNTIME} or forecast.defaultRuntime)"


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
