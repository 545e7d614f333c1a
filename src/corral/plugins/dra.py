"""``dra``: Dynamic Resource Allocation — a pod goes only to a node where the devices its claims ask for
can be allocated, and each placement takes concrete devices (kube-scheduler's ``DynamicResources``
plugin, ``pkg/scheduler/framework/plugins/dynamicresources``, with the structured allocator of
:mod:`corral.dra.allocator`).

Per pod (the claims of ``Cluster.dra``, :mod:`corral.dra.inventory`):

- a claim already allocated (in the snapshot, or to another pod of this cycle) restricts the pod to
  its node ("resourceclaim not available on the node" elsewhere), as kube-scheduler's Filter does for
  allocated claims; a claim shared by several pods is allocated once;
- the claims not yet allocated must all be allocatable together on the node, from devices no other
  claim holds ("cannot allocate all claims" elsewhere). The mask over all nodes is worked out from
  per-node counts of free selected devices (one ``bincount`` per request shape and state), and the full
  search runs only where the counts pass and a pod's claims could interfere (several requests, a
  constraint, ``All``, admin access, a partitionable device: the counts cannot see counter sets).

Books. Devices are held in the scheduler's future view: by claims allocated in the snapshot, and by
claims whose consumers hold a node (allocated, bound, running, or nominated). When a pod starts holding
a node (Statement allocate/pipeline, a reverted eviction) its pending claims are allocated on that node
— on the devices the claim last had there when they are free (a reverted move or eviction restores
them exactly), else by the search. When a pod stops holding (evicted, an allocation discarded) its
claims are freed unless another consumer still holds them: Kubernetes' resourceclaim controller clears
the allocation of a claim no pod is reserved for any more. Claims allocated in the snapshot for pods
corral does not see are never freed. The simulation points of seed 003 do the same on a dry run.

At session close the allocations in force are written to the cluster (``Cluster.dra.allocations``),
so the next cycle starts from them, and every pod bound this cycle reports its claims in the decisions'
``claim_allocations``: claim, pod, node, devices (request, driver, pool, device), the template a claim
was instantiated from — what ``corral run`` writes into the claim's status before the bind
(:mod:`corral.kube.dra_status`).

No arguments. Pods without claims pass every node, so the plugin is part of the default configuration.
"""

from __future__ import annotations

import numpy as np

from corral.dra.allocator import allocate
from corral.dra.inventory import Inventory
from corral.dra.objects import ALL, EXACT, Claim, SubRequest
from corral.dra.records import ClaimAllocation, devices_of
from corral.framework.extension import (
    EventHandler,
    Predicate,
    PredicateReason,
    Resolvable,
    SimulateAddTask,
    SimulatePredicate,
    SimulateRemoveTask,
)
from corral.framework.hints import BaseSigned
from corral.framework.plugin import Plugin
from corral.model import Task

__all__ = ["DraPlugin"]

NOT_ON_NODE = "resourceclaim not available on the node"
CANNOT = "cannot allocate all claims"


def _plain(claim: Claim) -> bool:
    """One request of one device class, ExactCount, no constraint, no admin access."""
    spec = claim.spec
    if len(spec.requests) != 1 or spec.constraints or len(spec.requests[0].alternatives) != 1:
        return False
    sub = spec.requests[0].alternatives[0]
    return sub.mode == EXACT and not sub.admin


