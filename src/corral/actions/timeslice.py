"""``timeslice``: order-driven preemption and time-slicing, as Tiresias and Lucid schedule (issue 29).

Every cycle (the scheduling interval: Lucid's Tiresias re-ranks every 60 s, its SRTF every second) the
action ranks the running jobs and the waiting jobs **together** by the session's JobOrder — the ``las``
plugin gives Tiresias' discretised least-attained-service, ``srtf`` the shortest remaining time — and
walks them best first against what the cluster holds (the summed allocatable of the live, schedulable
nodes, over every resource a job requests; the nodes' fragmentation is left to placement, as Lucid's
and Tiresias' quota walk leaves it to their placer). A job that still fits in what is left takes its
share; a running job that no longer fits is to be **stopped**. This follows the loop of Lucid's
``simulation/policy/tiresias.py`` and ``srtf.py`` (``quota = total GPUs``; ``if gpu_num <= quota:
quota -= gpu_num`` and start it if pending; ``elif status == "run": preempt``) and of Tiresias'
``dlas_sim_jobs`` (SymbioticLab/Tiresias ``simulator/run_sim.py``).

The stops go through one Statement, as ``preempt``'s do: the waiting jobs that fit are nominated
(pipelined, all of a job's waiting pods or none) in rank order — first those that fit without the stops,
then, after every pod of the jobs to stop is evicted (gangs whole, SPEC.md §5), the others. The
Statement commits only when at least one waiting job is nominated into the room the stops free; else it
is discarded and nothing is stopped (Lucid stops the jobs even when its placer then fails; in corral
``allocate`` would restart them in the idle room and the next cycle stop them again). The nominations
hold the room, so it goes to the jobs the order chose; ``allocate`` binds them in the next cycle — the
simulator runs that cycle at the same instant when evicted pods leave at once. Each evicted pod's
``preemptor`` is the best-ranked job nominated into the freed room.

Of the jobs the walk would stop, only those on whose nodes a nominated pod lands are stopped: a job
whose room no waiting job takes keeps running where it is (stopped, ``allocate`` would restart it at the
same instant, and it would pay a checkpoint and a restore for nothing).

**Lucid's pass** (argument ``mode: quota``; the default ``useful`` is the above): the walk of Lucid's
``tiresias.py`` and ``srtf.py`` as it is — every running job outside the quota is stopped, whether or
not a waiting job can use its room, and only the waiting jobs inside the quota start, placed by this
action itself (bound where the room is free, nominated where a stop frees it; the follow-up cycle at the
same instant binds them); a job inside the quota that cannot be placed keeps its share of the quota, so
the jobs behind it wait even when GPUs are idle. Configure it without ``allocate`` and ``backfill``
(:mod:`corral.actions.common.quota_pass`). It ranks the whole cluster (``perQueue`` is refused with it).

Which running jobs may be stopped (the others keep their room first, before the walk):

- every pod they hold is a possible victim: managed by corral, not ``volcano.sh/preemptable: "false"``,
  not in ``kube-system`` nor of a system-critical priority class (the rule of ``conformance``), and
  running or bound by an earlier cycle (a job placed in this cycle is not stopped in it);
- **minimum lease** (argument ``minLease``, a duration, default 0s): a job whose current run started
  less than this long ago keeps running (anti-thrashing; the run starts when its earliest held pod
  started);
- **min-runtime** (SPEC.md §3.4): the VictimFilter point (the ``minruntime`` plugin) is asked with the
  best-ranked waiting job as the preemptor; a protected job keeps running.

The priority rule of ``preempt`` (SPEC.md §5) does not apply here: the JobOrder decides, and this action
does not ask the Preemptable/Reclaimable points (the ``priority`` and ``drf`` plugins' rules for
``preempt``/``reclaim``). Put a ``priority`` plugin before ``las``/``srtf`` in the tiers to rank
priority classes first. By default queues are not consulted: all jobs of the cluster are ranked
together, as Tiresias ranks one cluster and Lucid one virtual cluster.

**Per queue** (argument ``perQueue: true``): each queue's running and waiting jobs are ranked apart,
as Tiresias run per tenant or KAI-Scheduler's time-sharing inside a queue's fair share, so a queue's
jobs take turns within what the queue deserves and a job is stopped only for a better-ranked job of its
own queue. A queue's share is the deserved share of the first plugin that reports one (QueueReport:
``proportion``, ``capacity``), else the queue's ``deserved``, else its ``guarantee``, else unlimited; its
walk's room is the idle room plus what its stoppable jobs hold, at most its share less what its jobs
that keep running hold. Queues are walked in name order; what a queue's starts take beyond what its
stops free leaves the idle room of the queues after it.

**Starvation promotion** (argument ``starvationFactor``, default 0: off): Tiresias' ``solve_starvation``
— a waiting job that has run, sits in a ``las`` queue below the first and has waited at least
``starvationFactor`` × its executed time (its attained GPU-seconds over its GPUs) goes back to the
first queue, its attained service set to zero (``corral.io/attained-gpu-seconds: 0s``, a podgroup
update). Tiresias counts the pending time accumulated since the last promotion; corral counts the wait
since the job was last stopped by this action (``corral.io/timeslice-stopped-at``, written on the
PodGroup when it stops a job). The promotion ranks the job from the next cycle (this cycle's JobOrder
keys were taken by ``allocate``). Without a ``las`` plugin the factor has no effect.

Configure ``timeslice`` after ``allocate`` (``actions: "allocate, timeslice, backfill"``: ``allocate``
places what fits first and binds the nominations of the cycle before) and without ``enqueue``: a
podgroup ``enqueue`` has not admitted cannot take a stopped job's room. The argument ``interval`` is
the simulator's: it runs a cycle at least that often while jobs wait when the clock alone can change
what this action decides (:func:`ranks_move_with_clock`: under ``las``, not under ``srtf``); elsewhere
cycles run every period anyway and it has no effect.

The ranking costs what changed, not what waits: the waiting jobs come in order from the lines kept
across cycles, each tested (schedulable, starving) only as the walk reaches it
(:func:`_ranked_from_lines`; :func:`ranked_waiting` per queue); the running jobs are kept across cycles
too, and under ``srtf`` only those its clock cannot rank before the best waiting job are keyed
(:mod:`corral.actions.common.timeslice_running`); the same order as sorting every job
(``CORRAL_CHECK_INDEX=1`` compares them).
"""

