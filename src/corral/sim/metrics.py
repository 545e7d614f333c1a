"""The simulator's measurements (split from :mod:`corral.sim.engine`): cluster and queue samples over
time, the deserved share each queue is measured against (GPU water-filling by weight, capped by
demand and capability, raised to guarantee — the same for every configuration, so runs compare), the
per-job records and the :class:`~corral.sim.result.SimResult`. ``EngineMetrics`` is a mixin of
:class:`~corral.sim.engine.Engine`; it reads the engine's state and owns no event logic."""

from __future__ import annotations

import math
import time as _time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.framework.session import PENDING_LIKE
from corral.model import PodGroupPhase
from corral.model.quantity import MILLI
from corral.model.resources import EPS, admission_refusal
from corral.sim.events import _HOLDING, MAX_QUEUE_INSTANTS, SAMPLE
from corral.sim.jobspec import JobSpec
from corral.sim.result import ClusterSample, JobRecord, QueueSample, SimResult

if TYPE_CHECKING:
    from corral.framework.config import Config
    from corral.model import Cluster, Job, Nodes, Task
    from corral.sim.engine import SimJob, SimOptions
    from corral.sim.speed import SpeedTracker

__all__ = ["EngineMetrics", "water_fill"]


def water_fill(
    total: float, weight: np.ndarray, demand: np.ndarray, cap: np.ndarray, guarantee: np.ndarray
) -> np.ndarray:
    """Deal ``total`` out by ``weight``, each share capped by ``cap`` and ``demand`` and raised to
    ``guarantee``; rounds repeat over the queues not yet satisfied until nothing is left or nothing
    changes (Volcano proportion's loop, one resource)."""
    deserved = np.zeros(len(weight))
    remaining = float(total)
    met = np.zeros(len(weight), dtype=bool)
    for _ in range(len(weight) + 2):
        w = np.where(met, 0.0, np.maximum(weight, 0.0))
        if w.sum() <= 0 or remaining <= 0:
            break
        new = deserved + remaining * w / w.sum()
        new = np.where(met, deserved, np.maximum(np.minimum(np.minimum(new, cap), demand), guarantee))
        increased = float((new - deserved).sum())
        deserved = new
        met |= (demand <= deserved + 1e-9) | (cap <= deserved + 1e-9)  # satisfied, or full
        if increased <= 1e-12:
            break
        remaining = max(remaining - increased, 0.0)
    return deserved


