"""The loop of ``corral run``: every ``period`` seconds, a consistent snapshot of the watch cache becomes a
cluster (the snapshot loader's assembly), one cycle runs (:func:`corral.framework.cycle.run_cycle`, the
function ``corral schedule`` runs) and its decisions are applied (:class:`~corral.kube.apply.Applier`),
or, with ``dry_run``, printed and assumed as ``corral schedule --cycles`` applies them between cycles
(:class:`~corral.kube.dryrun.DryRun`): one :class:`~corral.framework.cycle.DecisionSink` or the other, so ``corral run --dry-run --cycles N`` and ``corral schedule --cycles N`` on the
same objects decide the same.

A cycle that fails (a fault in the scheduling core, an object no check caught) is logged and counted; the
next cycle runs as usual: the scheduler never stops on the cluster's content.

No cycle runs before every watched kind is listed (nodes, pods, and each PodGroup kind the cluster serves:
without the running pods a cycle would bind onto nodes whose load it cannot see): :meth:`Runner.run`
logs what it waits for every ``10`` s and raises :class:`SyncTimeout` after ``sync_timeout`` seconds
rather than schedule on an incomplete cache. A stop request (SIGTERM, Ctrl-C) ends the wait at once.

Warnings (:meth:`Runner.warn`): every cycle, what corral does not act on for the cycle's cluster —
the objects' fields (``Cluster.notes``, as the snapshot reader and the loader's assembly warn) and what
the configuration leaves undone (:func:`corral.framework.notices.configuration_notes`), what ``corral
validate`` prints — is told
once per object — in the first cycle for what is there, later for each object that appears and again
for one whose warning changed (:class:`~corral.framework.notices.Warned`): a log line, a
``FieldsNotEnforced`` Warning Event on the object (not in a dry run) and, for a podgroup's fields, the
cycle's decisions (``warnings``, as ``corral schedule`` lists them in its first cycle).

Leadership (``leader_elect``): a cycle starts only while the lease was renewed within its renew deadline
(:meth:`corral.kube.leader.LeaderElector.is_leader`), and every write of the apply phase asks again; a
replica that stops being leader mid-phase writes nothing more and the runner stops (the process exits so
its Deployment restarts it as a candidate, as kube-scheduler does).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from corral.errors import ClusterAPIError
from corral.framework.config import Config
from corral.framework.cycle import run_cycle
from corral.framework.decisions import Decisions, FieldWarning
from corral.framework.memo import ClusterHistory
from corral.framework.notices import Warned, configuration_notes
from corral.kube.api import KubeAPI, NotLeader
from corral.kube.apply import Applier
from corral.kube.apply_report import ApplyReport
from corral.kube.cache import WatchCache
from corral.kube.dryrun import DryRun, dry_run_assume
from corral.kube.expected import ExpectedStarts, LiveForecast
from corral.kube.jobfacts import IndexMismatch, PodGroupNotices
from corral.kube.leader import LeaderElector
from corral.kube.logs import Log
from corral.kube.longlived import LongLived
from corral.kube.metrics import Metrics
from corral.kube.native_status import native_conditions
from corral.kube.queuemetrics import unschedulable_by_queue, unschedulable_kept
from corral.model import Cluster
from corral.model.clock import format_time
from corral.model.notes import record_text
from corral.queueview import QueueRow, queue_rows
from corral.registry import REGISTRY

__all__ = ["RunOptions", "Runner", "SyncTimeout", "dry_run_assume"]

#: the schedulerName ``corral run`` serves unless told otherwise (``--scheduler-name``): its own only, so
#: beside Volcano or KAI it never takes their pods
RUN_SCHEDULERS: tuple[str, ...] = ("corral",)


class SyncTimeout(ClusterAPIError):
    """The cache was not listed within ``sync_timeout`` seconds (exit code 1: scheduling blind is worse)."""


@dataclass
class RunOptions:
    schedulers: tuple[str, ...] = RUN_SCHEDULERS
    period: float = 1.0
    dry_run: bool = False
    cycles: int | None = None  # stop after this many cycles (None: run until stopped)
    now: float | None = None  # a fixed clock for the first cycle (tests, reproductions)
    clock_step: float | None = None  # how far a fixed clock moves per cycle (default: period)
    dump: Path | None = None
    leader_elect: bool = False
    lease_namespace: str = "default"
    lease_name: str = "corral"
    identity: str = "corral"
    sync_timeout: float = 300.0
    page: int = 5000
    watch_timeout: int = 300
    backoff: tuple[float, float] = (0.5, 30.0)
    lease: tuple[float, float, float] = (15.0, 10.0, 2.0)  # duration, renew deadline, retry
    workers: int = 16
    #: seconds between recomputations of the per-queue gauges (a session of the queue plugins over every
    #: pod: about half a steady cycle's scheduling at 50,000 pods); 0: every cycle
    queue_metrics_interval: float = 10.0
    #: seconds between full garbage collections of the long-lived cache and model (kube/longlived.py);
    #: 0: the collector's own schedule, which walks them every other cycle
    gc_full_every: float = 300.0
    #: expected starts (kube/expected.py); ``every`` 0 is off, the default of a runner built in code
    forecast: LiveForecast = field(default_factory=lambda: LiveForecast(every=0))
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CycleResult:
    cycle: int
    now: float
    decisions: Decisions
    report: ApplyReport | None
    seconds: dict[str, float]


class Runner:
    """Cache, leader election, cycles, applier; :meth:`run` until stopped or ``cycles`` are done."""

    def __init__(
        self,
        api: KubeAPI,
        config: Config,
        options: RunOptions,
        log: Log | None = None,
        metrics: Metrics | None = None,
        out: TextIO | None = None,
    ) -> None:
        self.api = api
        self.config = config
        self.opts = options
        self.log = log or Log()
        self.metrics = metrics or Metrics()
        self.out = out if out is not None else sys.stdout
        self.stopping = threading.Event()
        self.cache = WatchCache(
            api,
            self.log,
            self.metrics,
            page=options.page,
            watch_timeout=options.watch_timeout,
            backoff=options.backoff,
        )
        self.applier = Applier(
            api,
            self.cache,
            self.log,
            self.metrics,
            scheduler_name=options.schedulers[0],
            identity=options.identity,
            workers=options.workers,
            may_write=self.is_leader,
            lease_left=self._lease_left,
            bind_margin=options.lease[2] if options.leader_elect else 0.0,
        )
        self.applier.sleep = self.stopping.wait
        #: where the decisions are carried out: the API server, or with ``dry_run`` the cache alone
        self.sink: Applier | DryRun = DryRun(self.cache) if options.dry_run else self.applier
        self.elector: LeaderElector | None = None
        self.lost = False
        self.stop_signal = 0  # the signal that stopped the runner (the command's handler sets it)
        self.cycle_no = 0
        self.last_cycle_end = 0.0
        self.total = Decisions()
        self.results: list[CycleResult] = []
        self.keep_results = False
        # what earlier cycles learned (framework/memo/): each cycle's cluster is a new object, so the
        # history does not track the jobs' changes; its skip memory outlives the clusters
        self.history = ClusterHistory()
        #: the objects warned about, with what they were told (framework/notices.py)
        self.warned = Warned()
        self.notices = PodGroupNotices(config, REGISTRY)  # each podgroup's notices, kept by job
        self.queue_rows_failed = False
        self.queue_rows_last: list[QueueRow] | None = None
        self.queue_rows_at = 0.0
        self.expected = _expected_starts(self)
        #: called after each cycle with the cycle's cluster, decisions and time (the live dashboard)
        self.after_cycle: Callable[[Cluster, Decisions, float], None] | None = None
        self.long_lived = LongLived(options.gc_full_every)

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.cache.start()
        if self.opts.leader_elect and not self.opts.dry_run:
            d, r, retry = self.opts.lease
            self.elector = LeaderElector(
                self.api,
                self.opts.lease_namespace,
                self.opts.lease_name,
                self.opts.identity,
                self.log,
                duration=d,
                renew_deadline=r,
                retry=retry,
                on_lost=self._lost,
                ready=self.cache.is_synced,
            )
            self.elector.start()

    def _lost(self) -> None:
        self.lost = True
        self.stopping.set()
        if self.elector is not None:
            self.elector.stopping.set()  # no new bid for the lease: the process exits as a candidate

    def stop(self) -> None:
        self.stopping.set()
        if self.elector is not None:
            self.elector.stop(release=not self.lost)
        self.cache.stop()
        self.applier.close()
        self.long_lived.release()

    def health(self) -> tuple[bool, str]:
        if not self.cache.is_synced():
            return False, "cache not synced"
        if self.elector is not None and not self.elector.is_leader():
            return True, "ok (standby)"
        stale = max(10 * self.opts.period, 120.0)
        if self.last_cycle_end and time.monotonic() - self.last_cycle_end > stale:
            return False, f"no cycle finished for {stale:.0f} s"
        return True, "ok"

    def alive(self) -> tuple[bool, str]:
        """Liveness: working, or still waiting for the first sync (the timeout ends that wait)."""
        if not self.cache.is_synced():
            return True, "ok (waiting for the cache to sync)"
        return self.health()

    def _lease_left(self) -> float:
        return float("inf") if self.elector is None else self.elector.valid_for()

    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    # -- the loop -----------------------------------------------------------------------------------
    def run(self) -> Decisions:
        """Cycles until stopped (or ``cycles`` done); the decisions of every cycle, in order."""
        t0 = time.monotonic()
        if not self._wait_synced(t0):
            return self.total
        self.log.info(
            "cache synced",
            seconds=round(time.monotonic() - t0, 3),
            objects={r.name: len(s) for r, s in self.cache.stores.items() if r not in self.cache.absent},
        )
        clock = self.opts.now
        self.last_cycle_end = time.monotonic()  # /healthz counts from here
        while not self.stopping.is_set():
            start = time.monotonic()
            if self.is_leader():
                now = clock if clock is not None else float(int(time.time()))
                self.cycle(now)
                if clock is not None:
                    clock += self.opts.period if self.opts.clock_step is None else self.opts.clock_step
                if self.opts.cycles is not None and self.cycle_no >= self.opts.cycles:
                    break
            wait = self.opts.period - (time.monotonic() - start)
            if wait > 0 and self.elector is not None and not self.is_leader():
                self._standby(wait)
            elif wait > 0:
                self.stopping.wait(wait)
        return self.total

    def _standby(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds as a standby; back at once when this replica becomes leader
        (its first cycle starts then, not a period later) or is stopped. The model is kept up to date
        meanwhile (:meth:`warm`), so the first cycle after a takeover builds only what changed since."""
        assert self.elector is not None
        end = time.monotonic() + timeout
        self.warm()
        while not self.stopping.is_set() and not self.is_leader():
            left = end - time.monotonic()
            if left <= 0:
                return
            if self.elector.leading.is_set():  # leading, but its renewal is too old: no busy loop
                self.stopping.wait(min(0.05, left))
            else:
                self.elector.leading.wait(min(0.05, left))

    def warm(self) -> None:
        """Bring the kept model up to date with the cache without running a cycle (a standby, once per
        period): kube-scheduler's standby keeps its scheduling cache current through its informers'
        handlers, so its first cycle as leader does not assemble the cluster first. A failure is left
        to the first cycle, which logs it."""
        try:
            self.cache.build(self.opts.schedulers)
            self.cache.model.state.untouched()  # the cluster is dropped: nothing to put back
            self.long_lived.after_build(self.cache.model.last == "full")
        except IndexMismatch:
            raise
        except Exception:  # noqa: BLE001 - the first cycle as leader builds again and reports
            return

    def _wait_synced(self, t0: float) -> bool:
        """Wait for the first list of every kind; False when stopped meanwhile; SyncTimeout past
        ``sync_timeout``."""
        deadline = t0 + self.opts.sync_timeout
        step = 1.0  # the first report after a second, then every 10 s
        while not self.cache.wait_synced(min(step, max(0.0, deadline - time.monotonic())), self.stopping):
            step = 10.0
            if self.stopping.is_set():
                return False
            missing = self.cache.missing()
            if time.monotonic() >= deadline:
                self.log.error("cache did not sync in time: exiting", missing=missing)
                raise SyncTimeout(
                    f"not listed within {self.opts.sync_timeout:g} s: {', '.join(missing)} "
                    "(check the API server and the RBAC of the service account)"
                )
            self.log.info("waiting for the cache to sync: no cycle runs until then", missing=missing)
        return True

    def cycle(self, now: float) -> CycleResult | None:
        """One cycle; never raises on the cluster's content (logged, counted, next cycle runs)."""
        self.cycle_no += 1
        n = self.cycle_no
        times: dict[str, float] = {}
        t, cpu = time.perf_counter(), time.process_time()
        try:
            cluster, pending = self._build(n, now, times)
            tq = time.perf_counter()
            rows = self._queue_rows(cluster, now)
            times["queues"] = time.perf_counter() - tq
            decisions = self._schedule(cluster, now, n, times)
            unschedulable = self._unschedulable(cluster, decisions)
            self.warn(cluster, decisions, n)
        except IndexMismatch:
            raise  # CORRAL_CHECK_INDEX=1: a kept index is wrong, which no cycle may hide
        except Exception as exc:  # noqa: BLE001 - a cycle fault never stops the scheduler
            self.log.error("cycle failed", cycle=n, error=f"{type(exc).__name__}: {exc}")
            self.metrics.api_errors.labels("cycle", "scheduler", "fault").inc()
            self.last_cycle_end = time.monotonic()
            return None
        t2 = time.perf_counter()
        applied, report = self._apply(decisions, cluster, now, n)
        if not applied:
            self.last_cycle_end = time.monotonic()
            return None
        times["apply"] = time.perf_counter() - t2
        times["total"] = time.perf_counter() - t
        times["total_cpu"] = time.process_time() - cpu
        self._observe(decisions, times, pending)
        if rows is not None:
            self.metrics.queues.update(rows, list(cluster.resources.names), unschedulable)
        if report is not None:
            self.metrics.outcomes.observe(cluster, decisions, report, now + times["total"])
        if self.expected is not None and self.expected.due(n):
            times["forecast"] = self.expected.run(cluster, decisions, now + self.opts.period)
        if self.after_cycle is not None:
            self.after_cycle(cluster, decisions, now)
        return self._finish(CycleResult(n, now, decisions, report, times))

    def _build(self, n: int, now: float, times: dict[str, float]) -> tuple[Cluster, int]:
        """The cycle's cluster from the cache (ambiguous writes of earlier cycles read back first), and
        the pods waiting; the first cycle's cache written out with ``dump``."""
        t = time.perf_counter()
        dump = self.opts.dump is not None and n == 1
        if not self.opts.dry_run:
            self.applier.resolve()  # ambiguous writes of earlier cycles, read back first
        cluster, objects = self.cache.build(self.opts.schedulers, with_objects=dump)
        model = self.cache.model
        self.long_lived.after_build(model.last == "full")
        times["build"] = time.perf_counter() - t
        times["gc"] = self.long_lived.seconds  # within build: the last cycle's garbage collected
        times["view"] = self.cache.view_seconds
        if model.last == "full":
            self.log.debug("model assembled from every object", cycle=n, reason=model.reason)
        self.metrics.builds.labels(model.last).inc()
        if dump:
            assert self.opts.dump is not None
            path = self.cache.dump(self.opts.dump, objects, now)
            self.log.info(
                "cache dumped",
                path=str(path),
                now=format_time(now),
                reproduce=f"corral schedule {self.opts.dump} --now {format_time(now)}",
            )
        return cluster, model.pending

    def _schedule(self, cluster: Cluster, now: float, n: int, times: dict[str, float]) -> Decisions:
        """``run_cycle`` on the cycle's cluster (what ``corral schedule`` runs), and the conditions of
        Kubernetes' own PodGroups; the model is told what the cycle changed, so only that is put back."""
        t1, cpu1 = time.perf_counter(), time.process_time()
        decisions = run_cycle(cluster, self.config, REGISTRY, now, n, history=self.history)
        if cluster.jobs is self.cache.model.jobs:  # the kept model's cluster (not a dump's assembly)
            self.cache.model.state.changed(decisions.touched, decisions.changed_jobs)
        decisions.conditions.extend(native_conditions(cluster, decisions, n))
        times["schedule"] = time.perf_counter() - t1
        times["schedule_cpu"] = time.process_time() - cpu1
        return decisions

    def _unschedulable(self, cluster: Cluster, decisions: Decisions) -> dict[str, tuple[int, int]]:
        """Per leaf queue, the podgroups the cycle could not start and their waiting pods: from the
        model's kept counts when ``cluster`` is its own (checked with ``CORRAL_CHECK_INDEX=1``)."""
        model = self.cache.model
        if cluster.jobs is not model.jobs or decisions.touched is None:
            return unschedulable_by_queue(cluster, decisions)
        kept = unschedulable_kept(cluster, decisions, model.facts.waiting)
        if model.facts.check:
            full = unschedulable_by_queue(cluster, decisions)
            if kept != full:
                raise IndexMismatch(f"unschedulable pods by queue: kept {kept}, walked {full}")
        return kept

    def _apply(
        self, decisions: Decisions, cluster: Cluster, now: float, n: int
    ) -> tuple[bool, ApplyReport | None]:
        """Carry the decisions out (written, or with ``dry_run`` assumed and printed); False when the
        leadership was lost meanwhile (the runner stops)."""
        if self.opts.dry_run:
            self.sink.apply(decisions, cluster, now)
            if self.opts.cycles is None and _any(decisions):
                self.out.write(
                    json.dumps({"cycle": n, "now": format_time(now), **decisions.to_json(1)}) + "\n"
                )
                self.out.flush()
            return True, None
        try:
            return True, self.sink.apply(decisions, cluster, now)
        except NotLeader as exc:
            self.log.error("leadership lost: apply phase stopped", cycle=n, at=str(exc))
            self._lost()
            return False, None

    def _finish(self, result: CycleResult) -> CycleResult:
        """The cycle's record kept (bounded runs, tests) and logged when it decided anything."""
        decisions, times = result.decisions, result.seconds
        if self.opts.cycles is not None:  # kept for the caller of a bounded run; never grows unbounded
            self.total.extend(decisions)
        self.last_cycle_end = time.monotonic()
        if self.keep_results:
            self.results.append(result)
        if _any(decisions):
            self.log.info(
                "cycle",
                cycle=result.cycle,
                binds=len(decisions.binds),
                evictions=len(decisions.evictions),
                nominations=len(decisions.nominations),
                unschedulable=len(decisions.unschedulable),
                seconds={k: round(v, 4) for k, v in times.items()},
            )
        return result

    def warn(self, cluster: Cluster, decisions: Decisions, n: int) -> None:
        """Tell what corral does not act on for ``cluster`` — the objects' own warnings
        (``cluster.notes``: the reader's, kept by the watch cache, and the assembly's, kept by the
        incremental model), then the configuration's — once per object and text (see
        the module docstring): ``decisions.warnings`` becomes the podgroups' fields told in this cycle,
        in :func:`~corral.framework.notices.cluster_notices`' order, so cycle 1 lists what ``corral
        schedule`` lists."""
        try:
            model = self.cache.model
            podgroups = self.notices.of(cluster, model.version if cluster.jobs is model.jobs else None)
            notes = [
                *cluster.notes.warnings,
                *configuration_notes(cluster, self.config, REGISTRY, podgroups).warnings,
            ]
        except IndexMismatch:
            raise
        except Exception as exc:  # noqa: BLE001 - warnings never stop a cycle
            self.log.error("warnings not computed", cycle=n, error=f"{type(exc).__name__}: {exc}")
            return
        fresh = self.warned.fresh(notes)
        for obj, about in fresh:
            text = record_text(about)
            self.log.warning("not acted on", cycle=n, object=obj, warning=text)
            if not self.opts.dry_run:
                self.applier.recorder.warn(obj, text)
        told = {obj for obj, _ in fresh}
        decisions.warnings = [
            FieldWarning(w.obj.removeprefix("PodGroup "), w.field, w.message, n)
            for w in podgroups
            if w.obj in told
        ]

    def _queue_rows(self, cluster: Cluster, now: float) -> list[QueueRow] | None:
        """The rows of ``corral queues`` for this cycle's snapshot (a session opened and discarded
        before the cycle's own: the state its session opens on), recomputed once ``queue_metrics_interval``
        seconds passed since the last time (the last rows meanwhile); None when they cannot be computed
        (logged once; the cycle goes on without them)."""
        mono = time.monotonic()
        if self.queue_rows_last is not None and mono - self.queue_rows_at < self.opts.queue_metrics_interval:
            return self.queue_rows_last
        try:
            rows, _ = queue_rows(cluster, self.config, now)
        except Exception as exc:  # noqa: BLE001 - metrics never stop a cycle
            if not self.queue_rows_failed:
                self.log.error("queue metrics not computed", error=f"{type(exc).__name__}: {exc}")
            self.queue_rows_failed = True
            return None
        self.queue_rows_last, self.queue_rows_at = rows, mono
        return rows

    def _observe(self, decisions: Decisions, times: dict[str, float], pending: int) -> None:
        m = self.metrics
        m.cycle.observe(times["total"])
        for phase in ("build", "schedule", "apply"):
            m.phase.labels(phase).observe(times.get(phase, 0.0))
        for kind in ("binds", "evictions", "nominations", "podgroups", "node_locks", "unschedulable"):
            count = len(getattr(decisions, kind))
            if count:
                m.decisions.labels(kind).inc(count)
        m.pending.set(pending)
        m.leader.set(1 if self.is_leader() else 0)
        self.cache.count()


def _expected_starts(runner: Runner) -> ExpectedStarts | None:
    """The live forecast of ``runner`` (None when off): writes through the applier's guarded API and
    pool, none with ``dry_run``."""
    settings = runner.opts.forecast
    if settings.every <= 0:
        return None
    applier = runner.applier
    return ExpectedStarts(
        settings,
        runner.config,
        runner.metrics.registry,
        runner.log,
        find=runner.cache.find,
        patch=None if runner.opts.dry_run else applier.api.patch,
        assume=runner.cache.assume,
        pool=applier.pool,
        observe=runner.metrics.phase.labels("forecast").observe,
    )


def _any(d: Decisions) -> bool:
    return bool(d.binds or d.evictions or d.nominations or d.podgroups or d.node_locks)