from __future__ import annotations

import bisect
import functools
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.actions.common.broken import healthy
from corral.actions.common.jobs import schedulable, schedulable_jobs, waiting_tasks
from corral.actions.common.quota_pass import quota_pass, quota_walk
from corral.actions.common.timeslice_clock import clock_dependence, clock_horizon
from corral.actions.common.timeslice_jobs import (
    STOPPED_AT,
    Walk,
    demand,
    held,
    nominate,
    running_jobs,
    stop_jobs,
    stoppable,
)
from corral.actions.common.timeslice_running import KeptRunning, after, kept_running
from corral.actions.common.timeslice_running import running as kept_jobs
from corral.errors import ConfigError
from corral.framework.config import Config, Registry, arg
from corral.framework.memo.lines import KeptLines, kept_lines
from corral.framework.plugin import Action
from corral.framework.session import Session
from corral.framework.statement import Statement
from corral.model import Job
from corral.model.annotations import ATTAINED_SERVICE
from corral.model.clock import annotated_duration, format_time, parse_time
from corral.model.quantity import MILLI
from corral.model.resources import EPS, GPU

__all__ = [
    "MODES",
    "STOPPED_AT",
    "TimesliceAction",
    "TimesliceArgs",
    "quota_pass",
    "quota_walk",
    "rank_and_walk",
    "ranked_waiting",
    "ranks_move_with_clock",
]

#: the ``mode`` argument: corral's pass (the default) and Lucid's quota pass
MODES = ("useful", "quota")


