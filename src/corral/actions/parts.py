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
    node: each node is priced at the least cost per gang pod it could hold once victims on it are
    gone (its free room costs nothing; a victim job's pods cost themselves while the job has surplus
    left — as many as its SAFE bundle holds, whichever of its pods they are, as in
    :mod:`corral.actions.surplus`; the rest of its pods on the node cost together what the gang holds,
    and nothing once the gang is broken for a node taken before), the cheapest node is taken, the nodes
    sharing a gang whose surplus it used or that it broke are priced again, until the nodes hold the
    gang — and again with a quarter more room. The bundles are then taken in their order inside such
    a part (:meth:`GangEvictAction.select`). With ``safe``, no gang may be broken: only the pods of
    victim jobs with surplus left (or broken already) count; with ``only``, only the jobs it accepts."""
    if pack.n == 0 or not bundles:
        return []
    req = tasks[0].request
    cols = req > 0
    if not cols.any():
        return []
    mask = pack.groups[0][1]
    # each victim job's pods per node, and how many of them may go without breaking it (its SAFE bundle)
    pods_on: dict[int, dict[int, list[Task]]] = {}
    nodes_of: dict[int, set[int]] = {}
    jobs: dict[int, Job] = {}
    budget: dict[int, int] = {}
    core: set[int] = set()                  # jobs with a WHOLE bundle: breaking them costs all they hold
    for b in bundles:
        if only is not None and not only(b.job):
            continue
        k = id(b.job)
        jobs[k] = b.job
        if b.kind == WHOLE:
            core.add(k)
        else:
            budget[k] = budget.get(k, 0) + len(b.tasks)
        for t in b.tasks:
            i = pack.pos.get(t.node)
            if i is None or not mask[i]:
                continue
            pods_on.setdefault(i, {}).setdefault(k, []).append(t)
            nodes_of.setdefault(k, set()).add(i)
    broken: set[int] = set()
    # a gang only one of whose resources can limit it (the usual GPU gang): plain floats, numpy is slow
    # on one number at a time
    need_cols, creq = np.flatnonzero(cols), req[cols]
    one = pack.one

    def amount(vec: np.ndarray):
        return float(vec[one]) if one is not None else vec[need_cols]

    # per node and job: its pods as (cost, freed, cost per unit of the need), cheapest first
    pod_items: dict[int, dict[int, list[tuple[float, object, float]]]] = {}
    for i, groups in pods_on.items():
        pod_items[i] = {}
        for k, pods in groups.items():
            items = []
            for t in pods:
                c = costs.pod(t)
                items.append((c, amount(t.request), c / max(costs.size(t), 1e-12)))
            items.sort(key=lambda it: it[2])
            pod_items[i][k] = items

    req1 = float(req[one]) if one is not None else 0.0

    def room(free) -> int:
        if one is not None:
            return int((free + EPS) // req1)
        return int(np.floor((free + EPS) / creq).min())

    def node_items(i: int) -> list[tuple]:
        """(cost, freed, ratio, gang broken or None, job whose surplus it uses or None) of the node's
        victims: each job's cheapest pods while it has surplus left, the rest of its pods as one item
        that breaks it (free once it is broken)."""
        items: list[tuple] = []
        for k, its in pod_items.get(i, {}).items():
            if k in broken:
                items += [(0.0, it[1], 0.0, None, None) for it in its]
                continue
            n = min(budget.get(k, 0), len(its))
            items += [(c, r, q, None, k) for c, r, q in its[:n]]
            rest = its[n:]
            if rest and k in core and not safe:
                freed = sum(it[1] for it in rest[1:]) + rest[0][1]
                units = sum(it[0] / it[2] if it[2] > 0 else 0.0 for it in rest)
                held = costs.held(jobs[k])
                items.append((held, freed, held / max(units, 1e-12), k, None))
        items.sort(key=lambda it: it[2])
        return items

    def price(i: int) -> tuple[float, int, list[int], dict[int, int]]:
        """(cost per pod, pods, gangs broken, surplus used per job) of the node's cheapest prefix: the
        node's victims taken cheapest per freed resource first."""
        free = amount(pack.base[i]) if one is not None else pack.base[i][need_cols].copy()
        k = room(free)
        best: tuple = (0.0, k, [], {}) if k > 0 else (float("inf"), 0, [], {})
        spent, gangs, used = 0.0, [], {}
        for cost, freed, _, gang, spare in node_items(i):
            free = free + freed
            spent += cost
            if gang is not None:
                gangs = gangs + [gang]
            if spare is not None:
                used[spare] = used.get(spare, 0) + 1
            kk = room(free)
            if kk > k:
                k = kk
                if best[1] == 0 or spent / k < best[0] / best[1] - 1e-12:
                    best = (spent, k, list(gangs), dict(used))
        return (best[0] / best[1] if best[1] else float("inf")), best[1], best[2], best[3]

    heap = []
    for i in range(len(pack.rows)):
        if mask[i]:
            c, k, _, _ = price(i)
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
        _, k, gangs, used = price(i)
        chosen.append(i)
        got += k
        version[i] = -1
        changed = set()
        for g in gangs:
            if g not in broken:
                broken.add(g)
                changed.add(g)
        for j, n in used.items():
            budget[j] = budget.get(j, 0) - n
            changed.add(j)
        for g in changed:
            for r in nodes_of.get(g, ()):
                if version[r] >= 0 and r != i:
                    version[r] += 1
                    cc, kk, _, _ = price(r)
                    if kk:
                        heapq.heappush(heap, (cc, -kk, r, version[r]))
        while rooms and got >= rooms[0]:
            rooms.pop(0)
            m = np.zeros_like(domain.mask)
            m[pack.rows[chosen]] = True
            if m.sum() < domain.mask.sum() and not any((m == o.mask).all() for o in out):
                out.append(Domain(domain.name, m, domain.tier, domain.score))
    return out
