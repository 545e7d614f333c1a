"""Where the moved pods of a :mod:`consolidate plan <corral.actions.common.consolidate_plan>` land,
and the room made for those that have none: the units and the planner's state they work on.

A moved pod lands outside the gang's nodes if it can, then where it costs the gang fewest slots, then
where it fits tightest (never on the node it leaves). One with nowhere to go, or whose landing takes a
gang slot, has room made for it: in the greedy's first passes by one single-pod unit moving away
(:meth:`Landing._room_single`, a chain of two moves), in the deeper pass by the cheapest set of units
of one node (:meth:`Landing._room_deep`, a covering knapsack as a step's), each of whose pods lands
itself without taking a gang slot.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.model import Task
from corral.model.resources import EPS

__all__ = [
    "CHAIN",
    "DEEP_CHAINS",
    "DEEP_ROWS",
    "DEEP_SHARE",
    "REPACKS",
    "Budget",
    "Landing",
    "Pool",
    "State",
    "Unit",
]

#: Single-pod units tried, at most, to make room for a moved pod with nowhere to go.
CHAIN = 16
#: Deeper landing searches (:meth:`Landing._room_deep`) per planner, at most.
DEEP_CHAINS = 8
#: Nodes a deeper landing search works out, at most (those of the least bound first).
DEEP_ROWS = 12
#: The deeper pass's move sets, at most, as a multiple of those the first passes spent.
DEEP_SHARE = 1
#: Packs of the repack (:mod:`corral.actions.common.consolidate_repack`) per decision, at most.
REPACKS = 48
#: Slots counted per node at most (an unlimited resource would count infinitely many).
_MOST = 1 << 20


@dataclass
class Budget:
    """The per-decision search budget: steps tried (a moved set evaluated with its pods landed). When
    it is spent the greedy stops (no plan, or the best so far), so a decision's time is bounded; a
    count, not a clock, so the same input gives the same decisions. The repack, run only when the
    greedy finds no plan, counts its packs apart (``packs``)."""

    left: int = 1 << 30
    #: the repack's packs left (:data:`REPACKS`)
    packs: int = REPACKS

    def spent(self) -> bool:
        return self.left <= 0


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
@dataclass
class State:
    free: np.ndarray
    slots: np.ndarray
    total: int
    taken: list[Unit] = field(default_factory=list)
    moved: set[int] = field(default_factory=set)  # ids of the pods moved
    moves: list[tuple[Task, int]] = field(default_factory=list)
    jobs: set[int] = field(default_factory=set)
    paid: set[int] = field(default_factory=set)  # jobs that move whole

    def copy(self) -> State:
        return State(
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
    of one pod, cheapest first (``singles``)."""

    def __init__(self, units: list[Unit], free: np.ndarray) -> None:
        self.units, self.shape = units, free.shape
        self.rates: dict[int, np.ndarray] = {}

    @cached_property
    def by_row(self) -> tuple[dict[int, list[Unit]], np.ndarray]:
        """``at_all`` and ``movable`` (worked out when first asked, as each group here)."""
        at_all: dict[int, list[Unit]] = {}
        movable = np.zeros(self.shape)
        alone = set()
        for u in self.units:
            for r in sorted({t.node for t in u.pods}):
                at_all.setdefault(r, []).append(u)
            if not u.whole:
                movable[u.pods[0].node] += u.pods[0].request
                alone.add(id(u.pods[0]))
        for u in self.units:
            for t in u.pods if u.whole else ():
                if id(t) not in alone:
                    movable[t.node] += t.request
        return at_all, movable

    @cached_property
    def paid(self) -> tuple[dict[int, np.ndarray], dict[int, list[Unit]], dict[int, list[Unit]]]:
        """``paid_rows``, ``relocs`` and ``relocs_at``."""
        paid_rows: dict[int, np.ndarray] = {}
        relocs: dict[int, list[Unit]] = {}
        relocs_at: dict[int, list[Unit]] = {}
        order = len(self.units)
        for u in self.units:
            if not u.whole:
                continue
            paid_rows[u.job] = np.array(sorted({t.node for t in u.pods}), dtype=np.int64)
            for t in u.pods:
                unit = Unit([t], 0.0, u.job, False, order, True)
                order += 1
                relocs.setdefault(u.job, []).append(unit)
                relocs_at.setdefault(t.node, []).append(unit)
        return paid_rows, relocs, relocs_at

    @cached_property
    def singles(self) -> tuple[list[Unit], np.ndarray, np.ndarray]:
        """``singles``, with their pods' rows and requests as arrays."""
        singles = sorted((u for u in self.units if len(u.pods) == 1), key=lambda u: (u.cost, u.order))
        rows = np.array([u.pods[0].node for u in singles], dtype=np.int64)
        req = np.array([u.pods[0].request for u in singles]).reshape(len(singles), self.shape[1])
        return singles, rows, req


