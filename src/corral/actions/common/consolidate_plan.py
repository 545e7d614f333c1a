"""The move plan of ``consolidate`` (:mod:`corral.actions.consolidate`): which running pods to move, and
where, so that a waiting gang fits inside one domain — at the least work lost.

The planner works on plain arrays — each node's free capacity once releasing pods are gone (future idle,
``free``: nodes × resources), which nodes may hold the gang's pods (``gang_ok``: the domain and the
predicates), which nodes may hold each movable pod — and on **units**, what may move together:

* a *pod unit*: one pod of a job that stays at or above its minimums without it (its surplus; a job
  already below a minimum gives any pod). The pod restarts on its new node and loses its own work;
* a *job unit*: every running pod of a job, which restarts whole on its new nodes and loses the work of
  all its pods — the cost model of gang eviction (:mod:`corral.actions.common.bundles`), where a gang pushed
  below its minimum loses everything it has done since its last checkpoint.

A *slot* is room for one more of the gang's pods (its largest request) on a node where it may go.
Moving a unit frees its pods' room where they run and takes room where they land; each moved pod lands
outside the domain if it can, then where it costs the gang fewest slots, then where it fits tightest
(never on the node it leaves); a pod with nowhere to go lands where one cheap single-pod unit moves away
for it (a chain of two moves). The steps:

1. **greedy** — candidate *steps* are, per node, the cheapest set of units there that opens one more
   slot (a covering knapsack on the column that lacks most, exact over the units on that node), and
   each job unit spanning several nodes. A step is priced by the work it loses per slot it opens, net
   of the slots its moved pods take where they land (measured when the step is first in line: a lazy
   greedy), counting at most the slots still lacking — so a unit that alone completes the gang for
   less wins. A node's step is worked out only when its lower bound (:meth:`MovePlanner.bound`: the
   fractional covering knapsack of its units; for the job-cap ranking, the fewest jobs that cover the
   lack) could beat what is in line, and a job moved whole across nodes is in line only when its
   leaving opens a slot (:meth:`MovePlanner.spanning`; one that opens none cannot gain alone). At most
   ``max_jobs`` jobs move (when that cap stops the greedy, it runs once more ranking steps by the
   jobs they add first). A moved pod with nowhere to go makes its step fail. The move sets
   evaluated count against the decision's :class:`Budget`;
2. **reprieve** — units whose move turns out not to be needed are given back, dearest first: its
   pods back where they run, when the room there is still free and the gang still fits;
3. **the gang's pods** go, each, to the node of the domain where it leaves fewest slots unused.

The plan is an estimate over capacity columns; the caller's dry run through a Statement decides.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.model import Task
from corral.model.resources import EPS

__all__ = ["Budget", "MovePlan", "MovePlanner", "Pool", "Unit"]

#: Single-pod units tried, at most, to make room for a moved pod with nowhere to go.
CHAIN = 16
#: Deeper landing searches (:meth:`MovePlanner._room_deep`) per planner, at most.
DEEP_CHAINS = 16
#: Nodes a deeper landing search works out, at most (those of the least bound first).
DEEP_ROWS = 12
#: The deeper pass's move sets, at most, as a multiple of those the first passes spent.
DEEP_SHARE = 1
#: What a unit of a job not moving yet weighs in a node's step when the job cap binds (more than any
#: work: the step adds fewest jobs first)
_NEW_JOB = 1e9
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
    #: one pod of a job that moves whole already, taken to another node: its work is lost with the
    #: job's, so it costs nothing more (the job's pods not taken so restart where they run)
    paid: bool = False


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
class Budget:
    """The per-decision search budget: steps tried (a moved set evaluated with its pods landed). When
    it is spent the greedy stops (no plan, or the best so far), so a decision's time is bounded; a
    count, not a clock, so the same input gives the same decisions."""

    left: int = 1 << 30

    def spent(self) -> bool:
        return self.left <= 0


@dataclass
class _State:
    free: np.ndarray
    slots: np.ndarray
    total: int
    taken: list[Unit] = field(default_factory=list)
    moved: set[int] = field(default_factory=set)  # ids of the pods moved
    moves: list[tuple[Task, int]] = field(default_factory=list)
    jobs: set[int] = field(default_factory=set)
    paid: set[int] = field(default_factory=set)  # jobs that move whole

    def copy(self) -> _State:
        return _State(
            self.free.copy(),
            self.slots.copy(),
            self.total,
            list(self.taken),
            set(self.moved),
            list(self.moves),
            set(self.jobs),
            set(self.paid),
        )


class Pool:
    """What the planners of one decision share about ``units`` (whatever the domain): every unit by
    node row (``at_all``) and what movable pods hold per row (``movable``), the least work per room
    freed per row and column (``rates``, filled as asked), per job moved whole the rows of its pods
    and those pods as :attr:`Unit.paid` units (``relocs``, and by row ``relocs_at``), and the units
    of one pod, cheapest first (``singles``); the job index of each pod (``job_of``, by id)."""

    def __init__(self, units: list[Unit], free: np.ndarray) -> None:
        self.at_all: dict[int, list[Unit]] = {}
        self.movable = np.zeros_like(free)
        alone = set()
        for u in units:
            for r in sorted({t.node for t in u.pods}):
                self.at_all.setdefault(r, []).append(u)
            if not u.whole:
                self.movable[u.pods[0].node] += u.pods[0].request
                alone.add(id(u.pods[0]))
        self.rates: dict[int, np.ndarray] = {}
        self.paid_rows: dict[int, np.ndarray] = {}
        self.relocs: dict[int, list[Unit]] = {}
        self.relocs_at: dict[int, list[Unit]] = {}
        order = len(units)
        for u in units:
            if not u.whole:
                continue
            self.paid_rows[u.job] = np.array(sorted({t.node for t in u.pods}), dtype=np.int64)
            for t in u.pods:
                if id(t) not in alone:
                    self.movable[t.node] += t.request
                paid = Unit([t], 0.0, u.job, False, order, True)
                order += 1
                self.relocs.setdefault(u.job, []).append(paid)
                self.relocs_at.setdefault(t.node, []).append(paid)
        self.singles = sorted((u for u in units if len(u.pods) == 1), key=lambda u: (u.cost, u.order))
        self.job_of = {id(t): u.job for u in units for t in u.pods}


class MovePlanner:
    """Plans for one domain (:meth:`plan`). ``free``: future idle per node row (not modified);
    ``gang``: the waiting pods to place, in order; ``gang_ok``: rows where they may go; ``dest``:
    a movable pod's allowed rows (its predicates, live nodes); ``units``: what may move;
    ``allowed(job, pods)``: may these pods of job ``job`` move together without breaking it (pod
    units of one job add up); ``max_jobs``: most jobs moved (-1: no limit); ``first``: the steps of
    nodes before anything moves, shared between planners of the same ``free`` and ``units``."""

    def __init__(
        self,
        free: np.ndarray,
        gang: list[Task],
        gang_ok: np.ndarray,
        dest: Callable[[Task], np.ndarray],
        units: list[Unit],
        allowed: Callable[[int, list[Task]], bool],
        max_jobs: int = -1,
        first: dict[int, list[Unit] | None] | None = None,
        budget: Budget | None = None,
        pool: Pool | None = None,
    ) -> None:
        self.budget = budget or Budget()
        self.base = free
        #: each node's step before anything moves, shared by the planners of one decision (a node's
        #: step depends on the node alone)
        self.first = first if first is not None else {}
        self.gang = gang
        self.req = np.max(np.array([t.request for t in gang]), axis=0)
        self.cols = np.flatnonzero(self.req > 0)
        self._colreq = [(int(c), float(self.req[c])) for c in self.cols]
        self.gang_ok = gang_ok
        self.dest = dest
        self.allowed = allowed
        self.max_jobs = max_jobs
        self.units = [u for u in units if any(gang_ok[t.node] for t in u.pods)]
        self._pods: dict[int, tuple[Any, ...]] = {}  # id(pod) -> what landing it needs (:meth:`_land`)
        self.deep = False  # the deeper pass of :meth:`plan`
        self.chains = DEEP_CHAINS  # its landing searches left
        self.rooms = 0  # landings the greedy sought room for (none: the deeper pass changes nothing)
        self.ceiling = math.inf  # the deeper pass stops once its moves cost this much
        self._spanning: list[tuple[Unit, int]] | None = None  # :meth:`spanning`
        self._bounds: dict[int, tuple[float, float]] = {}  # :meth:`bound`
        self.capped = False  # the job cap refused a unit
        self.by_jobs = False  # the greedy ranks steps by the jobs they add (:meth:`_greedy`)
        self._first_jobs: dict[int, list[Unit] | None] = {}  # :meth:`_first` for that ranking
        self._held_at: dict[tuple[int, int], np.ndarray] = {}  # :meth:`_held`
        self.at: dict[int, list[Unit]] = {}  # node row -> units with a pod there
        self.job_rows: dict[int, set[int]] = {}  # job index -> rows in ``at`` with a unit of it
        for u in self.units:
            for r in sorted({t.node for t in u.pods if gang_ok[t.node]}):
                self.at.setdefault(r, []).append(u)
                self.job_rows.setdefault(u.job, set()).add(r)
        pool = pool if pool is not None else Pool(units, free)
        self.at_all, self._movable, self._rates = pool.at_all, pool.movable, pool.rates
        self._paid_rows, self.relocs, self.relocs_at = pool.paid_rows, pool.relocs, pool.relocs_at
        self._singles, self._job_of = pool.singles, pool.job_of

    # -- slots -------------------------------------------------------------------------------------
    def _slots(self, free: np.ndarray, rows: np.ndarray, at: np.ndarray | None = None) -> np.ndarray:
        """Slots on node ``rows``, their free room ``free[rows]`` (or ``free[at]``)."""
        f = free[rows if at is None else at][:, self.cols]
        n = np.floor((f + EPS) / self.req[self.cols]).min(axis=1)
        return np.where(self.gang_ok[rows], np.clip(n, 0, _MOST), 0).astype(np.int64)

    def _fresh(self) -> _State:
        free = self.base.copy()
        rows = np.arange(len(free))
        slots = self._slots(free, rows)
        return _State(free, slots, int(slots.sum()))

    def _touch(self, st: _State, rows: set[int]) -> None:
        if len(rows) == 1:  # one row (a pod landed): plain floats
            (p,) = rows
            free = st.free[p]
            new1 = 0
            if self.gang_ok[p]:
                most = min((free[c] + EPS) // q for c, q in self._colreq)  # may be inf: unlimited
                new1 = int(min(max(most, 0.0), _MOST))
            st.total += new1 - int(st.slots[p])
            st.slots[p] = new1
            return
        r = np.array(sorted(rows), dtype=np.int64)
        new = self._slots(st.free, r)
        st.total += int(new.sum() - st.slots[r].sum())
        st.slots[r] = new

    def bound(self, p: int, jobs: bool = False) -> float:
        """At most what node ``p``'s step costs as long as nothing on it has moved (inf: no step): the
        fractional covering knapsack over the column that lacks most, every unit with a pod there
        taken as freeing what it holds there — the work per freed room, cheapest first, covers the
        lack; ``jobs``: the fewest jobs whose pods there cover it. The greedy works a node's step out
        only when this could beat what is in line."""
        got = self._bounds.get(p)
        if got is None:
            got = self._bounds[p] = self._bound(p)
        return got[1] if jobs else got[0]

    def _bound(self, p: int) -> tuple[float, float]:
        if not self.gang_ok[p]:
            return math.inf, math.inf
        req = self.req[self.cols]
        free = self.base[p][self.cols]
        lack = req * (math.floor(min((free + EPS) / req)) + 1) - free
        c = int(np.argmax(lack / req))
        col = int(self.cols[c])
        need = float(lack[c]) - EPS
        rates = []
        per_job: dict[int, float] = {}
        whole: dict[int, float] = {}
        for u in self.at.get(p, ()):
            got = sum(float(t.request[col]) for t in u.pods if t.node == p)
            if got > 0:
                rates.append((u.cost / got, got))
                if u.whole:  # a job frees at most all its pods there
                    whole[u.job] = got
                else:
                    per_job[u.job] = per_job.get(u.job, 0.0) + got
        rates.sort()
        cost, left = 0.0, need
        for rate, got in rates:
            take = min(got, left)
            cost += rate * take
            left -= take
            if left <= 0:
                break
        else:
            return math.inf, math.inf
        jobs, left = 0, need
        for j, got in whole.items():
            per_job[j] = max(per_job.get(j, 0.0), got)
        for got in sorted(per_job.values(), reverse=True):
            jobs, left = jobs + 1, left - got
            if left <= 0:
                break
        return cost, float(max(jobs, 1))

    def spanning(self) -> list[tuple[Unit, int]]:
        """The jobs moved whole across several nodes that open a slot by leaving (before anything
        moves), each with the slots their leaving opens — at least what moving them gains, as their
        pods land somewhere. One that opens none cannot open one alone: it is left to the nodes'
        steps (:meth:`_here`), and no move set is spent on it."""
        if self._spanning is None:
            self._spanning = []
            colreq, ok = self._colreq, self.gang_ok
            for u in self.units:
                if not u.whole or len({t.node for t in u.pods}) < 2:
                    continue
                freed: dict[int, list[float]] = {}
                for t in u.pods:
                    if ok[t.node]:
                        f = freed.setdefault(t.node, [0.0] * len(colreq))
                        for k, (c, _) in enumerate(colreq):
                            f[k] += float(t.request[c])
                gain = 0
                for r, f in freed.items():
                    base = self.base[r]
                    now = min((float(base[c]) + EPS) // q for c, q in colreq)
                    after = min((float(base[c]) + f[k] + EPS) // q for k, (c, q) in enumerate(colreq))
                    gain += int(min(max(after, 0.0), _MOST) - min(max(now, 0.0), _MOST))
                if gain > 0:
                    self._spanning.append((u, gain))
        return self._spanning

    # -- moving a unit --------------------------------------------------------------------------------
    def _may(self, st: _State, u: Unit) -> bool:
        if u.paid:
            return u.job in st.paid and id(u.pods[0]) not in st.moved
        if self.max_jobs >= 0 and u.job not in st.jobs and len(st.jobs) >= self.max_jobs:
            self.capped = True
            return False
        mine = [x for x in st.taken if x.job == u.job]
        if any(x.whole for x in mine):
            return False  # the job moves whole already
        if u.whole:
            return True
        return id(u.pods[0]) not in st.moved and self.allowed(
            u.job, [t for x in mine for t in x.pods] + u.pods
        )

    def _move(self, st: _State, units: list[Unit], chain: bool = True, at: int = -1) -> bool:
        """Move ``units`` in ``st`` (in place): free their pods' room, land each (largest first) where it
        costs fewest slots, then tightest; a pod with nowhere to go lands where one cheap pod moves away
        for it (``chain``, :meth:`_make_room`). A job moved whole leaves node ``at`` (the step's; -1:
        every node its leaving opens a slot on) and restarts where it runs elsewhere (its pods there
        are :attr:`Unit.paid` steps from then on). False when a pod has nowhere to go (``st`` is then
        spoilt)."""
        pods: list[Task] = []
        rows: set[int] = set()
        for u in units:
            leave = None
            if u.whole:  # the job's pod units fold into it
                st.taken = [x for x in st.taken if x.job != u.job]
                st.paid.add(u.job)
                leave = self._leaves(st, u, at)
            st.taken.append(u)
            st.jobs.add(u.job)
            for t in u.pods:
                if id(t) in st.moved or (leave is not None and t.node not in leave):
                    continue
                st.moved.add(id(t))
                st.free[t.node] += t.request
                rows.add(t.node)
                pods.append(t)
        self._touch(st, rows)
        scale = self.req[self.cols]
        pods.sort(key=lambda t: (-float((t.request[self.cols] / scale).sum()), t.node))
        for t in pods:
            row, lost = self._land(st, t)
            if lost != 0 and chain:
                other = self._make_room(st, t, lost)
                if other >= 0:
                    row = other
            if row < 0:
                return False
            st.free[row] -= t.request
            st.moves.append((t, row))
            self._touch(st, {row})
        return True

    def _leaves(self, st: _State, u: Unit, at: int) -> set[int]:
        """The nodes job unit ``u`` leaves: ``at`` (the step's node; -1: none) and those where its
        pods' leaving opens a slot as things stand."""
        held: dict[int, np.ndarray] = {}
        for t in u.pods:
            if self.gang_ok[t.node] and id(t) not in st.moved:
                held[t.node] = held.get(t.node, 0) + t.request[self.cols]
        out = {at} if at >= 0 else set()
        for r, f in held.items():
            after = np.floor((st.free[r][self.cols] + f + EPS) / self.req[self.cols]).min()
            if min(max(after, 0.0), _MOST) > st.slots[r]:
                out.add(r)
        return out

    def _make_room(self, st: _State, t: Task, lost: int) -> int:
        """A node for moved pod ``t`` that has none, or whose landing takes ``lost`` gang slots:
        :meth:`_room_single`, or in the deeper pass :meth:`_room_deep`. The row, or -1."""
        if not self.deep:
            row = self._room_single(st, t)
            self.rooms += 1
            return row
        if self.chains <= 0:
            return -1
        self.chains -= 1
        return self._room_deep(st, t, lost)

    def _room_single(self, st: _State, t: Task) -> int:
        """The cheapest single-pod unit (of the first :data:`CHAIN` that could; a pod of a job moving
        whole first, which costs nothing more) whose pod, moved away to where it lands itself without
        taking a gang slot, leaves room for ``t`` where it was; that unit is moved in ``st``. The row,
        or -1."""
        cols = np.flatnonzero(t.request > 0)
        dest = self.dest(t)
        tried = 0
        paid = [r for j in sorted(st.paid) for r in self.relocs.get(j, ())]
        for u in paid + self._singles:
            v = u.pods[0]
            q = v.node
            if q == t.node or id(v) in st.moved or not dest[q]:
                continue
            if not ((st.free[q, cols] + v.request[cols]) >= t.request[cols] - EPS).all():
                continue
            tried += 1
            if tried > CHAIN:
                break
            if not self._may_all(st, [u]) or self._land(st, v)[1] != 0:
                continue
            self._move(st, [u], chain=False, at=q)
            return q
        return -1

    def _room_deep(self, st: _State, t: Task, lost: int) -> int:
        """The
        node where the cheapest set of units there (a covering knapsack, as a step's) whose pods each
        land elsewhere without taking a gang slot leaves room for ``t`` — of the first :data:`CHAIN`
        nodes by the cheapest unit there —, kept only when the gang then keeps more slots than by the
        plain landing (all of them, when ``t`` has none); those units are moved in ``st``. The row,
        or -1."""
        c = self._chain_col(t)
        need = float(t.request[c]) - EPS
        rows = np.flatnonzero(
            self.dest(t) & (st.free[:, c] < need) & (st.free[:, c] + self._movable[:, c] >= need)
        )
        rows = rows[rows != t.node]
        lb = self._rate(c)[rows] * (need - st.free[rows, c])
        for j in st.paid:  # a pod of a job moving whole moves for nothing more
            lb[np.isin(rows, self._paid_rows[j])] = 0.0
        best: tuple[float, int, list[Unit]] | None = None
        for k in np.lexsort((rows, lb))[:DEEP_ROWS].tolist():
            q = int(rows[k])
            if best is not None and lb[k] >= best[0]:
                break
            got = self._room_at(st, t, q)
            if got is not None and (best is None or got[0] < best[0]) and self._lands(st, got[1], q):
                best = (got[0], q, got[1])
        if best is None:
            return -1
        _, q, units = best
        trial = st.copy()
        if not self._move(trial, units, chain=False, at=q):
            return -1
        tc = np.flatnonzero(t.request > 0)
        if not (trial.free[q, tc] >= t.request[tc] - EPS).all():
            return -1
        after = trial.free[q] - t.request
        slots = 0
        if self.gang_ok[q]:
            n = min((after[k] + EPS) // r for k, r in self._colreq)
            slots = int(min(max(n, 0.0), _MOST))
        if trial.total - int(trial.slots[q]) + slots < (st.total - lost + 1 if lost > 0 else st.total):
            return -1
        st.free, st.slots, st.total, st.taken = trial.free, trial.slots, trial.total, trial.taken
        st.moved, st.moves, st.jobs, st.paid = trial.moved, trial.moves, trial.jobs, trial.paid
        return q

    def _chain_col(self, t: Task) -> int:
        cols = np.flatnonzero(t.request > 0)
        return int(cols[np.argmax(t.request[cols] / np.maximum(self.base[:, cols].max(axis=0), EPS))])

    def _rate(self, c: int) -> np.ndarray:
        """Per node row, the least work per room freed in column ``c`` by a unit with pods there:
        times the room lacking, a lower bound of what making room there costs (a pod of a job moving
        whole costs nothing more: ``_paid_rows``)."""
        got = self._rates.get(c)
        if got is None:
            got = self._rates[c] = np.full(len(self.base), math.inf)
            for r, us in self.at_all.items():
                for u in us:
                    held = sum(float(t.request[c]) for t in u.pods if t.node == r)
                    if held > 0:
                        got[r] = min(got[r], u.cost / held)
        return got

    def _room_at(self, st: _State, t: Task, q: int) -> tuple[float, list[Unit]] | None:
        """The cheapest units on node ``q`` whose leaving makes room for ``t`` there: (their work, the
        units), or None."""
        cols = self.cols
        cands = self._here(st, q, self.at_all)
        if not cands:
            return None
        req = t.request[cols]
        lack = np.clip(req - st.free[q][cols], 0.0, None)
        freed = [self._held(st, u, q) for u in cands]
        picked = _cover([u.cost for u in cands], freed, lack, np.where(req > 0, req, math.inf))
        if picked is None:
            return None
        units = [cands[i] for i in picked]
        whole = {u.job for u in units if u.whole}
        units = [u for u in units if u.whole or u.job not in whole]
        if not self._may_all(st, units):
            return None
        return sum(u.cost for u in units), units

    def _lands(self, st: _State, units: list[Unit], q: int) -> bool:
        """Does each pod of ``units`` on node ``q`` land (alone, as things stand) where it takes no
        gang slot?"""
        return all(
            self._land(st, v)[1] == 0 for u in units for v in u.pods if v.node == q and id(v) not in st.moved
        )

    def _land(self, st: _State, t: Task) -> tuple[int, int]:
        """Where moved pod ``t`` goes: outside the gang's nodes if it can, then fewest gang slots lost, then
        the smallest share of the node left over, then the lowest row; -1 when it fits nowhere. With the
        gang slots it takes there (-1 too when it fits nowhere)."""
        info = self._pods.get(id(t))
        if info is None:
            cols = np.flatnonzero(t.request > 0)
            first = int(cols[np.argmax(t.request[cols] / np.maximum(self.base[:, cols].max(axis=0), EPS))])
            dest = self.dest(t).copy()
            dest[t.node] = False
            mine = (t.request[self.cols] - EPS) / self.req[self.cols]
            info = self._pods[id(t)] = (
                cols,
                t.request[cols],
                first,
                float(t.request[first]) - EPS,
                dest,
                mine,
            )
        cols, req, first, need, dest, mine = info
        rows = np.flatnonzero((st.free[:, first] >= need) & dest)  # the column it needs most, first
        if not len(rows):
            return -1, -1
        fr = st.free[rows]
        if len(cols) > 1:
            fit = (fr[:, cols] >= req - EPS).all(axis=1)
            rows, fr = rows[fit], fr[fit]
            if not len(rows):
                return -1, -1
        after = np.floor(fr[:, self.cols] / self.req[self.cols] - mine).min(axis=1)
        ok = self.gang_ok[rows]
        lost = st.slots[rows] - np.where(ok, np.clip(after, 0, _MOST), 0)
        spare = ((fr[:, cols] - req) / req).sum(axis=1)
        k = np.lexsort((rows, spare, lost, ok))[0]
        return int(rows[k]), int(lost[k])

    # -- 1. the greedy --------------------------------------------------------------------------------
    def _step(self, st: _State, p: int) -> list[Unit] | None:
        """The cheapest units on node ``p`` that together open one more slot there (module doc)."""
        cands = self._here(st, p)
        free = st.free[p][self.cols]
        want = self.req[self.cols] * (st.slots[p] + 1)
        if not cands or not self.gang_ok[p] or (want - free <= EPS).all():
            return None
        freed = [self._held(st, u, p) for u in cands]
        weights = [u.cost for u in cands]
        if self.by_jobs:  # a unit of a job not moving yet weighs more than any work
            weights = [w + (_NEW_JOB if u.job not in st.jobs else 0.0) for u, w in zip(cands, weights)]
        picked = _cover(weights, freed, want - free, self.req[self.cols])
        if picked is None:
            return None
        total = free + sum((freed[i] for i in picked), np.zeros(len(self.cols)))
        for i in sorted(range(len(cands)), key=lambda i: (cands[i].cost, cands[i].order)):
            if (total >= want - EPS).all():
                break
            if i not in picked:  # another column lacks too: the cheapest others
                picked.append(i)
                total = total + freed[i]
        units = [cands[i] for i in picked]
        whole = {u.job for u in units if u.whole}
        units = [u for u in units if u.whole or u.job not in whole]  # the whole unit moves them too
        return units if self._may_all(st, units) else None

    def _held(self, st: _State, u: Unit, p: int) -> np.ndarray:
        """What unit ``u``'s pods not moved yet hold on node ``p`` (the gang's columns); memoised for
        a unit none of whose pods has moved."""
        moved = st.moved
        if moved and any(id(t) in moved for t in u.pods):
            f = np.zeros(len(self.cols))
            for t in u.pods:
                if t.node == p and id(t) not in moved:
                    f += t.request[self.cols]
            return f
        key = (u.order, p)
        got = self._held_at.get(key)
        if got is None:
            got = np.zeros(len(self.cols))
            for t in u.pods:
                if t.node == p:
                    got += t.request[self.cols]
            self._held_at[key] = got
        return got

    def _here(self, st: _State, p: int, at: dict[int, list[Unit]] | None = None) -> list[Unit]:
        """The units a step on node ``p`` may take: per job, its pod units that may move together
        (cheapest first, within its surplus); its whole unit only when those cannot free all its pods
        here (moving whole frees no more here and costs all its work). ``at``: the units by node
        (those on the gang's nodes by default)."""
        cands = [u for u in (self.at if at is None else at).get(p, ()) if self._may(st, u)]
        paid = [u for u in self.relocs_at.get(p, ()) if self._may(st, u)] if st.paid else []
        singles: dict[int, list[Unit]] = {}
        for u in sorted(cands, key=lambda u: (u.cost, u.order)):
            if not u.whole:
                singles.setdefault(u.job, []).append(u)
        kept: list[Unit] = []
        for j, units in singles.items():
            prior = [t for x in st.taken if x.job == j for t in x.pods]
            for u in units:
                if not self.allowed(j, prior + u.pods):
                    break
                prior = prior + u.pods
                kept.append(u)
        count = {j: sum(1 for u in kept if u.job == j) for j in singles}
        out = kept + [
            u
            for u in cands
            if u.whole
            and count.get(u.job, 0) < sum(1 for t in u.pods if t.node == p and id(t) not in st.moved)
        ]
        return sorted(out + paid, key=lambda u: u.order)

    def _may_all(self, st: _State, units: list[Unit]) -> bool:
        """May ``units`` move together (each may, their pods of one job together, the job cap)?"""
        if not all(self._may(st, u) for u in units):
            return False
        by_job: dict[int, list[Task]] = {}
        for u in units:
            if not u.whole and not u.paid:
                by_job.setdefault(u.job, []).extend(u.pods)
        for j, pods in by_job.items():
            if len(pods) > 1 and not self.allowed(
                j, [t for x in st.taken if x.job == j for t in x.pods] + pods
            ):
                return False
        if self.max_jobs < 0 or len(st.jobs | {u.job for u in units}) <= self.max_jobs:
            return True
        self.capped = True
        return False

    def _first(self, st: _State, p: int) -> list[Unit] | None:
        """Node ``p``'s step before anything moves (``st`` fresh), from the shared cache (the job-cap
        ranking's from its own)."""
        first = self._first_jobs if self.by_jobs else self.first
        if p not in first:
            first[p] = self._step(st, p)
        return first[p]

    def estimate(self, domains: list[np.ndarray]) -> list[float]:
        """Per domain (a node mask within ``gang_ok``): the work of opening the slots it lacks by the
        cheapest one-slot steps of its nodes, as things stand (0: the gang fits there already; inf: no
        step opens enough; a unit in several of those steps, a job moved whole, counted once) — the
        order in which :meth:`plan` is worth asking, domain by domain."""
        st = self._fresh()
        first = {p: s for p in self.at if (s := self._first(st, p)) is not None}
        cost = {p: sum(u.cost for u in s) for p, s in first.items()}
        out = []
        for mask in domains:
            lack = len(self.gang) - int(st.slots[mask].sum())
            if lack <= 0:
                out.append(0.0)
                continue
            steps = sorted((c, p) for p, c in cost.items() if mask[p])
            if len(steps) < lack:
                out.append(math.inf)
                continue
            seen: set[int] = set()
            total = 0.0
            for _, p in steps[:lack]:
                total += sum(u.cost for u in first[p] if u.order not in seen)
                seen |= {u.order for u in first[p]}
            out.append(total)
        return out

    def _greedy(self, by_jobs: bool = False) -> _State | None:
        """The greedy of the module doc; ``by_jobs``: rank steps
        by the jobs they add per slot first (when ``max_jobs`` binds), then by work."""
        self.by_jobs = by_jobs
        line = _Line(self, self._fresh(), by_jobs)
        n = len(self.gang)
        while line.st.total < n:
            got = line.next()
            if got is None or self.budget.spent():
                return None
            units, node, ver, trial = got
            st = line.st
            if trial is None:  # (a step measured since the last taken is taken as measured)
                if (node >= 0 and line.version.get(node, 0) != ver) or not self._may_all(st, units):
                    continue  # a step of a node changed since (its new step is in line), or not allowed
                trial = st.copy()
                self.budget.left -= 1
                if not self._move(trial, units, at=node) or trial.total <= st.total:
                    continue  # a moved pod has nowhere to go, or where they land costs what they free
            taken = [u for u in trial.taken if not any(u is x for x in st.taken)]  # with any chained
            exact = line.key(taken, trial.total - st.total)
            if line.ahead(exact):
                line.push(units, exact, node, ver, (trial, line.gen))  # dearer than measured: later
                continue
            line.accept(trial, taken)
            if self.deep and sum(u.cost for u in line.st.taken) + line.floor() >= self.ceiling:
                return None  # no cheaper than the plan in hand, as far as can be told
        return line.st

    # -- 2. the reprieve, 3. the gang ---------------------------------------------------------------
    def _place_gang(self, st: _State) -> list[tuple[Task, int]] | None:
        f = st.free.copy()
        out = []
        for t in self.gang:
            cols = np.flatnonzero(t.request > 0)
            rows = np.flatnonzero(self.gang_ok & (f[:, cols] >= t.request[cols] - EPS).all(axis=1))
            if not len(rows):
                return None
            left = np.floor((f[rows][:, self.cols] - t.request[self.cols] + EPS) / self.req[self.cols]).min(
                axis=1
            )
            row = int(rows[np.lexsort((rows, left))[0]])
            f[row] -= t.request
            out.append((t, row))
        return out

    def plan(self) -> MovePlan | None:
        """The cheapest plan the search finds (None: none): the greedy, and — when the job cap stopped
        it — the greedy that adds fewest jobs first; each with its reprieve. Then the deeper pass:
        the greedy again with the deeper landing search (:meth:`_room_deep`), stopped once its moves
        cost what the best plan costs (and, when there is none and the cap stopped the greedy, the
        greedy by jobs so too)."""
        start = self.budget.left
        found = [st for st in (self._greedy(),) if st is not None]
        if (len(found[0].jobs) >= self.max_jobs >= 0) if found else self.capped:
            found += [st for st in (self._greedy(by_jobs=True),) if st is not None]
        plans = [p for p in (self._finish(st) for st in found) if p is not None]
        best = min(plans, key=lambda p: (p.cost, p.pods)) if plans else None
        if (best is not None and best.cost <= 0.0) or not self.rooms:
            return best  # nothing cheaper, or no landing that the deeper search could change
        shared = self.budget
        self.budget = Budget(min(shared.left, int((start - shared.left) * DEEP_SHARE)))
        self.deep, self.ceiling = True, best.cost if best is not None else math.inf
        modes = [False] + ([True] if best is None and self.capped else [])
        for by_jobs in modes:
            st = self._greedy(by_jobs)
            p = self._finish(st) if st is not None else None
            if p is not None and (best is None or (p.cost, p.pods) < (best.cost, best.pods)):
                best = p
        shared.left -= min(shared.left, int((start - shared.left) * DEEP_SHARE)) - self.budget.left
        self.deep, self.budget = False, shared
        return best

    def _finish(self, st: _State) -> MovePlan | None:
        """The reprieve (units given back, dearest first, while the gang still fits without them),
        then the gang's pods placed."""
        for u in sorted(st.taken, key=lambda u: (-u.cost, -len(u.pods), -u.order)):
            if any(u is x for x in st.taken):
                again = self._give_back(st, u)
                if again is not None:
                    st = again
        gang = self._place_gang(st)
        if gang is None:
            return None
        units = st.taken
        moves = st.moves + [  # the pods of jobs moved whole that restart where they run
            (t, t.node) for u in units if u.whole for t in u.pods if id(t) not in st.moved
        ]
        return MovePlan(units, moves, gang, sum(u.cost for u in units), len({u.job for u in units}))

    def _give_back(self, st: _State, u: Unit) -> _State | None:
        """``st`` without moving ``u`` — its pods back where they run, the others where they landed
        (those that landed in the room it takes back landed again: :meth:`_reland`) — when every node
        still holds what it has and the gang still fits; else None."""
        back = st.copy()
        mine = {id(t) for t in u.pods}
        if u.whole:  # its pods taken elsewhere go back too
            back.paid.discard(u.job)
            gone = [x for x in st.taken if x.paid and x.job == u.job]
            mine |= {id(x.pods[0]) for x in gone}
        rows: set[int] = set()
        for t, r in st.moves:
            if id(t) in mine:
                back.free[r] += t.request
                back.free[t.node] -= t.request
                rows |= {r, t.node}
        back.moves = [(t, r) for t, r in st.moves if id(t) not in mine]
        back.moved -= mine
        back.taken = [x for x in st.taken if x is not u and not (u.whole and x.paid and x.job == u.job)]
        back.jobs = {x.job for x in back.taken}
        self._touch(back, rows)
        for r in sorted(rows):
            if (back.free[r] < -EPS).any() and not self._reland(back, r):
                return None  # other moved pods landed in the room this one takes back, for good
        return back if back.total >= len(self.gang) else None

    def _reland(self, st: _State, r: int) -> bool:
        """Make node ``r`` hold what it has again (``st`` in place): the pods that landed there, largest
        first, back where they run when their job moves whole and the room there is free (they
        restart in place), else where :meth:`_land` puts them (not ``r``), until it does. False when
        it does not."""
        scale = self.req[self.cols]
        here = sorted(
            (t for t, q in st.moves if q == r),
            key=lambda t: (-float((t.request[self.cols] / scale).sum()), t.node),
        )
        for t in here:
            st.moves = [(x, q) for x, q in st.moves if x is not t]
            st.free[r] += t.request
            self._touch(st, {r})
            cols = np.flatnonzero(t.request > 0)
            job = self._job_of.get(id(t))
            if job in st.paid and (st.free[t.node, cols] >= t.request[cols] - EPS).all():
                st.free[t.node] -= t.request
                st.moved.discard(id(t))
                st.taken = [x for x in st.taken if not (x.paid and x.pods[0] is t)]
                self._touch(st, {t.node})
            else:
                row, _ = self._land(st, t)
                if row < 0 or row == r:
                    return False
                st.free[row] -= t.request
                st.moves.append((t, row))
                self._touch(st, {row})
            if not (st.free[r] < -EPS).any():
                return True
        return False


class _Line:
    """The steps in line for :meth:`MovePlanner._greedy`, cheapest per slot first (a lazy greedy): a
    node's step is worked out only when its lower bound (:meth:`MovePlanner.bound`) could beat what is
    in line, and again whenever the greedy changes the node (``version``: older steps of it are
    stale); each job moved whole across nodes whose leaving opens a slot is in line from the start."""

    def __init__(self, planner: MovePlanner, st: _State, by_jobs: bool) -> None:
        self.pl, self.st, self.by_jobs = planner, st, by_jobs
        self.heap: list[tuple[tuple[float, ...], int, list[Unit], int, int, Any]] = []
        self.gen = 0  # steps taken: a step measured at the same count needs no measuring again
        self.seq = 0
        self.version: dict[int, int] = {}
        self.expanded: set[int] = set()  # rows whose step has been worked out
        self.changed: set[int] = set()  # rows the greedy changed: their first steps are stale
        self.nodes: list[tuple[tuple[float, ...], int, int]] = []
        # by_jobs: a node's step goes in line as adding at least one job per slot (:meth:`_expand`)
        # until a job with a unit on the node moves (:meth:`accept` puts the node in line again at 0)
        for p in sorted(planner.at):
            cheap = planner.bound(p)
            self.nodes.append(
                ((planner.bound(p, True), -math.inf, cheap, 0.0, -1) if by_jobs else (cheap, 0.0, -1), p, p)
            )
        heapq.heapify(self.nodes)
        for u, gain in planner.spanning():
            if planner._may(st, u):
                self.push([u], self.key([u], gain))

    def key(self, units: list[Unit], gain: int) -> tuple[float, ...]:
        """Work (then pods) per slot, the slots counted up to those still lacking; ``by_jobs``: the
        jobs it adds per slot first."""
        g = max(min(gain, len(self.pl.gang) - self.st.total), 1)
        cost = sum(u.cost for u in units) / g
        pods = sum(len(u.pods) for u in units) / g
        first = min(u.order for u in units)
        if self.by_jobs:
            new = {u.job for u in units} - self.st.jobs
            spread = sum(len(self.pl.job_rows.get(j, ())) for j in new)
            return (len(new) / g, -spread / g, cost, pods, first)
        return (cost, pods, first)

    def floor(self) -> float:
        """What the slots still lacking cost at the rate of the cheapest step in line (an estimate:
        a later step may cost less than the line shows)."""
        lack = len(self.pl.gang) - self.st.total
        if lack <= 0 or self.by_jobs:
            return 0.0
        heads = [q[0][0][0] for q in (self.heap, self.nodes) if q]
        return lack * min(heads, default=0.0)

    def push(
        self,
        units: list[Unit],
        key: tuple[float, ...],
        node: int = -1,
        ver: int | None = None,
        measured: tuple[_State, int] | None = None,
    ) -> None:
        """Put a step in line; ``measured``: the state it gives and :attr:`gen` when it was measured."""
        v = self.version.get(node, 0) if ver is None else ver
        heapq.heappush(self.heap, (key, self.seq, units, node, v, measured))
        self.seq += 1

    def ahead(self, key: tuple[float, ...]) -> bool:
        """Is something in line (or a node not worked out yet) cheaper than ``key``?"""
        return bool(self.heap and key > self.heap[0][0]) or bool(self.nodes and key > self.nodes[0][0])

    def next(self) -> tuple[list[Unit], int, int, _State | None] | None:
        """The cheapest step in line (units, node or -1, its node's version, the state it gives when
        measured since the last step taken), or None."""
        heap, nodes = self.heap, self.nodes
        while nodes and (not heap or nodes[0][0] < heap[0][0]):
            _, _, p = heapq.heappop(nodes)
            if p not in self.expanded:
                self._expand(p)
        if not heap:
            return None
        _, _, units, node, ver, measured = heapq.heappop(heap)
        return units, node, ver, measured[0] if measured is not None and measured[1] == self.gen else None

    def _expand(self, p: int) -> None:
        self.expanded.add(p)
        pl = self.pl
        step = pl._step(self.st, p) if p in self.changed else pl._first(self.st, p)
        if step is not None:
            self.push(step, self.key(step, 1), p)

    def accept(self, trial: _State, units: list[Unit]) -> None:
        """Take the step: ``trial`` is the state with it; the nodes it changed get their steps anew."""
        touched = {t.node for u in units for t in u.pods} | {r for _, r in trial.moves[len(self.st.moves) :]}
        if self.by_jobs:
            pl = self.pl
            for j in sorted(trial.jobs - self.st.jobs):
                for p in sorted(pl.job_rows.get(j, ())):
                    if p not in self.expanded:
                        heapq.heappush(self.nodes, ((0.0, -math.inf, pl.bound(p), 0.0, -1), p, p))
        self.st = trial
        self.gen += 1
        self.changed |= touched
        for r in touched:
            self.version[r] = self.version.get(r, 0) + 1
        for p in sorted(r for r in touched if r in self.pl.at):
            self._expand(p)


def _cover(
    weights: list[float], freed: list[np.ndarray], lack: np.ndarray, req: np.ndarray
) -> list[int] | None:
    """The cheapest of ``cands`` (by index) whose ``freed`` room covers ``lack`` in the column that
    lacks most (relative to ``req``): a covering knapsack in eighths of a slot, exact over the
    candidates; ties to fewer units. None when all of them do not cover it."""
    c = int(np.argmax(lack / req))
    unit = req[c]
    need = math.ceil((lack[c] - EPS) / unit * 8)
    best: dict[int, tuple[float, list[int]]] = {0: (0.0, [])}
    for i, w in enumerate(weights):
        a = int((freed[i][c] + EPS) / unit * 8)
        if a <= 0:
            continue
        for have, (cost, items) in list(best.items()):
            got = min(have + a, need)
            new = (cost + w, items + [i])
            old = best.get(got)
            if old is None or (new[0], len(new[1])) < (old[0], len(old[1])):
                best[got] = new
    return list(best[need][1]) if need in best else None
