"""A lower bound on what entering a domain can cost, so that ``gangpreempt``/``gangreclaim`` skip the
domains whose plan could not beat the best plan already found (a plan in full takes milliseconds per
domain; the bound, a sort of the victim jobs).

Every plan of a domain (:meth:`~corral.actions.gang_evict.GangEvictAction.select`, over the domain or a
part of it) frees, with what is free in the domain, at least the need in each resource the gang
requests. Measured as the need's fraction (Σ_r amount_r / need_r, the unit of
:meth:`~corral.actions.bundles.WorkCost.size`), its victims therefore add up to at least the *deficit*
``D = Σ_r max(need_r − free_r, 0) / need_r``. A victim job ``j`` with pods of total size ``cap_j`` in
the domain can give at most ``cap_j`` of it, and whatever ``x`` it gives costs at least ``rate_j · x``,
where ``rate_j`` is the smaller of its cheapest pod's work per unit of size (evicted pods that leave the
gang healthy cost themselves) and its whole held work over ``cap_j`` (breaking the gang costs all it
holds, wherever its pods run). The fractional knapsack over these rates is a lower bound of any plan's
work; ignoring node fit, queue shares and validators only lowers it.

Plans of different domains are ranked first by whether they break a healthy gang (those that do
not first), then by the action's rank of their highest victim (``gangpreempt``: the victim priority;
``gangreclaim``: none), then by work with a 5 % tie band (:data:`~corral.actions.bundles.ROI_THRESHOLD`),
then by the search-space order. A plan that breaks no healthy gang takes from each healthy victim job
at most its surplus pods (all the pods of a job broken already), each at its own cost: the same
knapsack over those amounts bounds such plans (``safe``; inf: the domain cannot be entered without
breaking a gang). A later domain can only beat the best plan ``B`` if ``B`` breaks a gang and the
domain may be entered without; or, among plans that break a gang as ``B`` does or not, if it can cover
``D`` with victims ranked below ``B``'s, or if, with victims ranked at most as ``B``'s, its bound is
below ``(1 − 0.05) × cost(B)``.

For a gang of identical pods the bound is also taken node by node: a victim job's cost, spread over its
pods at its rate, splits by node, and each gang pod needs a node where what is free plus what is
evicted there holds it (:func:`_node_bound`). This sees what the total misses — cheap victims scattered
one per node free nothing an 8-GPU pod can use.
"""

from __future__ import annotations

import heapq
from typing import Callable, Iterable

import numpy as np

from corral.actions.bundles import ROI_THRESHOLD, WorkCost
from corral.actions.packing import Packer
from corral.model import Job, Task
from corral.model.resources import EPS

__all__ = ["DomainBound", "deficit"]


def deficit(need: np.ndarray, free: np.ndarray, costs: WorkCost) -> float:
    """``D``: what the victims must free at least, in units of the need (``free``: what the domain has
    free and being released, per resource)."""
    return float(np.maximum(need - free, 0.0) @ costs.inv)


def _bound(items: list[tuple[float, float, str]], need: float, caps: dict[str, float] | None = None) -> float:
    """Fractional knapsack: the least cost of ``need`` units from ``(rate, capacity, group)`` items, at
    most ``caps[group]`` units from one group (a victim queue's reclaimable amount); inf when they
    cannot cover it. Cheapest rate first is optimal, also with the group limits."""
    left = dict(caps) if caps else None
    got = cost = 0.0
    for rate, cap, group in sorted(items):
        if left is not None and group in left:
            cap = min(cap, left[group])
            left[group] -= cap
        take = min(cap, need - got)
        cost += rate * take
        got += take
        if got >= need - EPS:
            return cost
    return float("inf")


