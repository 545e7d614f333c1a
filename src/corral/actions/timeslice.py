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
(:func:`quota_walk`, :func:`quota_pass`). It ranks the whole cluster (``perQueue`` is refused with it).

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
the simulator's: it runs a cycle at least that often while jobs wait (under ``las`` time alone changes
a rank); elsewhere cycles run every period anyway and it has no effect.

The ranking costs what changed, not what waits: the waiting jobs come in order from the lines kept
across cycles (:func:`ranked_waiting`), as far as the walk goes, and only jobs holding a node are looked
at for running ones; the same order as sorting every job (``CORRAL_CHECK_INDEX=1`` compares them).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.actions.common.broken import healthy
from corral.actions.common.jobs import schedulable_jobs, waiting_tasks
from corral.actions.common.placement import best_node
from corral.actions.common.subgroups import greedy_trial, place_held
from corral.errors import ConfigError
from corral.framework.config import arg
from corral.framework.memo.lines import kept_lines
from corral.framework.plugin import Action
from corral.framework.session import Session
from corral.framework.statement import Statement
from corral.model import Job, Task, TaskStatus
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
]

#: When ``timeslice`` last stopped the job (RFC 3339), on its PodGroup: the start of its wait.
STOPPED_AT = "corral.io/timeslice-stopped-at"
_HELD = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})
_CRITICAL = frozenset({"system-cluster-critical", "system-node-critical"})
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
        "the simulator runs a cycle at least this often while jobs wait (time alone changes a job's rank "
        "under las); the action itself ranks at every cycle",
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


@dataclass
class Walk:
    """The outcome of one ranking: the running jobs to stop and the waiting jobs that fit."""

    stop: list[Job]
    start: list[Job]


def _victim(task: Task) -> bool:
    return (
        task.managed
        and task.preemptable
        and task.namespace != "kube-system"
        and task.priority_class not in _CRITICAL
    )


def _held(job: Job) -> list[Task]:
    return [t for t in job.tasks if t.status in _HELD and t.node >= 0]


def _demand(tasks: list[Task], width: int) -> np.ndarray:
    out = np.zeros(width)
    for t in tasks:
        out += t.request
    return out


def _running(session: Session) -> list[Job]:
    """Jobs running at or above their minimums whose pods hold nodes and none is leaving or placed in
    this cycle, in the cluster's order. With the session's job index only the jobs holding a node at
    open, or changed by the session, are looked at (the others hold nothing)."""
    out = []
    jobs = session.cluster.jobs
    index = session.index
    if index is None:
        walk = list(jobs.values())
    else:
        touched, moved = session.ledger.since_open()
        maybe = index.holding.keys() | touched | moved
        walk = [job for uid, job in jobs.items() if uid in maybe]
    for job in walk:
        held = _held(job)
        if not held or not healthy(job):
            continue
        if any(t.status in (TaskStatus.RELEASING, TaskStatus.ALLOCATED) for t in job.tasks):
            continue
        out.append(job)
    return out


def _run_start(job: Job) -> float | None:
    starts = [t.start_time for t in _held(job) if t.start_time is not None]
    return min(starts) if starts else None


def _stoppable(session: Session, job: Job, top: Job | None, lease: float) -> bool:
    if top is None or not all(_victim(t) for t in job.tasks if t.status in _HELD):
        return False
    start = _run_start(job)
    if start is None or session.now - start < lease:
        return False
    return session.victim_filter(top, job, TimesliceAction.name)


