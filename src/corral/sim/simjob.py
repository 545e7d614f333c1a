"""The engine's side of one job (:class:`SimJob`: its state and the accounting of its runs), of its current run under the job-speed model
(:class:`SpeedState`, :mod:`corral.sim.speed`) and of every job by state (:class:`JobBook`): the state
the engine (:mod:`corral.sim.engine`) keeps and writes, and its observers (:mod:`corral.sim.metrics`,
:class:`~corral.sim.speed.SpeedTracker`) read — an observer never writes into it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.model import Job
    from corral.sim.jobspec import JobSpec

__all__ = ["JobBook", "SimJob", "SpeedState"]


class SimJob:
    """The engine's side of one job: its model Job and what it has lived through."""

    __slots__ = (
        "end",
        "epoch",
        "evictions",
        "first_start",
        "gpus",
        "held_time",
        "job",
        "lost",
        "moved_lost",
        "moves",
        "overhead",
        "placement",
        "preemptions",
        "progress",
        "restarts",
        "run_from",
        "since",
        "spec",
        "speed",
    )

    def __init__(self, spec: JobSpec, job: Job, gpus: float) -> None:
        self.spec, self.job, self.gpus = spec, job, gpus
        self.progress = 0.0  # seconds of progress before ``since``
        self.since: float | None = None  # running at >= minMember since
        self.epoch = 0  # bumps on every stop and rate change: stale completion events are ignored
        self.first_start: float | None = None
        self.end: float | None = None
        self.restarts = self.evictions = self.preemptions = 0
        self.moves = 0  # pods moved away by ``consolidate``
        self.moved_lost = 0.0  # GPU-seconds of progress lost to restarts the moves caused
        self.lost = 0.0  # GPU-seconds lost to restarts
        self.overhead = 0.0  # GPU-seconds spent restoring after stops (resume_overhead)
        self.held_time = 0.0  # seconds the gang held its nodes at its minimum (restoring included)
        self.run_from: float | None = None  # the current run's start (``since`` is after its restore)
        self.speed: SpeedState | None = None  # its rate and placement under the speed model
        self.placement = ""  # where a gang first ran: see JobRecord.placement

    def end_run(self, now: float) -> float:
        """End the current run's accounting at ``now`` (its restore time and the time it held its
        nodes): the seconds of progress it made after its restore."""
        assert self.since is not None and self.run_from is not None
        restored = min(now, self.since) - self.run_from
        self.overhead += restored * self.gpus
        self.held_time += now - self.run_from
        return max(now - self.since, 0.0)

    def roll_back(self, interval: float | None, held_gpus: float, *, keep: bool, moved: bool) -> None:
        """A restart: progress goes back to the last checkpoint (every ``interval`` seconds of progress;
        None: never; ``keep``: one taken as it stopped), and the progress lost times the ``held_gpus``
        it held counts as lost (to ``consolidate``'s moves too when ``moved``)."""
        saved = 0.0 if interval is None else math.floor(self.progress / interval + 1e-9) * interval
        saved = min(saved, self.progress)
        if keep:
            saved = self.progress
        self.lost += (self.progress - saved) * held_gpus
        if moved:
            self.moved_lost += (self.progress - saved) * held_gpus
        self.progress = saved
        self.restarts += 1


class SpeedState:
    """One job's current run under the model: its rate since ``mark`` (the end of its restore), the work
    done in the run before ``mark``, the placement the rate was read from, and the run's totals."""

    __slots__ = ("done", "gpus", "level", "lost", "mark", "rate", "spread", "widest")

    def __init__(self) -> None:
        self.rate, self.mark, self.done = 1.0, 0.0, 0.0
        self.spread, self.gpus, self.level = 1.0, 0.0, 0
        self.widest: int | None = None  # the widest level of any run (None: never ran)
        self.lost = 0.0  # GPU-seconds lost to spread, every run


class JobBook:
    """Every submitted job by state, keyed by job uid: ``active`` (submitted, not finished), ``waiting``
    (active jobs with a Pending or Pipelined pod), ``running`` (active jobs making progress: at least
    their minimum of pods running) and ``done`` (finished). The engine moves jobs between them; the
    observers read them and never write."""

    __slots__ = ("active", "done", "running", "waiting")

    def __init__(self) -> None:
        self.active: dict[str, SimJob] = {}
        self.waiting: dict[str, SimJob] = {}
        self.running: set[str] = set()
        self.done: dict[str, SimJob] = {}
