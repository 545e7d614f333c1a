"""Each queue's waiting jobs in JobOrder, kept across cycles: a strict-order or time-slicing cycle costs
what changed, not the backlog.

Strict FIFO (and strict SJF: ``sjf`` then ``fifo``) needs, per queue, the jobs with waiting pods in the
session's JobOrder: the head blocks the jobs behind it; ``timeslice`` walks the waiting jobs in the same
order (:func:`corral.actions.timeslice.ranked_waiting`). Sorting thousands of waiting jobs at every cycle
made a congested 1 s run cost 37-41 ms a cycle. Where the session has a kept job index
(:mod:`corral.framework.memo.jobindex`: the simulator, ``corral schedule --cycles``) and every JobOrder
plugin is keyed (:meth:`corral.framework.session.Session.job_sort_key`), :class:`KeptLines` keeps the
sorted lines beside the index (``JobIndex.extras``) and, at a session's first use, re-keys only the jobs
the index saw change since the last session (``JobIndex.last_changed``) and the jobs holding a nominated
pod or, under an order whose keys of running jobs move with the clock (``srtf``, ``las``), a running pod
(their key is not kept whole: see :mod:`corral.framework.memo.orderkeys`). The lines hold a job the
session changed after their first use in it as they first found it (``timeslice``, after ``allocate``,
keys those again). A new order context, a missed
session or a new index rebuilds the lines. The lines are exactly the sorted waiting jobs of each queue
(with ``CORRAL_CHECK_INDEX=1`` every session compares them with a fresh sort; ``tests/plugins/test_fifo_line.py``
and ``tests/sim/test_timeslice_kept.py`` run congested simulations so, and check that decisions are
byte-identical with the index on and off).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral.framework.memo.jobindex import JobIndex
from corral.model import Job, TaskStatus

if TYPE_CHECKING:
    from corral.framework.session import Session

__all__ = ["KeptLines", "kept_lines"]

_EXTRA = "fifo-lines"


class KeptLines:
    """Per queue, the sorted JobOrder keys of the valid jobs with waiting pods (the key ends with the
    uid, so it names its job); ``key_of`` maps a job to its key and queue."""

    __slots__ = ("context", "generation", "key_of", "lines", "moving", "volatile")

    def __init__(self, context: tuple[Any, ...], moving: bool = False) -> None:
        self.context = context
        self.moving = moving  # keys of jobs with a running pod move with the clock
        self.generation = -1
        self.lines: dict[str, list[tuple[Any, ...]]] = {}
        self.key_of: dict[str, tuple[tuple[Any, ...], str]] = {}
        # keyed with a nominated pod (or, when ``moving``, a running one): keyed again at every session
        self.volatile: set[str] = set()

    def _fleeting(self, job: Job, pipelined: set[str]) -> bool:
        return job.uid in pipelined or (
            self.moving and any(t.status is TaskStatus.RUNNING for t in job.tasks)
        )

    def _drop(self, uid: str) -> None:
        old = self.key_of.pop(uid, None)
        if old is not None:
            line = self.lines[old[1]]
            del line[bisect_left(line, old[0])]

    def _take(self, job: Job, key: Callable[[Job], tuple[Any, ...]], index: JobIndex) -> None:
        if job.uid not in index.sets["waiting"] or job.invalid_reason:
            return
        k = key(job)
        self.key_of[job.uid] = (k, job.queue)
        insort(self.lines.setdefault(job.queue, []), k)
        if self._fleeting(job, index.sets["pipelined"]):
            self.volatile.add(job.uid)

    def rebuild(self, jobs: dict[str, Job], key: Callable[[Job], tuple[Any, ...]], index: JobIndex) -> None:
        self.lines, self.key_of, self.volatile = {}, {}, set()
        pipelined = index.sets["pipelined"]
        for uid in index.sets["waiting"]:
            job = jobs[uid]
            if job.invalid_reason:
                continue
            k = key(job)
            self.key_of[uid] = (k, job.queue)
            self.lines.setdefault(job.queue, []).append(k)
            if self._fleeting(job, pipelined):
                self.volatile.add(uid)
        for line in self.lines.values():
            line.sort()
        self.generation = index.generation

    def update(self, jobs: dict[str, Job], key: Callable[[Job], tuple[Any, ...]], index: JobIndex) -> None:
        """Re-key the jobs changed since the last session (the index's last refresh) and the volatile ones."""
        stale = index.last_changed | self.volatile | (index.sets["pipelined"] & self.key_of.keys())
        self.volatile = set()
        for uid in stale:
            self._drop(uid)
        for uid in sorted(stale):
            job = jobs.get(uid)
            if job is not None:
                self._take(job, key, index)
        self.generation = index.generation


def kept_lines(session: Session) -> KeptLines | None:
    """The session's kept lines brought up to date, or None where none can be kept (no job index, or a
    JobOrder plugin without keys): the caller then sorts the waiting jobs itself."""
    index = session.index
    keyed = session.job_order_context()
    if index is None or keyed is None:
        return None
    # the order's plugins too: a history kept across configurations must not reuse another's lines
    context = (tuple(p.name for tier in session.members["JobOrder"] for p in tier), keyed)
    key = session.job_sort_key()
    moving = any(p.running_keys_move for tier in session.members["JobOrder"] for p in tier)
    got = index.extras.get(_EXTRA)
    if not isinstance(got, KeptLines) or got.context != context or got.generation < index.generation - 1:
        got = index.extras[_EXTRA] = KeptLines(context, moving)
        got.rebuild(session.cluster.jobs, key, index)
    elif got.generation == index.generation - 1:
        got.update(session.cluster.jobs, key, index)
    if session.history.check_index:  # CORRAL_CHECK_INDEX=1: the kept lines must equal a fresh sort
        _check(got, session, key, index)
    return got


def _check(got: KeptLines, session: Session, key: Callable[[Job], tuple[Any, ...]], index: JobIndex) -> None:
    """The kept lines against a fresh sort of the waiting jobs, but for the jobs the session changed
    since it opened: the lines hold them as the session first used the lines (``timeslice``, which may
    come after ``allocate``, keys those again)."""
    fresh = KeptLines(got.context, got.moving)
    fresh.rebuild(session.cluster.jobs, key, index)
    touched = session.ledger.touched_jobs

    def mine(lines: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
        out = {q: [k for k in v if k[-1] not in touched] for q, v in lines.items()}
        return {q: v for q, v in out.items() if v}

    def keys(of: dict[str, tuple[tuple[Any, ...], str]]) -> dict[str, tuple[tuple[Any, ...], str]]:
        return {u: v for u, v in of.items() if u not in touched}

    if mine(got.lines) != mine(fresh.lines) or keys(got.key_of) != keys(fresh.key_of):
        raise AssertionError("kept fifo lines differ from a fresh sort of the waiting jobs")
