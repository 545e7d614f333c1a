"""Baseline policies for comparisons in the simulator: ``fifo``, ``sjf``, ``srtf`` and ``las``.

Researchers compare a scheduler against the textbook policies; these plugins let an operator express them
in an ordinary configuration, so that ``corral compare`` runs them on the same trace and cluster as
corral's own configuration.

``fifo`` — strict first-in, first-out. A queue's head job (the first job in the session's JobOrder among
the queue's jobs with waiting pods) blocks the queue: the Allocatable point refuses the pods of every job
behind a head that has not become ready. It orders jobs by creation time (submit time in the simulator)
so that, alone or after ``priority``, the head is the oldest job. This is the FIFO of the cluster-trace
studies (Philly: Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training
Workloads", USENIX ATC 2019; the FIFO baseline of Tiresias and Lucid). corral's ``allocate`` on its own
skips a blocked job and goes on with the next ("greedy" or first-fit backfill): that is the comparison the
plugin makes possible. A job already past the head (ready, with elastic pods still waiting) keeps placing
them. Decision: a Pending podgroup not yet admitted by ``enqueue`` still holds its place in line (strict
order), while a job that is invalid (JobValid refuses it, missing queue) never does, since it can never run.

``sjf`` / ``srtf`` — shortest job first, shortest remaining time first, by the expected run time of the
PodGroup annotation ``corral.io/expected-runtime`` (a duration; the first pod's annotation when the
PodGroup has none). ``srtf`` subtracts the work a job has already kept (annotation
``corral.io/completed-runtime``, which the simulator writes when a job stops, plus the time its running
pods have been running). Jobs with no estimate come after every job with one and leave their order to the
next plugin. Both order jobs; the ``timeslice`` action makes ``srtf`` preemptive, as Lucid's SRTF.
References: SJF/SRTF as in Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019 (their SRTF baseline assumes known run times).

``las`` — Tiresias' discretised two-dimensional least-attained-service. A job's attained service is the
GPU-time it has received (GPUs × seconds run, all runs counted: annotation
``corral.io/attained-gpu-seconds`` for past runs, which the simulator writes when a job stops, plus
GPUs × time since start of its running pods). The argument ``thresholds`` (GPU-hours, comma-separated,
ascending; default ``"1"``) splits jobs into priority queues; a job in a lower queue (less service) goes
first, and inside one queue the oldest job goes first (Tiresias' FIFO within a queue). Decision:
Tiresias preempts running jobs demoted below waiting ones; corral's ``preempt`` evicts only jobs of lower
priority (SPEC.md §5), so with ``allocate`` alone ``las`` orders the waiting jobs; the ``timeslice``
action (:mod:`corral.actions.timeslice`) ranks running and waiting jobs together by this order and
stops the running ones that fall behind, as Tiresias does.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass
from typing import Any

from corral.errors import ConfigError
from corral.framework.config import arg
from corral.framework.extension import (
    Allocatable,
    AllocatableReason,
    EnqueueReason,
    JobEnqueueable,
    KeyClock,
    KeyedJobOrder,
    KeyHorizon,
    LineRefusal,
    Vote,
)
from corral.framework.memo.lines import KeptLines, kept_lines
from corral.framework.plugin import Plugin
from corral.framework.session import PENDING_LIKE
from corral.model import Job, PodGroupPhase, Queue, Task, TaskStatus
from corral.model.annotations import ATTAINED_SERVICE, COMPLETED_RUNTIME, EXPECTED_RUNTIME
from corral.model.clock import annotated_duration
from corral.model.quantity import MILLI
from corral.model.resources import GPU

__all__ = [
    "ATTAINED_SERVICE",
    "COMPLETED_RUNTIME",
    "EXPECTED_RUNTIME",
    "FifoPlugin",
    "LasPlugin",
    "SjfPlugin",
    "SrtfPlugin",
    "attained_service",
    "expected_runtime",
]


#: seconds before a computed threshold crossing at which ``las`` takes a running job's key again
_CROSSING_MARGIN = 1e-3


def _cmp(a: float, b: float) -> int:
    return (a > b) - (a < b)


@functools.lru_cache(maxsize=1 << 16)
def _seconds(text: str) -> float | None:
    """``annotated_duration`` of one annotation value, remembered: the order keys of ``srtf`` and ``las``
    move with the clock and are taken again at every cycle, the annotations they read rarely change."""
    return annotated_duration("_", {"_": text})


def _annotated(key: str, *annotations: Any) -> float | None:
    """:func:`corral.model.clock.annotated_duration` (the first readable duration), with string values
    read through :func:`_seconds`."""
    for notes in annotations:
        value = notes.get(key) if notes else None
        if value is None or value == "":
            continue
        got = _seconds(value) if isinstance(value, str) else annotated_duration(key, {key: value})
        if got is not None:
            return got
    return None


def expected_runtime(job: Job) -> float | None:
    """The job's expected run time: its PodGroup annotation, else its first pod's."""
    return _annotated(EXPECTED_RUNTIME, job.annotations, job.tasks[0].annotations if job.tasks else None)


def _running_since(job: Job, now: float) -> list[tuple[Task, float]]:
    return [
        (t, max(now - t.start_time, 0.0))
        for t in job.tasks
        if t.status is TaskStatus.RUNNING and t.start_time is not None
    ]


def attained_service(job: Job, now: float, gpu_col: int | None) -> float:
    """GPU-seconds the job has received: past runs (annotation) plus its running pods until ``now``."""
    past = _annotated(ATTAINED_SERVICE, job.annotations) or 0.0
    if gpu_col is None:
        return past
    return past + sum(float(t.request[gpu_col]) / MILLI * run for t, run in _running_since(job, now))


class FifoPlugin(
    Plugin, KeyedJobOrder, JobEnqueueable, Allocatable, AllocatableReason, LineRefusal, EnqueueReason
):
    """Strict FIFO: a queue's blocked head job blocks the queue (see the module docstring).

    A queue's line is its valid jobs with waiting pods as the line is first used in the session, in the
    session's JobOrder: kept across cycles where the session has a job index
    (:mod:`corral.framework.memo.lines`), else sorted here. The head is the first job of the line that
    still holds it (moving on as jobs become ready); the first job of the line waiting for admission is
    found the same way."""

    name = "fifo"
    #: a rejection by JobEnqueueable holds for every later job of the queue in JobOrder (the job ahead
    #: that waits for admission is ahead of them too): ``enqueue`` need not explain each of them
    strict_line = True

    def on_session_open(self) -> None:
        self._kept: KeptLines | None = None
        self._built = False
        self._lines: dict[str, list[tuple[Any, ...]]] = {}  # queue -> sorted (key..., uid) of its line
        self._key_of: dict[str, tuple[tuple[Any, ...], str]] = {}  # uid -> (its key, its queue)
        self._head: dict[str, int] = {}  # queue -> index of the head in its line
        self._admit: dict[str, int] = {}  # queue -> index of the first job waiting for admission
        self._refused: Task | None = None  # the task allocatable last refused

    def job_order_key(self, job: Job) -> float:
        """Arrival: the earlier created goes first."""
        return job.creation

    def job_order_key_context(self) -> tuple[Any, ...]:
        """The key is the job's own (its creation time): kept across cycles."""
        return ()

    def job_enqueueable(self, job: Job) -> Vote:
        """Admission keeps the line too: a job is not admitted while one ahead of it waits for admission
        (else a small job admitted early would hold the room the head needs, and the line would stall)."""
        return Vote.REJECT if self._pending_ahead(job) is not None else Vote.ABSTAIN

    def enqueue_refusal(self, job: Job) -> str | None:
        """Why JobEnqueueable rejects ``job`` (None when fifo does not): the job ahead of it in line
        that waits for admission."""
        ahead = self._pending_ahead(job)
        if ahead is None:
            return None
        return (
            f"not admitted: waiting behind {ahead.uid}, ahead of it in queue {job.queue!r} and not "
            f"yet admitted (fifo)"
        )

    def _pending_ahead(self, job: Job) -> Job | None:
        """The first job ahead of ``job`` in its queue's line that waits for admission, if any. Phases
        only move on from Pending while a session runs, so the search resumes where it last stopped."""
        mine = self._place(job)
        if mine is None:
            return None
        line, jobs = self._lines[job.queue], self.session.cluster.jobs
        at = self._admit.get(job.queue, 0)
        while at < len(line) and jobs[line[at][-1]].phase is not PodGroupPhase.PENDING:
            at += 1
        self._admit[job.queue] = at
        if at < len(line) and line[at] < mine:
            return jobs[line[at][-1]]
        return None

    def allocatable(self, queue: Queue, task: Task) -> bool:
        job = task.job
        if job is None:
            return True
        mine = self._place(job)
        if mine is None:  # not waiting when the line was taken: nothing to hold it back
            return True
        head = self._advance(job.queue)
        ok = head is None or mine <= head
        self._refused = None if ok else task
        return ok

    def allocatable_refusal(self, queue: Queue, task: Task) -> str | None:
        """Why Allocatable refuses ``task`` (None when fifo does not): the head its job waits behind.
        Asked right after :meth:`allocatable` refused the same task (the dispatch asks so), the answer
        stands: nothing moved in between."""
        if self._refused is not task and self.allocatable(queue, task):
            return None
        return self._behind(task.job.queue)

    def line_refusal(self, queue: Queue, job: Job) -> str | None:
        """The line is closed behind a head that is not ready: every pod of a job behind it is refused
        for the same reason (:meth:`allocatable_refusal`'s), so ``allocate`` gives the job that reason
        without a turn. None for a job not in line or at or before the head."""
        mine = self._place(job)
        if mine is None:
            return None
        head = self._advance(job.queue)
        if head is None or mine <= head:
            return None
        return self._behind(job.queue)

    def _behind(self, queue: str) -> str:
        head = self.session.cluster.jobs[self._lines[queue][self._head[queue]][-1]]
        return f"waiting behind {head.uid}, the head of queue {head.queue!r} (fifo)"

    def _place(self, job: Job) -> tuple[Any, ...] | None:
        """The job's key in its queue's line, or None when it is not in line."""
        if not self._built:
            self._take_lines()
        got = self._key_of.get(job.uid)
        return got[0] if got is not None and got[1] == job.queue else None

    def _take_lines(self) -> None:
        """The lines as the session first uses them: kept across cycles, or sorted here."""
        self._built = True
        kept = kept_lines(self.session)
        if kept is not None:
            self._lines, self._key_of = kept.lines, kept.key_of
            return
        session = self.session
        key = session.job_sort_key()
        for j in session.cluster.jobs.values():
            if not j.invalid_reason and self._waiting(j):
                k = (key(j), j.uid)  # the uid last, as in the kept keys (job_key gives no tuple)
                self._key_of[j.uid] = (k, j.queue)
                self._lines.setdefault(j.queue, []).append(k)
        for line in self._lines.values():
            line.sort()

    def _advance(self, queue: str) -> tuple[Any, ...] | None:
        """Move the head past jobs that no longer hold the line; return its key (None: no head)."""
        line, head = self._lines[queue], self._head.get(queue, 0)
        jobs = self.session.cluster.jobs
        while head < len(line) and self._passed(jobs[line[head][-1]]):
            head += 1
        self._head[queue] = head
        return line[head] if head < len(line) else None

    @staticmethod
    def _waiting(job: Job) -> bool:
        return any(t.status in PENDING_LIKE and t.managed and not t.best_effort for t in job.tasks)

    def _passed(self, job: Job) -> bool:
        """A job stops holding the line once it is ready (or has nothing left to place)."""
        return self.session.job_ready(job) or not self._waiting(job)


