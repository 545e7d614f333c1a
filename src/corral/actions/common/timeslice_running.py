"""The running jobs ``timeslice`` may stop, kept across cycles beside the job index: a cycle costs the
running jobs that changed and those that can rank after the best waiting job, not every running job.

Two things are kept (``JobIndex.extras``), brought up to date at a session's first use from the jobs the
index saw change since the last session (``JobIndex.last_changed``) and the jobs this session changed:

- **which jobs run** (:func:`~corral.actions.common.timeslice_jobs.running_jobs`' rule: pods holding
  nodes, at or above the gang's minimums, none leaving nor placed in this cycle): a function of the
  job's own pods, so it holds until the job changes;
- **their clock**, where the first JobOrder plugin declares :class:`~corral.framework.extension.KeyClock`
  (``srtf``): each running job's clock (its completion instant at the current run, constant while the
  job's pods and annotations are) in a sorted list, and the running jobs without a figure apart. A
  running job whose clock is more than :data:`MARGIN` seconds before ``now`` plus the best waiting
  job's remaining time ranks before that job (its remaining time is smaller) and keeps its room, so
  its key is not taken; the others' exact keys are (:func:`after`). The margin covers the rounding
  between ``clock - now`` and the plugin's own ``expected - (done + (now - start))``.

The jobs come sorted by uid (the walk sums integer amounts: any order gives the same bits).
``CORRAL_CHECK_INDEX=1`` compares the kept jobs with a fresh walk and checks that every running job
left out by the clock ranks before the waiting job; ``tests/sim/test_timeslice_kept.py`` runs congested
``srtf`` and ``las`` simulations with the index on and off and compares every decision and record.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Any

import numpy as np

from corral.actions.common.broken import healthy
from corral.actions.common.timeslice_jobs import demand, held, run_facts
from corral.framework.extension import KeyClock
from corral.framework.points import declares
from corral.framework.session import Session
from corral.model import Job, TaskStatus

__all__ = ["MARGIN", "KeptRunning", "after", "kept_running", "running"]

_EXTRA = "timeslice-running"
#: seconds: a running job whose clock is this much before the waiting job's bound surely ranks before it
MARGIN = 1e-3
_NOT_NOW = frozenset({TaskStatus.RELEASING, TaskStatus.ALLOCATED})


def _runs(job: Job) -> bool:
    return bool(held(job)) and healthy(job) and not any(t.status in _NOT_NOW for t in job.tasks)


def _facts(job: Job) -> tuple[tuple[bool, float | None], np.ndarray]:
    pods = held(job)
    return run_facts(job), demand(pods, len(pods[0].request))


class KeptRunning:
    """The running jobs (uid -> job) and, with a clock, their clocks sorted and those without one."""

    __slots__ = ("clock_of", "clocks", "context", "facts", "generation", "jobs", "plain", "until")

    def __init__(self, context: tuple[Any, ...]) -> None:
        self.context = context
        self.generation = -1
        self.jobs: dict[str, Job] = {}
        # per running job: its run facts (timeslice_jobs.run_facts) and what it holds (a vector)
        self.facts: dict[str, tuple[tuple[bool, float | None], np.ndarray]] = {}
        # per running job, until when its key holds (KeyHorizon; timeslice_clock.clock_horizon's)
        self.until: dict[str, float] = {}
        self.clocks: list[tuple[float, str]] = []
        self.clock_of: dict[str, float] = {}
        self.plain: set[str] = set()  # running, without a figure

    def _drop(self, uid: str) -> None:
        self.jobs.pop(uid, None)
        self.facts.pop(uid, None)
        self.until.pop(uid, None)
        self.plain.discard(uid)
        c = self.clock_of.pop(uid, None)
        if c is not None:
            del self.clocks[bisect_left(self.clocks, (c, uid))]

    def _take(self, job: Job, clock: KeyClock | None) -> None:
        if not _runs(job):
            return
        self.jobs[job.uid] = job
        self.facts[job.uid] = _facts(job)
        if clock is None:
            return
        c = clock.key_clock(job)
        if c is None:
            self.plain.add(job.uid)
        else:
            self.clock_of[job.uid] = c
            insort(self.clocks, (c, job.uid))

    def refresh(self, session: Session, clock: KeyClock | None, uids: set[str]) -> None:
        jobs = session.cluster.jobs
        for uid in uids:
            self._drop(uid)
        for uid in sorted(uids):
            job = jobs.get(uid)
            if job is not None:
                self._take(job, clock)


def _clock_plugin(session: Session) -> KeyClock | None:
    """The first JobOrder plugin, when it declares KeyClock and every JobOrder plugin is keyed (its
    figure then leads the plain key tuple)."""
    order = [p for tier in session.members["JobOrder"] for p in tier]
    if not order or not declares(order[0], KeyClock) or session.job_order_context() is None:
        return None
    return order[0]


def kept_running(session: Session) -> KeptRunning | None:
    """The kept running jobs brought up to date for this session (None without a job index)."""
    index = session.index
    if index is None:
        return None
    clock = _clock_plugin(session)
    context = (tuple(p.name for tier in session.members["JobOrder"] for p in tier), clock is not None)
    got = index.extras.get(_EXTRA)
    touched, moved = session.ledger.since_open()
    if not isinstance(got, KeptRunning) or got.context != context or got.generation < index.generation - 1:
        got = index.extras[_EXTRA] = KeptRunning(context)
        got.refresh(session, clock, set(index.holding) | touched | moved)
    elif got.generation == index.generation - 1:  # a new session: what changed since the last one
        got.refresh(session, clock, index.last_changed | touched | moved)
    else:  # the same session again: what it changed
        got.refresh(session, clock, touched | moved)
    got.generation = index.generation
    if session.history.check_index:  # CORRAL_CHECK_INDEX=1: the kept jobs against a fresh walk
        jobs = session.cluster.jobs
        maybe = index.holding.keys() | touched | moved
        fresh = {uid for uid in maybe if uid in jobs and _runs(jobs[uid])}
        if fresh != set(got.jobs):
            raise AssertionError("timeslice's kept running jobs differ from a fresh walk")
        for uid, (facts, holds) in got.facts.items():
            now, now_holds = _facts(jobs[uid])
            if facts != now or not np.array_equal(holds, now_holds):
                raise AssertionError(f"timeslice's kept facts of running job {uid} differ from its pods")
    return got


def running(kept: KeptRunning) -> list[Job]:
    """The kept running jobs, sorted by uid."""
    return [kept.jobs[uid] for uid in sorted(kept.jobs)]


def after(session: Session, kept: KeptRunning, top_key: Any, now: float) -> list[Job] | None:
    """The running jobs that may rank after the waiting job of key ``top_key`` (its exact rank is the
    caller's to take), sorted by uid; None when no clock applies (every running job may)."""
    clock = _clock_plugin(session)
    if clock is None or not kept.context[1]:
        return None
    figure = clock.key_figure(top_key[0][0])
    if figure is None:
        # the waiting job has no figure: every running job with one ranks before it
        chosen = set(kept.plain)
    elif figure <= MARGIN:
        return None
    else:
        at = bisect_left(kept.clocks, (now + figure - MARGIN, ""))
        chosen = kept.plain | {uid for _, uid in kept.clocks[at:]}
    if session.history.check_index:  # CORRAL_CHECK_INDEX=1: those left out rank before the waiting job
        key = session.job_sort_key()
        for uid, job in kept.jobs.items():
            if uid not in chosen and not key(job) < top_key:
                raise AssertionError(f"running job {uid} left out by the clock ranks after {top_key!r}")
    return [kept.jobs[uid] for uid in sorted(chosen)]
