"""The discrete-event simulator (SPEC.md §1.3, §4; DESIGN.md convention 7).

An event heap of ``(time, priority, sequence, kind, payload)``; :meth:`Engine.step` handles one event and
:meth:`Engine.run` runs to the end or to ``until``. Events at the same instant run in this order: job
completions, evicted pods leaving, node failures and repairs, pod starts, injected evictions, job
submissions, the scheduling cycle, queue samples — so a cycle sees everything that happened at its
instant. Ties at one instant and priority break on the sequence number (insertion order), which makes a
run deterministic: the same inputs give the same result, record for record.

**Cycles.** A cycle runs at multiples of ``schedule_period`` through the same core as ``corral
schedule`` (:func:`~corral.framework.cycle.run_cycle`, then
:func:`~corral.framework.cycle.apply_decisions` with binds as ``Bound`` and evictions as
``Releasing``). A cycle is skipped when no job waits or when nothing changed since the last one (no
submit, completion, release or node event, and the last cycle made no decision); with ``heartbeat`` set,
a cycle also runs at least that often while jobs wait (for time-dependent plugins).

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

**Metrics** (:mod:`corral.sim.result`): one :class:`JobRecord` per submitted job; a
:class:`ClusterSample` whenever GPU use or the job counts change (GPUs held by bound, running and
releasing pods over the GPUs of live nodes); a :class:`QueueSample` per queue every ``sample_period``.
A queue's deserved share is computed here by weight water-filling over GPUs — Volcano proportion's
algorithm on one dimension: capped by capability and by what the queue's active jobs ask for, raised to
its guarantee — so that every configuration is measured against the same yardstick.
"""

from __future__ import annotations

import heapq
import math
import time as _time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from corral.errors import InputError
from corral.framework.config import Config, Registry
from corral.framework.cycle import apply_decisions, run_cycle
from corral.framework.decisions import Decisions
from corral.framework.memo import ClusterHistory
from corral.framework.notices import job_notices, topology_provider
from corral.framework.session import PENDING_LIKE
from corral.model import OCCUPYING_STATES, Cluster, Job, PodClass, PodGroupPhase, Task, TaskStatus
from corral.model.annotations import ATTAINED_SERVICE, COMPLETED_RUNTIME, EXPECTED_RUNTIME
from corral.model.clock import parse_duration
from corral.model.notes import record_text
from corral.model.quantity import MILLI
from corral.model.resources import GPU
from corral.sim.clusters import check_workload, min_counts, pod_vector
from corral.sim.jobspec import JobSpec
from corral.sim.metrics import EngineMetrics, water_fill
from corral.sim.options import SimOptions
from corral.sim.result import SimResult
from corral.sim.simjob import SimJob
from corral.sim.speed import SpeedTracker

__all__ = ["Engine", "ProgressFn", "SimOptions", "simulate", "water_fill"]

from corral.sim.events import (  # noqa: F401
    _HOLDING,
    COMPLETE,
    CYCLE,
    EVICT,
    MAX_QUEUE_INSTANTS,
    NODE,
    RELEASE,
    SAMPLE,
    START,
    SUBMIT,
)

ProgressFn = Callable[[float, int, int], None]
_STALL_CYCLES = 100