class _RuntimeOrder(Plugin, KeyedJobOrder):
    """Order jobs by a run-time figure, smallest first; jobs without one last, undecided among
    themselves."""

    def on_session_open(self) -> None:
        self._cache: dict[str, float | None] = {}

    def _figure(self, job: Job) -> float | None:
        raise NotImplementedError

    def _value(self, job: Job) -> float | None:
        if job.uid not in self._cache:
            self._cache[job.uid] = self._figure(job)
        return self._cache[job.uid]

    def job_order_key(self, job: Job) -> tuple[bool, float]:
        """``(no figure, figure)``: jobs with a figure first, smallest first; the others equal."""
        v = self._value(job)
        return (True, 0.0) if v is None else (False, v)

    def job_order_key_context(self) -> tuple[Any, ...]:
        """The figure is the job's own: a remaining time moves with the clock only while the job runs
        (``running_keys_move``), and such keys are never kept."""
        return ()


class SjfPlugin(_RuntimeOrder):
    """Shortest job first by ``corral.io/expected-runtime``."""

    name = "sjf"

    def _figure(self, job: Job) -> float | None:
        return expected_runtime(job)


class SrtfPlugin(_RuntimeOrder, KeyClock):
    """Shortest remaining time first: expected run time minus the work already kept."""

    name = "srtf"
    #: the remaining time of a job with a running pod falls with the clock; any other's is its own
    running_keys_move = True

    def _total_and_done(self, job: Job) -> tuple[float | None, float]:
        notes = job.annotations
        pod = job.tasks[0].annotations if job.tasks else None
        texts = (
            notes.get(EXPECTED_RUNTIME) if notes else None,
            pod.get(EXPECTED_RUNTIME) if pod else None,
            notes.get(COMPLETED_RUNTIME) if notes else None,
        )
        if all(v is None or isinstance(v, str) for v in texts):
            return _total_and_done(*texts)
        return expected_runtime(job), _annotated(COMPLETED_RUNTIME, notes) or 0.0

    def _figure(self, job: Job) -> float | None:
        total, done = self._total_and_done(job)
        if total is None:
            return None
        # the work kept from past runs plus the current run's (a resumed job counts both): the longest
        # any running pod has run (one pass, no list: taken for every running job at every cycle)
        now, ran = self.session.now, 0.0
        for t in job.tasks:
            if t.status is TaskStatus.RUNNING and t.start_time is not None and now - t.start_time > ran:
                ran = now - t.start_time
        return max(total - (done + ran), 0.0)

    def key_clock(self, job: Job) -> float | None:
        """The completion instant at the current run: the earliest start of a running pod plus the
        expected run time less the work kept (None: no estimate, or no running pod)."""
        total, done = self._total_and_done(job)
        starts = [
            t.start_time for t in job.tasks if t.status is TaskStatus.RUNNING and t.start_time is not None
        ]
        if total is None or not starts:
            return None
        return min(starts) + (total - done)

    def key_figure(self, key: Any) -> float | None:
        """The remaining time of a key ``(no figure, figure)``."""
        return None if key[0] else float(key[1])