@dataclass(frozen=True)
class TimesliceArgs:
    min_lease: float = arg(
        "minLease",
        0.0,
        "a job whose current run started less than this long ago is not stopped (anti-thrashing)",
        kind="duration",
        minimum=0.0,
    )
    interval: float = arg(
        "interval",
        60.0,
        "the simulator runs a cycle at least this often while jobs wait when the clock alone can change "
        "the action's answer (las, minLease, starvationFactor, minruntime; not srtf); the action itself "
        "ranks at every cycle",
        kind="duration",
        minimum=0.0,
    )
    per_queue: bool = arg(
        "perQueue",
        False,
        "rank each queue's jobs apart, within the queue's deserved share (else the whole cluster together)",
    )
    mode: str = arg(
        "mode",
        "useful",
        "useful: stop only for a waiting job that takes the room (idle room is left to allocate); quota: "
        "Lucid's pass (stop every job outside the GPU quota, start only the jobs inside it; configure "
        "without allocate)",
        choices=MODES,
    )
    starvation_factor: float = arg(
        "starvationFactor",
        0.0,
        "Tiresias' starvation promotion: a stopped job waiting this many times its executed time goes "
        "back to the first las queue (0: off)",
        minimum=0.0,
    )

    def __post_init__(self) -> None:
        if self.mode == "quota" and self.per_queue:
            raise ConfigError(
                "mode quota (Lucid's pass) ranks the whole cluster together and cannot rank per queue: "
                "set perQueue to false or mode to useful",
                field="arguments.perQueue",
            )


def ranks_move_with_clock(args: TimesliceArgs, config: Config, registry: Registry) -> bool:
    """Can the clock alone — no submit, completion, stop, bind or node change — change what this action
    decides under ``config``? Then the simulator runs a heartbeat while jobs wait
    (:func:`corral.sim.cycle_clock.heartbeat`; :mod:`corral.actions.common.timeslice_clock`)."""
    return clock_dependence(args.min_lease, args.starvation_factor, config, registry) != "none"


def rank_and_walk(session: Session, min_lease: float = 0.0, per_queue: bool = False) -> Walk:
    """Rank running and waiting jobs together by JobOrder and walk them against the cluster's room (see
    the module docstring); ``per_queue``: each queue's jobs apart, against the queue's share."""
    cluster = session.cluster
    nodes = cluster.nodes
    live = ~(nodes.down | nodes.unschedulable)
    room = nodes.future_idle[live].sum(axis=0)
    width = len(cluster.resources)
    key = session.job_sort_key()  # the JobOrder as plain tuples where every plugin is keyed
    kept = kept_running(session)

    def running() -> list[Job]:  # taken only where the clock does not narrow them down (after)
        return running_jobs(session) if kept is None else kept_jobs(kept)

    lines = None if per_queue else kept_lines(session)
    if lines is not None:
        return _walk(
            session, key, _ranked_from_lines(session, key, lines), running, room, min_lease, width, kept=kept
        )
    waiting = _waiting(session)
    if not waiting:
        return Walk([], [])
    if not per_queue:
        ranked = ranked_waiting(session, key, waiting)
        return _walk(session, key, ranked, running, room, min_lease, width, kept=kept)
    limits = _queue_limits(session, width)
    stop: list[Job] = []
    start: list[Job] = []
    every = running()
    for name in sorted({j.queue for j in waiting}):
        mine = [j for j in every if j.queue == name]
        ranked = ranked_waiting(session, key, [j for j in waiting if j.queue == name], name)
        got = _walk(session, key, ranked, functools.partial(list, mine), room, min_lease, width, limits[name])
        stop += got.stop
        start += got.start
        if got.stop:
            # what the queue's starts take beyond what its stops free comes out of the idle room
            taken = sum((demand(waiting_tasks(j), width) for j in got.start), np.zeros(width))
            freed = sum((demand(held(j), width) for j in got.stop), np.zeros(width))
            room = np.maximum(room - np.maximum(taken - freed, 0.0), 0.0)
    start.sort(key=key)
    return Walk(stop, start)


def _startable(session: Session) -> Callable[[Job], bool]:
    """The test of a waiting job the walk may start: schedulable now (``schedulable_jobs``), starving,
    and not holding a healthy run already."""
    admit_all = "enqueue" not in session.actions

    def test(job: Job) -> bool:
        return (
            schedulable(session, job, admit_all)
            and session.job_starving(job)
            and not (held(job) and healthy(job))
        )

    return test