class Engine(EngineMetrics):
    """One simulation of ``jobs`` on ``cluster`` (which it mutates: pass a fresh one) under ``config``.

    Inputs are validated here, before anything runs (:func:`~corral.sim.clusters.check_workload`):
    bad input raises InputError; jobs that can never run are recorded as ``never_fits`` with their
    reason in ``meta["never_fits"]``. ``progress(now, finished_jobs, total_jobs)`` is called now and
    then (at most every 0.2 s of wall time) and at the end.
    """

    # The state EngineMetrics reads is typed on EngineMetrics; the rest is typed here.
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
        self.options = options or SimOptions()
        self.specs = sorted(jobs, key=lambda j: (j.submit, j.name))
        self.never_fits = check_workload(cluster, self.specs)
        self.progress_fn = progress
        self.meta = dict(meta or {})
        self.now = 0.0
        self.events = 0
        self.cycles = 0
        self._heap = []
        self._seq = 0
        self._enqueue = any(a.name == "enqueue" for a in config.actions)
        self._gpu = cluster.resources.get(GPU)
        self._active = {}
        self._waiting = {}
        self._running = set()
        self._done = {}
        self._started: set[str] = set()  # uids of pods in state Running
        self._release_token: dict[str, int] = {}
        self._reasons = {}
        self._last_reasons = {}
        self._forecast_at = None
        self._expected = {}
        self._submitted = 0
        #: per job: what the configuration does not act on (framework/notices.py), for its record
        self._notes: dict[str, str] = {}
        self._topology = topology_provider(config, registry)
        self._speed = SpeedTracker(self.options.speed, cluster) if self.options.speed else None
        self._dirty = False
        # a time-slicing action re-ranks by time alone (attained service, remaining time): it needs a
        # cycle every period while jobs wait, even when no event happened (the period is its interval)
        slicing = [a.args.interval for a in config.actions if a.name == "timeslice"]
        self._heartbeat = self.options.heartbeat or (
            max(slicing[0], self.options.schedule_period) if slicing else None
        )
        self._follow_at: float | None = None
        self._cycle_at: float | None = None
        self._beat_at: float | None = None
        self._last_cycle = -math.inf
        self._idle_cycles = 0
        self._stalled = None
        self._changed = True
        self._last_sample = None
        self._evictions = self._restarts = 0
        self._demand = 0.0
        self._common_gpu = None
        self._samples = []
        self._queue_samples = []
        self._queues = sorted({s.queue for s in self.specs})
        self._role_cache: dict[int, list] = {}
        # what the cycles remember; every job an event changes is reported to it (history.changed). An
        # untracked history (given by a test) makes every cycle walk every job: the same decisions.
        self.history = history if history is not None else ClusterHistory(tracked=True)
        self._wall = _time.monotonic()
        self._progress_at = 0.0
        for index, spec in enumerate(self.specs):
            self._push(spec.submit, SUBMIT, index)
        span = (
            self.options.until
            if self.options.until is not None
            else (self.specs[-1].submit if self.specs else 0.0)
        )
        period = self.options.sample_period or max(self.options.schedule_period, span / 500.0)
        self._sample_period = period
        self._push(0.0, SAMPLE, 0)

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
        row = self.cluster.nodes.index.get(node)
        if row is None:
            raise InputError(f"no node named {node!r}", obj="node event")
        self._push(float(at), NODE, (row, True))
        if duration is not None:
            self._push(float(at) + duration, NODE, (row, False))

    def node_up(self, at: float, node: str) -> None:
        row = self.cluster.nodes.index.get(node)
        if row is None:
            raise InputError(f"no node named {node!r}", obj="node event")
        self._push(float(at), NODE, (row, False))

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
        if kind == SUBMIT:
            self._submit(self.specs[payload])
        elif kind == CYCLE:
            self._cycle(payload == "beat")
        elif kind == COMPLETE:
            self._complete(*payload)
        elif kind == START:
            self._start(*payload)
        elif kind == RELEASE:
            self._release_event(*payload)
        elif kind == EVICT:
            self._inject(payload)
        elif kind == NODE:
            self._node(*payload)
        elif kind == SAMPLE:
            self._sample_queues()
        if kind != CYCLE and kind != SAMPLE:
            self._idle_cycles = 0
        if self._changed:
            self._sample_cluster()
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
        self._changed = True
        self._sample_cluster()
        self._sample_queues(final=True)
        self._report_progress(True)
        return self.result()

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
    def _submit(self, spec: JobSpec) -> None:
        self._submitted += 1
        if spec.name in self.never_fits:
            return
        sim = self._build(spec)
        job = sim.job
        self.cluster.jobs[job.uid] = job
        for task in job.tasks:
            self.cluster.tasks[task.uid] = task
        self._active[job.uid] = sim
        self._waiting[job.uid] = sim
        if job.topology_mode:
            notes = job_notices(job, self._topology, bool(self.cluster.hypernodes))
            if notes:
                self._notes[job.uid] = record_text(notes)
        self.history.changed(job.uid)
        self._demand += sim.gpus
        self._changed = True
        self._wake()

    def _roles(self, spec: JobSpec) -> list:
        """Per role (name, count, request vector, class key, GPUs); the vectors are shared by every pod
        of the role (nothing writes into a task's request) and cached across jobs of one trace."""
        got = self._role_cache.get(id(spec.roles))
        if got is None or got[0] is not spec.roles:
            res = self.cluster.resources
            rows = []
            for role in spec.roles:
                req = pod_vector(res, role.requests, spec.source or spec.name)
                gpus = float(req[self._gpu]) / MILLI if self._gpu is not None else 0.0
                rows.append((role, req, PodClass(req.tobytes()), gpus))
            got = self._role_cache[id(spec.roles)] = [spec.roles, rows]
        return got[1]

    def _build(self, spec: JobSpec) -> SimJob:
        """The Job and its Pending pods; minResources is the request of the job's minimum (Volcano)."""
        ns = self.options.namespace
        job = Job(
            uid=f"{ns}/{spec.name}",
            name=spec.name,
            namespace=ns,
            queue=spec.queue,
            min_member=spec.min_pods,
            priority=spec.priority,
            creation=spec.submit,
            annotations=dict(spec.annotations),
            min_resources=self.cluster.resources.zeros(),
        )
        if self.options.estimates is not None:
            job.annotations[EXPECTED_RUNTIME] = (
                f"{self.options.estimates.estimate(spec.name, spec.duration):.0f}s"
            )
        job.min_task_member = {r.name: r.min_count for r in spec.roles if r.min_count is not None}
        if spec.topology is not None:
            job.topology_mode, job.topology_tier = spec.topology
        rows, counts, gpus = self._roles(spec), min_counts(spec), 0.0
        for role, req, klass, g in rows:
            job.min_resources += req * counts[role.name]
            prefix = (
                f"{spec.name}-" if len(rows) == 1 and not role.name else f"{spec.name}-{role.name or 'pod'}-"
            )
            for i in range(role.count):
                job.tasks.append(
                    Task(
                        uid=f"{ns}/{prefix}{i}",
                        name=f"{prefix}{i}",
                        namespace=ns,
                        request=req,
                        job=job,
                        role=role.name,
                        priority=spec.priority,
                        creation=spec.submit,
                        klass=klass,
                    )
                )
            gpus += g * role.count
        return SimJob(spec, job, gpus)

    def _meets(self, job: Job) -> bool:
        running = sum(1 for t in job.tasks if t.status is TaskStatus.RUNNING)
        if running < job.min_member:
            return False
        if job.min_task_member:
            counts = job.role_counts(frozenset({TaskStatus.RUNNING}))
            return all(counts.get(r, 0) >= n for r, n in job.min_task_member.items())
        return True

    def _update(
        self, sim: SimJob, held_gpus: float = 0.0, preempted: bool = False, moved: bool = False
    ) -> None:
        """Start or stop ``sim``'s progress after its pods changed; a stop is a restart (``preempted``:
        caused by the scheduler's evictions; ``moved``: by ``consolidate``'s moves)."""
        ok = self._meets(sim.job)
        uid = sim.job.uid
        if ok and sim.since is None:
            restore = self._resume_overhead(sim.gpus) if sim.restarts else 0.0
            sim.run_from, sim.since = self.now, self.now + restore
            if sim.first_start is None:
                sim.first_start = self.now
                sim.placement = self._placement(sim.job)
            self._reasons.pop(uid, None)  # running again after a restart: no longer waiting
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

    def _placement(self, job: Job) -> str:
        """The smallest topology domain holding every placed pod of a gang of two or more pods: "node",
        "tier N" (one hypernode of tier N, as network-topology-aware counts tiers), "cluster" (none
        does), or "nodes" on a cluster without hypernodes; "" for a job of one pod."""
        if len(job.tasks) < 2:
            return ""
        rows = np.unique(np.fromiter((t.node for t in job.tasks if t.node >= 0), dtype=np.int64))
        if len(rows) <= 1:
            return "node"
        tree = self.cluster.hypernodes
        if not tree:
            return "nodes"
        tier = tree.lca_tier(rows)
        return "cluster" if tier is None else f"tier {tier}"

    def _resume_overhead(self, gpus: float) -> float:
        """Seconds a job of ``gpus`` GPUs restores before it progresses again (the first band it fits)."""
        for upto, seconds in self.options.resume_overhead:
            if gpus <= upto:
                return seconds
        return 0.0

    def _stop_run(self, sim: SimJob) -> float:
        """End the current run's accounting: the seconds of progress it made (after its restore)."""
        assert sim.since is not None and sim.run_from is not None
        restored = min(self.now, sim.since) - sim.run_from
        sim.overhead += restored * sim.gpus
        sim.held_time += self.now - sim.run_from
        return max(self.now - sim.since, 0.0)

    def _restart(self, sim: SimJob, held_gpus: float, preempted: bool = False, moved: bool = False) -> None:
        """The gang fell below its minimum: roll back to the last checkpoint. Policy ``pods``: the
        surviving pods keep their nodes and the job stays admitted (Inqueue) until its evicted pods are
        placed again; policy ``job``: the survivors are stopped too and the podgroup goes back to Pending
        (Inqueue when no ``enqueue`` action is configured, as nothing would admit it)."""
        assert sim.since is not None  # only a job making progress restarts (see _update)
        ran = self._stop_run(sim)
        sim.progress += ran if self._speed is None else self._speed.end(sim, self.now)
        sim.since = None
        sim.epoch += 1
        self._running.discard(sim.job.uid)
        interval = self.options.checkpoint_interval
        saved = 0.0 if interval is None else math.floor(sim.progress / interval + 1e-9) * interval
        saved = min(saved, sim.progress)
        if preempted:
            sim.preemptions += 1
            if self.options.checkpoint_on_preempt:  # a checkpoint taken as it is stopped
                saved = sim.progress
        sim.lost += (sim.progress - saved) * held_gpus
        if moved:
            sim.moved_lost += (sim.progress - saved) * held_gpus
        sim.progress = saved
        sim.restarts += 1
        self._restarts += 1
        self.history.changed(sim.job.uid)
        self._remember_run(sim, ran, held_gpus)
        self._changed = True
        if self.options.restart_policy == "pods":
            sim.job.phase = PodGroupPhase.INQUEUE
            return
        sim.job.phase = PodGroupPhase.PENDING if self._enqueue else PodGroupPhase.INQUEUE
        for task in sim.job.tasks:
            if task.status in _HOLDING:
                self._mark_releasing(task)
                self._started.discard(task.uid)
                self._let_go(task, self.options.eviction_grace)

    @staticmethod
    def _remember_run(sim: SimJob, ran: float, held_gpus: float) -> None:
        """Write what the job's past runs gave it onto its PodGroup, as a real cluster's controller
        would: the service it received and the progress it keeps (read by the ``las`` and ``srtf``
        baselines)."""
        notes = sim.job.annotations
        attained = parse_duration(notes.get(ATTAINED_SERVICE, 0)) + ran * held_gpus
        notes[ATTAINED_SERVICE] = f"{attained:.3f}s"
        notes[COMPLETED_RUNTIME] = f"{sim.progress:.3f}s"

    def _mark_releasing(self, task: Task) -> None:
        self.history.changed(task.job.uid)
        self.cluster.charge(task, -1)
        task.status = TaskStatus.RELEASING
        self.cluster.charge(task, +1)

    def _start(self, task: Task, bound_at: float) -> None:
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

    def _complete(self, sim: SimJob, epoch: int) -> None:
        uid = sim.job.uid
        if epoch != sim.epoch or uid not in self._active or sim.since is None:
            return
        self._stop_run(sim)
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
        self._demand -= sim.gpus
        self._waiting.pop(uid, None)
        self._running.discard(uid)
        self._reasons.pop(uid, None)
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
        victims = [t for t in dict.fromkeys(tasks) if t.status in _HOLDING]
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
            self._evictions += len(group)
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

    def _release_event(self, task: Task, token: int) -> None:
        if self._release_token.get(task.uid) == token:
            self._release(task)

    def _release(self, task: Task) -> None:
        """An evicted pod is gone from its node: it comes back as a Pending pod of its job."""
        self._release_token.pop(task.uid, None)
        if task.uid not in self.cluster.tasks or task.status is not TaskStatus.RELEASING:
            return
        self.cluster.charge(task, -1)
        task.status, task.node, task.nominated, task.start_time = TaskStatus.PENDING, -1, -1, None
        uid = task.job.uid
        self.history.changed(uid)
        sim = self._active[uid]
        self._waiting[uid] = sim
        self._changed = True
        self._wake()

    def _node(self, row: int, down: bool) -> None:
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
        self._dirty = True
        if self._cycle_at is None and self._waiting and self._stalled is None:
            period = self.options.schedule_period
            at = math.ceil(self.now / period - 1e-9) * period
            if at <= self._last_cycle:
                at = self._last_cycle + period
            self._cycle_at = at
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
        from corral.sim.forecast import first_estimates

        assert self.options.forecast_every is not None
        self._forecast_at = self.now + self.options.forecast_every
        first_estimates(self.cluster, self.config, self.now, self._expected)

    def _cycle(self, beat: bool = False) -> None:
        if beat:
            self._beat_at, self._dirty = None, True
        else:
            self._cycle_at = None
        if not self._waiting or not self._dirty:
            self._dirty = False
            return
        if self.options.forecast_every and (self._forecast_at is None or self.now >= self._forecast_at):
            self._forecast()
        self.cycles += 1
        self._last_cycle = self.now
        decisions = run_cycle(
            self.cluster,
            self.config,
            self.registry,
            self.now,
            self.cycles,
            explain=False,
            history=self.history,
        )
        apply_decisions(self.cluster, decisions, self.now, bound=TaskStatus.BOUND, remove_evicted=False)
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
                self._reasons[record.podgroup] = self._last_reasons[record.podgroup] = record.reason
        moved = decisions.touched
        assert moved is not None  # a cycle's session always records the pods it changed
        changed = bool(
            decisions.binds or decisions.evictions or decisions.podgroups or decisions.node_locks
        ) or self._waiting_pods_moved(moved)
        for job in {id(t.job): t.job for t, _, _ in moved}.values():
            if job.uid in self._waiting and not any(t.status in PENDING_LIKE for t in job.tasks):
                del self._waiting[job.uid]
        self._changed = True
        # decisions that change state but never bind, with nothing else happening: a livelock of the
        # policy (e.g. evicting and re-nominating forever); stop cycling and report it in the meta
        self._idle_cycles = 0 if decisions.binds or not changed else self._idle_cycles + 1
        if self._idle_cycles >= _STALL_CYCLES:
            self._stalled = self.now
        self._dirty = False
        if self._follow_up(decisions):
            self._follow_at = self._cycle_at = self.now
            self._push(self.now, CYCLE, None)
        if changed:
            self._wake()
        if self._heartbeat and self._waiting and self._beat_at is None and self._stalled is None:
            self._beat_at = self.now + self._heartbeat
            self._push(self._beat_at, CYCLE, "beat")

    def _follow_up(self, decisions: Decisions) -> bool:
        """Does a cycle follow at the same instant? When ``timeslice`` stopped jobs whose pods left at
        once (no grace period), the jobs that take their room are bound now, not a period later: Lucid
        and Tiresias start them in the step that stops the others. One follow-up per instant."""
        return (
            self.options.eviction_grace <= 0
            and self._follow_at != self.now
            and any(e.action == "timeslice" for e in decisions.evictions)
        )


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
