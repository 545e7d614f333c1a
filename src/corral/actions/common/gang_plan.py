"""The plan of one domain for gang-aware eviction (seed 000 §3.1–3.2, SPEC.md §3.3): which victims let
the gang's waiting pods fit inside the domain, at the least cost under the cost model of
:mod:`corral.actions.common.bundles`.

A plan is built for a *level* — only victim jobs whose policy rank is at most the level — and with or
without breaking healthy gangs:

1. **fill** — free pods (those of jobs broken already, or broken by this plan) and SAFE pods (a
   healthy job's pods up to its surplus and role surpluses) cost no work: node by node, the fewest
   of them that open one more slot for the gang, the node needing fewest pods per slot first;
2. **break** (only when allowed and the fill is not enough) — one healthy gang whose pods in the domain
   let most of the gang fit per unit of work (the seed's ROI: local gain over global cost; a gang
   that alone completes the gang for less than that rate would charge wins), then fill again;
3. **reprieve** — what turned out not to be needed is given back: whole broken gangs, dearest first,
   then single pods, those of broken gangs first, so a gang left within its surplus is not broken.

The estimate of fit counts, per node, how many of the gang's pods (the largest request of its waiting
pods, within the predicates) the free room plus what the victims free holds; the caller's dry run
decides. Queue limits (gangreclaim: the queue rule of proportion/capacity, :class:`QueueLimit`) are
kept exactly as the rule counts them; the victim filter over the plan's victims still decides.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.actions.common.bundles import CostModel, VictimJob
from corral.framework.extension import Domain, QueueLimit
from corral.framework.session import Session
from corral.model import Task
from corral.model.resources import EPS

__all__ = ["DomainPlanner", "QueueLimit", "Room"]

# a gang to break: (its rate key, lowest first), its job id, the pods it gives up
_Pick = tuple[tuple[float, ...], int, list[Task]]

#: Plans made again, each time without the first gang the last one broke, when it does not fit.
RESTARTS = 2


class Room:
    """The gang's room over a domain's nodes: per node the free capacity (future idle) in the columns
    the gang requests, and how many of its pods (``slot``) that holds."""

    def __init__(self, session: Session, tasks: list[Task], domain: Domain) -> None:
        nodes = session.cluster.nodes
        req = np.max(np.array([t.request for t in tasks]), axis=0)
        live = domain.mask & ~nodes.down
        ok = live.copy()
        for t in {t.klass or id(t): t for t in tasks}.values():
            ok &= session.resolvable(t)  # what evicting can make room for (DRA devices, GPU memory)
        self.rows = np.flatnonzero(live)
        self.pos = {int(r): i for i, r in enumerate(self.rows.tolist())}
        self.ok = ok[self.rows].tolist()
        cols = np.flatnonzero(req > 0)
        free = np.clip(nodes.future_idle[self.rows][:, cols], 0, None)
        # a column that holds, with what is free now, as many pods as another could with the node
        # empty never decides (the pod slot, CPU on GPU nodes): only the others are counted
        now = np.floor((free + EPS) / req[cols])
        most = np.floor((nodes.allocatable[self.rows][:, cols] + EPS) / req[cols])
        keep = [
            k
            for k in range(len(cols))
            if not any(j != k and (now[:, k] >= most[:, j]).all() for j in range(len(cols)))
        ] or list(range(len(cols)))
        self.cols = cols[keep]
        self.req = req[self.cols].tolist()
        self.free = free[:, keep].tolist()
        self.n = len(tasks)
        self.one = self.req[0] if len(self.req) == 1 else None
        self.slots = [self.slot(i, f) for i, f in enumerate(self.free)]

    def slot(self, i: int, free: list[float]) -> int:
        if not self.ok[i]:
            return 0
        if self.one is not None:
            return max(int((free[0] + EPS) // self.one), 0)
        return max(min(int((f + EPS) // r) for f, r in zip(free, self.req)), 0)


@dataclass
class _State:
    """A plan being built: each node's room, the pods taken, what each job and queue has given (per
    queue with a limit: the sum and the largest of its victims' requests, per resource)."""

    free: list[list[float]]
    slots: list[int]
    total: int
    limits: dict[str, QueueLimit] | None
    given: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)  # queue -> (sum, largest)
    taken: list[Task] = field(default_factory=list)
    ids: set[int] = field(default_factory=set)
    used: dict[int, int] = field(default_factory=dict)
    role_used: dict[tuple[int, str], int] = field(default_factory=dict)
    broken: set[int] = field(default_factory=set)
    first: int = 0  # the first gang broken
    last: int = 0  # the last
    heap: list[Any] = field(default_factory=list)  # the fill's steps (pods per slot, node)
    rates: list[Any] | None = None  # the gangs' rates when last measured (:meth:`_break`)
    cheap: list[Any] = field(default_factory=list)  # the gangs that may break, cheapest first


