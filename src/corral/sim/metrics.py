"""The simulator's measurements: :class:`RunMetrics`, the observer :class:`~corral.sim.engine.Engine`
calls as a run goes.

Contract: the engine calls the hooks at the moments they name — :meth:`~RunMetrics.submitted`,
:meth:`~RunMetrics.started` (a job begins to make progress), :meth:`~RunMetrics.evicted` (pods of an
active job were evicted), :meth:`~RunMetrics.stopped` (a gang fell below its minimum and restarts),
:meth:`~RunMetrics.completed`, :meth:`~RunMetrics.unschedulable` (a cycle's reason for a waiting job) —
and :meth:`~RunMetrics.sample` after every event that may have changed what a cluster sample shows,
:meth:`~RunMetrics.sample_queues` on the grid of the sample period. The observer reads the cluster and
the engine's :class:`~corral.sim.simjob.JobBook` and never writes into them; it schedules no event (it
says when the next queue sample is due, the engine schedules it), so a run is the same with or
without anyone reading its metrics.

What it measures: cluster and queue samples over time, the deserved share each queue is measured
against (GPU water-filling by weight, capped by demand and capability, raised to guarantee — the same for
every configuration, so runs compare), the per-job records and the pending reasons of
:class:`~corral.sim.result.SimResult`."""

from __future__ import annotations

import math
import time as _time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.framework.notices import job_notices, topology_provider
from corral.framework.session import PENDING_LIKE
from corral.model import PodGroupPhase
from corral.model.notes import record_text
from corral.model.quantity import MILLI
from corral.model.resources import EPS, GPU, admission_refusal
from corral.sim.events import HOLDING, MAX_QUEUE_INSTANTS
from corral.sim.jobspec import JobSpec
from corral.sim.result import ClusterSample, JobRecord, QueueSample, SimResult

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from corral.framework.config import Config, Registry
    from corral.model import Cluster, Job, Nodes
    from corral.sim.options import SimOptions
    from corral.sim.simjob import JobBook, SimJob
    from corral.sim.speed import SpeedTracker

__all__ = ["RunMetrics", "Stamp", "water_fill"]

#: the state of a run a result is written at, (cycles, events): what the admission budget is kept for
Stamp = tuple[int, int]


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


