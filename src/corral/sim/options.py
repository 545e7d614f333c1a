"""How the simulated world behaves (:class:`SimOptions`): what the engine (:mod:`corral.sim.engine`)
runs under and its metrics (:mod:`corral.sim.metrics`) report against."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral.errors import InputError

if TYPE_CHECKING:
    from corral.sim.estimates import EstimateModel
    from corral.sim.speed import SpeedModel

__all__ = ["RESTART_POLICIES", "SimOptions"]

#: ``job``: a broken gang stops all its pods and is rescheduled whole (Volcano's RestartJob policy);
#: ``pods``: only the evicted pods are rescheduled while the survivors wait on their nodes.
RESTART_POLICIES = ("job", "pods")


@dataclass(frozen=True)
class SimOptions:
    """How the simulated world behaves. Times in simulated seconds. ``sample_period`` None picks
    1/500 of the run's span (at least ``schedule_period``)."""

    schedule_period: float = 10.0
    startup_delay: float = 0.0
    eviction_grace: float = 0.0
    checkpoint_interval: float | None = None
    until: float | None = None
    sample_period: float | None = None
    heartbeat: float | None = None
    restart_policy: str = "job"
    namespace: str = "default"
    estimates: EstimateModel | None = None  # writes corral.io/expected-runtime
    #: the scheduler's evictions (preempt, reclaim, ...) checkpoint the gang they stop: no progress is lost
    checkpoint_on_preempt: bool = False
    #: a job running again after a stop first spends this long restoring: ((up to GPUs, seconds), ...)
    resume_overhead: tuple[tuple[float, float], ...] = ()
    forecast_every: float | None = None  # seconds between expected-start forecasts (sim/forecast.py)
    speed: SpeedModel | None = None  # the job-speed model (sim/speed.py); None: every job at rate 1
    #: how jobs submitted at one instant are ordered (``simulation.ties``; sim/workload.py ``tie_times``):
    #: ``name`` (names as text), ``natural`` (numbers in names as numbers) or ``shuffle`` (from ``tie_seed``)
    ties: str = "name"
    tie_seed: int = 0

    def __post_init__(self) -> None:
        if self.ties not in ("name", "natural", "shuffle"):
            raise InputError(
                f"expected one of name, natural, shuffle, got {self.ties!r}", obj="simulation", field="ties"
            )
        if self.restart_policy not in RESTART_POLICIES:
            raise InputError(
                f"expected one of {', '.join(RESTART_POLICIES)}, got {self.restart_policy!r}",
                obj="simulation",
                field="restart_policy",
            )
        for name in (
            "schedule_period",
            "checkpoint_interval",
            "sample_period",
            "heartbeat",
            "forecast_every",
        ):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and 0 < value < math.inf):
                raise InputError(
                    f"expected a positive number of seconds, got {value!r}", obj="simulation", field=name
                )
        for name in ("startup_delay", "eviction_grace", "until"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and 0 <= value < math.inf):
                raise InputError(
                    f"expected a number of seconds >= 0, got {value!r}", obj="simulation", field=name
                )
