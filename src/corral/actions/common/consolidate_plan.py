"""The move plan of ``consolidate`` (:mod:`corral.actions.consolidate`): which running pods to move, and
where, so that a waiting gang fits inside one domain — at the least work lost.

The planner works on plain arrays — each node's free capacity once releasing pods are gone (future idle,
``free``: nodes × resources), which nodes may hold the gang's pods (``gang_ok``: the domain and the
predicates), which nodes may hold each movable pod — and on **units**, what may move together:

* a *pod unit*: one pod of a job that stays at or above its minimums without it (its surplus; a job
  already below a minimum gives any pod). The pod restarts on its new node and loses its own work;
* a *job unit*: every running pod of a job, which restarts whole and loses the work of all its pods —
  the cost model of gang eviction (:mod:`corral.actions.common.bundles`), where a gang pushed below its
  minimum loses everything it has done since its last checkpoint. Its pods leave the step's node and
  the nodes where their leaving opens a slot; the others **restart where they run** (evicted and
  nominated on the same node: the gang restarts together, and their work is lost either way), and
  from then on each of them may move to another node for nothing more (:attr:`Unit.paid`).

A *slot* is room for one more of the gang's pods (its largest request) on a node where it may go.
Moving a unit frees its pods' room where they run and takes room where they land
(:mod:`corral.actions.common.consolidate_landing`): outside the domain if it can, then where it costs
the gang fewest slots, then where it fits tightest (never on the node it leaves); a pod with nowhere
to go, or whose landing would take a gang slot, lands where one cheap single-pod unit moves away for
it (a chain of two moves). The steps:

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
   jobs they add first, a node's step then weighing a job not moving yet above any work). A moved
   pod with nowhere to go makes its step fail; a step measured since the last step taken is taken
   as measured. The move sets evaluated count against the decision's :class:`Budget`;
   **the deeper pass** — the greedy once more, when it sought room for a landing: a pod with nowhere
   to go, or whose landing would take a gang slot, lands where the cheapest set of units of one node
   leaves room for it, each of their pods landing itself without taking a slot (a covering knapsack
   over the first ``DEEP_ROWS`` nodes by a lower bound, ``DEEP_CHAINS`` such searches per planner),
   within as many move sets as the first passes spent, and stopped once its moves (with the slots
   still lacking at the line's cheapest rate) cost what the plan in hand costs;
   **the repack** — before it, when the greedy found no plan (the job cap stopped it, or no landing
   kept the slots its moves opened) and the domain would hold the gang with every movable pod gone:
   the jobs chosen first, fewest first, and their pods packed again
   (:mod:`corral.actions.common.consolidate_repack`);
2. **reprieve** — units whose move turns out not to be needed are given back, dearest first: its
   pods back where they run, when the room there is still free and the gang still fits;
3. **the gang's pods** go, each, to the node of the domain where it leaves fewest slots unused.

The plan is an estimate over capacity columns; the caller's dry run through a Statement decides.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.actions.common.consolidate_landing import (
    _MOST,
    DEEP_CHAINS,
    DEEP_SHARE,
    Budget,
    Landing,
    Pool,
    Unit,
    _cover,
)
from corral.actions.common.consolidate_landing import State as _State
from corral.actions.common.consolidate_line import Line
from corral.actions.common.consolidate_repack import Repack
from corral.model import Task
from corral.model.resources import EPS

__all__ = ["Budget", "MovePlan", "MovePlanner", "Pool", "Unit"]

#: What a unit of a job not moving yet weighs in a node's step when the job cap binds (more than any
#: work: the step adds fewest jobs first)
_NEW_JOB = 1e9


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


class MovePlanner(Landing):
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
        self._pool = pool if pool is not None else Pool(units, free)

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
        step opens enough), the cheapest per slot first, a step counting the slots of the steps its
        units make: a job moved whole opens every node whose step it is, and is counted once — the
        order in which :meth:`plan` is worth asking, domain by domain."""
        st = self._fresh()
        first = {p: s for p in self.at if (s := self._first(st, p)) is not None}
        ords = {p: frozenset(u.order for u in s) for p, s in first.items()}
        cost = {p: sum(u.cost for u in s) for p, s in first.items()}
        out = []
        for mask in domains:
            lack = len(self.gang) - int(st.slots[mask].sum())
            if lack <= 0:
                out.append(0.0)
                continue
            rows = [p for p in first if mask[p]]
            if len(rows) < lack:
                out.append(math.inf)
                continue
            if sum(len(ords[p]) for p in rows) == len(frozenset().union(*(ords[p] for p in rows))):
                out.append(sum(sorted(cost[p] for p in rows)[:lack]))  # no unit in two steps
                continue
            seen: set[int] = set()
            total = 0.0
            while lack > 0:  # the cheapest step per slot, with the steps its units make free
                best: tuple[float, int, list[int]] | None = None
                for p in rows:
                    mine = ords[p] | seen
                    free = [q for q in rows if q != p and ords[q] <= mine]
                    c = sum(u.cost for u in first[p] if u.order not in seen)
                    rate = c / min(1 + len(free), lack)
                    if best is None or (rate, p) < (best[0], best[1]):
                        best = (rate, p, free)
                assert best is not None
                _, p, free = best
                total += sum(u.cost for u in first[p] if u.order not in seen)
                seen |= ords[p]
                taken = [p] + free[: lack - 1]
                rows = [q for q in rows if q not in taken]
                lack -= len(taken)
            out.append(total)
        return out

    def _greedy(self, by_jobs: bool = False) -> _State | None:
        """The greedy of the module doc; ``by_jobs``: rank steps
        by the jobs they add per slot first (when ``max_jobs`` binds), then by work."""
        self.by_jobs = by_jobs
        line = Line(self, self._fresh(), by_jobs)
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
        it — the greedy that adds fewest jobs first; each with its reprieve; when neither found a plan,
        the repack (:class:`Repack`). Then the deeper pass:
        the greedy again with the deeper landing search (:meth:`_room_deep`), stopped once its moves
        cost what the best plan costs (and, when there is none and the cap stopped the greedy, the
        greedy by jobs so too)."""
        start = self.budget.left
        found = [st for st in (self._greedy(),) if st is not None]
        if (len(found[0].jobs) >= self.max_jobs >= 0) if found else self.capped:
            found += [st for st in (self._greedy(by_jobs=True),) if st is not None]
        plans = [p for p in (self._finish(st) for st in found) if p is not None]
        best = min(plans, key=lambda p: (p.cost, p.pods)) if plans else None
        if best is None:  # the greedy fell short: the jobs first
            rp = Repack(self)
            st = rp.search() if rp.possible() else None
            best = self._finish(st) if st is not None else None
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
        """``st`` without moving ``u`` — its pods back where they run, the others where they landed —
        when every node still holds what it has and the gang still fits; else None."""
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
        for r in rows:
            if (back.free[r] < -EPS).any():
                return None  # another moved pod landed in the room this one would take back
        self._touch(back, rows)
        return back if back.total >= len(self.gang) else None
