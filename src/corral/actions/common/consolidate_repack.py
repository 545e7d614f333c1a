"""The repack of a :mod:`consolidate plan <corral.actions.common.consolidate_plan>`: when the greedy
finds no plan — the job cap (``maxMovedJobs``) stops it, or no landing keeps the slots its moves
open —, the jobs are chosen first and their pods packed again: the exact move oracle's view
(:mod:`corral.solvers.move_oracle`), which stays within the cap by moving young gangs spread over
many nodes whole (one job, and each of its pods free to go anywhere or to restart where it runs),
and gathers a gang moved whole on one of its own nodes.

1. **targets** (:meth:`Repack.targets`) — the domain's nodes to open slots on, a slot at a time: the
   node whose cheapest set of jobs opening one more slot there (a covering knapsack, a job weighing
   more than any work) counts fewest jobs *plus the pods it displaces that would find no hole* (their
   sizes in the column the gang needs most, first fit, largest first, into the free room of the nodes
   not chosen; the pods it displaces are those of lifted jobs that the room the gang leaves there does
   not hold); ties to the jobs spread over most nodes, then the least work — and once more with the
   least work first, the cheaper repack kept. The chosen jobs are *lifted*: a job that may move whole
   all its running pods, else its movable pods;
2. **pack** (:meth:`Repack.pack`) — the gang's pods on the chosen nodes (else where lifting displaces
   least), then every lifted pod, largest first: back where it runs when the room there is still free
   (it does not move), else where it fits tightest, never on the node it leaves;
3. **helpers** (:meth:`Repack._search`) — while lifted pods find no place and the cap allows, one more
   job lifted: of the first :data:`HELPER_WIDTH` by the holes their leaving opens for the pods left
   over (pods smaller than those they make room for), the one whose pack leaves least unplaced.
4. **jobs alone** — besides, with no targets (the gang where lifting displaces least): the jobs spread
   over most nodes lifted first, one more per pack up to the cap (:meth:`Repack._spread`); and jobs
   lifted one at a time, each the one of the first :data:`HELPER_WIDTH` by spread whose pack leaves
   least unplaced (:meth:`Repack._grow`).

Of the four searches (two tie orders of the targets, two of jobs alone) the repack of least work is
kept.

A job whose moved pods stay within its surplus moves them as pod units, else it moves whole (its other
pods restart where they run, as a job the greedy moves whole). Every pack counts against the
decision's :attr:`Budget.packs <corral.actions.common.consolidate_landing.Budget>`, a count.
"""

from __future__ import annotations

import bisect

import numpy as np

from corral.actions.common.consolidate_landing import Landing, State, Unit, _cover
from corral.model import Task
from corral.model.resources import EPS

__all__ = ["HELPER_WIDTH", "Repack"]

#: Jobs whose pack is tried, at most, for each helper added.
HELPER_WIDTH = 8
#: A job not lifted yet weighs this more than any work in a target's covering knapsack.
_NEW_JOB = 1e9