def _waiting(session: Session) -> list[Job]:
    """Every waiting job the walk may start, in the order of ``schedulable_jobs``."""
    return [
        j
        for j in schedulable_jobs(session, quiet=True)
        if session.job_starving(j) and not (held(j) and healthy(j))
    ]


def _ranked_from_lines(session: Session, key: Any, lines: KeptLines) -> Iterator[tuple[Any, Job]]:
    """The waiting jobs the walk may start, best first with their keys, from the kept lines
    (:mod:`corral.framework.memo.lines`) as the walk reaches them: a job is tested (:func:`_startable`)
    only when reached — the walk stops once the stoppable running jobs are decided and one waiting job
    fits, so a cycle costs the jobs it reaches, not every job that waits — and the jobs the session
    changed are keyed again. The same jobs in the same order as :func:`ranked_waiting` over every
    startable job (``CORRAL_CHECK_INDEX=1`` compares them)."""
    jobs = session.cluster.jobs
    startable = _startable(session)

    def pick(uid: str) -> Job | None:
        job = jobs.get(uid)
        return job if job is not None and startable(job) else None

    fresh = [j for uid in session.ledger.touched_jobs if (j := pick(uid)) is not None]
    return _merged(session, key, list(lines.lines.values()), fresh, pick, lambda: _waiting(session))


def _merged(
    session: Session,
    key: Any,
    lines: list[list[tuple[Any, ...]]],
    fresh: list[Job],
    pick: Callable[[str], Job | None],
    expected: Callable[[], list[Job]],
) -> Iterator[tuple[Any, Job]]:
    """The kept ``lines`` (sorted keys, each ending with its job's uid) merged with ``fresh`` (jobs keyed
    here), best first with their keys: a line's job is the one ``pick`` gives for its uid (None: left
    out), a job the session changed only as keyed here. ``CORRAL_CHECK_INDEX=1`` compares the order
    with a fresh sort of ``expected()``."""
    touched = session.ledger.touched_jobs
    merged = ((k, j) for k in heapq.merge(*lines) if k[-1] not in touched and (j := pick(k[-1])) is not None)
    got = heapq.merge(sorted(((key(j), j) for j in fresh), key=_first), merged, key=_first)
    if not session.history.check_index:
        return got
    listed = list(got)
    if [j.uid for _, j in listed] != [j.uid for j in sorted(expected(), key=key)]:
        raise AssertionError("timeslice's ranking from the kept lines differs from a fresh sort")
    return iter(listed)


def _queue_limits(session: Session, width: int) -> dict[str, np.ndarray]:
    """Per queue, the share its jobs are ranked within: the deserved share of the first fair-share
    plugin that reports one (``proportion``, ``capacity``), else the queue's own ``deserved``, else its
    ``guarantee``, else no limit."""
    reports = session.implementers("QueueReport")
    report = reports[0].queue_report() if reports else {}
    out: dict[str, np.ndarray] = {}
    for name, queue in session.cluster.queues.items():
        got = report.get(name)
        limit = got.deserved if got is not None and got.deserved is not None else None
        for vec in (queue.deserved, queue.guarantee):
            if limit is None and vec is not None and np.isfinite(vec).any():
                limit = vec
        out[name] = np.full(width, np.inf) if limit is None else np.asarray(limit, dtype=float)
    return out


