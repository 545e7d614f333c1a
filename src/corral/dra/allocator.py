"""Allocate devices on one node for the pending claims of one pod, as kube-scheduler's structured
allocator does (``k8s.io/dynamic-resource-allocation/structured``, the stable allocator of
resource.k8s.io/v1).

The search is the allocator's: claims in the pod's order, each claim's requests in order, each request's
devices one after the other; for every required device the node's devices are tried in allocation
order (:mod:`corral.dra.inventory`), skipping devices in use (unless the request has ``adminAccess``:
then only devices this claim already takes are skipped), devices the class and request selectors do not
select, and devices that break a ``matchAttribute`` constraint; a dead end backtracks to the previous
choice. The first complete solution wins. ``allocationMode: All`` takes every selected device of the
node and fails if one is in use or the node has an incomplete or invalid pool (or selects none). A
``firstAvailable`` request tries its sub-requests in order and keeps the first that leads to a solution;
its results are named ``request/sub-request``. A claim may hold at most 32 devices.

A partitionable device (one that consumes counters, :mod:`corral.dra.inventory`) is also skipped when
taking it would over-commit a counter set, counting what the devices in use and the devices this search
has taken consume (``checkAvailableCounters``); backtracking gives its counters back. A device taken with
admin access consumes nothing (it is not in use).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from corral.dra.inventory import Inventory
from corral.dra.objects import ALL, MAX_RESULTS, Claim, SubRequest

__all__ = ["Allocation", "allocate"]

#: a search gives up after this many device choices (kube-scheduler bounds it by the scheduling
#: context's deadline; without one, a pathological claim could try every permutation)
MAX_STEPS = 100_000


@dataclass
class Allocation:
    """The devices chosen per claim key: ``((request name, device index), ...)``; ``reason`` when none."""

    claims: dict[str, tuple[tuple[str, int], ...]]
    reason: str = ""


class _Search:
    def __init__(
        self, inv: Inventory, row: int, claims: Sequence[Claim], in_use: np.ndarray, used: np.ndarray | None
    ) -> None:
        self.inv = inv
        # what the counter slots hold in use (a copy: the search adds and gives back its own devices)
        self.used = (inv.counters_used(in_use) if used is None else used).copy()
        self.row = row
        self.claims = claims
        self.in_use = in_use
        self.devices = inv.node_devices[row]
        self.taking: dict[int, set[int]] = {}  # device -> claim positions taking it now
        self.result: list[list[tuple[str, int]]] = [[] for _ in claims]
        self.constraint_values: list[list[object]] = [[None] * len(c.spec.constraints) for c in claims]
        self.constraint_counts: list[list[int]] = [[0] * len(c.spec.constraints) for c in claims]
        self.steps = 0
        self.reason = ""

    # -- constraints (matchAttribute): every device of the named requests shares the attribute's value
    def _constrained(self, ci: int, sub: SubRequest) -> list[int]:
        base = sub.name.split("/", 1)[0]
        out = []
        for k, c in enumerate(self.claims[ci].spec.constraints):
            if not c.requests or base in c.requests or sub.name in c.requests:
                out.append(k)
        return out

    def _add(self, ci: int, sub: SubRequest, dev: int) -> bool:
        ks = self._constrained(ci, sub)
        spec = self.claims[ci].spec
        for k in ks:
            value = self.inv.attribute(dev, spec.constraints[k].attribute)
            if value is None:
                return False
            if self.constraint_counts[ci][k] and self.constraint_values[ci][k] != value:
                return False
        for k in ks:
            if not self.constraint_counts[ci][k]:
                self.constraint_values[ci][k] = self.inv.attribute(dev, spec.constraints[k].attribute)
            self.constraint_counts[ci][k] += 1
        return True

    def _remove(self, ci: int, sub: SubRequest) -> None:
        for k in self._constrained(ci, sub):
            self.constraint_counts[ci][k] -= 1

    # -- taking one device
    def _usable(self, ci: int, sub: SubRequest, dev: int) -> bool:
        if sub.admin:
            return ci not in self.taking.get(dev, ())
        if self.in_use[dev] or self.taking.get(dev):
            return False
        consumes = self.inv.dev_counters[dev]
        return not consumes or all(self.used[s] + m <= self.inv.counter_cap[s] for s, m in consumes)

    def _count(self, sub: SubRequest, dev: int, sign: int) -> None:
        if not sub.admin:
            for slot, milli in self.inv.dev_counters[dev]:
                self.used[slot] += sign * milli

    def _take(self, ci: int, sub: SubRequest, dev: int) -> bool:
        if not self._usable(ci, sub, dev) or not self._add(ci, sub, dev):
            return False
        self.taking.setdefault(dev, set()).add(ci)
        self.result[ci].append((sub.name, dev))
        self._count(sub, dev, 1)
        return True

    def _untake(self, ci: int, sub: SubRequest, dev: int) -> None:
        self.result[ci].pop()
        self.taking[dev].discard(ci)
        self._remove(ci, sub)
        self._count(sub, dev, -1)

    # -- the recursion: claim ci, request ri, alternative ai, device di of it
    def run(self, ci: int = 0, ri: int = 0) -> bool:
        if ci >= len(self.claims):
            return True
        requests = self.claims[ci].spec.requests
        if ri >= len(requests):
            return self.run(ci + 1, 0)
        for sub in requests[ri].alternatives:
            if self._sub(ci, ri, sub):
                return True
            if self.steps > MAX_STEPS:
                return False
        return False

    def _sub(self, ci: int, ri: int, sub: SubRequest) -> bool:
        mask, error = self.inv.match(sub)
        if error and not self.reason:
            self.reason = error
        candidates = [d for d in self.devices if mask[d]]
        if sub.mode == ALL:
            if self.row in self.inv.node_bad_pool:
                self.reason = self.reason or self.inv.node_bad_pool[self.row]
                return False
            if not candidates or len(self.result[ci]) + len(candidates) > MAX_RESULTS:
                return False
            taken = []
            for d in candidates:
                if not self._take(ci, sub, d):
                    break
                taken.append(d)
            else:
                if self.run(ci, ri + 1):
                    return True
            for d in reversed(taken):
                self._untake(ci, sub, d)
            return False
        if len(self.result[ci]) + sub.count > MAX_RESULTS:
            return False
        return self._pick(ci, ri, sub, candidates, 0, sub.count)

    def _pick(self, ci: int, ri: int, sub: SubRequest, candidates: list[int], start: int, left: int) -> bool:
        if left == 0:
            return self.run(ci, ri + 1)
        # devices of one request are interchangeable in order: choosing them in increasing position
        # visits each set once (kube-scheduler's search visits permutations; the first solution found
        # is the same)
        for pos in range(start, len(candidates)):
            self.steps += 1
            if self.steps > MAX_STEPS:
                return False
            d = candidates[pos]
            if not self._take(ci, sub, d):
                continue
            if self._pick(ci, ri, sub, candidates, pos + 1, left - 1):
                return True
            self._untake(ci, sub, d)
        return False


def allocate(
    inv: Inventory,
    row: int,
    claims: Sequence[Claim],
    in_use: np.ndarray,
    counters_used: np.ndarray | None = None,
) -> Allocation:
    """Devices of node ``row`` for every claim of ``claims`` (none allocated yet), or a reason why not.
    ``counters_used``: what the devices in use consume of each counter slot, when the caller keeps it
    (else worked out from ``in_use``)."""
    search = _Search(inv, row, claims, in_use, counters_used)
    if search.run():
        return Allocation({c.key: tuple(search.result[i]) for i, c in enumerate(claims)})
    reason = search.reason or "cannot allocate all claims"
    if search.steps > MAX_STEPS:
        reason = f"gave up after {MAX_STEPS} device choices"
    return Allocation({}, reason)
