"""The move plan of ``consolidate`` (:mod:`corral.actions.consolidate`): which running pods to move, and
where, so that a waiting gang fits inside one domain — at the least work lost.

The planner works on plain arrays — each node's free capacity once releasing pods are gone (future idle,
``free``: nodes × resources), which nodes may hold the gang's pods (``gang_ok``: the domain and the
predicates), which nodes may hold each movable pod — and on **units**, what may move together:

* a *pod unit*: one pod of a job that stays at or above its minimums without it (its surplus; a job
  already below a minimum gives any pod). The pod restarts on its new node and loses its own work;
* a *job unit*: every running pod of a job, which restarts whole on its new nodes and loses the work of
  all its pods — the cost model of gang eviction (:mod:`corral.actions.bundles`), where a gang pushed
  below its minimum loses everything it has done since its last checkpoint.

Steps:

1. **greedy** — the unit that opens most slots for the gang per unit of work lost (a slot: room for one
   more of the gang's pods — its largest request — on a node of the domain), or, for less than that
   rate would charge for the rest, the cheapest unit that alone completes the gang; the rates are kept
   from one pick to the next and only the best measured again (a lazy greedy); at most ``max_jobs``
   jobs move;
2. **placement** (:meth:`MovePlanner.place`) — the gang's pods go first, each to the node of the domain
   where it leaves fewest slots unused (the freed holes), then the moved pods, largest first, each to
   the node where it fits tightest — never back to the node it leaves; if that fails, the moved pods go
   first, nodes outside the domain preferred. A moved pod that finds no node bans its unit and the
   greedy runs again (at most :data:`RETRIES` times);
3. **reprieve** — units whose move turns out not to be needed are given back, dearest first.

The plan is an estimate over capacity columns; the caller's dry run through a Statement decides.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from corral.model import Task
from corral.model.resources import EPS

__all__ = ["RETRIES", "MovePlan", "MovePlanner", "Unit"]

#: Plans made again after a moved pod found no node (its unit banned).
RETRIES = 4
#: Slots counted per node at most (an unlimited resource would count infinitely many).
_MOST = 1 << 20


@dataclass
class Unit:
    """Pods that move together (see the module docstring); ``job``: the index of their job, ``whole``:
    every running pod of it; ``order``: ties between equal rates (the victim order)."""

    pods: list[Task]
    cost: float
    job: int
    whole: bool
    order: int


@dataclass
class MovePlan:
    """Units to move, each moved pod's new node row (``moves``: (pod, row)), the gang's pods' rows
    (``gang``: (task, row)), and the work the moves lose."""

    units: list[Unit]
    moves: list[tuple[Task, int]]
    gang: list[tuple[Task, int]]
    cost: float = 0.0
    jobs: int = 0

    @property
    def pods(self) -> int:
        return len(self.moves)


@dataclass
class _State:
    free: np.ndarray
    slots: np.ndarray
    total: int
    taken: list[Unit] = field(default_factory=list)
    pods: set[int] = field(default_factory=set)  # ids of the pods moved
    jobs: dict[int, int] = field(default_factory=dict)  # job index -> units taken


class MovePlanner:
    """Plans for one domain (:meth:`plan`). ``free``: future idle per node row (not modified);
    ``gang``: the waiting pods to place, in order; ``gang_ok``: rows where they may go; ``dest``:
    a movable pod's allowed rows (its predicates, live nodes); ``units``: what may move;
    ``allowed(job, pods)``: may these pods of job ``job`` move together without breaking it (pod
    units of one job add up); ``max_jobs``: most jobs moved (-1: no limit)."""

    def __init__(
        self,
        free: np.ndarray,
        gang: list[Task],
        gang_ok: np.ndarray,
        dest: Callable[[Task], np.ndarray],
        units: list[Unit],
        allowed: Callable[[int, list[Task]], bool],
        max_jobs: int = -1,
    ) -> None:
        self.base = free
        self.gang = gang
        self.req = np.max(np.array([t.request for t in gang]), axis=0)
        self.cols = np.flatnonzero(self.req > 0)
        self.gang_ok = gang_ok
        self.dest = dest
        self.allowed = allowed
        self.max_jobs = max_jobs
        self.units = [u for u in units if any(gang_ok[t.node] for t in u.pods)]
        self.cheap = sorted(self.units, key=lambda u: (u.cost, len(u.pods), u.order))
        self._nowhere: dict[int, bool] = {}

    # -- slots -------------------------------------------------------------------------------------
    def _slots(self, free: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        f = free if rows is None else free[rows]
        ok = self.gang_ok if rows is None else self.gang_ok[rows]
        n = np.floor((f[:, self.cols] + EPS) / self.req[self.cols]).min(axis=1)
        return np.where(ok, np.clip(n, 0, _MOST), 0).astype(np.int64)

    def _gain(self, st: _State, u: Unit) -> int:
        """Slots for the gang that moving ``u`` (what of it is not moved yet) opens."""
        pods = [t for t in u.pods if id(t) not in st.pods and self.gang_ok[t.node]]
        if not pods:
            return 0
        rows = sorted({t.node for t in pods})
        at = {r: i for i, r in enumerate(rows)}
        f = st.free[rows].copy()
        for t in pods:
            f[at[t.node]] += t.request
        new = np.floor((f[:, self.cols] + EPS) / self.req[self.cols]).min(axis=1)
        return int(np.clip(new, 0, _MOST).sum() - st.slots[rows].sum())

    def _may(self, st: _State, u: Unit, banned: set[int]) -> bool:
        if u.order in banned or self.nowhere(u):
            return False
        if self.max_jobs >= 0 and u.job not in st.jobs and len(st.jobs) >= self.max_jobs:
            return False
        mine = [x for x in st.taken if x.job == u.job]
        if any(x.whole for x in mine):
            return False  # the job moves whole already
        if u.whole:
            return True
        return all(id(t) not in st.pods for t in u.pods) and self.allowed(
            u.job, [t for x in mine for t in x.pods] + u.pods
        )

    def nowhere(self, u: Unit) -> bool:
        """Has a pod of ``u`` no node to go to even before anything moves (its predicates, the room
        free now, not its own node)?"""
        got = self._nowhere.get(u.order)
        if got is None:
            got = False
            for t in u.pods:
                cols = np.flatnonzero(t.request > 0)
                fits = (self.base[:, cols] >= t.request[cols] - EPS).all(axis=1) & self.dest(t)
                fits[t.node] = False
                if not fits.any():
                    got = True
                    break
            self._nowhere[u.order] = got
        return got

    def _take(self, st: _State, u: Unit) -> None:
        if u.whole:  # the job's pod units fold into it
            st.taken = [x for x in st.taken if x.job != u.job]
        st.taken.append(u)
        st.jobs[u.job] = st.jobs.get(u.job, 0) + 1
        rows = set()
        for t in u.pods:
            if id(t) in st.pods:
                continue
            st.pods.add(id(t))
            st.free[t.node] += t.request
            rows.add(t.node)
        if rows:
            r = np.array(sorted(rows))
            new = self._slots(st.free, r)
            st.total += int(new.sum() - st.slots[r].sum())
            st.slots[r] = new

    # -- 1. the greedy -------------------------------------------------------------------------------
    def _greedy(self, banned: set[int]) -> _State | None:
        free = self.base.copy()
        slots = self._slots(free)
        st = _State(free, slots, int(slots.sum()))
        n = len(self.gang)
        heap = []
        for u in self.units:
            if self._may(st, u, banned):
                g = self._gain(st, u)
                if g > 0:
                    heap.append((self._key(u, g, n - st.total), u.order, u))
        heapq.heapify(heap)
        while st.total < n:
            lack = n - st.total
            best: Unit | None = None
            rate = 0.0
            while heap:
                _, _, u = heapq.heappop(heap)
                if not self._may(st, u, banned):
                    continue
                g = self._gain(st, u)
                if g <= 0:
                    continue
                key = self._key(u, g, lack)
                if heap and key > heap[0][0]:
                    heapq.heappush(heap, (key, u.order, u))
                    continue
                best, rate = u, key[0]
                break
            if best is None:
                return None
            for u in self.cheap:  # the cheapest unit that alone completes the gang, for less
                if u.cost > rate * lack + 1e-12:
                    break
                if u is not best and self._may(st, u, banned) and self._gain(st, u) >= lack:
                    heapq.heappush(heap, (self._key(best, 1, lack), best.order, best))
                    best = u
                    break
            self._take(st, best)
        return st

    @staticmethod
    def _key(u: Unit, gain: int, lack: int) -> tuple[float, float, int]:
        g = min(gain, lack)
        return (u.cost / g, len(u.pods) / g, u.order)

    # -- 2. placement --------------------------------------------------------------------------------
    def place(self, units: list[Unit]) -> tuple[list[tuple[Task, int]], list[tuple[Task, int]]] | list[Task]:
        """(gang placements, moves) for moving ``units``; or the moved pods that found no node."""
        free = self.base.copy()
        moved: list[Task] = []
        seen: set[int] = set()
        for u in units:
            for t in u.pods:
                if id(t) not in seen:
                    seen.add(id(t))
                    moved.append(t)
                    free[t.node] += t.request
        moved.sort(key=lambda t: (-float((t.request[self.cols] / self.req[self.cols]).sum()), t.node))
        stuck: list[Task] = []
        for gang_first in (True, False):
            f = free.copy()
            got = self._place_all(f, moved, gang_first)
            if isinstance(got, tuple):
                return got
            if not stuck:
                stuck = got
        return stuck

    def _place_all(
        self, f: np.ndarray, moved: list[Task], gang_first: bool
    ) -> tuple[list[tuple[Task, int]], list[tuple[Task, int]]] | list[Task]:
        gang: list[tuple[Task, int]] = []
        moves: list[tuple[Task, int]] = []
        stuck: list[Task] = []

        def put_gang() -> bool:
            for t in self.gang:
                row = self._tightest(f, t, self.gang_ok, slots=True)
                if row < 0:
                    return False
                f[row] -= t.request
                gang.append((t, row))
            return True

        def put_moved() -> None:
            for t in moved:
                mask = self.dest(t).copy()
                mask[t.node] = False
                row = self._tightest(f, t, mask, slots=False, outside=not gang_first)
                if row < 0:
                    stuck.append(t)
                    continue
                f[row] -= t.request
                moves.append((t, row))

        if gang_first:
            if not put_gang():
                return []
            put_moved()
        else:
            put_moved()
            if not stuck and not put_gang():
                return []
        return stuck if stuck else (gang, moves)

    def _tightest(
        self, f: np.ndarray, t: Task, mask: np.ndarray, *, slots: bool, outside: bool = False
    ) -> int:
        """The row of ``mask`` where ``t`` fits leaving least room: for the gang's pods, fewest of its
        slots; for a moved pod, the smallest share of the node left over (``outside``: nodes where the
        gang may not go first); ties to the lowest row. -1 when it fits nowhere."""
        cols = np.flatnonzero(t.request > 0)
        fits = mask & (f[:, cols] >= t.request[cols] - EPS).all(axis=1)
        rows = np.flatnonzero(fits)
        if not len(rows):
            return -1
        left = f[rows] - t.request
        if slots:
            score = np.floor((left[:, self.cols] + EPS) / self.req[self.cols]).min(axis=1)
        else:
            scale = np.where(t.request[cols] > 0, t.request[cols], 1.0)
            score = (left[:, cols] / scale).sum(axis=1)
        if outside:
            score = score + np.where(self.gang_ok[rows], 1e12, 0.0)
        return int(rows[int(np.argmin(score))])

    # -- the plan ------------------------------------------------------------------------------------
    def plan(self) -> MovePlan | None:
        """The cheapest plan the search finds (None: none; a plan without units when the gang fits
        already)."""
        banned: set[int] = set()
        for _ in range(RETRIES + 1):
            st = self._greedy(banned)
            if st is None:
                return None
            got = self.place(st.taken)
            if isinstance(got, list):
                if not got:
                    return None  # the gang's own pods do not fit: the estimate was wrong
                ids = {id(t) for t in got}
                banned |= {u.order for u in st.taken if any(id(t) in ids for t in u.pods)}
                continue
            return self._reprieve(st.taken, got)
        return None

    def _reprieve(
        self, units: list[Unit], placed: tuple[list[tuple[Task, int]], list[tuple[Task, int]]]
    ) -> MovePlan:
        """Give back the units not needed, dearest first."""
        for u in sorted(units, key=lambda u: (-u.cost, -len(u.pods), -u.order)):
            rest = [x for x in units if x is not u]
            got = self.place(rest)
            if isinstance(got, tuple):
                units, placed = rest, got
        return MovePlan(units, placed[1], placed[0], sum(u.cost for u in units), len({u.job for u in units}))