def _walk(
    session: Session,
    key: Any,
    ranked: Iterator[tuple[Any, Job]],
    running: Callable[[], list[Job]],
    room: np.ndarray,
    min_lease: float,
    width: int,
    limit: np.ndarray | None = None,
    kept: KeptRunning | None = None,
) -> Walk:
    """The walk over the waiting jobs (``ranked``: best first, with their keys) and ``running`` against
    ``room`` (the idle room); with ``limit`` (a queue's share), the room is at most the share less what
    the queue's jobs that keep running hold. With ``kept`` (the whole cluster ranked together) only
    the running jobs its clock cannot place before the best waiting job are keyed."""
    head = next(ranked, None)
    if head is None:
        return Walk([], [])
    top_key, top = head
    pool = after(session, kept, top_key, session.now) if kept is not None and limit is None else None
    candidates: list[tuple[Any, Job, np.ndarray]] = []
    facts = kept.facts if kept is not None else {}
    for job in running() if pool is None else pool:
        k = key(job)
        if k <= top_key:
            continue  # a job ranked above every waiting one keeps its room
        fact = facts.get(job.uid)
        if stoppable(session, job, top, min_lease, TimesliceAction.name, fact and fact[0]):
            mine = fact[1] if fact is not None else demand(held(job), width)
            room = room + mine
            candidates.append((k, job, mine))
    if not candidates:
        return Walk([], [])
    if limit is not None:
        chosen = {id(j) for _, j, _ in candidates}
        keeps = sum((demand(held(j), width) for j in running() if id(j) not in chosen), np.zeros(width))
        room = np.minimum(room, np.maximum(limit - keeps, 0.0))
    return _merge(ranked, (top_key, top), sorted(candidates, key=lambda r: r[0]), room, width)


def _merge(
    ranked: Iterator[tuple[Any, Job]],
    head: tuple[Any, Job] | None,
    candidates: list[tuple[Any, Job, np.ndarray]],
    room: np.ndarray,
    width: int,
) -> Walk:
    """The walk proper: the stoppable running jobs (sorted by key) and the waiting ones (``head``, then
    ``ranked``) best first against ``room``: a job that fits takes its room; a running one that does not
    is to be stopped."""
    # the waiting jobs are taken in rank order as the walk reaches them: once every stoppable job is
    # decided and one waiting job fits, the rest of the order changes nothing (a congested cluster
    # has thousands waiting; a full sort each cycle would cost what waits, not what changed)
    stop: list[Job] = []
    start: list[Job] = []
    at = 0
    while at < len(candidates) or (head is not None and not start):
        if at < len(candidates) and (head is None or candidates[at][0] < head[0]):
            _, job, need = candidates[at]
            at += 1
            running_job = True
        else:
            assert head is not None
            job = head[1]
            head = next(ranked, None)
            # what it holds already is in use: it needs its waiting pods
            need = demand(waiting_tasks(job), width)
            running_job = False
        if (need <= room + EPS).all():
            room = room - need
            if not running_job:
                start.append(job)
        elif running_job:
            stop.append(job)
    return Walk(stop if start else [], start)


def ranked_waiting(
    session: Session, key: Any, waiting: list[Job], queue: str | None = None
) -> Iterator[tuple[Any, Job]]:
    """``waiting`` (not empty) best first with their JobOrder keys, taken as the walk reaches them.
    Where the session keeps the waiting jobs' lines across cycles (:mod:`corral.framework.memo.lines`:
    the job index, every JobOrder plugin keyed) they are merged from the lines, ``queue``'s alone when
    given, and only the jobs the session changed (or missing from the lines) are keyed here; else the
    keys of every waiting job are taken and heaped. Both give the order of ``sorted(waiting, key=key)``
    (every key ends with the job's uid: no two are equal)."""
    kept = kept_lines(session)
    if kept is None:
        return _heaped(key, waiting)
    wanted = {j.uid: j for j in waiting}
    touched, key_of = session.ledger.touched_jobs, kept.key_of
    fresh = [j for j in waiting if j.uid in touched or j.uid not in key_of]
    lines = [kept.lines.get(queue, [])] if queue is not None else list(kept.lines.values())
    return _merged(session, key, lines, fresh, wanted.get, lambda: waiting)


def _heaped(key: Any, waiting: list[Job]) -> Iterator[tuple[Any, Job]]:
    """``waiting`` best first with their keys, every key taken and heaped."""
    heap = [(key(j), i) for i, j in enumerate(waiting)]
    heapq.heapify(heap)
    while heap:
        k, i = heapq.heappop(heap)
        yield k, waiting[i]


def _first(pair: tuple[Any, Job]) -> Any:
    return pair[0]


