"""The cluster's jobs indexed by what a cycle looks for, kept across cycles: a cycle's bookkeeping costs
the jobs that changed, not the jobs that wait (issue "cycles that cost what changed, not what waits").

A congested simulation has thousands of podgroups waiting and a few dozen that change between two
cycles. Without an index every session walks all of them several times: ``enqueue`` for the podgroups
to admit and the admitted ones not started, ``allocate`` and ``backfill`` for jobs with waiting pods, the
fairness plugins for what every job and queue holds and asks for, the session for the phases at open,
the nominations of earlier cycles and the jobs to close. :class:`JobIndex` keeps each of those sets and
sums and brings them up to date when a session opens, from the jobs that changed since the last one:

- the front end's own changes, reported through its history
  (:meth:`~corral.framework.memo.history.ClusterHistory.changed`: the simulator's submissions,
  completions, evictions, starts and releases);
- what the sessions changed: pods moved by their operations, phases moved, anything a closing session
  looked at (:meth:`~corral.framework.memo.history.ClusterHistory.closed` marks them :attr:`JobIndex.dirty`),
  which covers what ``apply_decisions`` then carries out.

The index is kept only by a history that tracks its jobs' changes (``ClusterHistory(tracked=True)``:
the simulator, ``corral schedule --cycles``) with skipping and the index on (its ``skip`` and
``keep_index`` fields; ``CORRAL_NO_SKIP=1`` turns both off, and the equality test compares them).
Sessions without one (``corral schedule``, one cycle; ``corral run``, a new cluster each cycle) walk
every job. A front end that tracks must report every job whose pods, phase or fields it changes
between cycles.

Sums are exact. What each queue holds and asks for is kept as exact integers (each amount is a float,
hence a dyadic rational: scaled by 2**1074 it is an integer) and rounded once when read, so adding a
job's amounts and taking them away again leaves no trace; the walking path computes the same correctly
rounded sums with ``math.fsum`` (:func:`exact_sum`), so both paths give the same bits whatever the
order of the jobs.

``ClusterHistory(check_index=True)`` (or ``CORRAL_CHECK_INDEX=1``) builds the index afresh at every session open and fails on any difference
from the kept one (the tests run simulations with it).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from corral.model import ALLOCATED_STATES, Cluster, Job, PodGroupPhase, Task, TaskStatus

__all__ = ["JobIndex", "exact_sum", "scores_others"]

_SCALE = 1 << 1074  # every finite double is an integer multiple of 2**-1074
_WAITING = frozenset({TaskStatus.PENDING, TaskStatus.PIPELINED})


def scores_others(task: Task) -> bool:
    """Do ``task``'s inter-pod terms score other pods once it is placed? kube-scheduler's
    InterPodAffinity Score adds a placed pod's preferred affinity and anti-affinity terms, and its
    required affinity terms (with ``hardPodAffinityWeight``), that select the pod being scored."""
    aff = task.affinity
    return aff is not None and bool(
        aff.pod_affinity_preferred or aff.pod_anti_affinity_preferred or aff.pod_affinity
    )


def exact_sum(rows: list[np.ndarray], width: int) -> np.ndarray:
    """The column sums of ``rows``, each correctly rounded (``math.fsum``): the same bits whatever the
    order of the rows, and the same as the index's kept sums."""
    if not rows:
        return np.zeros(width)
    arr = np.concatenate(rows).reshape(len(rows), width)
    return np.array([math.fsum(col) for col in arr.T.tolist()], dtype=float)


