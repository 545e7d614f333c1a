"""The cheapest parts of an eviction domain (seed 000 §3, corral's refinement of step 4; used by
:class:`corral.actions.gang_evict.GangEvictAction`): the nodes where a gang's pods could go for the
least work lost, chosen greedily node by node."""
from __future__ import annotations

import heapq

import numpy as np

from corral.actions.bundles import WHOLE, Bundle, WorkCost
from corral.actions.packing import Packer
from corral.framework.extension import Domain
from corral.model import Job, Task
from corral.model.resources import EPS

__all__ = ["cheapest_parts"]


def cheapest_parts(tasks: list[Task], domain: Domain, bundles: list[Bundle], costs: WorkCost,
                   pack: Packer) -> list[Domain]:
    """Parts of the domain where the gang's pods could go for the least work, chosen greedily node by
    node: each node is priced at the least cost per gang pod it could hold once victims on it are
    gone (its free room costs nothing, a SAFE pod costs itself, the pods of a WHOLE bundle on it
    cost together what their gang holds — nothing once the gang is broken for a node taken
    before), the cheapest node is taken, the nodes sharing a gang it breaks are priced again, until
    the nodes hold the gang — and again with a quarter more room. The bundles are then taken in
    their order inside such a part (:meth:`GangEvictAction.select`)."""
    if pack.n == 0 or not bundles:
        return []
    req = tasks[0].request
    cols = req > 0
    if not cols.any():
        return []
    mask = pack.groups[0][1]
    safe_on: dict[int, list[Task]] = {}
    core_on: dict[int, dict[int, list[Task]]] = {}
    nodes_of: dict[int, set[int]] = {}
    jobs: dict[int, Job] = {}
    for b in bundles:
        for t in b.tasks:
            i = pack.pos.get(t.node)
            if i is None or not mask[i]:
                continue
            if b.kind == WHOLE:
                core_on.setdefault(i, {}).setdefault(id(b.job), []).append(t)
                nodes_of.setdefault(id(b.job), set()).add(i)
                jobs[id(b.job)] = b.job
            else:
                safe_on.setdefault(i, []).append(t)
    broken: set[int] = set()
    # per node, over the requested columns only: the SAFE pods as (cost, freed, ratio) sorted by ratio,
    # and the WHOLE bundles' pods as gang -> (what the gang holds, freed, freed in ROI units)
    need_cols, creq = np.flatnonzero(cols), req[cols]
    # a gang only one of whose resources can limit it (the usual GPU gang): plain floats, numpy is slow
    # on one number at a time
    one = pack.one

    def amount(vec: np.ndarray):
        return float(vec[one]) if one is not None else vec[need_cols]
    safe_items: dict[int, list[tuple[float, np.ndarray, float]]] = {}
    for i, pods in safe_on.items():
        items = []
        for t in pods:
            c, units = costs.pod(t), max(costs.size(t), 1e-12)
            items.append((c, amount(t.request), c / units))
        items.sort(key=lambda it: it[2])
        safe_items[i] = items
    core_items: dict[int, list[tuple[int, float, np.ndarray, float]]] = {}
    for i, groups in core_on.items():
        core_items[i] = []
        for k, pods in groups.items():
            freed = sum(float(t.request[one]) for t in pods) if one is not None else amount(sum(t.request for t in pods))
            units = sum(costs.size(t) for t in pods)
            core_items[i].append((k, costs.held(jobs[k]), freed, max(units, 1e-12)))

    req1 = float(req[one]) if one is not None else 0.0

    def room(free) -> int:
        if one is not None:
            return int((free + EPS) // req1)
        return int(np.floor((free + EPS) / creq).min())

    def price(i: int) -> tuple[float, int, list[int]]:
        """(cost per pod, pods, gangs broken) of the node's cheapest prefix: the node's victims taken
        cheapest per freed resource first."""
        items = list(safe_items.get(i, ()))
        cores = core_items.get(i)
        if cores:
            items = items + [(0.0, r, 0.0, ()) if k in broken else (c, r, c / units, (k,))
                             for k, c, r, units in cores]
            items.sort(key=lambda it: it[2])
        free = amount(pack.base[i]) if one is not None else pack.base[i][need_cols].copy()
        k = room(free)
        best = (0.0, k, []) if k > 0 else (float("inf"), 0, [])
        spent, gangs = 0.0, []
        for it in items:
            free = free + it[1]
            spent += it[0]
            if len(it) > 3 and it[3]:
                gangs = gangs + list(it[3])
            kk = room(free)
            if kk > k:
                k = kk
                if best[1] == 0 or spent / k < best[0] / best[1] - 1e-12:
                    best = (spent, k, list(gangs))
        return (best[0] / best[1] if best[1] else float("inf")), best[1], best[2]

    heap = []
    for i in range(len(pack.rows)):
        if mask[i]:
            c, k, g = price(i)
            if k:
                heap.append((c, -k, i, 0))
    heapq.heapify(heap)
    version = [0] * len(pack.rows)
    chosen: list[int] = []
    got = 0
    out = []
    rooms = [pack.n, pack.n + max(1, pack.n // 4)]
    while heap and rooms:
        c, negk, i, ver = heapq.heappop(heap)
        if ver != version[i]:
            continue
        _, k, gangs = price(i)
        chosen.append(i)
        got += k
        version[i] = -1
        for g in gangs:
            if g not in broken:
                broken.add(g)
                for r in nodes_of.get(g, ()):
                    if version[r] >= 0 and r != i:
                        version[r] += 1
                        cc, kk, _ = price(r)
                        if kk:
                            heapq.heappush(heap, (cc, -kk, r, version[r]))
        while rooms and got >= rooms[0]:
            rooms.pop(0)
            m = np.zeros_like(domain.mask)
            m[pack.rows[chosen]] = True
            if m.sum() < domain.mask.sum() and not any((m == o.mask).all() for o in out):
                out.append(Domain(domain.name, m, domain.tier, domain.score))
    return out
