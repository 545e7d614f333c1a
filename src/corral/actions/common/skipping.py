"""Skipping jobs that cannot have become schedulable: a speed change that never changes a decision.

A congested cluster has thousands of waiting jobs and little free capacity; most of them fail their
placement attempt in every cycle, for the same reason, until something they depend on changes. Two pieces
of knowledge let ``allocate`` leave such jobs out (KAI-Scheduler keeps the first: a job's *scheduling
signature*; the second is what Volcano's and KAI's event-driven caches give them for free):

**Within a cycle** (:class:`Skipper`, one per execution of ``allocate``): once a job failed because the
first pod it tried fits on no node (now, or onto capacity being released), any later job whose first pod
has the same constraints (same equivalence class apart from the request) and requests at least as much of
every resource fails too, without being tried: capacity only shrinks while ``allocate`` runs (it places
pods; a discarded attempt restores the state it started from).

**Across cycles** (:class:`~corral.framework.memo.skipmemory.SkipMemory`, kept by the front end's
:class:`~corral.framework.memo.history.ClusterHistory`, so the simulator, ``corral schedule --cycles``
and ``corral run`` — which builds a new Cluster object each cycle — keep what earlier cycles learned): a job whose attempt failed at its first pod
is remembered with the state of its own pods (uid, class, status and nomination of each).
When ``allocate`` starts again and the job's pods are unchanged, the job fails again unless its first
pod's class now fits somewhere — a test made once per class, not per job, against the capacity at the
start of ``allocate``. Capacity freed, a node added or repaired, a lock lifted or a predicate loosened
all show up in that test; "its own pods changed" shows up in the state comparison; a queue's share does
not matter for a pod that fits nowhere (the attempt fails whatever the queue says).

Skipping applies only to pods every Predicate plugin signs (:mod:`corral.framework.hints`: the plugin
declares its mask a function of the pod's signature and the nodes' state; ``predicates`` does; a plugin
whose mask depends on the job, such as a reservation lock that lets short jobs through, signs nothing,
which turns skipping off for the sessions it is in). Pods are compared by
:meth:`~corral.framework.session.Session.mask_key`.

What makes this exact (decisions byte-identical with skipping on and off, checked by
``tests/framework/test_skipcache.py`` over the whole scenario suite and a congested simulation):

- only jobs whose attempt is a plain first-pod failure are remembered: no topology domain, no pod of
  the job placed or nominated, not ready already, the pod without inter-pod (anti-)affinity terms of its
  own (an affinity term can be satisfied by a pod placed later in the cycle); predicate masks otherwise
  only shrink as pods are placed (existing pods' anti-affinity, devices used up);
- when reasons are reported (``Session.report_reasons``, the default: ``corral schedule`` prints one per
  job), a skipped job keeps its place in the job order and its reason is worked out at its turn exactly
  as the attempt would have (queue capability first, then the no-fit reason), so even the reason text is
  unchanged; only the placement search is saved. When reasons are not reported (the simulator's cycles),
  a skipped job is left out before the job order is even sorted: the order of the others is a total
  order, unchanged by leaving some out, and a failed first-pod attempt has no side effect.

``ClusterHistory(skip=False)`` (or the environment variable ``CORRAL_NO_SKIP=1``, read when a history
is made) turns all skipping off; ``benchmarks/bench_backlog.py --no-skip`` and the equality test use it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.framework.memo.skipmemory import own_state, plain
from corral.model import Job, Task, TaskStatus

if TYPE_CHECKING:
    from corral.framework.session import Session

__all__ = ["JobHeap", "Skipper", "grouping", "hopeless_for_enqueue", "pre_filter", "skipper_for"]

_WAITING = frozenset({TaskStatus.PENDING, TaskStatus.PIPELINED})


class Skipper:
    """The skip knowledge of one ``allocate`` execution (see the module docstring)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.memory = session.history.skip_memory
        self.memory.prune(session.cluster.jobs)
        self._fits_at_start: dict[tuple[Any, ...], bool] = {}  # class -> fits somewhere at the start
        self._failed: dict[tuple[Any, ...], list[np.ndarray]] = {}  # constraints -> requests that failed

    # -- across cycles ---------------------------------------------------------------------------
    def _fits_somewhere(self, task: Task) -> bool:
        key = self.session.mask_key(task)
        if key is None:
            return True  # not signed: nothing to conclude
        got = self._fits_at_start.get(key)
        if got is None:
            s = self.session
            got = bool((s.predicate(task) & s.capacity.fits(task, future=True)).any())
            self._fits_at_start[key] = got
        return got

    def still_blocked(self, job: Job) -> bool:
        """Remembered as failing at its first pod, its pods unchanged, and that pod's class still fits
        nowhere: it fails again this cycle (checked at the start of ``allocate``)."""
        entry = self.memory.blocked.get(job.uid)
        if entry is None:
            return False
        state, task = entry
        return not (state != own_state(job) or self._fits_somewhere(task))

    def first_pod(self, job: Job) -> Task | None:
        """The pod a job's attempt starts with, when it is cheap to know: its only waiting pod, or the
        remembered first pod when its pods have not changed since; None otherwise."""
        waiting = [t for t in job.tasks if t.status in _WAITING and t.managed and not t.best_effort]
        if len(waiting) == 1:
            return waiting[0]
        entry = self.memory.blocked.get(job.uid)
        if entry is not None and entry[0] == own_state(job):
            return entry[1]
        return None

    # -- within the cycle ------------------------------------------------------------------------
    def no_easier_failed(self, task: Task) -> bool:
        """Did a pod with the same constraints and no larger request already fit nowhere this cycle?"""
        key = self.session.mask_key(task)
        if key is None:
            return False
        failed = self._failed.get((key[0][1:], key[1]) if task.labels else key[1:])
        if not failed:
            return False
        req = task.request
        return any(bool((req >= r).all()) for r in failed)

    def known_to_fail(self, job: Job, first: Task | None) -> bool:
        """Will ``job``'s attempt fail at its first pod ``first`` without needing to be tried?"""
        if first is None or not plain(first):
            return False
        return self.no_easier_failed(first) or self.still_blocked(job)

    def record(self, job: Job, first: Task | None, failed_first: bool) -> None:
        """After a real attempt: remember a plain first-pod failure (and forget anything else)."""
        key = None if first is None else self.session.mask_key(first)
        if not failed_first or first is None or not plain(first) or key is None:
            self.memory.blocked.pop(job.uid, None)
            return
        s = self.session
        if (s.predicate(first) & s.capacity.fits(first, future=True)).any():
            # it failed on the queue's capability, not on capacity: nothing to conclude
            self.memory.blocked.pop(job.uid, None)
            return
        self.memory.blocked[job.uid] = (own_state(job), first)
        self._fits_at_start[key] = False
        constraints = (key[0][1:], key[1]) if first.labels else key[1:]
        self._failed.setdefault(constraints, []).append(first.request)