class Repack:
    """The repack for one planner (a :class:`~corral.actions.common.consolidate_plan.MovePlanner`: its
    domain, gang, units and cap); :meth:`search` gives the state for the planner to finish, or None."""

    def __init__(self, pl: Landing) -> None:
        self.pl = pl
        whole: dict[int, Unit] = {}
        singles: dict[int, list[Unit]] = {}
        for u in pl._pool.units:
            if u.whole:
                whole[u.job] = u
            else:
                singles.setdefault(u.job, []).append(u)
        self.whole, self.singles = whole, singles
        self.jobs = sorted(set(whole) | set(singles))
        self.lift = {j: whole[j].pods if j in whole else [u.pods[0] for u in singles[j]] for j in self.jobs}
        self.cost = {j: whole[j].cost if j in whole else sum(u.cost for u in singles[j]) for j in self.jobs}
        self.spread = {j: len({t.node for t in self.lift[j]}) for j in self.jobs}
        self.on: dict[int, dict[int, list[Task]]] = {}  # node row -> job -> its lifted pods there
        self.job_of: dict[int, int] = {}  # id(pod) -> job
        for j in self.jobs:
            for t in self.lift[j]:
                self.on.setdefault(t.node, {}).setdefault(j, []).append(t)
                self.job_of[id(t)] = j
        self.scale = pl.req[pl.cols]
        cap = (pl.base + pl._movable)[:, pl.cols].max(axis=0)
        self.col = int(pl.cols[np.argmax(self.scale / np.maximum(cap, EPS))])  # the scarcest column
        self.rest = pl.base  # the free room the last pack left
        self.sizes: dict[int, float] = {}  # id(pod) -> its request in the gang's pods, summed over columns

    def possible(self) -> bool:
        """The domain's bound: would its nodes hold the gang with every movable pod gone?"""
        pl = self.pl
        rows = np.flatnonzero(pl.gang_ok)
        return int(pl._slots(pl.base + pl._movable, rows).sum()) >= len(pl.gang)

    def _size(self, t: Task) -> float:
        got = self.sizes.get(id(t))
        if got is None:
            got = self.sizes[id(t)] = float((t.request[self.pl.cols] / self.scale).sum())
        return got

    # -- 1. targets ---------------------------------------------------------------------------------
    def _open(self, free: np.ndarray, lifted: set[int], p: int, slots: int) -> list[int] | None:
        """The fewest jobs not lifted yet, then the least work, whose pods on node ``p`` leave room for
        ``slots`` + 1 of the gang's pods there ([]: there is room already; None: none do)."""
        pl = self.pl
        want = self.scale * (slots + 1)
        lack = want - free[p][pl.cols]
        if (lack <= EPS).all():
            return []
        cands = [j for j in sorted(self.on.get(p, {})) if j not in lifted]
        freed = [sum((t.request[pl.cols] for t in self.on[p][j]), np.zeros(len(pl.cols))) for j in cands]
        picked = _cover([_NEW_JOB + self.cost[j] for j in cands], freed, lack, self.scale)
        if picked is None:
            return None
        total = free[p][pl.cols] + sum((freed[i] for i in picked), np.zeros(len(pl.cols)))
        for i in sorted(range(len(cands)), key=lambda i: (self.cost[cands[i]], cands[i])):
            if (total >= want - EPS).all():
                break
            if i not in picked:  # another column lacks too
                picked.append(i)
                total = total + freed[i]
        return [cands[i] for i in picked] if (total >= want - EPS).all() else None

    def targets(self, by_cost: bool = False) -> tuple[set[int], dict[int, int]] | None:
        """The lifted jobs and, per node, the gang's pods it is to hold (step 1 of the module doc), or
        None. Ties between nodes go to the jobs spread over most nodes, then the least work
        (``by_cost``: the least work first)."""
        pl = self.pl
        free, c = pl.base.copy(), self.col
        st = pl._fresh()
        holes = sorted(
            float(free[q, c]) for q in np.flatnonzero((free[:, c] > EPS) & (st.slots == 0)).tolist()
        )
        lifted: set[int] = set()
        chosen: dict[int, int] = {}  # node row -> the gang's pods it is to hold
        away: set[int] = set()  # the lifted pods counted as leaving their node
        rows = [
            p for p in sorted(set(self.on) | set(np.flatnonzero(free[:, c] > EPS).tolist())) if pl.gang_ok[p]
        ]
        steps: dict[int, list[int] | None] = {}  # node row -> its jobs to open one more slot (while valid)
        for _ in range(len(pl.gang) - st.total):
            best: tuple[tuple[float, ...], int, list[int], list[Task]] | None = None
            for p in rows:
                slots = chosen.get(p, int(st.slots[p]))
                if p not in steps:
                    steps[p] = self._open(free, lifted, p, slots)
                new = steps[p]
                if new is None or (best is not None and len(new) > best[0][0]):
                    continue
                gone = self._gone(free, lifted, new, p, slots + 1, away)
                spread = -sum(self.spread[j] for j in new)
                work = sum(self.cost[j] for j in new)
                missed = _first_fit(holes, [float(t.request[c]) for t in gone])[1]
                key = (len(new) + missed, *((work, spread) if by_cost else (spread, work)), p)
                if best is None or key < best[0]:
                    best = (key, p, new, gone)
            if best is None:
                return None
            _, p, new, gone = best
            if p not in chosen:  # its free room is the gang's now
                k = bisect.bisect_left(holes, float(free[p, c]) - EPS)
                if k < len(holes) and abs(holes[k] - float(free[p, c])) <= EPS:
                    holes.pop(k)
            holes = _first_fit(holes, [float(t.request[c]) for t in gone])[0]
            away |= {id(t) for t in gone}
            chosen[p] = chosen.get(p, int(st.slots[p])) + 1
            steps.pop(p)
            for j in new:
                lifted.add(j)
                for t in self.lift[j]:
                    free[t.node] += t.request
                    steps.pop(t.node, None)
        return lifted, chosen

    def _gone(
        self, free: np.ndarray, lifted: set[int], new: list[int], p: int, slots: int, away: set[int]
    ) -> list[Task]:
        """The pods of the jobs ``lifted`` and ``new`` on node ``p`` (``free`` with the lifted ones gone;
        none counted as leaving yet) that leave it when it holds ``slots`` of the gang's pods: those
        that do not fit, largest first, in the room the gang leaves there."""
        c, on = self.col, self.on.get(p, {})
        room = float(free[p, c]) - float(self.pl.req[c]) * slots
        room += sum(float(t.request[c]) for j in new for t in on.get(j, ()))
        pods = [t for j in sorted(lifted | set(new)) for t in on.get(j, ()) if id(t) not in away]
        out = []
        for t in sorted(pods, key=lambda t: (-float(t.request[c]), t.uid)):
            if float(t.request[c]) <= room + EPS:
                room -= float(t.request[c])
            else:
                out.append(t)
        return out

    # -- 2. pack --------------------------------------------------------------------------------------
    def pack(
        self, lifted: set[int], chosen: dict[int, int]
    ) -> tuple[list[tuple[Task, int]] | None, float, list[Task]]:
        """The lifted jobs' pods packed again around the gang (step 2 of the module doc): the moves
        (pod, new row; None when some pod finds no place), the size left unplaced (the gang's pods with
        no room too), the lifted pods left."""
        pl = self.pl
        pl.budget.packs -= 1
        free = pl.base.copy()
        pods = [t for j in sorted(lifted) for t in self.lift[j]]
        held = np.zeros(len(free))
        for t in pods:
            free[t.node] += t.request
            held[t.node] += float(t.request[self.col])
        want = dict(chosen)
        short = 0.0  # the gang's pods with no room, in the lifted pods' measure
        for t in pl.gang:
            cols = np.flatnonzero(t.request > 0)
            rows = np.flatnonzero(pl.gang_ok & (free[:, cols] >= t.request[cols] - EPS).all(axis=1))
            if not len(rows):
                short += self._size(t)
                continue
            after = free[rows][:, self.col] - t.request[self.col]
            displaced = np.maximum(held[rows] - np.maximum(after, 0.0), 0.0)
            spare = ((free[rows][:, pl.cols] - t.request[pl.cols]) / self.scale).sum(axis=1)
            aim = np.array([want.get(int(r), 0) <= 0 for r in rows])
            row = int(rows[np.lexsort((rows, spare, displaced, aim))[0]])
            want[row] = want.get(row, 0) - 1
            free[row] -= t.request
        moves, left_size, left = self._place(free, pods)
        return (moves if not short else None), left_size + short, left

    def _place(
        self, free: np.ndarray, pods: list[Task]
    ) -> tuple[list[tuple[Task, int]] | None, float, list[Task]]:
        groups: dict[tuple[float, bytes], list[Task]] = {}
        for t in sorted(pods, key=lambda t: (-self._size(t), t.node, t.uid)):
            groups.setdefault((-self._size(t), t.request.tobytes()), []).append(t)
        moves: list[tuple[Task, int]] = []
        left: list[Task] = []
        for key in sorted(groups, key=lambda k: k[0]):
            away = []
            for t in groups[key]:  # back where they run first
                cols = np.flatnonzero(t.request > 0)
                if (free[t.node, cols] >= t.request[cols] - EPS).all():
                    free[t.node] -= t.request
                else:
                    away.append(t)
            for t in away:
                cols = np.flatnonzero(t.request > 0)
                ok = self.pl.dest(t) & (free[:, cols] >= t.request[cols] - EPS).all(axis=1)
                ok[t.node] = False
                rows = np.flatnonzero(ok)
                if not len(rows):
                    left.append(t)
                    continue
                spare = ((free[rows][:, self.pl.cols] - t.request[self.pl.cols]) / self.scale).sum(axis=1)
                row = int(rows[np.lexsort((rows, spare))[0]])
                free[row] -= t.request
                moves.append((t, row))
        self.rest = free
        return (None if left else moves), sum(self._size(t) for t in left), left

    # -- 3. helpers, and the search -------------------------------------------------------------------
    def _helpers(self, lifted: set[int], left: list[Task]) -> list[int]:
        """The jobs not lifted whose leaving opens holes for the pods ``left`` over, most first (each
        node once, its pods there all smaller than the pod it makes room for), then by the room they
        take, their work, their index."""
        rest, c = self.rest, self.col
        sizes = sorted((float(t.request[c]) for t in left), reverse=True)
        out = []
        for h in self.jobs:
            if h in lifted:
                continue
            at: dict[int, list[float]] = {}
            for t in self.lift[h]:
                at.setdefault(t.node, []).append(float(t.request[c]))
            used: set[int] = set()
            vol = 0.0
            for s in sizes:
                for q in sorted(at):
                    if q not in used and rest[q, c] < s - EPS <= rest[q, c] + sum(at[q]) and max(at[q]) < s:
                        used.add(q)
                        vol += sum(at[q])
                        break
            if used:
                out.append((-len(used), vol, self.cost[h], h))
        return [h for *_, h in sorted(out)]

    def search(self) -> State | None:
        """The cheaper of the repacks with either tie order of :meth:`targets` (module doc), or None:
        no targets, no pack within the cap or the decision's packs."""
        best: State | None = None
        for st in (self._search(False), self._search(True), self._spread(), self._grow()):
            if st is not None and (best is None or _work(st) < _work(best)):
                best = st
        return best

    def _spread(self) -> State | None:
        """The jobs spread over most nodes lifted first (then the least work), one more each pack, up
        to the cap: the pack's gang on the nodes where lifting displaces least."""
        pl = self.pl
        mine = [j for j in self.jobs if any(pl.gang_ok[t.node] for t in self.lift[j])]
        order = sorted(mine, key=lambda j: (-self.spread[j], self.cost[j], j))
        lifted: set[int] = set()
        rows = np.flatnonzero(pl.gang_ok)
        free = pl.base.copy()
        for j in order[: pl.max_jobs] if pl.max_jobs >= 0 else order:
            lifted.add(j)
            for t in self.lift[j]:
                free[t.node] += t.request
            if pl.budget.packs <= 0:
                return None
            if int(pl._slots(free, rows).sum()) < len(pl.gang):
                continue  # not room enough yet, whatever the pack
            moves, _, _ = self.pack(lifted, {})
            if moves is not None:
                return self._state(moves)
        return None

    def _grow(self) -> State | None:
        """Jobs lifted one at a time, up to the cap, with no targets (the pack's gang where lifting
        displaces least): of the first :data:`HELPER_WIDTH` not lifted by the nodes they spread over
        (then the least work), the one whose pack leaves least unplaced — the gang's pods counted
        when there is not room enough for them yet."""
        pl = self.pl
        mine = [j for j in self.jobs if any(pl.gang_ok[t.node] for t in self.lift[j])]
        order = sorted(mine, key=lambda j: (-self.spread[j], self.cost[j], j))
        lifted: set[int] = set()
        while pl.max_jobs < 0 or len(lifted) < pl.max_jobs:
            best: tuple[float, float, int] | None = None
            for j in [j for j in order if j not in lifted][:HELPER_WIDTH]:
                if pl.budget.packs <= 0:
                    return None
                moves, short, _ = self.pack(lifted | {j}, {})
                if moves is not None:
                    return self._state(moves)
                if best is None or (short, self.cost[j]) < best[:2]:
                    best = (short, self.cost[j], j)
            if best is None:
                return None
            lifted.add(best[2])
        return None

    def _search(self, by_cost: bool) -> State | None:
        pl = self.pl
        got = self.targets(by_cost) if pl.budget.packs > 0 else None
        if got is None:
            return None
        lifted, chosen = got
        moves, short, left = self.pack(lifted, chosen)
        while moves is None and left and (pl.max_jobs < 0 or len(lifted) < pl.max_jobs):
            best: tuple[float, float, int] | None = None
            for h in self._helpers(lifted, left)[:HELPER_WIDTH]:
                if pl.budget.packs <= 0:
                    break
                m, s, _ = self.pack(lifted | {h}, chosen)
                if best is None or (s, self.cost[h]) < best[:2]:
                    best = (s, self.cost[h], h)
                if m is not None:
                    break
            if best is None or best[0] >= short:
                return None  # no job more helps
            lifted.add(best[2])
            moves, short, left = self.pack(lifted, chosen)
        return self._state(moves) if moves is not None else None

    def _state(self, moves: list[tuple[Task, int]]) -> State | None:
        """The planner's state for ``moves``: per job its pod units when they may move together, else
        the job whole; None beyond the cap."""
        pl = self.pl
        by_job: dict[int, list[Task]] = {}
        for t, _ in moves:
            by_job.setdefault(self.job_of[id(t)], []).append(t)
        if pl.max_jobs >= 0 and len(by_job) > pl.max_jobs:
            return None
        st = pl._fresh()
        ids = {id(t) for t, _ in moves}
        for j, pods in sorted(by_job.items()):
            units = [u for u in self.singles.get(j, ()) if id(u.pods[0]) in ids]
            if len(units) == len(pods) and pl.allowed(j, pods):
                st.taken += units
            elif j in self.whole:
                st.taken.append(self.whole[j])
                st.paid.add(j)
            else:
                return None
            st.jobs.add(j)
        rows: set[int] = set()
        for t, r in moves:
            st.free[t.node] += t.request
            st.free[r] -= t.request
            rows |= {t.node, r}
            st.moved.add(id(t))
        st.moves = list(moves)
        pl._touch(st, rows)
        return st


def _work(st: State) -> float:
    return sum(u.cost for u in st.taken)


def _first_fit(holes: list[float], sizes: list[float]) -> tuple[list[float], int]:
    """``sizes`` put, largest first, each in the smallest of ``holes`` (sorted) that holds it: the holes
    left (sorted) and how many sizes found none."""
    left = list(holes)
    missed = 0
    for s in sorted(sizes, reverse=True):
        k = bisect.bisect_left(left, s - EPS)
        if k == len(left):
            missed += 1
            continue
        h = left.pop(k)
        if h - s > EPS:
            bisect.insort(left, h - s)
    return left, missed
