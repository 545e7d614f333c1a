"""The line of steps of :meth:`MovePlanner._greedy <corral.actions.common.consolidate_plan.MovePlanner>`:
cheapest per slot first, each node's step worked out only when its lower bound could beat what is in
line (a lazy greedy)."""

from __future__ import annotations

import heapq
import math
from typing import Any

from corral.actions.common.consolidate_landing import Landing, State, Unit

__all__ = ["Line"]


class Line:
    """The steps in line for :meth:`MovePlanner._greedy`, cheapest per slot first (a lazy greedy): a
    node's step is worked out only when its lower bound (:meth:`MovePlanner.bound`) could beat what is
    in line, and again whenever the greedy changes the node (``version``: older steps of it are
    stale); each job moved whole across nodes whose leaving opens a slot is in line from the start."""

    def __init__(self, planner: Landing, st: State, by_jobs: bool) -> None:
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
        measured: tuple[State, int] | None = None,
    ) -> None:
        """Put a step in line; ``measured``: the state it gives and :attr:`gen` when it was measured."""
        v = self.version.get(node, 0) if ver is None else ver
        heapq.heappush(self.heap, (key, self.seq, units, node, v, measured))
        self.seq += 1

    def ahead(self, key: tuple[float, ...]) -> bool:
        """Is something in line (or a node not worked out yet) cheaper than ``key``?"""
        return bool(self.heap and key > self.heap[0][0]) or bool(self.nodes and key > self.nodes[0][0])

    def next(self) -> tuple[list[Unit], int, int, State | None] | None:
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

    def accept(self, trial: State, units: list[Unit]) -> None:
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