def skipper_for(session: Session) -> Skipper | None:
    """A Skipper for this ``allocate`` execution, or None when skipping is off or some Predicate plugin
    gives no cache hints (a reservation's lock, for one, depends on the job's expected run time)."""
    if not session.history.skip or not session.predicates_signed():
        return None
    return Skipper(session)


def pre_filter(skipper: Skipper | None, session: Session) -> Callable[[Job], bool] | None:
    """The test that leaves a job out of ``allocate``'s job order altogether: only when reasons are not
    reported (a skipped job's reason would otherwise be needed at its turn)."""
    if skipper is None or session.report_reasons:
        return None
    return skipper.still_blocked


def hopeless_for_enqueue(session: Session, pending: list[Job], budget: np.ndarray, eps: float) -> list[Job]:
    """``pending`` without the jobs enqueue cannot admit whatever comes before them: minResources above
    the budget at the start of enqueue in some resource (the budget only shrinks as jobs are admitted,
    Volcano ``actions/enqueue``). Only when reasons are not reported (the rejected job's reason names
    the budget at its turn) and skipping is on."""
    if not session.history.skip or session.report_reasons or not pending:
        return pending
    needs = [j.min_resources for j in pending if j.min_resources is not None]
    if len(needs) < len(pending):
        return pending
    needs_arr: np.ndarray = np.concatenate(needs).reshape(len(needs), len(budget))
    hopeless = needs_arr.any(axis=1) & (needs_arr > budget + eps).any(axis=1)
    if not hopeless.any():
        return pending
    return [j for j, h in zip(pending, np.asarray(hopeless).tolist()) if not h]


def grouping(skipper: Skipper | None, session: Session) -> Skipper | None:
    """The Skipper that groups ``allocate``'s job order by first-pod class, or None (reasons reported,
    or skipping off): see :class:`JobHeap`."""
    return None if skipper is None or session.report_reasons else skipper


class JobHeap:
    """One queue's jobs in job order for ``allocate``: ``push((key, seq, job))``, ``pop()``, truth,
    iteration. Keys are totally ordered (``seq`` breaks ties) and do not change while a job waits.

    With a ``skipper`` (reasons not reported) the jobs are grouped by the class of their first pod (plain
    pods only; any other job is a group of its own) and the queue pops the best group head. Once a
    popped job is known to fail at its first pod, every other job of its group would fail the same way
    at its turn, so the group is dropped at once instead of popping its members one by one: a class that
    no longer fits costs one pop, not one per waiting job. The jobs popped are the same, in the same
    order, minus jobs that would fail without effect."""

    __slots__ = ("groups", "heap", "skipper")

    def __init__(self, skipper: Skipper | None = None) -> None:
        self.skipper = skipper
        self.heap: list[Any] = []  # entries, or (key, seq, group) heads when grouped
        self.groups: dict[Any, list[Any]] = {}

    def _group_of(self, job: Job) -> Any:
        assert self.skipper is not None  # grouping happens only with a skipper
        first = self.skipper.first_pod(job)
        key = self.skipper.session.mask_key(first) if first is not None and plain(first) else None
        return ("class", key) if key is not None else ("job", job.uid)

    def push(self, entry: tuple[Any, ...]) -> None:
        if self.skipper is None:
            heapq.heappush(self.heap, entry)
            return
        gkey = self._group_of(entry[2])
        group = self.groups.get(gkey)
        if group is None:
            group = self.groups[gkey] = []
        if not group or entry[:2] < group[0][:2]:
            heapq.heappush(self.heap, (entry[0], entry[1], gkey))  # the group's new head
        heapq.heappush(group, entry)

    def pop(self) -> tuple[Any, ...]:
        if self.skipper is None:
            return heapq.heappop(self.heap)
        while True:
            _key, seq, gkey = heapq.heappop(self.heap)
            group = self.groups.get(gkey)
            if not group or group[0][1] != seq:
                continue  # stale head: the group moved on or left
            entry = heapq.heappop(group)
            job = entry[2]
            if group and gkey[0] == "class" and self.skipper.known_to_fail(job, self.skipper.first_pod(job)):
                del self.groups[gkey]  # all of them fail at their first pod
            elif group:
                heapq.heappush(self.heap, (group[0][0], group[0][1], gkey))
            else:
                del self.groups[gkey]
            return entry

    def __bool__(self) -> bool:
        if self.skipper is None:
            return bool(self.heap)
        return any(self.groups.values())

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        if self.skipper is None:
            return iter(list(self.heap))
        return iter([e for g in self.groups.values() for e in g])