def _scaled(vec: np.ndarray) -> list[int] | None:
    """``vec`` as exact integers (times 2**1074), or None when an amount is not finite."""
    out = []
    for x in vec.tolist():
        if not math.isfinite(x):
            return None
        n, d = x.as_integer_ratio()
        out.append(n * (_SCALE // d))
    return out


class _Entry:
    """What the index knows of one job (computed from the job and its pods alone)."""

    __slots__ = (
        "anti",
        "asked",
        "best_effort",
        "enqueue",
        "exact",
        "held",
        "holding",
        "inqueue",
        "job",
        "phase",
        "pipelined",
        "queue",
        "scoring",
        "waiting",
        "waiting_all",
    )

    def __init__(self, job: Job, width: int) -> None:
        self.job = job
        self.phase = job.phase
        self.queue = job.queue
        waiting = waiting_all = best_effort = pipelined = anti = False
        held_rows: list[np.ndarray] = []
        asked_rows: list[np.ndarray] = []
        for t in job.tasks:
            status = t.status
            if t.affinity is not None and t.affinity.pod_anti_affinity:
                anti = True
            if not t.managed:
                continue
            if status in _WAITING:
                waiting_all = True
                if t.best_effort:
                    best_effort = True
                else:
                    waiting = True
                if status is TaskStatus.PIPELINED:
                    pipelined = True
            if status in ALLOCATED_STATES and t.node >= 0:  # a pod on a node not known holds nothing
                held_rows.append(t.request)
                asked_rows.append(t.request)
            elif status in _WAITING:
                asked_rows.append(t.request)
        self.waiting, self.waiting_all, self.best_effort, self.pipelined, self.anti = (
            waiting,
            waiting_all,
            best_effort,
            pipelined,
            anti,
        )
        # pods whose inter-pod terms score other pods (the nodeorder plugin's inter-pod score)
        self.scoring = any(scores_others(t) for t in job.tasks)
        self.enqueue = job.awaiting_admission()
        self.inqueue = job.admitted_unstarted()
        # what the job holds, summed in task order exactly as shares.job_usage sums it
        holding = None
        for req in held_rows:
            if holding is None:
                holding = np.zeros(width)
            holding += req
        self.holding = holding
        self.exact = True
        self.held = self._sum_scaled([holding] if holding is not None else [], width)
        self.asked = self._sum_scaled(asked_rows, width)

    def _sum_scaled(self, rows: list[np.ndarray], width: int) -> list[int]:
        total = [0] * width
        for row in rows:
            got = _scaled(row)
            if got is None:
                self.exact = False
                return total
            total = [a + b for a, b in zip(total, got)]
        return total


class JobIndex:
    """The kept sets and sums (see the module docstring). Read them only through a session that opened
    after the last :meth:`refresh` (``Session.index``); they describe the cluster as that session found
    it, and :meth:`candidates` adds what the session itself changed since."""

    def __init__(self, cluster: Cluster) -> None:
        self.queues_key = tuple(cluster.queues)
        self.width = len(cluster.resources)
        self.entries: dict[str, _Entry] = {}
        self.uids: list[str] = []  # every job, sorted (Session.job_uids)
        self.phase: dict[str, PodGroupPhase] = {}  # phases at open (Session._phase0)
        self.sets: dict[str, set[str]] = {
            name: set()
            for name in (
                "waiting",
                "waiting_all",
                "best_effort",
                "enqueue",
                "inqueue",
                "admitted",
                "pipelined",
                "anti",
                "scoring",
            )
        }
        self.holding: dict[str, np.ndarray] = {}  # shares.job_usage
        self.q_held: dict[str, list[int]] = {q: [0] * self.width for q in cluster.queues}
        self.q_asked: dict[str, list[int]] = {q: [0] * self.width for q in cluster.queues}
        self.inexact = 0  # jobs with a non-finite amount
        self.no_min = 0  # podgroups to admit without minResources
        # podgroups to admit: their minResources as rows of one matrix (enqueue's budget test)
        self.needs = np.zeros((64, self.width))
        self.row_of: dict[str, int] = {}
        self.free_rows: list[int] = list(range(63, -1, -1))
        self.row_uid: list[str | None] = [None] * 64
        self.row_queue = np.full(64, -1, dtype=np.int64)  # the queue (code) of each row
        self.queue_code = {q: i for i, q in enumerate(cluster.queues)}
        # enqueue's job order, kept per queue while the order's context stays the same
        self._order_ctx: tuple[Any, ...] | None = None
        self._order: dict[str, list[tuple[Any, ...]]] = {}
        self._order_key: dict[str, tuple[Any, ...]] = {}
        self._order_stale: set[str] = set()
        self.dirty: set[str] = set()
        # what the last refresh looked at (``generation`` counts refreshes): for structures kept beside
        # the index in ``extras`` (the fifo plugin's line), which bring themselves up to date from it
        self.generation = 0
        self.last_changed: set[str] = set()
        self.extras: dict[str, Any] = {}
        for uid, job in cluster.jobs.items():
            self._add(uid, job)
        self.uids = sorted(cluster.jobs)

    # -- upkeep ----------------------------------------------------------------------------------
    def _add(self, uid: str, job: Job) -> None:
        e = self.entries[uid] = _Entry(job, self.width)
        self.phase[uid] = e.phase
        sets = self.sets
        names = (
            "waiting",
            "waiting_all",
            "best_effort",
            "enqueue",
            "inqueue",
            "pipelined",
            "anti",
            "scoring",
        )
        for name in names:
            if getattr(e, name):
                sets[name].add(uid)
        if e.phase is not PodGroupPhase.PENDING:
            sets["admitted"].add(uid)
        if e.holding is not None:
            self.holding[uid] = e.holding
        self._charge(e, 1)
        if e.enqueue:
            if job.min_resources is None:
                self.no_min += 1
            else:
                self._put_row(uid, job.min_resources)

    def _drop(self, uid: str) -> None:
        e = self.entries.pop(uid)
        del self.phase[uid]
        for s in self.sets.values():
            s.discard(uid)
        self.holding.pop(uid, None)
        self._charge(e, -1)
        if e.enqueue:
            if e.job.min_resources is None:
                self.no_min -= 1
            else:
                row = self.row_of.pop(uid)
                self.row_uid[row] = None
                self.needs[row] = 0.0
                self.row_queue[row] = -1
                self.free_rows.append(row)

    def _charge(self, e: _Entry, sign: int) -> None:
        if not e.exact:
            self.inexact += sign
        if e.queue not in self.q_held:
            return
        held, asked = self.q_held[e.queue], self.q_asked[e.queue]
        for i in range(self.width):
            held[i] += sign * e.held[i]
            asked[i] += sign * e.asked[i]

    def _put_row(self, uid: str, need: np.ndarray) -> None:
        if not self.free_rows:
            size = len(self.row_uid)
            self.needs = np.vstack([self.needs, np.zeros((size, self.width))])
            self.row_queue = np.concatenate([self.row_queue, np.full(size, -1, dtype=np.int64)])
            self.row_uid.extend([None] * size)
            self.free_rows = list(range(2 * size - 1, size - 1, -1))
        row = self.free_rows.pop()
        self.needs[row] = need
        self.row_queue[row] = self.queue_code.get(self.entries[uid].queue, -1)
        self.row_of[uid] = row
        self.row_uid[row] = uid

    def refresh(self, cluster: Cluster, reported: set[str]) -> None:
        """Bring the index up to date with the jobs changed since it was last brought up to date: those
        the closing sessions named (:attr:`dirty`) and those the front end ``reported``."""
        changed = self.dirty | reported if reported else self.dirty
        self.dirty = set()
        self.generation += 1
        self.last_changed = changed
        self._order_stale |= changed
        jobs = cluster.jobs
        for uid in changed:
            known = uid in self.entries
            if known:
                self._drop(uid)
            job = jobs.get(uid)
            if job is not None:
                self._add(uid, job)
                if not known:
                    insort(self.uids, uid)
            elif known:
                del self.uids[bisect_left(self.uids, uid)]

    # -- reading ---------------------------------------------------------------------------------
    def candidates(self, since: Iterable[set[str]], *names: str, within: str = "") -> list[str]:
        """The sorted uids of the jobs in any of the sets ``names`` (intersected with set ``within`` if
        given) as the session opened, plus every job in ``since`` (the sets of jobs the session changed
        since it opened): a superset of the jobs that qualify now, so callers test each job as the walk
        over every job would."""
        sets = self.sets
        got: set[str] = set().union(*(sets[n] for n in names)) if len(names) > 1 else set(sets[names[0]])
        if within:
            got &= sets[within]
        for group in since:
            got |= group
        return sorted(got)

    def hopeless(self, budget: np.ndarray, eps: float) -> set[str]:
        """The podgroups to admit (as the session opened) whose minResources exceed ``budget`` in some
        resource (``actions.common.skipping.hopeless_for_enqueue``'s test, one matrix comparison)."""
        n = len(self.row_uid)
        needs = self.needs[:n]
        rows = np.flatnonzero(needs.any(axis=1) & (needs > budget + eps).any(axis=1))
        row_uid = self.row_uid
        return {uid for r in rows.tolist() if (uid := row_uid[r]) is not None}

    def fitting(self, budget: np.ndarray, eps: float) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """Per row of the minResources matrix: within ``budget`` (no minResources at all counts as
        within, as enqueue's ``_within_budget`` has it)."""
        needs = self.needs[: len(self.row_uid)]
        return np.logical_or(~needs.any(axis=1), ~(needs > budget + eps).any(axis=1))

    def enqueue_order(
        self, context: tuple[Any, ...], key: Callable[[Job], tuple[Any, ...]], jobs: dict[str, Job]
    ) -> dict[str, list[tuple[Any, ...]]]:
        """Per queue, the podgroups to admit as the session opened, in JobOrder: sorted ``(key(job),
        uid)``, kept while ``context`` (``Session.job_order_context``) stays the same and brought up to
        date for the jobs changed since. Jobs with a nominated pod are left out (their key depends on
        the session: see ``orderkeys.kept_keys``); the caller treats them as changed."""
        skip = self.sets["pipelined"]
        if context != self._order_ctx:
            self._order_ctx = context
            self._order, self._order_key = {}, {}
            for uid in self.sets["enqueue"] - skip:
                k, q = key(jobs[uid]), self.entries[uid].queue
                self._order_key[uid] = (k, q)
                self._order.setdefault(q, []).append((k, uid))
            for order in self._order.values():
                order.sort()
        else:
            enqueue = self.sets["enqueue"]
            for uid in self._order_stale:
                old = self._order_key.pop(uid, None)
                if old is not None:
                    order = self._order[old[1]]
                    del order[bisect_left(order, (old[0], uid))]
                if uid in enqueue and uid not in skip:
                    k, q = key(jobs[uid]), self.entries[uid].queue
                    self._order_key[uid] = (k, q)
                    insort(self._order.setdefault(q, []), (k, uid))
        self._order_stale = set()
        return self._order

    def queue_held(self) -> dict[str, np.ndarray] | None:
        """What each queue holds (shares.queue_usage), or None when a sum cannot be kept exactly."""
        return self._rounded(self.q_held)

    def queue_asked(self) -> dict[str, np.ndarray] | None:
        """What each queue's jobs hold and wait for (shares.queue_requests), or None likewise."""
        return self._rounded(self.q_asked)

    def _rounded(self, sums: dict[str, list[int]]) -> dict[str, np.ndarray] | None:
        if self.inexact:
            return None
        return {q: np.array([a / _SCALE for a in acc], dtype=float) for q, acc in sums.items()}

    def open_nominations(self, jobs: dict[str, Job]) -> dict[int, Task]:
        return {
            id(t): t
            for uid in self.sets["pipelined"]
            for t in jobs[uid].tasks
            if t.status is TaskStatus.PIPELINED
        }

    # -- checking --------------------------------------------------------------------------------
    def differences(self, other: JobIndex) -> list[str]:
        """What differs from ``other`` (a fresh build): empty when the kept index is right."""
        out = []
        if self.uids != other.uids:
            out.append("uids")
        if self.phase != other.phase:
            out.append(
                "phases: "
                + ", ".join(
                    sorted(
                        u
                        for u in set(self.phase) | set(other.phase)
                        if self.phase.get(u) is not other.phase.get(u)
                    )
                )[:200]
            )
        for name, s in self.sets.items():
            if s != other.sets[name]:
                out.append(f"set {name}: {sorted(s ^ other.sets[name])[:5]}")
        if self.holding.keys() != other.holding.keys() or any(
            not np.array_equal(v, other.holding[u]) for u, v in self.holding.items()
        ):
            out.append("holding")
        if self.q_held != other.q_held or self.q_asked != other.q_asked or self.inexact != other.inexact:
            out.append("queue sums")
        if (
            self.no_min != other.no_min
            or sorted(self.row_of) != sorted(other.row_of)
            or any(
                not np.array_equal(self.needs[r], other.needs[other.row_of[u]])
                for u, r in self.row_of.items()
            )
        ):
            out.append("enqueue needs")
        return out