def rank_and_walk(session: Session, min_lease: float = 0.0, per_queue: bool = False) -> Walk:
    """Rank running and waiting jobs together by JobOrder and walk them against the cluster's room (see
    the module docstring); ``per_queue``: each queue's jobs apart, against the queue's share."""
    cluster = session.cluster
    nodes = cluster.nodes
    live = ~(nodes.down | nodes.unschedulable)
    room = nodes.future_idle[live].sum(axis=0)
    width = len(cluster.resources)
    key = session.job_sort_key()  # the JobOrder as plain tuples where every plugin is keyed
    waiting = [
        j
        for j in schedulable_jobs(session, quiet=True)
        if session.job_starving(j) and not (_held(j) and healthy(j))
    ]
    if not waiting:
        return Walk([], [])
    if not per_queue:
        return _walk(session, key, waiting, _running(session), room, min_lease, width)
    running = _running(session)
    limits = _queue_limits(session, width)
    stop: list[Job] = []
    start: list[Job] = []
    for name in sorted({j.queue for j in waiting}):
        mine = [j for j in running if j.queue == name]
        got = _walk(
            session,
            key,
            [j for j in waiting if j.queue == name],
            mine,
            room,
            min_lease,
            width,
            limits[name],
            name,
        )
        stop += got.stop
        start += got.start
        if got.stop:
            # what the queue's starts take beyond what its stops free comes out of the idle room
            taken = sum((_demand(waiting_tasks(j), width) for j in got.start), np.zeros(width))
            freed = sum((_demand(_held(j), width) for j in got.stop), np.zeros(width))
            room = np.maximum(room - np.maximum(taken - freed, 0.0), 0.0)
    start.sort(key=key)
    return Walk(stop, start)


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
    waiting: list[Job],
    running_jobs: list[Job],
    room: np.ndarray,
    min_lease: float,
    width: int,
    limit: np.ndarray | None = None,
    queue: str | None = None,
) -> Walk:
    """The walk over ``waiting`` and ``running_jobs`` against ``room`` (the idle room); with ``limit``
    (a queue's share, ``queue`` its name), the room is at most the share less what the queue's jobs
    that keep running hold."""
    ranked = ranked_waiting(session, key, waiting, queue)
    top_key, top = next(ranked)
    stoppable: list[tuple[Any, Job, np.ndarray]] = []
    for job in running_jobs:
        k = key(job)
        # a job ranked above every waiting one keeps its room
        if k > top_key and _stoppable(session, job, top, min_lease):
            held = _demand(_held(job), width)
            room = room + held
            stoppable.append((k, job, held))
    if not stoppable:
        return Walk([], [])
    if limit is not None:
        kept = {id(j) for _, j, _ in stoppable}
        keeps = sum((_demand(_held(j), width) for j in running_jobs if id(j) not in kept), np.zeros(width))
        room = np.minimum(room, np.maximum(limit - keeps, 0.0))
    stoppable.sort(key=lambda r: r[0])
    # the waiting jobs are taken in rank order as the walk reaches them: once every stoppable job is
    # decided and one waiting job fits, the rest of the order changes nothing (a congested cluster
    # has thousands waiting; a full sort each cycle would cost what waits, not what changed)
    head: tuple[Any, Job] | None = (top_key, top)
    stop: list[Job] = []
    start: list[Job] = []
    at = 0
    while at < len(stoppable) or (head is not None and not start):
        if at < len(stoppable) and (head is None or stoppable[at][0] < head[0]):
            _, job, need = stoppable[at]
            at += 1
            running_job = True
        else:
            assert head is not None
            job = head[1]
            head = next(ranked, None)
            # what it holds already is in use: it needs its waiting pods
            need = _demand(waiting_tasks(job), width)
            running_job = False
        if bool(np.all(need <= room + EPS)):
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
        heap = [(key(j), i) for i, j in enumerate(waiting)]
        heapq.heapify(heap)
        while heap:
            k, i = heapq.heappop(heap)
            yield k, waiting[i]
        return
    wanted = {j.uid: j for j in waiting}
    touched = session.ledger.touched_jobs
    key_of = kept.key_of
    fresh = sorted(((key(j), j) for j in waiting if j.uid in touched or j.uid not in key_of), key=_first)
    lines = [kept.lines.get(queue, [])] if queue is not None else list(kept.lines.values())
    merged = ((k, wanted[k[-1]]) for k in heapq.merge(*lines) if k[-1] in wanted and k[-1] not in touched)
    if not session.history.check_index:
        yield from heapq.merge(fresh, merged, key=_first)
        return
    got = list(heapq.merge(fresh, merged, key=_first))  # CORRAL_CHECK_INDEX=1: against a fresh sort
    if [j.uid for _, j in got] != [j.uid for j in sorted(waiting, key=key)]:
        raise AssertionError("timeslice's ranking from the kept lines differs from a fresh sort")
    yield from got


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
            quota_pass(session, self.args.min_lease, self.name)
            return
        walk = rank_and_walk(session, self.args.min_lease, self.args.per_queue)
        if not walk.stop:
            return
        stops = walk.stop
        with session.statement() as stmt:
            # the jobs that fit without the stops are nominated first (allocate would place them anyway)
            rest = [j for j in walk.start if not _nominate(session, stmt, j)]
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
    nodes = {j.uid: {t.node for t in _held(j)} for j in stops}
    mark = stmt.save()
    _stop(stmt, stops, action)
    placed = [j for j in rest if _nominate(session, stmt, j)]
    if not placed:
        return [], []
    taken = {op.node for op in stmt.ops[mark:] if op.kind == "pipeline"}
    used = [j for j in stops if nodes[j.uid] & taken]
    if len(used) == len(stops):
        return placed, stops
    stmt.restore(mark)
    _stop(stmt, used, action)
    placed = [j for j in rest if _nominate(session, stmt, j)]
    return (placed, used) if placed else ([], [])