class DomainPlanner:
    """Plans for one domain (:meth:`plan`) over its candidate victims ``pods`` (already allowed by the
    victim filter), whose jobs are ``jobs`` (id -> :class:`VictimJob`). ``chain(queue)``: the queues a
    victim of ``queue`` draws on, for ``limits`` (the queue rule, per queue)."""

    def __init__(
        self,
        room: Room,
        pods: list[Task],
        jobs: dict[int, VictimJob],
        chain: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.room, self.jobs, self.chain = room, jobs, chain
        self.vec: dict[int, list[float]] = {}
        self.node: dict[int, list[Task]] = {}
        self.of_job: dict[int, list[Task]] = {}
        size = (
            np.array([t.request for t in pods]).reshape(len(pods), -1)[:, room.cols] if pods else np.zeros(0)
        )
        for k, t in enumerate(pods):
            p = room.pos.get(t.node)
            if p is None or id(t.job) not in jobs:
                continue
            self.vec[id(t)] = size[k].tolist()
            self.node.setdefault(p, []).append(t)
            self.of_job.setdefault(id(t.job), []).append(t)
        weight = [1.0 / r for r in room.req]
        self._size = {k: sum(a * w for a, w in zip(v, weight)) for k, v in self.vec.items()}
        for lst in self.node.values():
            lst.sort(key=lambda t: -self._size[id(t)])
        self.full = {id(t): t.request.tolist() for lst in self.node.values() for t in lst}
        # for :meth:`hopeless`: every candidate's node, room taken, rank, and whether it may go free
        mine = [t for lst in self.node.values() for t in lst]
        self._at = np.array([room.pos[t.node] for t in mine], dtype=np.int64)
        self._vec = np.array([self.vec[id(t)] for t in mine]).reshape(len(mine), len(room.req))
        self._rank = np.array([jobs[id(t.job)].rank for t in mine])
        self._safe = np.array(
            [not jobs[id(t.job)].healthy or jobs[id(t.job)].surplus > 0 for t in mine], dtype=bool
        )
        self._free = np.array(room.free).reshape(len(room.free), len(room.req))

    def hopeless(self, level: float, may_break: bool) -> bool:
        """Could not even every candidate of this level (that may go without breaking, unless
        ``may_break``) make room for the gang?"""
        take = self._rank <= level
        if not may_break:
            take &= self._safe
        free = self._free.copy()
        np.add.at(free, self._at[take], self._vec[take])
        slots = np.floor((free + EPS) / np.array(self.room.req)).min(axis=1) if len(free) else np.zeros(0)
        return float((np.maximum(slots, 0) * np.array(self.room.ok, dtype=bool)).sum()) < self.room.n

    # -- the plan --------------------------------------------------------------------------------
    def plan(
        self,
        level: float,
        may_break: bool,
        limits: dict[str, QueueLimit] | None = None,
        forbid: frozenset[int] = frozenset(),
        nobreak: frozenset[int] = frozenset(),
    ) -> list[Task] | None:
        """The victims with which the gang fits by the estimate, using jobs of rank <= ``level``; None
        when there are none. ``forbid``: pods never taken; ``nobreak``: jobs never broken. With queue
        ``limits`` the plan is made first without them (counted while the greedy builds, a queue's amount
        would be spent on gangs the reprieve gives back), kept if within them, else made within them."""
        if self.hopeless(level, may_break):
            return None
        self._level, self._forbid, self._pin = level, forbid, None
        victims = self._plan(may_break, None, nobreak)
        if victims is None or limits is None or self._keeps({}, victims, limits):
            return victims
        return self._plan(may_break, limits, nobreak) or self._crossing(may_break, limits, nobreak)

    def _crossing(
        self, may_break: bool, limits: dict[str, QueueLimit], nobreak: frozenset[int]
    ) -> list[Task] | None:
        """When the plan within the queue limits falls short: the rule lets any one pod of a queue cross
        its line, and the greedy may spend that on a small one. Made again with a queue's crossing pod taken
        first (``_pin``: its pod that opens most slots, then the one losing least work), once per victim
        queue; the plan that fits losing least work is kept."""
        top: dict[str, tuple[Any, ...]] = {}
        for t in (
            t for lst in self.node.values() for t in lst if self._eligible(t) and id(t.job) not in nobreak
        ):
            p, j = self.room.pos[t.node], self.jobs[id(t.job)]
            gain = (
                self.room.slot(p, [a + b for a, b in zip(self.room.free[p], self.vec[id(t)])])
                - self.room.slots[p]
            )
            key = (gain, -j.held * j.breaks([t]), -j.order)
            if gain > 0 and (may_break or not j.breaks([t])) and key > top.get(t.job.queue, ((0,),))[0]:
                top[t.job.queue] = (key, t)
        plans = [self._plan(may_break, limits, nobreak) for _, self._pin in top.values()]  # reset by plan()
        return min(
            (v for v in plans if v), key=lambda v: CostModel.price(v, self.jobs)[:2] + (len(v),), default=None
        )

    def _plan(
        self, may_break: bool, limits: dict[str, QueueLimit] | None, nobreak: frozenset[int]
    ) -> list[Task] | None:
        for _ in range(RESTARTS + 1):
            st = self._build(may_break, limits, nobreak)
            if st.total >= self.room.n:
                return self._improve(st, limits, nobreak).taken
            if not st.first:
                return None
            # the greedy's first gang led nowhere (queue limits spent on it): once more without it
            nobreak = nobreak | {st.first}
        return None

    def _improve(self, st: _State, limits: dict[str, QueueLimit] | None, nobreak: frozenset[int]) -> _State:
        """The reprieve (:meth:`_reprieve`), then, for the dearest gangs the plan still breaks (at most
        :data:`RESTARTS`), the plan made again without each: the one that loses less work is kept."""
        st = self._reprieve(st)
        for k in sorted(st.broken, key=lambda k: -self.jobs[k].held)[:RESTARTS]:
            other = self._build(True, limits, nobreak | {k})
            if other.total < self.room.n:
                continue
            other = self._reprieve(other)
            if (
                sum(self.jobs[j].held for j in other.broken)
                < sum(self.jobs[j].held for j in st.broken) - 1e-12
            ):
                st = other
        return st

    def _build(
        self, may_break: bool, limits: dict[str, QueueLimit] | None, nobreak: frozenset[int]
    ) -> _State:
        room = self.room
        st = _State([list(f) for f in room.free], list(room.slots), sum(room.slots), limits or None)
        if self._pin is not None and id(self._pin.job) not in nobreak:  # the crossing pod (:meth:`_crossing`)
            st.broken |= {id(self._pin.job)} if self.jobs[id(self._pin.job)].breaks([self._pin]) else set()
            self._take(st, [self._pin])
        self._fill(st)
        while st.total < room.n and may_break and self._break(st, nobreak):
            self._fill(st, {room.pos[t.node] for t in self.of_job[st.last]})
        return st

    def _eligible(self, t: Task) -> bool:
        return id(t) not in self._forbid and self.jobs[id(t.job)].rank <= self._level

    def _may_take(self, st: _State, t: Task, extra: dict[Any, Any] | None = None) -> bool:
        """May ``t`` go without breaking its job (or is its job broken anyway)?"""
        j = self.jobs[id(t.job)]
        k = id(t.job)
        if j.healthy and k not in st.broken:
            more = extra.get(k, 0) if extra else 0
            if st.used.get(k, 0) + more >= j.surplus:
                return False
            if j.roles is not None and t.role in j.roles:
                more = extra.get((k, t.role), 0) if extra else 0
                if st.role_used.get((k, t.role), 0) + more >= j.roles[t.role]:
                    return False
        return True

    def _within_limits(self, st: _State, pods: list[Task]) -> bool:
        """Does the queue rule allow the plan's victims with ``pods`` added?"""
        return st.limits is None or self._keeps(st.given, pods, st.limits)

    def _keeps(self, given: dict[Any, Any], pods: list[Task], limits: dict[str, QueueLimit]) -> bool:
        return self.chain is None or all(
            limits[q].allows(*g) for q, g in self._given(given, pods, limits).items()
        )

    def _given(
        self, given: dict[Any, Any], pods: list[Task], limits: dict[str, QueueLimit]
    ) -> dict[Any, Any]:
        """``given`` (queue -> (sum, largest) of its victims' requests) with ``pods`` added: a new dict
        holding only the queues they change."""
        out: dict[Any, Any] = {}
        if self.chain is None:
            return out
        for t in pods:
            v = self.full[id(t)]
            for q in self.chain(t.job.queue):
                if q in limits:
                    s, m = out.get(q) or given.get(q) or ([0.0] * len(v), [0.0] * len(v))
                    out[q] = ([a + b for a, b in zip(s, v)], [max(a, b) for a, b in zip(m, v)])
        return out

    def _take(self, st: _State, pods: list[Task], sign: int = 1) -> None:
        """Evict ``pods`` in the plan (``sign`` -1: give them back)."""
        room = self.room
        touched = set()
        for t in pods:
            p = room.pos[t.node]
            touched.add(p)
            f = st.free[p]
            for c, v in enumerate(self.vec[id(t)]):
                f[c] += sign * v
            k = id(t.job)
            st.used[k] = st.used.get(k, 0) + sign
            st.role_used[(k, t.role)] = st.role_used.get((k, t.role), 0) + sign
            if sign > 0:
                st.taken.append(t)
                st.ids.add(id(t))
        if sign < 0:
            gone = {id(t) for t in pods}
            st.taken = [t for t in st.taken if id(t) not in gone]
            st.ids -= gone
        if st.limits is not None and self.chain is not None:
            st.given = (
                self._given({}, st.taken, st.limits)
                if sign < 0
                else {**st.given, **self._given(st.given, pods, st.limits)}
            )
        for p in touched:
            new = room.slot(p, st.free[p])
            st.total += new - st.slots[p]
            st.slots[p] = new

    # -- 1. free and SAFE pods ---------------------------------------------------------------------
    def _step(self, st: _State, p: int) -> tuple[float, list[Task]] | None:
        """The fewest free or SAFE pods on node ``p`` that open one more slot there (the smallest pod
        that alone closes what is missing, else the largest), as (pods per slot, pods)."""
        room = self.room
        if not room.ok[p]:
            return None
        cands = [t for t in self.node.get(p, ()) if id(t) not in st.ids and self._eligible(t)]
        f = list(st.free[p])
        base = st.slots[p]
        pick: list[Task] = []
        extra: dict[Any, Any] = {}
        while cands:
            lack = [max(r * (base + 1) - x, 0.0) for r, x in zip(room.req, f)]
            usable = [
                t for t in cands if self._may_take(st, t, extra) and self._within_limits(st, pick + [t])
            ]
            if not usable:
                return None
            one = [t for t in usable if all(v >= m - EPS for v, m in zip(self.vec[id(t)], lack))]
            t = min(one, key=lambda t: self._size[id(t)]) if one else usable[0]
            pick.append(t)
            cands.remove(t)
            k = id(t.job)
            extra[k] = extra.get(k, 0) + 1
            extra[(k, t.role)] = extra.get((k, t.role), 0) + 1
            f = [x + v for x, v in zip(f, self.vec[id(t)])]
            gain = room.slot(p, f) - base
            if gain > 0:
                return len(pick) / gain, pick
        return None

    def _fill(self, st: _State, nodes: set[int] | None = None) -> None:
        """Take the cheapest steps (:meth:`_step`) until the gang fits or none is left; ``nodes``:
        those whose steps may have changed since the last fill (all at first)."""
        heap = st.heap
        for p in self.node if nodes is None else nodes:
            s = self._step(st, p)
            if s is not None:
                heapq.heappush(heap, (s[0], p))
        while heap and st.total < self.room.n:
            ratio, p = heapq.heappop(heap)
            s = self._step(st, p)
            if s is None:
                continue
            if s[0] > ratio + 1e-12 and heap and heap[0][0] < s[0]:
                heapq.heappush(heap, (s[0], p))  # dearer now: its turn later
                continue
            self._take(st, s[1])
            s = self._step(st, p)
            if s is not None:
                heapq.heappush(heap, (s[0], p))

    # -- 2. breaking a gang ------------------------------------------------------------------------
    def _spare(self, st: _State) -> tuple[dict[int, list[float]], dict[tuple[int, int], list[float]]]:
        """Per node, its room with every free or SAFE pod there taken too (what breaking a gang
        may count on: the fill takes those that help afterwards), and what each job adds to it."""
        out: dict[int, list[float]] = {}
        part: dict[tuple[int, int], list[float]] = {}
        for p, lst in self.node.items():
            f = list(st.free[p])
            for t in lst:
                if id(t) not in st.ids and self._eligible(t) and self._may_take(st, t):
                    mine = part.setdefault((p, id(t.job)), [0.0] * len(f))
                    for c, v in enumerate(self.vec[id(t)]):
                        f[c] += v
                        mine[c] += v
            out[p] = f
        return out, part

    def _useful(
        self, st: _State, pods: list[Task], spare: tuple[dict[Any, Any], dict[Any, Any]], lack: int
    ) -> tuple[int, list[Task]]:
        """What breaking a job gives: on each node, the fewest of its pods ``pods`` there that open
        the most slots with the free and SAFE pods there (``spare``) — most slots per pod first, then
        the node with most free room (least else to evict), while the queue rule allows and until
        ``lack`` slots; (slots opened, at most ``lack``; pods to take)."""
        room = self.room
        by_node: dict[int, list[Task]] = {}
        for t in pods:
            by_node.setdefault(room.pos[t.node], []).append(t)
        found = []
        for p, lst in by_node.items():
            lst.sort(key=lambda t: -self._size[id(t)])
            own = spare[1].get((p, id(lst[0].job)))
            f = [a - b for a, b in zip(spare[0][p], own)] if own else list(spare[0].get(p, st.free[p]))
            base = room.slot(p, f)
            g, used = 0, 0
            for k, t in enumerate(lst):  # (largest first) the fewest that open as many
                for c, v in enumerate(self.vec[id(t)]):
                    f[c] += v
                if room.slot(p, f) - base > g:
                    g, used = room.slot(p, f) - base, k + 1
            if g > 0:
                room_p = -sum(x / r for x, r in zip(st.free[p], room.req))
                found.append((-g / used, room_p, p, g, lst[:used]))
        gain, take = 0, list[Task]()
        for _, _, _, g, lst in sorted(found):
            if gain >= lack:
                break
            if self._within_limits(st, take + lst):
                gain += g
                take += lst
        return min(gain, lack), take

    def _break(self, st: _State, nobreak: frozenset[int]) -> bool:
        """Break the healthy gang that opens most slots per unit of work (or, for less than that rate
        would charge, one that alone completes the gang); False when none helps. The gangs' rates are
        kept from one break to the next and only the best few measured again (a lazy greedy)."""
        lack = self.room.n - st.total
        spare = self._spare(st)
        fresh: dict[int, _Pick | None] = {}

        def measure(k: int) -> _Pick | None:
            if k not in fresh:
                j = self.jobs[k]
                gain, take = self._useful(
                    st,
                    [t for t in self.of_job[k] if id(t) not in st.ids and id(t) not in self._forbid],
                    spare,
                    lack,
                )
                fresh[k] = ((j.held / gain, len(take) / gain, j.order), gain, take) if gain > 0 else None
            return fresh[k]

        if st.rates is None:
            ok = [
                k
                for k, j in self.jobs.items()
                if j.healthy and j.rank <= self._level and k in self.of_job and k not in nobreak
            ]
            st.rates = [(m[0], k) for k in ok if (m := measure(k)) is not None]
            st.cheap = sorted(ok, key=lambda k: (self.jobs[k].held, self.jobs[k].order))
            heapq.heapify(st.rates)
        best: _Pick | None = None
        while st.rates:
            _, k = heapq.heappop(st.rates)
            if k in st.broken:
                continue
            m = measure(k)
            if m is None:
                continue
            if not st.rates or m[0] <= st.rates[0][0]:
                best = (m[0], k, m[2])
                break
            heapq.heappush(st.rates, (m[0], k))
        if best is None:
            best = self._closest(st, nobreak, spare)
            if best is None:
                return False
        rate = (best[0][0] * lack, best[0][1] * lack)  # what the best rate would charge for the rest
        for k in st.cheap:  # the cheapest gang that alone completes it
            j = self.jobs[k]
            if j.held > rate[0] + 1e-12:
                break
            m = None if k in st.broken else measure(k)
            if m is not None and m[1] >= lack and (j.held < rate[0] - 1e-12 or len(m[2]) < rate[1]):
                best = (m[0], k, m[2])
                break
        _, k, take = best
        st.first = st.first or k
        st.last = k
        st.broken.add(k)
        self._take(st, take)
        return True

    def _closest(
        self, st: _State, nobreak: frozenset[int], spare: tuple[dict[Any, Any], dict[Any, Any]]
    ) -> _Pick | None:
        """When no gang alone opens a slot (two must go together): the one that brings nodes closest
        to one, per unit of work — its pods on those nodes — as (key, job, pods); None if none does."""
        room, best = self.room, None
        for k, pods in self.of_job.items():
            j = self.jobs[k]
            if not j.healthy or k in st.broken or k in nobreak or j.rank > self._level:
                continue
            by_node: dict[int, list[Task]] = {}
            for t in pods:
                if id(t) not in st.ids and id(t) not in self._forbid and room.ok[room.pos[t.node]]:
                    by_node.setdefault(room.pos[t.node], []).append(t)
            gain, take = 0.0, list[Task]()
            for p, lst in by_node.items():
                own = spare[1].get((p, k))
                f = [a - b for a, b in zip(spare[0][p], own)] if own else spare[0][p]
                lack = [r * (room.slot(p, f) + 1) - x for r, x in zip(room.req, f)]
                got = sum(
                    min(sum(self.vec[id(t)][c] for t in lst), m) / r
                    for c, (m, r) in enumerate(zip(lack, room.req))
                    if m > 0
                )
                if got > 0 and (self._within_limits(st, take + lst)):
                    gain, take = gain + got, take + lst
            if gain > 0 and (best is None or (j.held / gain, j.order) < best[0][:2]):
                best = ((j.held / gain, j.order, len(take)), k, take)
        return best

    # -- 3. the reprieve ---------------------------------------------------------------------------
    def _reprieve(self, st: _State) -> _State:
        """Give back whole broken gangs, dearest first — each when the gang still fits without it,
        free and SAFE pods making up for it — then single pods (those of broken gangs first) when the
        gang fits without them. Returns the plan (a new state when a gang was given back)."""
        n = self.room.n

        def spare(pods: list[Task]) -> bool:
            if not pods or st.total - self._loss(st, pods) < n:
                return False
            self._take(st, pods, -1)
            return True

        dear = sorted(st.broken, key=lambda k: (-self.jobs[k].held, self.jobs[k].order))
        for k in dear:
            pods = [t for t in st.taken if id(t.job) == k]
            trial = _State(
                [list(f) for f in st.free],
                list(st.slots),
                st.total,
                st.limits,
                dict(st.given),
                list(st.taken),
                set(st.ids),
                dict(st.used),
                dict(st.role_used),
                st.broken - {k},
                heap=list(st.heap),
            )
            self._take(trial, pods, -1)
            if trial.total < n:
                self._fill(trial, {self.room.pos[t.node] for t in self.of_job[k]})
            if trial.total >= n:
                st = trial
        first = {k: i for i, k in enumerate(dear)}
        order = sorted(range(len(st.taken)), key=lambda i: (first.get(id(st.taken[i].job), len(first)), -i))
        for t in [st.taken[i] for i in order]:
            spare([t])
        return st

    def _loss(self, st: _State, pods: list[Task]) -> int:
        room = self.room
        sub: dict[int, list[float]] = {}
        for t in pods:
            p = room.pos[t.node]
            a = sub.setdefault(p, list(st.free[p]))
            for c, v in enumerate(self.vec[id(t)]):
                a[c] -= v
        return sum(st.slots[p] - room.slot(p, f) for p, f in sub.items())