class EngineMetrics:
    """Sampling and results of a simulation run (mixed into Engine).

    The attributes below are the engine state this mixin reads and writes; :class:`Engine` sets them
    all in its ``__init__`` (they are declared here, without values, so each is typed once)."""

    #: the admission budget at the end of the run, for the reasons written with the results, keyed by
    #: (cycles, events) so that a later write recomputes it
    _final_budget: tuple[tuple[int, int], Any, float] | None = None

    cluster: Cluster
    config: Config
    options: SimOptions
    specs: list[JobSpec]
    never_fits: dict[str, str]  # job name -> why it can never run
    meta: dict[str, object]
    now: float
    events: int
    cycles: int
    # (time, kind, sequence, payload): the payload's type depends on the kind (see Engine.step)
    _heap: list[tuple[float, int, int, Any]]
    _enqueue: bool  # the configuration has an ``enqueue`` action
    _gpu: int | None  # the GPU column of the resource vectors (None: no GPUs)
    _active: dict[str, SimJob]  # submitted, not finished; by job uid
    _waiting: dict[str, SimJob]  # active jobs with pending or pipelined pods
    _running: set[str]  # active jobs making progress
    _done: dict[str, SimJob]
    _reasons: dict[str, str]  # last unschedulable reason, per waiting job
    _last_reasons: dict[str, str]  # the same, kept once the job started (per-job records)
    _notes: dict[str, str]  # what the configuration does not act on, per job
    _forecast_at: float | None  # the next instant an expected-start forecast is due
    _expected: dict[str, tuple[float, float]]  # job uid -> (first expected start, made at)
    _submitted: int  # specs submitted so far (a prefix of ``specs``)
    _stalled: float | None  # when the policy was found to livelock
    _changed: bool  # something a cluster sample shows may have changed
    _last_sample: ClusterSample | None
    _evictions: int  # pods evicted so far (scheduler's evictions and failed nodes)
    _restarts: int  # gang restarts so far
    _demand: float  # GPUs asked for by the active jobs' pods
    _common_gpu: float | None  # most common waiting pod GPU size (milli)
    _samples: list[ClusterSample]
    _queue_samples: list[QueueSample]
    _queues: list[str]
    _wall: float  # monotonic wall time at the start
    _sample_period: float
    _speed: SpeedTracker | None  # the job-speed model's side of the run (None: off)

    if TYPE_CHECKING:  # the engine's own methods, used here

        def _push(self, at: float, kind: int, payload: Any) -> int: ...

        def _gpus(self, task: Task) -> float: ...

    def _sample_cluster(self) -> None:
        self._changed = False
        nodes, live = self.cluster.nodes, ~self.cluster.nodes.down
        pending = fragmented = 0.0
        if self._gpu is None:
            used = total = 0.0
        else:
            g = self._gpu
            used = float(nodes.used[live, g].sum()) / MILLI
            total = float(nodes.allocatable[live, g].sum()) / MILLI
            held = used - float(nodes.releasing[live, g].sum()) / MILLI
            pending = max(round(self._demand - held, 9), 0.0)
            fragmented = self._fragmented(nodes, live, g)
        running = len(self._running)
        sample = ClusterSample(
            self.now,
            used,
            total,
            used / total if total > 0 else 0.0,
            len(self._active) - running,
            running,
            pending,
            fragmented,
            self._evictions,
            self._restarts,
        )
        last = self._last_sample
        if last is not None and (
            last.gpu_used,
            last.gpu_total,
            last.pending_jobs,
            last.running_jobs,
            last.pending_gpus,
            last.fragmented_gpus,
            last.evictions,
            last.restarts,
        ) == (
            used,
            total,
            sample.pending_jobs,
            running,
            pending,
            fragmented,
            self._evictions,
            self._restarts,
        ):
            return
        if last is not None and last.time == self.now:
            self._samples[-1] = sample
        else:
            self._samples.append(sample)
        self._last_sample = sample

    def _fragmented(self, nodes: Nodes, live: np.ndarray, g: int) -> float:
        """Free GPUs on live nodes with some free, but fewer than the most common waiting pod asks."""
        size = self._common_gpu
        if not size:
            return 0.0
        free = np.maximum(nodes.allocatable[live, g] - nodes.used[live, g], 0.0)
        return float(free[(free > 0) & (free < size)].sum()) / MILLI

    def _common_waiting_size(self) -> float | None:
        """The most common GPU request (milli) among waiting pods; ties to the smaller size."""
        if self._gpu is None:
            return None
        counts: dict[float, int] = {}
        for sim in self._waiting.values():
            for t in sim.job.tasks:
                if t.status in PENDING_LIKE:
                    size = float(t.request[self._gpu])
                    if size > 0:
                        counts[size] = counts.get(size, 0) + 1
        if not counts:
            return None
        return min(counts, key=lambda s: (-counts[s], s))

    def _sample_queues(self, final: bool = False) -> None:
        """Queue samples on a grid of ``sample_period``; past :data:`MAX_QUEUE_INSTANTS` instants every
        other one is dropped and the period doubles, so a run of any length keeps a bounded series."""
        names = self._queues
        common = self._common_waiting_size()
        if common != self._common_gpu:
            self._common_gpu, self._changed = common, True
        if names and self._queue_samples and self._queue_samples[-1].time == self.now:
            del self._queue_samples[-len(names) :]
        if names:
            self._queue_sample(names)
        if final:
            return
        if names and len(self._queue_samples) > MAX_QUEUE_INSTANTS * len(names):
            width = len(names)
            self._queue_samples = [s for i, s in enumerate(self._queue_samples) if (i // width) % 2 == 0]
            self._sample_period *= 2
        if self._heap:
            self._push(
                (math.floor(self.now / self._sample_period + 1e-9) + 1) * self._sample_period, SAMPLE, 0
            )

    def _queue_sample(self, names: list[str]) -> None:
        index = {n: i for i, n in enumerate(names)}
        held, demand, pending = np.zeros(len(names)), np.zeros(len(names)), np.zeros(len(names), int)
        for uid, sim in self._active.items():
            i = index[sim.spec.queue]
            demand[i] += sim.gpus
            if uid not in self._running:
                pending[i] += 1
            for t in sim.job.tasks:
                if t.status in _HOLDING:
                    held[i] += self._gpus(t)
        total = self._gpu_total()
        deserved = self._deserved(names, demand, total)
        for i, name in enumerate(names):
            self._queue_samples.append(
                QueueSample(
                    self.now,
                    name,
                    float(held[i]),
                    float(held[i] / total) if total > 0 else 0.0,
                    float(deserved[i] / total) if total > 0 else 0.0,
                    int(pending[i]),
                )
            )

    def _gpu_total(self) -> float:
        if self._gpu is None:
            return 0.0
        nodes = self.cluster.nodes
        return float(nodes.allocatable[~nodes.down, self._gpu].sum()) / MILLI

    def _deserved(self, names: list[str], demand: np.ndarray, total: float) -> np.ndarray:
        queues = self.cluster.queues
        g = self._gpu

        def column(attr: str, fill: float) -> np.ndarray:
            out = np.full(len(names), fill)
            for i, n in enumerate(names):
                vec = getattr(queues[n], attr)
                if vec is not None and g is not None:
                    out[i] = vec[g] / MILLI
            return out

        weight = np.array([queues[n].weight for n in names], dtype=float)
        return water_fill(total, weight, demand, column("capability", np.inf), column("guarantee", 0.0))

    # -- the result --------------------------------------------------------------------------------
    def _record(self, spec: JobSpec, sim: SimJob | None) -> JobRecord:
        rec = JobRecord(
            job=spec.name,
            queue=spec.queue,
            priority=spec.priority,
            pods=spec.num_pods,
            min_member=spec.min_pods,
            gpus=float(spec.gpus),
            duration=float(spec.duration),
            submit=float(spec.submit),
        )
        if sim is None:
            rec.status = "never_fits" if spec.name in self.never_fits else "pending"
            return rec
        rec.first_start, rec.end = sim.first_start, sim.end
        rec.notes = self._notes.get(sim.job.uid, "")
        rec.reason = self._last_reasons.get(sim.job.uid) or self._unreported(sim.job.uid)
        rec.wait = None if sim.first_start is None else sim.first_start - spec.submit
        rec.jct = None if sim.end is None else sim.end - spec.submit
        rec.restarts, rec.evictions, rec.gpu_hours_lost = sim.restarts, sim.evictions, sim.lost / 3600.0
        rec.preemptions, rec.restore_gpu_hours = sim.preemptions, sim.overhead / 3600.0
        if sim.speed is not None and self._speed is not None and sim.speed.widest is not None:
            rec.span = self._speed.label(sim.speed.widest)
            rec.spread_gpu_hours = self._speed.lost(sim, self.now) / 3600.0
        rec.placement = sim.placement
        if rec.jct is not None:
            rec.queue_time = max(rec.jct - sim.held_time, 0.0)
        expected = self._expected.get(sim.job.uid)
        if expected is not None:
            rec.expected_start, rec.expected_at = expected
        rec.status = (
            "completed" if sim.end is not None else "running" if sim.job.uid in self._running else "pending"
        )
        return rec

    def _unreported(self, uid: str) -> str:
        """The reason of a waiting job no cycle gave one: a cycle that skips a podgroup enqueue cannot
        admit, or that was submitted after the last cycle, leaves it without one (reasons are worked out
        when a job is tried, not for every waiting job in every cycle)."""
        sim = self._waiting.get(uid)
        if sim is None:
            return ""
        if sim.job.phase is PodGroupPhase.PENDING and self._enqueue:
            return (
                self._admission_reason(sim.job)
                or "podgroup not yet admitted (Pending): enqueue has not admitted it"
            )
        return "waiting: not yet placed"

    def _admission_reason(self, job: Job) -> str:
        """Why ``enqueue`` cannot admit ``job`` now, worked out on demand when the result is written:
        its minResources against what the overcommit budget leaves once the admitted podgroups not
        started yet are counted (``enqueue``'s own test and wording); empty when the budget would hold
        it (then a queue's capability or the order of an earlier cycle kept it out)."""
        need = job.min_resources
        if need is None or not need.any():
            return ""
        budget = self._final_budget
        if budget is None or budget[0] != (self.cycles, self.events):
            factor = self.config.overcommit_factor()
            left = self.cluster.admission_room(factor)
            for other in self.cluster.jobs.values():
                if other.admitted_unstarted():
                    left = left - other.min_resources
            budget = self._final_budget = ((self.cycles, self.events), left, factor)
        _, left, factor = budget
        if not (need > left + EPS).any():
            return ""
        return admission_refusal(self.cluster.resources, need, left, factor)

    def _pending_reasons(self) -> dict[str, str]:
        """Why each active job that waits, or waited since its last reason, did not start."""
        got = {u: r for u, r in self._reasons.items() if u in self._active}
        for uid in self._waiting:
            if uid not in got:
                got[uid] = self._unreported(uid)
        return {self._active[u].spec.name: got[u] for u in sorted(got)}

    def result(self) -> SimResult:
        """The flat records of the run so far (jobs in submit order; jobs not yet submitted are left out
        and counted in ``meta["jobs_not_submitted"]``)."""
        ns = self.options.namespace
        records = []
        for spec in self.specs[: self._submitted]:
            uid = f"{ns}/{spec.name}"
            records.append(self._record(spec, self._active.get(uid) or self._done.get(uid)))
        meta = {
            "config": getattr(self.config, "source", ""),
            **self.meta,
            "end_time": self.now,
            "wall_time": round(_time.monotonic() - self._wall, 3),
            "events": self.events,
            "cycles": self.cycles,
            "jobs_not_submitted": len(self.specs) - self._submitted,
            "options": asdict(self.options),
            "never_fits": [{"job": n, "reason": r} for n, r in sorted(self.never_fits.items())],
            "pending_reasons": self._pending_reasons(),
        }
        if self._stalled is not None:
            meta["stalled_at"] = self._stalled
        return SimResult(
            jobs=records, queues=list(self._queue_samples), cluster=list(self._samples), meta=meta
        )
