"""The discrete-event simulator (SPEC.md §1.3, §4; DESIGN.md convention 7).

An event heap of ``(time, kind, sequence, payload)``, an event's kind (:mod:`corral.sim.events`) being
its priority at one instant; :meth:`Engine.step` handles one event, looking its handler up in a table by
kind (every handler takes the event's payload), and :meth:`Engine.run` runs to the end or to ``until``. Events at the same instant run in this order: job
completions, evicted pods leaving, node failures and repairs, pod starts, injected evictions, job
submissions, the scheduling cycle, queue samples — so a cycle sees everything that happened at its
instant. Ties at one instant and priority break on the sequence number (insertion order), which makes a
run deterministic: the same inputs give the same result, record for record.

**Cycles.** A cycle runs at multiples of ``schedule_period`` through the same core as ``corral
schedule`` (:func:`~corral.framework.cycle.run_cycle`, then
:func:`~corral.framework.cycle.apply_decisions` with binds as ``Bound`` and evictions as
``Releasing``). A cycle is skipped when no job waits or when nothing changed since the last one (no
submit, completion, release or node event, and the last cycle made no decision); with ``heartbeat`` set,
a cycle also runs at least that often while jobs wait (for time-dependent plugins). When cycles run is
decided by a :class:`~corral.sim.cycle_clock.CycleClock` (follow-up cycles and livelocks too); the
engine schedules what it plans.

**Jobs.** A job is a podgroup of pods (roles, requests, minMember, queue, priority, topology). Bound pods
run after ``startup_delay``. A job makes progress only while at least minMember of its pods (and every
role's minimum) run; it completes after ``duration`` seconds of such progress. An eviction that drops a
running gang below its minimum restarts it: the progress since its last checkpoint (every
``checkpoint_interval`` seconds of progress; ``None``: never) is lost, and so are that many seconds times
the GPUs it held (``gpu_hours_lost``). With ``restart_policy="job"`` (the default, Volcano's RestartJob)
its surviving pods stop too and the podgroup goes back to Pending (Inqueue without an ``enqueue``
action); with ``"pods"`` the survivors keep their nodes and the job stays Inqueue until its evicted pods
are placed again. Evicting a surplus pod of an elastic job does not restart it. With a speed model
(``options.speed``, :mod:`corral.sim.speed`) progress is work done at a rate read from the job's
placement, GPU type and elastic pods, read again whenever its running pods change. Evicted pods hold their
node for ``eviction_grace`` seconds, then come back as Pending pods of their job. A node that fails loses
its pods at once. Finished jobs leave the cluster, so a cycle costs what is active, not what has been.

**Metrics** are an observer the engine calls (:class:`~corral.sim.metrics.RunMetrics`: submitted,
started, evicted, stopped, completed, unschedulable, and the samples), which reads the engine's jobs by
state (:class:`~corral.sim.simjob.JobBook`) and never writes them. They make (:mod:`corral.sim.result`)
one :class:`JobRecord` per submitted job; a :class:`ClusterSample` whenever GPU use or the job counts change
(GPUs held by bound, running and releasing pods over the GPUs of live nodes); a :class:`QueueSample` per
queue every ``sample_period``. A queue's deserved share is computed by weight water-filling over GPUs —
Volcano proportion's algorithm on one dimension: capped by capability and by what the queue's active
jobs ask for, raised to its guarantee — so that every configuration is measured against the same
yardstick.
"""

from __future__ import annotations

import heapq
import time as _time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from corral.errors import InputError
from corral.framework.config import Config, Registry
from corral.framework.cycle import apply_decisions, run_cycle
from corral.framework.decisions import Decisions
from corral.framework.memo import ClusterHistory
from corral.framework.session import PENDING_LIKE
from corral.model import OCCUPYING_STATES, Cluster, PodGroupPhase, Task, TaskStatus
from corral.model.quantity import MILLI
from corral.model.resources import GPU
from corral.sim.checks import check_workload
from corral.sim.cycle_clock import CycleClock, heartbeat
from corral.sim.events import COMPLETE, CYCLE, EVICT, HOLDING, NODE, RELEASE, SAMPLE, START, SUBMIT
from corral.sim.jobbuild import JobBuilder, meets_minimum, placement, remember_run
from corral.sim.jobspec import JobSpec
from corral.sim.metrics import RunMetrics, water_fill
from corral.sim.options import SimOptions
from corral.sim.preemption import resume_overhead
from corral.sim.result import SimResult
from corral.sim.simjob import JobBook, SimJob
from corral.sim.speed import SpeedTracker