def _stop(stmt: Statement, jobs: list[Job], action: str) -> None:
    """Evict every pod the ``jobs`` hold (gangs whole)."""
    for job in jobs:
        for task in sorted(_held(job), key=lambda t: t.name):
            stmt.evict(task, f"{action}: stopped", action=action)


def _nominate(session: Session, stmt: Statement, job: Job) -> bool:
    """Nominate every waiting pod of ``job`` to the best node whose capacity is free or being freed
    (``allocate`` binds a nominated pod to its node in the next cycle); all or nothing. Nominations
    hold their room, so ``allocate`` does not give it to a job ranked lower (or to a stopped one)."""
    mark = stmt.save()
    tasks = sorted(waiting_tasks(job), key=session.task_key())
    if job.subjobs:  # a sub-group with its own topology inside one of its domains, as allocate places it
        trial = greedy_trial(session, job, stmt, pipeline=True, queue_limits=False)
        if place_held(session, job, tasks, stmt, None, trial):
            stmt.restore(mark)
            return False
        return True
    for task in tasks:
        row, _ = best_node(session, task)
        if row < 0:
            stmt.restore(mark)
            return False
        stmt.pipeline(task, row)
    return True


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
        if not stopped or _held(job):
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


# ------------------------------------------------------------------ Lucid's quota pass (mode: quota)

_HELD_NOW = frozenset({TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING})
_SIZED = _HELD_NOW | {TaskStatus.PIPELINED, TaskStatus.PENDING}


def _nominated(task: Task) -> bool:
    return task.status is TaskStatus.PIPELINED and task.nominated >= 0


QUOTA_REASON = "timeslice: ranks outside the quota (the better-ranked jobs take the cluster's GPUs)"
PLACE_REASON = "timeslice: inside the quota, but no placement fits it now"