class TimesliceAction(Action):
    """Order-driven preemption and time-slicing (see the module docstring)."""

    name = "timeslice"
    Args = TimesliceArgs

    def execute(self, session: Session) -> None:
        if self.args.starvation_factor > 0:
            promote_starving(session, self.args.starvation_factor)
        if self.args.mode == "quota":
            # Lucid's pass keeps Lucid's tick: a pass every interval (no horizon: the heartbeat is literal)
            quota_pass(session, self.args.min_lease, self.name)
            return
        self._useful_pass(session)
        # when the clock alone can next change this answer (the simulator's heartbeat: timeslice_clock)
        session.ledger.decisions.clock_horizon = clock_horizon(
            session, self.args.min_lease, self.args.starvation_factor
        )

    def _useful_pass(self, session: Session) -> None:
        walk = rank_and_walk(session, self.args.min_lease, self.args.per_queue)
        if not walk.stop:
            return
        stops = walk.stop
        with session.statement() as stmt:
            # the jobs that fit without the stops are nominated first (allocate would place them anyway)
            rest = [j for j in walk.start if not nominate(session, stmt, j)]
            mark = stmt.save()
            placed, stops = _stop_for(session, stmt, stops, rest, self.name)
            if not placed:
                return  # the room would go unused (fragmentation): stopping would only thrash
            for op in stmt.ops[mark:]:
                if op.kind == "evict":
                    op.preemptor = placed[0].uid
                    op.reason = f"{self.name}: ranks below {placed[0].uid}, which takes its room"
            stmt.commit()
        stamp = format_time(session.now)
        for job in stops:
            session.ledger.annotate(job, STOPPED_AT, stamp)


def _stop_for(
    session: Session, stmt: Statement, stops: list[Job], rest: list[Job], action: str
) -> tuple[list[Job], list[Job]]:
    """Stop ``stops`` and nominate ``rest`` into the freed room; then keep only the stops whose room a
    nomination took (a node of theirs received a nominated pod): a job whose room no waiting job
    takes keeps running, where it stood, instead of being stopped and restarted by ``allocate`` at
    the same instant (each stop costs a checkpoint and a restore). Returns (nominated jobs, stops)."""
    nodes = {j.uid: {t.node for t in held(j)} for j in stops}
    mark = stmt.save()
    stop_jobs(stmt, stops, action)
    placed = [j for j in rest if nominate(session, stmt, j)]
    if not placed:
        return [], []
    taken = {op.node for op in stmt.ops[mark:] if op.kind == "pipeline"}
    used = [j for j in stops if nodes[j.uid] & taken]
    if len(used) == len(stops):
        return placed, stops
    stmt.restore(mark)
    stop_jobs(stmt, used, action)
    placed = [j for j in rest if nominate(session, stmt, j)]
    return (placed, used) if placed else ([], [])


def _las_limits(session: Session) -> list[float] | None:
    """The ``las`` plugin's thresholds in GPU-seconds, or None without the plugin."""
    pc = session.config.plugin("las")
    if pc is None:
        return None
    return [float(v) * 3600.0 for v in str(pc.args.thresholds).split(",") if v.strip()]


def promote_starving(session: Session, factor: float) -> None:
    """Tiresias' starvation promotion (see the module docstring): waiting jobs stopped by this action
    that waited ``factor`` × their executed time go back to the first ``las`` queue."""
    limits = _las_limits(session)
    gpu = session.cluster.resources.get(GPU)
    if not limits or gpu is None:
        return
    for job in schedulable_jobs(session, quiet=True):
        stopped = job.annotations.get(STOPPED_AT)
        if not stopped or held(job):
            continue
        attained = annotated_duration(ATTAINED_SERVICE, job.annotations) or 0.0
        if attained <= 0 or bisect.bisect_right(limits, attained) == 0:
            continue
        gpus = sum(float(t.request[gpu]) for t in job.tasks) / MILLI
        if gpus <= 0:
            continue
        since = parse_time(stopped, obj=f"PodGroup {job.uid}", field=f"metadata.annotations.{STOPPED_AT}")
        if session.now - since >= factor * attained / gpus:
            session.ledger.annotate(job, ATTAINED_SERVICE, "0s")