@functools.lru_cache(maxsize=1 << 16)
def _total_and_done(
    expected: str | None, pod_expected: str | None, completed: str | None
) -> tuple[float | None, float]:
    """``srtf``'s expected run time (the PodGroup's annotation, else the first pod's) and the work kept
    from past runs, from the annotations' texts: remembered, as a running job's remaining time is
    taken at every cycle while its annotations stay."""
    total = _annotated(EXPECTED_RUNTIME, {EXPECTED_RUNTIME: expected}, {EXPECTED_RUNTIME: pod_expected})
    return total, _annotated(COMPLETED_RUNTIME, {COMPLETED_RUNTIME: completed}) or 0.0


def _thresholds(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in str(text).split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or any(not (0 < v < float("inf")) for v in values) or list(values) != sorted(set(values)):
        raise ConfigError(
            f"expected ascending positive GPU-hours separated by commas, got {text!r}",
            field="arguments.thresholds",
        )
    return values


@dataclass(frozen=True)
class LasArgs:
    thresholds: str = arg(
        "thresholds",
        "1",
        "GPU-hours at which a job moves to the next (lower) queue, comma-separated and ascending",
    )

    def __post_init__(self) -> None:
        _thresholds(self.thresholds)


class LasPlugin(Plugin, KeyedJobOrder, KeyHorizon):
    """Discretised least-attained-service (Tiresias): queues by GPU-time received, FIFO inside one."""

    name = "las"
    Args = LasArgs
    #: the attained service of a job with a running pod grows with the clock; any other's is annotated
    running_keys_move = True

    def on_session_open(self) -> None:
        self._limits = [h * 3600.0 for h in _thresholds(self.args.thresholds)]
        self._gpu = self.session.cluster.resources.get(GPU)
        self._level: dict[str, int] = {}

    def _level_of(self, job: Job) -> int:
        """The job's priority queue: 0 below the first threshold, then one more per threshold passed."""
        got = self._level.get(job.uid)
        if got is None:
            got = self._level[job.uid] = bisect.bisect_right(
                self._limits, attained_service(job, self.session.now, self._gpu)
            )
        return got

    def job_order_key(self, job: Job) -> tuple[int, float]:
        """``(queue, arrival)``: the lower queue first, FIFO inside one."""
        return (self._level_of(job), job.creation)

    def job_order_key_context(self) -> tuple[Any, ...]:
        """Attained service grows with the clock only while a job runs (``running_keys_move``: such
        keys are never kept); any other job's comes from its annotation."""
        return ()

    def key_until(self, job: Job) -> float:
        """Just before the job's attained service reaches the next threshold at its current GPUs (it
        grows by the running pods' GPUs each second); infinity past the last threshold or with no GPU
        running. The margin (1 ms) covers the rounding of the crossing instant."""
        level = self._level_of(job)
        if level >= len(self._limits) or self._gpu is None:
            return float("inf")
        now = self.session.now
        rate = sum(float(t.request[self._gpu]) / MILLI for t, _ in _running_since(job, now))
        if rate <= 0:
            return float("inf")
        left = self._limits[level] - attained_service(job, now, self._gpu)
        return now + left / rate - _CROSSING_MARGIN
