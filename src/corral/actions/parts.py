"""The cheapest parts of an eviction domain (seed 000 §3, corral's refinement of step 4; used by
:class:`corral.actions.gang_evict.GangEvictAction`): the nodes where a gang's pods could go for the
least work lost, chosen greedily node by node."""
from __future__ import annotations

import heapq
from typing import Callable, Sequence

import numpy as np

from corral.actions.bundles import WHOLE, Bundle, WorkCost
from corral.actions.packing import Packer
from corral.framework.extension import Domain
from corral.model import Job, Task
from corral.model.resources import EPS

__all__ = ["cheapest_parts"]


def cheapest_parts(tasks: list[Task], domain: Domain, bundles: list[Bundle], costs: WorkCost,
                   pack: Packer, modes: Sequence[tuple[bool, Callable[[Job], bool] | None]] = ((False, None),)
                   ) -> list[Domain]:
    """The parts of :func:`_parts` for each of ``modes`` — (break no gang, take only the jobs it
    accepts) — without repeats."""
    out: list[Domain] = []
    for safe, only in modes:
        for d in _parts(tasks, domain, bundles, costs, pack, safe, only):
            if not any((d.mask == o.mask).all() for o in out):
                out.append(d)
    return out


def _parts(tasks: list[Task], domain: Domain, bundles: list[Bundle], costs: WorkCost, pack: Packer,
           safe: bool, only: Callable[[Job], bool] | None = None) -> list[Domain]:
    """Parts of the domain where the gang's pods could go for the least work, chosen greedily node by
    node (each node priced by :class:`_Prices`): the cheapest node is taken, the nodes sharing a gang
    whose surplus it used or that it broke are priced again, until the nodes hold the gang — and again
    with a quarter more room. The bundles are then taken in their order inside such a part
    (:meth:`GangEvictAction.select`). With ``safe``, no gang may be broken: only the pods of victim
    jobs with surplus left (or broken already) count; with ``only``, only the jobs it accepts."""
    if pack.n == 0 or not bundles or not (tasks[0].request > 0).any():
        return []
    prices = _Prices(tasks[0].request, bundles, costs, pack, safe, only)
    heap = []
    for i in range(len(pack.rows)):
        if prices.mask[i]:
            c, k, _, _ = prices.price(i)
            if k:
                heap.append((c, -k, i, 0))
    heapq.heapify(heap)
    version = [0] * len(pack.rows)
    chosen: list[int] = []
    got = 0
    out: list[Domain] = []
    rooms = [pack.n, pack.n + max(1, pack.n // 4)]
    while heap and rooms:
        c, negk, i, ver = heapq.heappop(heap)
        if ver != version[i]:
            continue
        _, k, gangs, used = prices.price(i)
        chosen.append(i)
        got += k
        version[i] = -1
        for r in prices.take(gangs, used):
            if version[r] >= 0 and r != i:
                version[r] += 1
                cc, kk, _, _ = prices.price(r)
                if kk:
                    heapq.heappush(heap, (cc, -kk, r, version[r]))
        while rooms and got >= rooms[0]:
            rooms.pop(0)
            m = np.zeros_like(domain.mask)
            m[pack.rows[chosen]] = True
            if m.sum() < domain.mask.sum() and not any((m == o.mask).all() for o in out):
                out.append(Domain(domain.name, m, domain.tier, domain.score))
    return out


class _Prices:
    """What each domain node costs per gang pod it could hold once victims on it are gone: its free
    room costs nothing; a victim job's pods cost themselves while the job has surplus left — as many
    as its SAFE bundle holds, whichever of its pods they are, as in :mod:`corral.actions.surplus`; the
    rest of its pods on the node cost together what the gang holds, and nothing once the gang is
    broken for a node taken before (``safe``: such pods are not victims at all)."""

    def __init__(self, req: np.ndarray, bundles: list[Bundle], costs: WorkCost, pack: Packer, safe: bool,
                 only: Callable[[Job], bool] | None) -> None:
        self.pack, self.costs, self.safe = pack, costs, safe
        self.mask = pack.groups[0][1]
        # a gang only one of whose resources can limit it (the usual GPU gang): plain floats, numpy is
        # slow on one number at a time
        self.one = pack.one
        self.need_cols = np.flatnonzero(req > 0)
        self.creq = req[self.need_cols]
        self.req1 = float(req[self.one]) if self.one is not None else 0.0
        self.jobs: dict[int, Job] = {}
        self.budget: dict[int, int] = {}     # how many pods each job may still give up without breaking
        self.core: set[int] = set()          # jobs with a WHOLE bundle: breaking them costs all they hold
        self.broken: set[int] = set()
        self.nodes_of: dict[int, set[int]] = {}
        pods_on: dict[int, dict[int, list[Task]]] = {}
        for b in bundles:
            if only is not None and not only(b.job):
                continue
            k = id(b.job)
            self.jobs[k] = b.job
            if b.kind == WHOLE:
                self.core.add(k)
            else:
                self.budget[k] = self.budget.get(k, 0) + len(b.tasks)
            for t in b.tasks:
                i = pack.pos.get(t.node)
                if i is not None and self.mask[i]:
                    pods_on.setdefault(i, {}).setdefault(k, []).append(t)
                    self.nodes_of.setdefault(k, set()).add(i)
        # per node and job: its pods as (cost, freed, cost per unit of the need), cheapest first
        self.pods: dict[int, dict[int, list[tuple[float, object, float]]]] = {}
        for i, groups in pods_on.items():
            self.pods[i] = {}
            for k, pods in groups.items():
                items = [(c, self.amount(t.request), c / max(costs.size(t), 1e-12))
                         for t, c in ((t, costs.pod(t)) for t in pods)]
                items.sort(key=lambda it: it[2])
                self.pods[i][k] = items

    def amount(self, vec: np.ndarray):
        return float(vec[self.one]) if self.one is not None else vec[self.need_cols]

    def room(self, free) -> int:
        if self.one is not None:
            return int((free + EPS) // self.req1)
        return int(np.floor((free + EPS) / self.creq).min())

    def items(self, i: int) -> list[tuple]:
        """(cost, freed, ratio, gang broken or None, job whose surplus it uses or None) of the node's
        victims, cheapest per freed resource first: each job's cheapest pods while it has surplus
        left, the rest of its pods as one item that breaks it (free once it is broken)."""
        items: list[tuple] = []
        for k, its in self.pods.get(i, {}).items():
            if k in self.broken:
                items += [(0.0, it[1], 0.0, None, None) for it in its]
                continue
            n = min(self.budget.get(k, 0), len(its))
            items += [(c, r, q, None, k) for c, r, q in its[:n]]
            rest = its[n:]
            if rest and k in self.core and not self.safe:
                freed = sum(it[1] for it in rest[1:]) + rest[0][1]
                units = sum(it[0] / it[2] if it[2] > 0 else 0.0 for it in rest)
                held = self.costs.held(self.jobs[k])
                items.append((held, freed, held / max(units, 1e-12), k, None))
        items.sort(key=lambda it: it[2])
        return items

    def price(self, i: int) -> tuple[float, int, list[int], dict[int, int]]:
        """(cost per pod, pods, gangs broken, surplus used per job) of the node's cheapest prefix of
        victims."""
        free = self.amount(self.pack.base[i]) if self.one is not None else self.pack.base[i][self.need_cols].copy()
        k = self.room(free)
        best: tuple = (0.0, k, [], {}) if k > 0 else (float("inf"), 0, [], {})
        spent, gangs, used = 0.0, [], {}
        for cost, freed, _, gang, spare in self.items(i):
            free = free + freed
            spent += cost
            if gang is not None:
                gangs = gangs + [gang]
            if spare is not None:
                used[spare] = used.get(spare, 0) + 1
            kk = self.room(free)
            if kk > k:
                k = kk
                if best[1] == 0 or spent / k < best[0] / best[1] - 1e-12:
                    best = (spent, k, list(gangs), dict(used))
        return (best[0] / best[1] if best[1] else float("inf")), best[1], best[2], best[3]

    def take(self, gangs: list[int], used: dict[int, int]) -> set[int]:
        """A node was taken, breaking ``gangs`` and using ``used`` of their surplus: the nodes to price
        again."""
        changed = set()
        for g in gangs:
            if g not in self.broken:
                self.broken.add(g)
                changed.add(g)
        for j, n in used.items():
            self.budget[j] = self.budget.get(j, 0) - n
            changed.add(j)
        return {r for g in changed for r in self.nodes_of.get(g, ())}