class DraPlugin(
    Plugin,
    Predicate,
    PredicateReason,
    Resolvable,
    SimulateAddTask,
    SimulateRemoveTask,
    SimulatePredicate,
    EventHandler,
    BaseSigned,
):
    """Device allocation for pods with ResourceClaims (kube-scheduler's DynamicResources). Its answers
    depend on the pod's claims (``Task.klass.claims``, which it signs) and the device books (the nodes'
    state) (:class:`~corral.framework.hints.BaseSigned`)."""

    name = "dra"
    signs = ("claims",)

    def on_session_open(self) -> None:
        cluster = self.session.cluster
        self.inv: Inventory | None = getattr(cluster, "dra", None)
        self.n = n = len(cluster.nodes)
        self._everywhere = np.ones(n, dtype=bool)
        self.held: dict[str, tuple[int, tuple[tuple[str, int], ...]]] = {}
        self.memory: dict[str, dict[int, tuple[tuple[str, int], ...]]] = {}
        self._counts: dict[SubRequest, np.ndarray] = {}  # free selected devices per node, kept current
        self._all: dict[SubRequest, np.ndarray] = {}  # selected devices per node
        self._masks: dict[SubRequest, np.ndarray] = {}
        self._node_devs: dict[int, np.ndarray] = {}
        self._admin_of: dict[str, frozenset[str]] = {}
        self._partitioned: dict[SubRequest, bool] = {}
        if self.inv is None:
            self.in_use = np.zeros(0, dtype=bool)
            self.counters_used = np.zeros(0, dtype=np.int64)
            return
        inv = self.inv
        self.in_use = np.zeros(len(inv.dev_id), dtype=bool)
        self.counters_used = np.zeros(len(inv.counter_cap), dtype=np.int64)
        for key, (row, devs) in inv.allocations.items():
            if key in inv.pinned or any(self._holder(u, None) >= 0 for u in inv.consumers.get(key, ())):
                self._hold(key, row, devs)

    def on_session_close(self) -> None:
        inv = self.inv
        if inv is None:
            return
        inv.allocations = dict(self.held)
        bound = {b.pod: b for b in self.session.decisions.binds}
        if not bound:
            return
        out = self.session.decisions.claim_allocations
        for task_key, b in bound.items():
            task = self._task_by_key(task_key)
            if task is None:
                continue
            for ref in inv.pod_claims.get(task.uid, ()):
                got = self.held.get(ref.claim)
                if got is None:
                    continue
                claim = inv.claims[ref.claim]
                out.append(
                    ClaimAllocation(
                        claim=ref.claim,
                        pod=task_key,
                        node=b.node,
                        devices=devices_of(inv, got[1]),
                        template=claim.template,
                        cycle=b.cycle,
                    )
                )

    # -- helpers -------------------------------------------------------------------------------
    def _task_by_key(self, key: str) -> Task | None:
        if not hasattr(self, "_by_key"):
            self._by_key = {t.key: t for t in self.session.cluster.tasks.values()}
        return self._by_key.get(key)

    def _holder(self, uid: str, other_than: Task | None) -> int:
        t = self.session.cluster.tasks.get(uid)
        if t is None or t is other_than:
            return -1
        return t.future_row

    def _claims(self, task: Task) -> list[Claim]:
        inv = self.inv
        if inv is None:
            return []
        refs = inv.pod_claims.get(task.uid)
        return [inv.claims[r.claim] for r in refs] if refs else []

    def _hold(self, key: str, row: int, devs: tuple[tuple[str, int], ...]) -> None:
        self.held[key] = (row, devs)
        admin = self._admin(key)
        for request, d in devs:
            if request not in admin:  # admin access takes a device without making it in use
                self._mark(d, True)
        self.memory.setdefault(key, {})[row] = devs

    def _admin(self, key: str) -> frozenset[str]:
        """The request names of claim ``key`` with admin access."""
        got = self._admin_of.get(key)
        if got is None:
            assert self.inv is not None
            claim = self.inv.claims[key]
            got = self._admin_of[key] = frozenset(
                s.name for r in claim.spec.requests for s in r.alternatives if s.admin
            )
        return got

    def _free(self, key: str) -> None:
        got = self.held.pop(key, None)
        if got is None:
            return
        admin = self._admin(key)
        for request, d in got[1]:
            if request not in admin:  # a device is never given twice: no other claim holds it
                self._mark(d, False)

    def _take(self, task: Task, row: int) -> None:
        """Allocate ``task``'s pending claims on node ``row`` (the devices they last had there first)."""
        inv = self.inv
        if inv is None or row < 0:
            return
        pending = [c for c in self._claims(task) if c.key not in self.held]
        if not pending:
            return
        remembered = [self.memory.get(c.key, {}).get(row) for c in pending]
        if all(m is not None and not any(self.in_use[d] for _, d in m) for m in remembered) and self._fit(
            [(c.key, m) for c, m in zip(pending, remembered, strict=True)]
        ):
            for c, m in zip(pending, remembered, strict=True):
                assert m is not None
                self._hold(c.key, row, m)
            return
        if (
            len(pending) == 1
            and _plain(pending[0])
            and not self._partitions(pending[0].spec.requests[0].alternatives[0])
        ):
            devs = self._first_fit(pending[0], row)
            if devs is not None:
                self._hold(pending[0].key, row, devs)
            return
        got = allocate(inv, row, pending, self.in_use, self.counters_used)
        for c in pending:
            devs = got.claims.get(c.key)
            if devs is not None:
                self._hold(c.key, row, devs)

    def _fit(self, held: list[tuple[str, tuple[tuple[str, int], ...] | None]]) -> bool:
        """Whether the devices of ``held`` (claim key, remembered devices) fit the counter sets now."""
        assert self.inv is not None
        if not len(self.inv.counter_cap):
            return True
        devs = [d for key, m in held for request, d in (m or ()) if request not in self._admin(key)]
        return self.inv.counters_fit(devs, self.counters_used)

    def _partitions(self, sub: SubRequest) -> bool:
        """Whether ``sub`` selects a partitionable device (whose counters the counts cannot follow)."""
        got = self._partitioned.get(sub)
        if got is None:
            assert self.inv is not None
            mask = self._selected(sub)
            got = self._partitioned[sub] = bool(len(self.inv.counter_cap)) and any(
                self.inv.dev_counters[d] for d in np.flatnonzero(mask).tolist()
            )
        return got

    def _give_back(self, task: Task) -> None:
        inv = self.inv
        if inv is None:
            return
        for c in self._claims(task):
            if c.key not in self.held or c.key in inv.pinned:
                continue
            if any(self._holder(u, task) >= 0 for u in inv.consumers.get(c.key, ())):
                continue  # another consumer still uses it
            self._free(c.key)

    # -- events --------------------------------------------------------------------------------
    def on_allocate(self, task: Task) -> None:
        self._take(task, task.future_row)

    def on_deallocate(self, task: Task) -> None:
        if task.future_row < 0:
            self._give_back(task)

    # -- placement -----------------------------------------------------------------------------
    def _mark(self, d: int, used: bool) -> None:
        """Device ``d`` taken or given back: the free counts of every request shape follow it."""
        self.in_use[d] = used
        assert self.inv is not None
        for slot, milli in self.inv.dev_counters[d]:
            self.counters_used[slot] += milli if used else -milli
        node = int(self.inv.dev_node[d])
        step = -1 if used else 1
        for sub, counts in self._counts.items():
            if self._selected(sub)[d]:
                counts[node] += step

    def _selected(self, sub: SubRequest) -> np.ndarray:
        got = self._masks.get(sub)
        if got is None:
            assert self.inv is not None
            got = self._masks[sub] = self.inv.match(sub)[0]
        return got

    def _free_counts(self, sub: SubRequest, use_state: bool) -> np.ndarray:
        """Per node, the devices ``sub`` selects that are free (all of them without ``use_state``, or for
        admin access): kept up to date device by device (:meth:`_mark`)."""
        assert self.inv is not None
        mask = self._selected(sub)
        if not use_state or sub.admin:
            got = self._all.get(sub)
            if got is None:
                got = self._all[sub] = np.bincount(self.inv.dev_node[mask], minlength=self.n)
            return got
        got = self._counts.get(sub)
        if got is None:
            got = self._counts[sub] = np.bincount(self.inv.dev_node[mask & ~self.in_use], minlength=self.n)
        return got

    def _first_fit(self, claim: Claim, row: int) -> tuple[tuple[str, int], ...] | None:
        """The allocator's answer for a claim of one plain request (one device class, ExactCount, no
        constraint, no admin access): the first free selected devices of the node in allocation order
        — what its search finds first — without the search."""
        assert self.inv is not None
        sub = claim.spec.requests[0].alternatives[0]
        devs = self._node_devs.get(row)
        if devs is None:
            devs = self._node_devs[row] = np.asarray(self.inv.node_devices[row], dtype=np.int64)
        free = devs[self._selected(sub)[devs] & ~self.in_use[devs]]
        if len(free) < sub.count:
            return None
        return tuple((sub.name, d) for d in free[: sub.count].tolist())

    def _mask(self, task: Task, use_state: bool = True) -> tuple[np.ndarray, str]:
        claims = self._claims(task)
        if not claims:
            return self._everywhere, ""
        assert self.inv is not None
        mask = self._everywhere.copy()
        why = ""
        pending = []
        for c in claims:
            got = self.held.get(c.key)
            if got is not None:
                row = got[0]
                only = np.zeros(self.n, dtype=bool)
                if row >= 0:
                    only[row] = True
                mask &= only
                why = why or NOT_ON_NODE
            else:
                pending.append(c)
        if not pending:
            return mask, why
        complex_ = sum(len(c.spec.requests) for c in pending) > 1
        for c in pending:
            complex_ = complex_ or bool(c.spec.constraints)
            for r in c.spec.requests:
                ok = np.zeros(self.n, dtype=bool)
                for sub in r.alternatives:
                    complex_ = complex_ or sub.mode == ALL or sub.admin or self._partitions(sub)
                    need = sub.count if sub.mode == EXACT else 1
                    ok |= self._free_counts(sub, use_state) >= need
                mask &= ok
        if complex_ and use_state:
            for node in np.flatnonzero(mask).tolist():
                if not allocate(self.inv, node, pending, self.in_use, self.counters_used).claims:
                    mask[node] = False
        return mask, why or CANNOT

    def predicate(self, task: Task) -> np.ndarray:
        return self._mask(task)[0]

    def resolvable(self, task: Task) -> np.ndarray:
        """Nodes where ``task``'s claims could be allocated once pods are evicted (the preempt pre-filter):
        the selected devices of each request counted whether in use or not."""
        if self.inv is None:
            return self._everywhere
        return self._mask(task, use_state=False)[0]

    def explain(self, task: Task) -> list[tuple[np.ndarray, str]]:
        if self.inv is None or not self._claims(task):
            return []
        mask, why = self._mask(task)
        detail = self._detail(task)
        return [(~mask, f"{why}{detail}")]

    def _detail(self, task: Task) -> str:
        """What no node of the cluster has: a request no device is selected for (or a CEL error)."""
        assert self.inv is not None
        for c in self._claims(task):
            for r in c.spec.requests:
                masks = [self.inv.match(s) for s in r.alternatives]
                if not any(m.any() for m, _ in masks):
                    err = next((e for _, e in masks if e), "")
                    what = (
                        err or f"no device matches the selectors of class {r.alternatives[0].device_class!r}"
                    )
                    return f" (claim {c.key}, request {r.name}: {what})"
        return ""

    # -- simulation (seed 003) -----------------------------------------------------------------
    def simulate_remove_task(self, task: Task, node: int) -> None:
        self._give_back_sim(task)

    def _give_back_sim(self, task: Task) -> None:
        inv = self.inv
        if inv is None:
            return
        for c in self._claims(task):
            if c.key not in self.held or c.key in inv.pinned:
                continue
            others = [u for u in inv.consumers.get(c.key, ()) if u != task.uid]
            if any(u not in self._removed and self._holder(u, task) >= 0 for u in others):
                continue
            self._free(c.key)
        self._removed.add(task.uid)

    def simulate_add_task(self, task: Task, node: int) -> None:
        self._removed.discard(task.uid)
        self._take(task, node)

    def simulate_predicate(self, task: Task, node: int) -> bool:
        if self.inv is None or not self._claims(task):
            return True
        for c in self._claims(task):
            got = self.held.get(c.key)
            if got is not None and got[0] != node:
                return False
        pending = [c for c in self._claims(task) if c.key not in self.held]
        return not pending or bool(allocate(self.inv, node, pending, self.in_use, self.counters_used).claims)

    @property
    def _removed(self) -> set[str]:
        got: set[str] | None = self.__dict__.get("_removed_set")
        if got is None:
            got = self.__dict__["_removed_set"] = set()
        return got