__all__ = ["Engine", "ProgressFn", "SimOptions", "simulate", "water_fill"]

ProgressFn = Callable[[float, int, int], None]


class Engine:
    """One simulation of ``jobs`` on ``cluster`` (which it mutates: pass a fresh one) under ``config``.

    Inputs are validated here, before anything runs (:func:`~corral.sim.checks.check_workload`):
    bad input raises InputError; jobs that can never run are recorded as ``never_fits`` with their
    reason in ``meta["never_fits"]``. ``progress(now, finished_jobs, total_jobs)`` is called now and
    then (at most every 0.2 s of wall time) and at the end. ``metrics`` is the run's observer
    (:class:`~corral.sim.metrics.RunMetrics`); ``book`` its jobs by state (read it, do not write it).
    """

    def __init__(
        self,
        cluster: Cluster,
        jobs: Sequence[JobSpec],
        config: Config,
        registry: Registry | None = None,
        options: SimOptions | None = None,
        *,
        progress: ProgressFn | None = None,
        meta: Mapping[str, object] | None = None,
        history: ClusterHistory | None = None,
    ) -> None:
        if registry is None:
            from corral.registry import REGISTRY

            registry = REGISTRY
        self.cluster, self.config, self.registry = cluster, config, registry
        self.options = options = options or SimOptions()
        self.specs = sorted(jobs, key=lambda j: (j.submit, j.name))
        from corral.sim.workload import tie_times

        self._created = tie_times(self.specs, self.options.ties, self.options.tie_seed)
        self.never_fits = check_workload(cluster, self.specs)
        self.progress_fn = progress
        self.now = 0.0
        self.events = self.cycles = 0
        self._init_state()
        # what the cycles remember; every job an event changes is reported to it (history.changed). An
        # untracked history (given by a test) makes every cycle walk every job: the same decisions.
        self.history = history if history is not None else ClusterHistory(tracked=True)
        self._speed = SpeedTracker(options.speed, cluster) if options.speed else None
        self.metrics = self._metrics(meta)
        self._clock = CycleClock(options.schedule_period, heartbeat(config, options, registry))
        self._handlers = self._dispatch()
        self._progress_at = 0.0
        for index in range(len(self.specs)):
            self._push(self.specs[index].submit, SUBMIT, index)
        self._push(0.0, SAMPLE, 0)

    def _metrics(self, meta: Mapping[str, object] | None) -> RunMetrics:
        """The run's observer; queues sampled every ``sample_period``, else every period or 1/500 of the run."""
        options, specs = self.options, self.specs
        span = options.until if options.until is not None else (specs[-1].submit if specs else 0.0)
        return RunMetrics(
            self.cluster,
            self.config,
            self.registry,
            specs,
            self.book,
            options,
            never_fits=self.never_fits,
            enqueue=self._enqueue,
            period=options.sample_period or max(options.schedule_period, span / 500.0),
            speed=self._speed,
            meta=meta,
        )

    def _dispatch(self) -> list[Callable[[Any], None]]:
        """step()'s dispatch table: the handler of each event kind, indexed by the kind (0, 1, ...)."""
        handlers: dict[int, Callable[[Any], None]] = {
            SUBMIT: self._submit,
            CYCLE: self._cycle,
            COMPLETE: self._complete,
            START: self._start,
            RELEASE: self._release_event,
            EVICT: self._inject,
            NODE: self._node,
            SAMPLE: self._sample_queues,
        }
        return [handlers[kind] for kind in range(len(handlers))]

    def _init_state(self) -> None:
        """The engine's own state at the start of a run."""
        self._heap: list[tuple[float, int, int, Any]] = []  # (time, kind, sequence, payload)
        self._seq = 0
        self._enqueue = any(a.name == "enqueue" for a in self.config.actions)
        self._gpu = self.cluster.resources.get(GPU)  # the GPU column (None: no GPUs)
        self._jobs = JobBuilder(self.cluster, self.options, self._created)
        self.book = JobBook()
        # the book's sets under the names the engine uses on its hot paths
        self._active, self._waiting = self.book.active, self.book.waiting
        self._running, self._done = self.book.running, self.book.done
        self._started: set[str] = set()  # uids of pods in state Running
        self._release_token: dict[str, int] = {}
        self._forecast_at: float | None = None  # the next instant an expected-start forecast is due
        self._submitted = 0  # specs submitted so far (a prefix of ``specs``)
        self._changed = True  # something a cluster sample shows may have changed

    # -- the heap --------------------------------------------------------------------------------
    def _push(self, at: float, kind: int, payload: Any) -> int:
        self._seq += 1
        heapq.heappush(self._heap, (float(at), kind, self._seq, payload))
        return self._seq

    def evict(self, at: float, pods: Iterable[str]) -> None:
        """Inject an eviction of the pods named ``namespace/name`` (or of every pod of a job given by
        its name) at time ``at``; pods that are not bound or running then are left alone."""
        self._push(float(at), EVICT, tuple(pods))

    def node_down(self, at: float, node: str, duration: float | None = None) -> None:
        """Fail ``node`` at ``at`` (its pods are lost at once); repair it ``duration`` later if given."""
        row = self._row(node)
        self._push(float(at), NODE, (row, True))
        if duration is not None:
            self._push(float(at) + duration, NODE, (row, False))

    def node_up(self, at: float, node: str) -> None:
        """Repair ``node`` at ``at``."""
        self._push(float(at), NODE, (self._row(node), False))

    def _row(self, node: str) -> int:
        row = self.cluster.nodes.index.get(node)
        if row is None:
            raise InputError(f"no node named {node!r}", obj="node event")
        return row

    # -- running -----------------------------------------------------------------------------------
    def step(self, until: float | None = None) -> bool:
        """Handle the next event (not past ``until``); False when there is none left to handle."""
        until = self.options.until if until is None else until
        if not self._heap or (until is not None and self._heap[0][0] > until):
            return False
        at, kind, _, payload = heapq.heappop(self._heap)
        if kind == SAMPLE and not self._heap:
            return False  # nothing else will happen: the run is over
        self.now = at
        self.events += 1
        self._handlers[kind](payload)
        if kind != CYCLE and kind != SAMPLE:
            self._clock.event()
        if self._changed:
            self._changed = False
            self.metrics.sample(at)
        if self.progress_fn is not None and (self.events & 255) == 0:
            self._report_progress(False)
        return True

    def run(self, until: float | None = None) -> SimResult:
        """Run until no event is left (or to ``until``, default ``options.until``); return the result."""
        until = self.options.until if until is None else until
        while self.step(until):
            pass
        if until is not None:
            self.now = max(self.now, until)
        self._changed = False
        self.metrics.sample(self.now)
        self.metrics.sample_queues(self.now, final=True)
        self._report_progress(True)
        return self.result()

    def _sample_queues(self, _: object) -> None:
        """A SAMPLE event: queue samples now, and the next one on the grid while events are left."""
        if self.metrics.sample_queues(self.now):
            self._changed = True  # the fragmentation a cluster sample shows may differ
        if self._heap:
            self._push(self.metrics.next_sample(self.now), SAMPLE, 0)

    def result(self) -> SimResult:
        """The flat records of the run so far (jobs in submit order; jobs not yet submitted are left out
        and counted in ``meta["jobs_not_submitted"]``)."""
        return self.metrics.result(self.now, self.events, self.cycles, self._submitted, self._clock.stalled)

    def _report_progress(self, final: bool) -> None:
        if self.progress_fn is None:
            return
        wall = _time.monotonic()
        if final or wall - self._progress_at >= 0.2:
            self._progress_at = wall
            self.progress_fn(self.now, len(self._done), len(self.specs))

    def running_jobs(self) -> list[str]:
        """Uids of the jobs making progress now (at least their minimum of pods running), sorted."""
        return sorted(self._running)

    # -- jobs --------------------------------------------------------------------------------------
    def _submit(self, index: int) -> None:
        spec = self.specs[index]
        self._submitted += 1
        if spec.name in self.never_fits:
            return
        sim = self._jobs.build(spec)
        job = sim.job
        self.cluster.jobs[job.uid] = job
        for task in job.tasks:
            self.cluster.tasks[task.uid] = task
        self._active[job.uid] = sim
        self._waiting[job.uid] = sim
        self.metrics.submitted(sim)
        self.history.changed(job.uid)
        self._changed = True
        self._wake()

    def _update(
        self, sim: SimJob, held_gpus: float = 0.0, preempted: bool = False, moved: bool = False
    ) -> None:
        """Start or stop ``sim``'s progress after its pods changed; a stop is a restart (``preempted``:
        caused by the scheduler's evictions; ``moved``: by ``consolidate``'s moves)."""
        ok = meets_minimum(sim.job)
        uid = sim.job.uid
        if ok and sim.since is None:
            restore = resume_overhead(self.options.resume_overhead, sim.gpus) if sim.restarts else 0.0
            sim.run_from, sim.since = self.now, self.now + restore
            if sim.first_start is None:
                sim.first_start = self.now
                sim.placement = placement(self.cluster, sim.job)
            self.metrics.started(sim)  # running (again after a restart): no longer waiting
            self._running.add(uid)
            if self._speed is None:
                finish = sim.since + max(sim.spec.duration - sim.progress, 0.0)
            else:
                finish = self._speed.begin(sim, self.now)
            self._push(finish, COMPLETE, (sim, sim.epoch))
            self._changed = True
        elif ok and sim.since is not None and self._speed is not None:
            finish_at = self._speed.rerate(sim, self.now)  # its pods changed: so may its rate
            if finish_at is not None:
                sim.epoch += 1
                self._push(finish_at, COMPLETE, (sim, sim.epoch))
        elif not ok and sim.since is not None:
            self._restart(sim, held_gpus, preempted, moved)

    def _restart(self, sim: SimJob, held_gpus: float, preempted: bool = False, moved: bool = False) -> None:
        """The gang fell below its minimum: roll back to the last checkpoint. Policy ``pods``: the
        surviving pods keep their nodes and the job stays admitted (Inqueue) until its evicted pods are
        placed again; policy ``job``: the survivors are stopped too and the podgroup goes back to Pending
        (Inqueue when no ``enqueue`` action is configured, as nothing would admit it)."""
        assert sim.since is not None  # only a job making progress restarts (see _update)
        ran = sim.end_run(self.now)
        sim.progress += ran if self._speed is None else self._speed.end(sim, self.now)
        sim.since = None
        sim.epoch += 1
        self._running.discard(sim.job.uid)
        if preempted:
            sim.preemptions += 1
        # the scheduler's own evictions may checkpoint the gang as they stop it (simulation.preemption)
        keep = preempted and self.options.checkpoint_on_preempt
        sim.roll_back(self.options.checkpoint_interval, held_gpus, keep=keep, moved=moved)
        self.metrics.stopped(sim)
        self.history.changed(sim.job.uid)
        remember_run(sim, ran, held_gpus)
        self._changed = True
        if self.options.restart_policy == "pods":
            sim.job.phase = PodGroupPhase.INQUEUE
            return
        sim.job.phase = PodGroupPhase.PENDING if self._enqueue else PodGroupPhase.INQUEUE
        for task in sim.job.tasks:
            if task.status in HOLDING:
                self._mark_releasing(task)
                self._started.discard(task.uid)
                self._let_go(task, self.options.eviction_grace)

    def _mark_releasing(self, task: Task) -> None:
        self.history.changed(task.job.uid)
        self.cluster.charge(task, -1)
        task.status = TaskStatus.RELEASING
        self.cluster.charge(task, +1)

    def _start(self, payload: tuple[Task, float]) -> None:
        task, bound_at = payload
        if (
            task.status is not TaskStatus.BOUND
            or task.start_time != bound_at
            or task.uid not in self.cluster.tasks
        ):
            return
        self._run_task(task)
        self._update(self._active[task.job.uid])

    def _run_task(self, task: Task) -> None:
        task.status, task.start_time = TaskStatus.RUNNING, self.now
        self.history.changed(task.job.uid)
        self._started.add(task.uid)
        self._changed = True

    def _complete(self, payload: tuple[SimJob, int]) -> None:
        sim, epoch = payload
        uid = sim.job.uid
        if epoch != sim.epoch or uid not in self._active or sim.since is None:
            return
        sim.end_run(self.now)
        if self._speed is not None:
            self._speed.end(sim, self.now)
        sim.progress = sim.spec.duration
        sim.since, sim.end = None, self.now
        cluster = self.cluster
        for task in sim.job.tasks:
            cluster.charge(task, -1)
            task.status = TaskStatus.SUCCEEDED
            cluster.tasks.pop(task.uid, None)
            self._started.discard(task.uid)
            self._release_token.pop(task.uid, None)
        del cluster.jobs[uid]
        self.history.changed(uid)  # gone: the kept job index drops it
        del self._active[uid]
        self._waiting.pop(uid, None)
        self._running.discard(uid)
        self.metrics.completed(sim)
        self._done[uid] = sim
        self._changed = True
        self._wake()

    # -- evictions ---------------------------------------------------------------------------------
    def _inject(self, names: tuple[str, ...]) -> None:
        ns, cluster = self.options.namespace, self.cluster
        tasks = []
        for name in names:
            key = name if "/" in name else f"{ns}/{name}"
            if key in cluster.tasks:
                tasks.append(cluster.tasks[key])
            elif key in cluster.jobs:
                tasks.extend(cluster.jobs[key].tasks)
        victims = [t for t in dict.fromkeys(tasks) if t.status in HOLDING]
        for task in victims:
            self._mark_releasing(task)
        self._evicted(victims, self.options.eviction_grace)

    def _evicted(
        self, tasks: Sequence[Task], grace: float, preempted: bool = False, moved: bool = False
    ) -> None:
        """Count evictions (tasks are Releasing now), restart gangs that fell below their minimum and
        let the pods go after ``grace``. ``preempted``: the scheduler's own decisions evicted them;
        ``moved``: ``consolidate`` moved them (they come back as Pending pods, as every evicted pod)."""
        by_job: dict[str, list[Task]] = {}
        for task in tasks:
            by_job.setdefault(task.job.uid, []).append(task)
        for uid, group in by_job.items():
            sim = self._active[uid]
            sim.evictions += len(group)
            sim.moves += len(group) if moved else 0
            self.metrics.evicted(sim, len(group))
            self._changed = True
            held = sum(
                self._gpus(t)
                for t in sim.job.tasks
                if t.status is TaskStatus.RUNNING or t.uid in self._started
            )
            for task in group:
                self._started.discard(task.uid)
            self._update(sim, held, preempted, moved)
        for task in tasks:
            self._let_go(task, grace)
        self._changed = True

    def _let_go(self, task: Task, grace: float) -> None:
        """A Releasing pod leaves its node after ``grace`` seconds (at once when 0)."""
        if grace <= 0:
            self._release(task)
        else:
            token = self._seq + 1  # the sequence number _push is about to use
            self._push(self.now + grace, RELEASE, (task, token))
            self._release_token[task.uid] = token

    def _gpus(self, task: Task) -> float:
        return float(task.request[self._gpu]) / MILLI if self._gpu is not None else 0.0

    def _release_event(self, payload: tuple[Task, int]) -> None:
        task, token = payload
        if self._release_token.get(task.uid) == token:
            self._release(task)

    def _release(self, task: Task) -> None:
        """An evicted pod is gone from its node: it comes back as a Pending pod of its job."""
        self._release_token.pop(task.uid, None)
        if task.uid not in self.cluster.tasks or task.status is not TaskStatus.RELEASING:
            return
        self.cluster.charge(task, -1)
        row = task.nominated  # a moved pod comes back nominated to its new node (unless it is down)
        task.status, task.node, task.nominated, task.start_time = TaskStatus.PENDING, -1, -1, None
        if row >= 0 and not self.cluster.nodes.down[row]:
            task.status, task.nominated = TaskStatus.PIPELINED, row
            self.cluster.charge(task, +1)
        uid = task.job.uid
        self.history.changed(uid)
        sim = self._active[uid]
        self._waiting[uid] = sim
        self._changed = True
        self._wake()

    def _node(self, payload: tuple[int, bool]) -> None:
        row, down = payload
        nodes = self.cluster.nodes
        if bool(nodes.down[row]) == down:
            return
        nodes.down[row] = down
        if down:
            lost, cleared = [], []
            for task in self.cluster.tasks.values():
                if task.node == row and task.status in OCCUPYING_STATES:
                    lost.append(task)
                elif task.status is TaskStatus.PIPELINED and task.nominated == row:
                    cleared.append(task)
            for task in cleared:
                self.cluster.charge(task, -1)
                task.status, task.nominated = TaskStatus.PENDING, -1
                self.history.changed(task.job.uid)
            fresh = [t for t in lost if t.status is not TaskStatus.RELEASING]
            for task in fresh:
                self._mark_releasing(task)
            self._evicted(fresh, 0.0)
            for task in lost:
                self._release(task)
        self._changed = True
        self._wake()

    # -- cycles ------------------------------------------------------------------------------------
    def _wake(self) -> None:
        """Something changed: make sure a cycle is coming at the next period boundary."""
        at = self._clock.wake(self.now, bool(self._waiting))
        if at is not None:
            self._push(at, CYCLE, None)

    def _waiting_pods_moved(self, touched: Sequence[tuple[Task, TaskStatus, int]]) -> bool:
        """Did the cycle leave a pod of a waiting job in another state (status or nomination) than it
        found it? Only the pods its operations changed can differ (``Decisions.touched``), so this
        costs what the cycle did, not what waits."""
        waiting = self._waiting
        return any(
            t.job.uid in waiting and (t.status is not status or t.nominated != nominated)
            for t, status, nominated in touched
        )

    def _forecast(self) -> None:
        """The expected start a forecast made now gives each waiting job; the first one made for a job
        is kept, so its record can show how far off it was (:mod:`corral.sim.forecast`)."""
        from corral.sim.forecast import first_estimates, plan_speed

        assert self.options.forecast_every is not None
        self._forecast_at = self.now + self.options.forecast_every
        speed = (
            None if self._speed is None else plan_speed(self._speed, self._active, self._running, self.now)
        )
        first_estimates(self.cluster, self.config, self.now, self.metrics.expected, speed)

    def _cycle(self, payload: str | None) -> None:
        """A CYCLE event (payload ``"beat"``: the heartbeat's): run one scheduling cycle when jobs wait
        and something changed since the last one, carry its decisions out, and plan the next cycle."""
        if not self._clock.begin(self.now, payload, bool(self._waiting)):
            return
        if self.options.forecast_every and (self._forecast_at is None or self.now >= self._forecast_at):
            self._forecast()
        self.cycles += 1
        config, history = self.config, self.history
        decisions = run_cycle(
            self.cluster, config, self.registry, self.now, self.cycles, explain=False, history=history
        )
        apply_decisions(self.cluster, decisions, self.now, bound=TaskStatus.BOUND, remove_evicted=False)
        changed = self._carry_out(decisions)
        self._changed = True
        # the next cycles (CycleClock): a follow-up at once when timeslice stopped jobs whose pods left at
        # once (Lucid and Tiresias start the jobs that take their room in the step that stops the
        # others), the next period's, the heartbeat's (the heartbeat option's is literal: no horizon);
        # none once the policy livelocks
        follow = self.options.eviction_grace <= 0 and any(
            e.action == "timeslice" for e in decisions.evictions
        )
        horizon = None if self.options.heartbeat else decisions.clock_horizon
        bound, waiting = bool(decisions.binds), bool(self._waiting)
        ends = self._clock.end(
            self.now, bound=bound, changed=changed, follow=follow, waiting=waiting, horizon=horizon
        )
        for at, kind in ends:
            self._push(at, CYCLE, kind)

    def _carry_out(self, decisions: Decisions) -> bool:
        """What the engine does with a cycle's decisions once they are applied to the cluster: bound pods
        start (after ``startup_delay``), evicted ones go (after ``eviction_grace``), jobs start or stop,
        the reasons reach the metrics and jobs with nothing left to place stop waiting. True when the
        cycle changed anything."""
        tasks = self.cluster.tasks
        touched: dict[str, SimJob] = {}
        for bind in decisions.binds:
            task = tasks[bind.pod]
            uid = task.job.uid
            touched[uid] = self._active[uid]
            if self.options.startup_delay <= 0:
                self._run_task(task)
            else:
                self._push(self.now + self.options.startup_delay, START, (task, task.start_time))
        moves = [tasks[e.pod] for e in decisions.evictions if e.action == "consolidate"]
        kills = [tasks[e.pod] for e in decisions.evictions if e.action != "consolidate"]
        self._evicted(kills, self.options.eviction_grace, preempted=True)
        if moves:
            self._evicted(moves, self.options.eviction_grace, preempted=True, moved=True)
        for sim in touched.values():
            self._update(sim)
        for record in decisions.unschedulable:
            if record.podgroup in self._waiting:
                self.metrics.unschedulable(record.podgroup, record.reason)
        moved = decisions.touched
        assert moved is not None  # a cycle's session always records the pods it changed
        changed = bool(
            decisions.binds or decisions.evictions or decisions.podgroups or decisions.node_locks
        ) or self._waiting_pods_moved(moved)
        for job in {id(t.job): t.job for t, _, _ in moved}.values():
            if job.uid in self._waiting and not any(t.status in PENDING_LIKE for t in job.tasks):
                del self._waiting[job.uid]
        return changed


def simulate(
    cluster: Cluster,
    jobs: Sequence[JobSpec],
    config: Config,
    registry: Registry | None = None,
    options: SimOptions | None = None,
    *,
    progress: ProgressFn | None = None,
    meta: Mapping[str, object] | None = None,
) -> SimResult:
    """Build an :class:`Engine` and run it to the end (or ``options.until``)."""
    return Engine(cluster, jobs, config, registry, options, progress=progress, meta=meta).run()