class RunMetrics:
    """The measurements of one simulation run: the observer the engine calls (see the module's
    contract). ``specs`` are the run's jobs in submission order, ``never_fits`` those that can never
    run (with why), ``book`` the engine's jobs by state, read here and never written; ``period`` the
    first queue-sample period (it doubles as the run grows, see :meth:`sample_queues`); ``meta`` what
    the caller adds to the result's meta."""

    def __init__(
        self,
        cluster: Cluster,
        config: Config,
        registry: Registry,
        specs: Sequence[JobSpec],
        book: JobBook,
        options: SimOptions,
        *,
        never_fits: Mapping[str, str],
        enqueue: bool,
        period: float,
        speed: SpeedTracker | None = None,
        meta: Mapping[str, object] | None = None,
    ) -> None:
        self.cluster, self.config, self.book, self.options = cluster, config, book, options
        self.specs, self.never_fits, self.meta = specs, never_fits, dict(meta or {})
        self.wall = _time.monotonic()  # when the run started, for its wall time
        self.enqueue = enqueue  # the configuration has an ``enqueue`` action
        self.speed = speed  # the job-speed model's side of the run (None: off)
        self.sample_period = period
        self.gpu = cluster.resources.get(GPU)  # the GPU column of the resource vectors (None: no GPUs)
        self.queues = sorted({s.queue for s in specs})
        self.samples: list[ClusterSample] = []
        self.queue_samples: list[QueueSample] = []
        self.last_sample: ClusterSample | None = None
        self.evictions = 0  # pods evicted so far (scheduler's evictions, injected ones, failed nodes)
        self.restarts = 0  # gang restarts so far
        self.demand = 0.0  # GPUs asked for by the active jobs' pods
        self.common_gpu: float | None = None  # the most common waiting pod GPU size (milli)
        self.reasons: dict[str, str] = {}  # last unschedulable reason, per waiting job
        self.last_reasons: dict[str, str] = {}  # the same, kept once the job started (its record)
        #: per job: what the configuration does not act on (framework/notices.py), for its record
        self.notes: dict[str, str] = {}
        #: job uid -> (first expected start, made at): written by the engine's forecasts
        self.expected: dict[str, tuple[float, float]] = {}
        self.topology = topology_provider(config, registry)
        #: the admission budget at the end of the run, for the reasons written with the results, kept
        #: for the stamp it was worked out at (a later write recomputes it)
        self.final_budget: tuple[Stamp, Any, float] | None = None

    # -- the hooks ---------------------------------------------------------------------------------
    def submitted(self, sim: SimJob) -> None:
        """``sim`` was submitted (not a never-fits job): its GPUs join the demand."""
        job = sim.job
        if job.topology_mode:
            notes = job_notices(job, self.topology, bool(self.cluster.hypernodes))
            if notes:
                self.notes[job.uid] = record_text(notes)
        self.demand += sim.gpus

    def started(self, sim: SimJob) -> None:
        """``sim`` makes progress (again): it no longer waits."""
        self.reasons.pop(sim.job.uid, None)

    def evicted(self, sim: SimJob, pods: int) -> None:
        """``pods`` pods of ``sim`` were evicted (before any restart they cause)."""
        self.evictions += pods

    def stopped(self, sim: SimJob) -> None:
        """``sim`` fell below its minimum and restarts."""
        self.restarts += 1

    def completed(self, sim: SimJob) -> None:
        """``sim`` finished and left the cluster."""
        self.demand -= sim.gpus
        self.reasons.pop(sim.job.uid, None)

    def unschedulable(self, uid: str, reason: str) -> None:
        """A cycle's reason why the waiting job ``uid`` was not placed."""
        self.reasons[uid] = self.last_reasons[uid] = reason

    # -- samples -----------------------------------------------------------------------------------
    def sample(self, now: float) -> None:
        """A cluster sample at ``now``, kept when it differs from the last one (replacing it when at
        the same instant)."""
        nodes, live = self.cluster.nodes, ~self.cluster.nodes.down
        pending = fragmented = 0.0
        if self.gpu is None:
            used = total = 0.0
        else:
            g = self.gpu
            used = float(nodes.used[live, g].sum()) / MILLI
            total = float(nodes.allocatable[live, g].sum()) / MILLI
            held = used - float(nodes.releasing[live, g].sum()) / MILLI
            pending = max(round(self.demand - held, 9), 0.0)
            fragmented = self._fragmented(nodes, live, g)
        running = len(self.book.running)
        pending_jobs = len(self.book.active) - running
        last = self.last_sample
        if last is not None and (
            last.gpu_used,
            last.gpu_total,
            last.pending_jobs,
            last.running_jobs,
            last.pending_gpus,
            last.fragmented_gpus,
            last.evictions,
            last.restarts,
        ) == (used, total, pending_jobs, running, pending, fragmented, self.evictions, self.restarts):
            return
        sample = ClusterSample(
            now,
            used,
            total,
            used / total if total > 0 else 0.0,
            pending_jobs,
            running,
            pending,
            fragmented,
            self.evictions,
            self.restarts,
        )
        if last is not None and last.time == now:
            self.samples[-1] = sample
        else:
            self.samples.append(sample)
        self.last_sample = sample

    def _fragmented(self, nodes: Nodes, live: np.ndarray, g: int) -> float:
        """Free GPUs on live nodes with some free, but fewer than the most common waiting pod asks."""
        size = self.common_gpu
        if not size:
            return 0.0
        free = np.maximum(nodes.allocatable[live, g] - nodes.used[live, g], 0.0)
        return float(free[(free > 0) & (free < size)].sum()) / MILLI

    def _common_waiting_size(self) -> float | None:
        """The most common GPU request (milli) among waiting pods; ties to the smaller size."""
        if self.gpu is None:
            return None
        counts: dict[float, int] = {}
        for sim in self.book.waiting.values():
            for t in sim.job.tasks:
                if t.status in PENDING_LIKE:
                    size = float(t.request[self.gpu])
                    if size > 0:
                        counts[size] = counts.get(size, 0) + 1
        if not counts:
            return None
        return min(counts, key=lambda s: (-counts[s], s))

    def sample_queues(self, now: float, final: bool = False) -> bool:
        """Queue samples at ``now`` (replacing those already taken at ``now``). Past
        :data:`MAX_QUEUE_INSTANTS` instants every other one is dropped and the period doubles (unless
        ``final``), so a run of any length keeps a bounded series. True when the most common waiting
        pod size changed, which a cluster sample shows (the engine takes one then)."""
        names = self.queues
        common = self._common_waiting_size()
        changed = common != self.common_gpu
        self.common_gpu = common
        if names and self.queue_samples and self.queue_samples[-1].time == now:
            del self.queue_samples[-len(names) :]
        if names:
            self._queue_sample(now, names)
        if not final and names and len(self.queue_samples) > MAX_QUEUE_INSTANTS * len(names):
            width = len(names)
            self.queue_samples = [s for i, s in enumerate(self.queue_samples) if (i // width) % 2 == 0]
            self.sample_period *= 2
        return changed

    def next_sample(self, now: float) -> float:
        """When the queue sample after the one at ``now`` is due: the next point of the period's grid."""
        return (math.floor(now / self.sample_period + 1e-9) + 1) * self.sample_period

    def _queue_sample(self, now: float, names: list[str]) -> None:
        index = {n: i for i, n in enumerate(names)}
        held, demand, pending = np.zeros(len(names)), np.zeros(len(names)), np.zeros(len(names), int)
        running, g = self.book.running, self.gpu
        for uid, sim in self.book.active.items():
            i = index[sim.spec.queue]
            demand[i] += sim.gpus
            if uid not in running:
                pending[i] += 1
            for t in sim.job.tasks:
                if t.status in HOLDING:
                    held[i] += float(t.request[g]) / MILLI if g is not None else 0.0
        total = self._gpu_total()
        deserved = self._deserved(names, demand, total)
        for i, name in enumerate(names):
            self.queue_samples.append(
                QueueSample(
                    now,
                    name,
                    float(held[i]),
                    float(held[i] / total) if total > 0 else 0.0,
                    float(deserved[i] / total) if total > 0 else 0.0,
                    int(pending[i]),
                )
            )

    def _gpu_total(self) -> float:
        if self.gpu is None:
            return 0.0
        nodes = self.cluster.nodes
        return float(nodes.allocatable[~nodes.down, self.gpu].sum()) / MILLI

    def _deserved(self, names: list[str], demand: np.ndarray, total: float) -> np.ndarray:
        queues = self.cluster.queues
        g = self.gpu

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
    def result(
        self, now: float, events: int, cycles: int, submitted: int, stalled: float | None
    ) -> SimResult:
        """The flat records of the run at ``now``, after ``events`` events and ``cycles`` cycles, with
        the first ``submitted`` jobs submitted (jobs in submit order; jobs not yet submitted are left
        out and counted in ``meta["jobs_not_submitted"]``; ``stalled``: when the policy livelocked)."""
        stamp, ns, book = (cycles, events), self.options.namespace, self.book
        records = []
        for spec in self.specs[:submitted]:
            uid = f"{ns}/{spec.name}"
            records.append(self._record(spec, book.active.get(uid) or book.done.get(uid), now, stamp))
        meta = {
            "config": getattr(self.config, "source", ""),
            **self.meta,
            "end_time": now,
            "wall_time": round(_time.monotonic() - self.wall, 3),
            "events": events,
            "cycles": cycles,
            "jobs_not_submitted": len(self.specs) - submitted,
            "options": asdict(self.options),
            "never_fits": [{"job": n, "reason": r} for n, r in sorted(self.never_fits.items())],
            "pending_reasons": self.pending_reasons(stamp),
        }
        if stalled is not None:
            meta["stalled_at"] = stalled
        return SimResult(jobs=records, queues=list(self.queue_samples), cluster=list(self.samples), meta=meta)

    def _record(self, spec: JobSpec, sim: SimJob | None, now: float, stamp: Stamp) -> JobRecord:
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
        uid = sim.job.uid
        rec.first_start, rec.end = sim.first_start, sim.end
        rec.notes = self.notes.get(uid, "")
        rec.reason = self.last_reasons.get(uid) or self._unreported(uid, stamp)
        rec.wait = None if sim.first_start is None else sim.first_start - spec.submit
        rec.jct = None if sim.end is None else sim.end - spec.submit
        rec.restarts, rec.evictions, rec.gpu_hours_lost = sim.restarts, sim.evictions, sim.lost / 3600.0
        rec.preemptions, rec.restore_gpu_hours = sim.preemptions, sim.overhead / 3600.0
        rec.moves, rec.gpu_hours_lost_to_moves = sim.moves, sim.moved_lost / 3600.0
        if sim.speed is not None and self.speed is not None and sim.speed.widest is not None:
            rec.span = self.speed.label(sim.speed.widest)
            rec.spread_gpu_hours = self.speed.lost(sim, now) / 3600.0
        rec.placement = sim.placement
        if rec.jct is not None:
            rec.queue_time = max(rec.jct - sim.held_time, 0.0)
        expected = self.expected.get(uid)
        if expected is not None:
            rec.expected_start, rec.expected_at = expected
        rec.status = (
            "completed" if sim.end is not None else "running" if uid in self.book.running else "pending"
        )
        return rec

    def _unreported(self, uid: str, stamp: Stamp) -> str:
        """The reason of a waiting job no cycle gave one: a cycle that skips a podgroup enqueue cannot
        admit, or that was submitted after the last cycle, leaves it without one (reasons are worked out
        when a job is tried, not for every waiting job in every cycle)."""
        sim = self.book.waiting.get(uid)
        if sim is None:
            return ""
        if sim.job.phase is PodGroupPhase.PENDING and self.enqueue:
            return (
                self._admission_reason(sim.job, stamp)
                or "podgroup not yet admitted (Pending): enqueue has not admitted it"
            )
        return "waiting: not yet placed"

    def _admission_reason(self, job: Job, stamp: Stamp) -> str:
        """Why ``enqueue`` cannot admit ``job`` now, worked out on demand when the result is written:
        its minResources against what the overcommit budget leaves once the admitted podgroups not
        started yet are counted (``enqueue``'s own test and wording); empty when the budget would hold
        it (then a queue's capability or the order of an earlier cycle kept it out)."""
        need = job.min_resources
        if need is None or not need.any():
            return ""
        budget = self.final_budget
        if budget is None or budget[0] != stamp:
            factor = self.config.overcommit_factor()
            left = self.cluster.admission_room(factor)
            for other in self.cluster.jobs.values():
                if other.admitted_unstarted():
                    left = left - other.min_resources
            budget = self.final_budget = (stamp, left, factor)
        _, left, factor = budget
        if not (need > left + EPS).any():
            return ""
        return admission_refusal(self.cluster.resources, need, left, factor)

    def pending_reasons(self, stamp: Stamp) -> dict[str, str]:
        """Why each active job that waits, or waited since its last reason, did not start: by job name,
        in uid order."""
        active = self.book.active
        got = {u: r for u, r in self.reasons.items() if u in active}
        for uid in self.book.waiting:
            if uid not in got:
                got[uid] = self._unreported(uid, stamp)
        return {active[u].spec.name: got[u] for u in sorted(got)}