class Landing:
    """The landing of moved pods, for :class:`~corral.actions.common.consolidate_plan.MovePlanner`
    (whose attributes and steps it uses)."""

    if TYPE_CHECKING:
        base: np.ndarray
        cols: np.ndarray
        req: np.ndarray
        gang: list[Task]
        gang_ok: np.ndarray
        dest: Callable[[Task], np.ndarray]
        budget: Budget
        deep: bool
        chains: int
        rooms: int
        _colreq: list[tuple[int, float]]
        _pods: dict[int, tuple[Any, ...]]
        _pool: Pool
        allowed: Callable[[int, list[Task]], bool]
        max_jobs: int
        at: dict[int, list[Unit]]
        job_rows: dict[int, set[int]]

        def bound(self, p: int, jobs: bool = False) -> float: ...
        def _slots(self, free: np.ndarray, rows: np.ndarray, at: np.ndarray | None = None) -> np.ndarray: ...
        def _fresh(self) -> State: ...
        def _touch(self, st: State, rows: set[int]) -> None: ...
        def spanning(self) -> list[tuple[Unit, int]]: ...
        def _first(self, st: State, p: int) -> list[Unit] | None: ...
        def _step(self, st: State, p: int) -> list[Unit] | None: ...
        def _may(self, st: State, u: Unit) -> bool: ...
        def _may_all(self, st: State, units: list[Unit]) -> bool: ...
        def _move(self, st: State, units: list[Unit], chain: bool = True, at: int = -1) -> bool: ...
        def _here(self, st: State, p: int, at: dict[int, list[Unit]] | None = None) -> list[Unit]: ...
        def _held(self, st: State, u: Unit, p: int) -> np.ndarray: ...

    # what the planners of one decision share (:class:`Pool`)
    @property
    def at_all(self) -> dict[int, list[Unit]]:
        return self._pool.by_row[0]

    @property
    def _movable(self) -> np.ndarray:
        return self._pool.by_row[1]

    @property
    def _rates(self) -> dict[int, np.ndarray]:
        return self._pool.rates

    @property
    def _paid_rows(self) -> dict[int, np.ndarray]:
        return self._pool.paid[0]

    @property
    def relocs(self) -> dict[int, list[Unit]]:
        return self._pool.paid[1]

    @property
    def relocs_at(self) -> dict[int, list[Unit]]:
        return self._pool.paid[2]

    @property
    def _singles(self) -> list[Unit]:
        return self._pool.singles[0]

    def _make_room(self, st: State, t: Task, lost: int) -> int:
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

    def _room_single(self, st: State, t: Task) -> int:
        """The cheapest single-pod unit (of the first :data:`CHAIN` that could; a pod of a job moving
        whole first, which costs nothing more) whose pod, moved away to where it lands itself without
        taking a gang slot, leaves room for ``t`` where it was; that unit is moved in ``st``. The row,
        or -1."""
        cols = np.flatnonzero(t.request > 0)
        dest = self.dest(t)
        tried = 0
        paid = [r for j in sorted(st.paid) for r in self.relocs.get(j, ())]
        seen: dict[Any, list[tuple[int, int]]] = {}
        _, rows, req = self._pool.singles
        room = (st.free[rows][:, cols] + req[:, cols] >= t.request[cols] - EPS).all(axis=1)
        could = np.flatnonzero(room & dest[rows] & (rows != t.node)).tolist()
        for u in paid + [self._singles[i] for i in could]:
            v = u.pods[0]
            q = v.node
            if q == t.node or id(v) in st.moved or not dest[q]:
                continue
            if not ((st.free[q, cols] + v.request[cols]) >= t.request[cols] - EPS).all():
                continue
            tried += 1
            if tried > CHAIN:
                break
            if not self._may_all(st, [u]) or self._land_like(st, v, seen)[1] != 0:
                continue
            self._move(st, [u], chain=False, at=q)
            return q
        return -1

    def _room_deep(self, st: State, t: Task, lost: int) -> int:
        """The node where the cheapest set of units there (a covering knapsack, as a step's) whose pods
        each land elsewhere without taking a gang slot leaves room for ``t`` — of the first
        :data:`DEEP_ROWS` nodes by a lower bound (:meth:`_rate`), stopping once the bound reaches the
        cheapest found —, kept only when the gang then keeps more slots than by the plain landing (all
        of them, when ``t`` has none); those units are moved in ``st``. The row, or -1."""
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

    def _room_at(self, st: State, t: Task, q: int) -> tuple[float, list[Unit]] | None:
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

    def _lands(self, st: State, units: list[Unit], q: int) -> bool:
        """Does each pod of ``units`` on node ``q`` land (alone, as things stand) where it takes no
        gang slot?"""
        return all(
            self._land(st, v)[1] == 0 for u in units for v in u.pods if v.node == q and id(v) not in st.moved
        )

    def _land(self, st: State, t: Task) -> tuple[int, int]:
        """Where moved pod ``t`` goes: outside the gang's nodes if it can, then fewest gang slots lost, then
        the smallest share of the node left over, then the lowest row; -1 when it fits nowhere. With the
        gang slots it takes there (-1 too when it fits nowhere)."""
        got = self._landings(st, t, 1, True)
        return got[0] if got else (-1, -1)

    def _land_like(self, st: State, t: Task, seen: dict[Any, list[tuple[int, int]]]) -> tuple[int, int]:
        """:meth:`_land` for ``t``, from the two best landings of a pod alike (its class and request)
        worked out before in ``seen`` as things stand: the same, but for the node it leaves."""
        key = (t.klass or id(t), t.request.tobytes())
        top = seen.get(key)
        if top is None:
            top = seen[key] = self._landings(st, t, 2, False)
        return next(((r, lost) for r, lost in top if r != t.node), (-1, -1))

    def _landings(self, st: State, t: Task, k: int, leave: bool) -> list[tuple[int, int]]:
        """The first ``k`` landings of :meth:`_land`'s order (row, gang slots taken); ``leave``: not on
        the node ``t`` leaves."""
        info = self._pods.get(id(t))
        if info is None:
            cols = np.flatnonzero(t.request > 0)
            first = int(cols[np.argmax(t.request[cols] / np.maximum(self.base[:, cols].max(axis=0), EPS))])
            dest = self.dest(t)
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
        ok = (st.free[:, first] >= need) & dest  # the column it needs most, first
        if leave:
            ok[t.node] = False
        rows = np.flatnonzero(ok)
        if not len(rows):
            return []
        fr = st.free[rows]
        if len(cols) > 1:
            fit = (fr[:, cols] >= req - EPS).all(axis=1)
            rows, fr = rows[fit], fr[fit]
            if not len(rows):
                return []
        after = np.floor(fr[:, self.cols] / self.req[self.cols] - mine).min(axis=1)
        ok = self.gang_ok[rows]
        lost = st.slots[rows] - np.where(ok, np.clip(after, 0, _MOST), 0)
        spare = ((fr[:, cols] - req) / req).sum(axis=1)
        order = np.lexsort((rows, spare, lost, ok))[:k]
        return [(int(rows[i]), int(lost[i])) for i in order]


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