def _node_bound(pack: Packer, per_node: dict[int, list[tuple[float, float, float]]], col: int,
                keep: Callable[[float], bool]) -> float:
    """The least work with which each of the gang's (identical) pods gets a node, counting only the
    resource ``col``: a pod of victim job ``j`` costs at least ``rate_j × size`` (the argument above),
    which splits the cost node by node. ``per_node``: for each domain node, its victims' ``(cost per
    unit of col, amount of col, rank)``, cheapest first; only those whose rank satisfies ``keep`` count.
    On each node the cheapest are taken first (fractionally), so the cost of the k-th gang pod there
    only grows with k, and the gang's pods go to the cheapest of these marginal costs over all nodes.
    inf when the nodes cannot hold the gang."""
    g = float(pack.groups[0][0][col])
    n = pack.n
    marginal: list[float] = []
    for i in np.flatnonzero(pack.mask):
        f = float(pack.base[i, col])
        k = min(int((f + EPS) // g), n)
        marginal.extend([0.0] * k)
        items = [(u, a) for u, a, r in per_node.get(int(i), ()) if keep(r)]
        cost = prev = freed = 0.0
        j = 0
        left = items[0][1] if items else 0.0
        while k < n:
            k += 1
            want = k * g - f - EPS
            while freed < want and j < len(items):
                take = min(left, want - freed)
                cost += items[j][0] * take
                freed += take
                left -= take
                if left <= EPS:
                    j += 1
                    left = items[j][1] if j < len(items) else 0.0
            if freed < want:
                break
            marginal.append(cost - prev)
            prev = cost
    if len(marginal) < n:
        return float("inf")
    return float(sum(heapq.nsmallest(n, marginal)))


class DomainBound:
    """The lower bound of one domain's plans. ``by_job``: its candidate victims by job; ``need_units``:
    the deficit ``D``; ``rank``: the action's rank of a victim job; ``pack`` (the gang's pods over the
    domain's nodes): a gang of identical pods is also bounded node by node (:func:`_node_bound`, per
    resource of the need); ``caps``: the most each victim queue may give up, in units of the need
    (gangreclaim's queue rule)."""

    def __init__(self, by_job: Iterable[tuple[Job, list[Task]]], costs: WorkCost, need_units: float,
                 rank: Callable[[Job], float], pack: Packer | None = None,
                 caps: dict[str, float] | None = None) -> None:
        self.need_units, self.pack, self.caps = need_units, pack, caps
        self.jobs: list[tuple[float, float, float, str]] = []          # rank, rate, size in all, queue
        self.safe_jobs: list[tuple[float, float, float, str]] = []     # the same, breaking no gang
        self._pods: list[tuple[float, float, list[Task], list[float]]] = []   # rank, rate, pods, sizes
        self.cols = [] if pack is None or not pack.single else [int(c) for c in np.flatnonzero(pack.cols & costs.dims)]
        self._per_node: dict[int, dict[int, list[tuple[float, float, float]]]] | None = None
        for job, pods in by_job:
            sizes = [costs.size(p) for p in pods]
            cap = sum(sizes)
            if cap <= EPS:
                continue
            pod_rate = min(costs.pod(p) / s for p, s in zip(pods, sizes) if s > EPS)
            rate = min(pod_rate, costs.held(job) / cap)
            self.jobs.append((rank(job), rate, cap, job.queue))
            self._pods.append((rank(job), rate, pods, sizes))
            healthy, ready, _, _ = costs.state(job)
            # without breaking it: at most its surplus pods (all of a broken job's), each costing itself
            spare = sum(sorted(sizes, reverse=True)[: max(ready - job.min_member, 0)]) if healthy else cap
            if spare > EPS:
                self.safe_jobs.append((rank(job), pod_rate, spare, job.queue))
        self._nodes: dict[tuple[int, str, float], float] = {}     # node-by-node bounds, by column and ranks
        self.all = self.value()                          # the bound over every candidate
        self.safe = self.value(safe=True)                # ... of the plans that break no healthy gang

    def per_node(self) -> dict[int, dict[int, list[tuple[float, float, float]]]]:
        """Per requested resource: each domain node's victims as (cost per unit, amount, rank), cheapest
        first (built once, when the node-by-node bound is first needed)."""
        if self._per_node is None:
            pack = self.pack
            self._per_node = {c: {} for c in self.cols}
            for col, nodes in self._per_node.items():
                for r, rate, pods, sizes in self._pods:
                    for p, s in zip(pods, sizes):
                        i = pack.pos.get(p.node)
                        a = float(p.request[col])
                        if i is not None and a > EPS and pack.mask[i]:
                            nodes.setdefault(i, []).append((rate * s / a, a, r))
                for items in nodes.values():
                    items.sort()
        return self._per_node

    def value(self, below: float = float("inf"), inclusive: bool = True, safe: bool = False) -> float:
        """The least work of a plan whose victims' ranks are all below ``below`` (or equal to it, with
        ``inclusive``) — and, with ``safe``, that breaks no healthy gang; inf: no such plan."""
        def keep(r: float) -> bool:
            return r <= below if inclusive else r < below
        jobs = self.safe_jobs if safe else self.jobs
        lb = 0.0 if self.need_units <= EPS else \
            _bound([(rate, cap, q) for r, rate, cap, q in jobs if keep(r)], self.need_units, self.caps)
        for col in self.cols:
            if lb == float("inf"):
                break
            # (the node-by-node bound counts every victim at its rate, breaking its gang or not)
            key = (col, "le" if inclusive else "lt", below)
            nb = self._nodes.get(key)
            if nb is None:
                nb = self._nodes[key] = _node_bound(self.pack, self.per_node()[col], col, keep)
            lb = max(lb, nb)
        return lb

    def could_beat(self, best_rank: float, best_cost: float, best_breaks: bool = False, earlier: bool = False) -> bool:
        """Could a plan of this domain beat a plan of rank ``best_rank`` and work ``best_cost`` that
        breaks a healthy gang or not (``best_breaks``)? ``earlier``: this domain comes first in the
        search space, so it wins a tie (work within 5 %)."""
        if best_breaks and self.safe < float("inf"):
            return True                                  # may win by breaking no gang
        # to tie on that, a plan must break no gang either (if the best breaks one, so do all of ours)
        safe = not best_breaks
        if self.value(best_rank, False, safe) < float("inf"):
            return True                                  # may win on the rank of its highest victim
        limit = best_cost / (1.0 - ROI_THRESHOLD) if earlier else best_cost * (1.0 - ROI_THRESHOLD)
        jobs = self.safe_jobs if safe else self.jobs
        lb = (self.safe if safe else self.all) if all(r <= best_rank for r, *_ in jobs) else \
            self.value(best_rank, True, safe)
        return lb <= limit if earlier else lb < limit