def quota_walk(session: Session, min_lease: float = 0.0) -> tuple[Walk, list[Job]]:
    """Lucid's pass (``simulation/policy/tiresias.py`` and ``srtf.py``, steps 3-5): every stoppable
    running job and every waiting job, ranked together by the JobOrder, walk against a quota of what the
    cluster holds for them (the idle room plus what they hold or have nominated: Lucid's ``quota =
    total GPUs``); a job whose whole size fits takes it from the quota (``if gpu_num <= quota``), a
    running job that does not fit is stopped — whether or not a waiting job can use its room. The
    waiting jobs inside the quota are the ones to start, in rank order (``prerun_list``); every other
    waiting job waits, even when GPUs are idle (the second list: the waiting jobs left out)."""
    cluster = session.cluster
    nodes = cluster.nodes
    live = ~(nodes.down | nodes.unschedulable)
    width = len(cluster.resources)
    key = session.job_sort_key()
    # a job nominated by the last pass is not starving (gang) but is still to be bound, if it ranks inside
    waiting = [
        j
        for j in schedulable_jobs(session, quiet=True)
        if (session.job_starving(j) or any(_nominated(t) for t in j.tasks)) and not (_held(j) and healthy(j))
    ]
    if not waiting:
        return Walk([], []), []
    top = min(waiting, key=key)
    quota = nodes.future_idle[live].sum(axis=0)
    ranked: list[tuple[Any, bool, Job, np.ndarray]] = []
    for job in _running(session):
        if _stoppable(session, job, top, min_lease):
            held = _demand(_held(job), width)
            quota = quota + held
            ranked.append((key(job), False, job, held))
    for job in waiting:
        # what it holds or has nominated already is in the quota (outside the idle room), its size is
        # what it needs: Lucid counts a job whole
        mine = [t for t in job.tasks if t.managed and not t.best_effort]
        own = [t for t in mine if (t.status in _HELD_NOW and t.node >= 0) or _nominated(t)]
        quota = quota + _demand(own, width)
        need = _demand([t for t in mine if t.status in _SIZED], width)
        ranked.append((key(job), True, job, need))
    ranked.sort(key=lambda r: r[0])
    stop: list[Job] = []
    start: list[Job] = []
    left: list[Job] = []
    for _, is_waiting, job, need in ranked:
        if bool(np.all(need <= quota + EPS)):
            quota = quota - need
            if is_waiting:
                start.append(job)
        elif not is_waiting:
            stop.append(job)
        else:
            left.append(job)
            session.ledger.unschedulable(job, QUOTA_REASON)
    return Walk(stop, start), left


def quota_pass(session: Session, min_lease: float, action: str) -> None:
    """One Lucid pass: stop the running jobs outside the quota, then place the waiting jobs inside it
    in rank order with the session's placement (``binpack`` on GPUs is Lucid's consolidate placer):
    onto free room at once (bound), onto room a stop is freeing as a nomination that the follow-up
    cycle at the same instant binds (Lucid places after its stops, in the same step). A job inside the
    quota that cannot be placed waits for the next pass (Lucid: "may place fail because consolidate
    requirement"); the stops stand even then."""
    walk, left = quota_walk(session, min_lease)
    # a nomination of a job left out holds room no job inside the quota could use (Lucid has none)
    dropped = [t for job in left for t in job.tasks if _nominated(t)]
    if not walk.stop and not walk.start and not dropped:
        return
    with session.statement() as stmt:
        for task in dropped:
            stmt.clear_nomination(task)
        _stop(stmt, walk.stop, action)
        placed = []
        for job in walk.start:
            if _place(session, stmt, job):
                placed.append(job)
            else:
                for task in job.tasks:
                    if _nominated(task):
                        stmt.clear_nomination(task)
                session.ledger.unschedulable(job, PLACE_REASON)
        for op in stmt.ops:
            if op.kind == "evict":
                if placed:
                    op.preemptor = placed[0].uid
                op.reason = f"{action}: ranks outside the quota"
        stmt.commit()
    stamp = format_time(session.now)
    for job in walk.stop:
        session.ledger.annotate(job, STOPPED_AT, stamp)


def _place(session: Session, stmt: Statement, job: Job) -> bool:
    """Place every waiting pod of ``job`` (all or nothing): allocated where the room is free, nominated
    where it is still being freed; a nomination from an earlier cycle is kept when its node fits."""
    if job.subjobs:
        return _nominate(session, stmt, job)
    mark = stmt.save()
    for task in sorted(waiting_tasks(job), key=session.task_key()):
        row, later = best_node(session, task)
        if row < 0:
            stmt.restore(mark)
            return False
        if later:
            stmt.pipeline(task, row)
        else:
            stmt.allocate(task, row)
    return True
