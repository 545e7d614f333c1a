"""The queue bookkeeping shared by ``proportion`` and ``capacity``: per queue, what it holds (kept
current by allocate/deallocate events, summed up the queue tree), what it deserves, its capability and
guarantee, and the minResources of its admitted jobs that have not started (Volcano's ``inqueue``).

Only the columns that are shared resources take part (the ``pods`` count and resources no node offers
are left out), so an unset dimension never makes a queue look full.

Reclaim's queue rule (SPEC.md §3.2; Volcano ``plugins/proportion`` and ``plugins/capacity``
``ReclaimableFn``): a victim is allowed while its queue, counting the victims allowed before it, still
holds more than it deserves in some resource (``!allocated.LessEqual(deserved)``), so the pod that
crosses the line is allowed and whole pods can give a share back. What a queue is compared with is its
*reclaim line* (:meth:`QueuePlugin._reclaim_line`): proportion's deserved share; capacity's deserved in
the resources the queue states (a resource it leaves out — a KAI quota of -1 — is unlimited, as Volcano
treats a scalar resource missing from deserved). Capacity also keeps each queue's guarantee covered
after the eviction, as Volcano does. In a queue tree the rule is checked on the victim's leaf queue and,
with capacity's ``ancestorReclaimLevel`` N, on its N nearest ancestors that lie *below the lowest common
ancestor* with the reclaimer's leaf queue (a reclaim inside that ancestor moves resources between its
children and leaves its own total, and everything above it, unchanged); without it the leaf only, as in
Volcano (proportion: always the leaf only).

The rule is cumulative, so it is asked about a concrete list of victims in the order they would go: the
gang eviction actions list their candidates with ``Session.listing_victims`` set, and the rule then
allows every candidate (UnifiedEvictable), to be asked again over each plan's victims.

Admission by capability (JobEnqueueable) compares only the resources the job's minResources asks for,
as Volcano's ``LessEqualWithDimensionAndResourcesName`` does: a queue over its capability in a resource
the job does not request does not block it.
"""

from __future__ import annotations

import numpy as np

from corral.framework.extension import (
    AllocatableReason,
    EnqueueReason,
    EventHandler,
    JobEnqueued,
    Preemptive,
    QueueAmounts,
    QueueLimit,
    QueueOrder,
    QueueReport,
    QueueRule,
    QueueShare,
    Reclaimable,
    SimulateAddTask,
    SimulateAllocatable,
    SimulateRemoveTask,
    UnifiedEvictable,
)
from corral.framework.plugin import Plugin
from corral.framework.queries import exact_sum
from corral.model import Job, Queue, Task
from corral.model.resources import EPS, PODS

__all__ = ["QueuePlugin"]


class QueuePlugin(
    Plugin,
    QueueOrder,
    Preemptive,
    Reclaimable,
    UnifiedEvictable,
    SimulateAddTask,
    SimulateRemoveTask,
    SimulateAllocatable,
    EventHandler,
    AllocatableReason,
    EnqueueReason,
    JobEnqueued,
    QueueRule,
    QueueAmounts,
    QueueReport,
):
    """Base of proportion and capacity: usage, shares and the victim rule they have in common."""

    #: whether DRA claims count in queue usage and quota (their ``deviceclass/<class>`` columns); only
    #: capacity's ``capacity.DynamicResourceAllocationEnable`` turns it on, as in Volcano 1.15
    counts_claims = False

    def on_session_open(self) -> None:
        cluster = self.session.cluster
        total = cluster.total_allocatable().astype(float)
        self.cols = np.isfinite(total) & (total > 0)
        self.cols[cluster.resources.pos(PODS)] = False
        if not self.counts_claims:  # DRA devices charged as deviceclass/<class> (corral.dra.inventory)
            for i, name in enumerate(cluster.resources.names):
                self.cols[i] &= not name.startswith("deviceclass/")
        self.total = np.where(self.cols, total, 0.0)
        self._pairs: dict[int, list[tuple[int, float]]] = {}  # task id -> its counted requests
        self._col_list: list[int] | None = None  # the columns counted, as ints
        self.queues = cluster.queues
        self._chains: dict[str, list[str]] = {}
        self._capped: dict[str, bool] = {}  # queue -> any capability on its chain
        usage = self.session.queue_usage()
        self.allocated = {name: v * self.cols for name, v in usage.items()}
        for name, q in self.queues.items():  # leaf usage summed into every ancestor
            if q.children:
                continue
            for parent in cluster.queue_chain(name)[1:]:
                self.allocated[parent] = self.allocated[parent] + self.allocated[name]
        self.inqueue = self._admitted_not_started()
        self.deserved = self._compute_deserved()
        self._sides: dict[tuple[str, str], list[str]] = {}  # (victim queue, reclaimer queue) -> checked
        self._lines: dict[str, list[float]] = {}
        self._guards: dict[str, list[float]] = {}

    def _admitted_not_started(self) -> dict[str, np.ndarray]:
        """Per queue (every ancestor included), the minResources of its admitted podgroups that have
        not reached their minimum yet, summed exactly (the same bits in any job order, so the session's
        session can hand over just those podgroups: ``Session.admitted_unstarted``)."""
        cluster = self.session.cluster
        rows: dict[str, list[np.ndarray]] = {name: [] for name in self.queues}
        for job in self.session.admitted_unstarted():
            if job.queue in self.queues:
                for name in cluster.queue_chain(job.queue):
                    rows[name].append(job.min_resources * self.cols)
        width = len(self.total)
        return {
            name: exact_sum(vecs, width) if vecs else np.zeros_like(self.total) for name, vecs in rows.items()
        }

    def _compute_deserved(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _vec(self, v: np.ndarray | None, fill: float) -> np.ndarray:
        if v is None:
            return np.full_like(self.total, fill)
        return np.where(self.cols, v, fill if fill else 0.0)

    def _capability(self, q: Queue) -> np.ndarray:
        return self._vec(q.capability, np.inf)

    def _guarantee(self, q: Queue) -> np.ndarray:
        return self._vec(q.guarantee, 0.0)

    # -- shares ----------------------------------------------------------------------------------
    def _share(self, name: str) -> float:
        """Held over deserved, the largest over the resources the queue deserves (Volcano's
        ``updateShare`` iterates ``deserved.ResourceNames()``, the non-zero ones): a queue that deserves
        only GPUs is not made to look full by the CPU its pods also hold. A queue that deserves nothing
        at all has share 1 once it holds anything (it runs on idle capacity only), else 0."""
        alloc, deserved = self.allocated[name], self.deserved[name]
        dims = self.cols & (deserved > EPS) & np.isfinite(deserved)
        if not dims.any():
            return 1.0 if bool(np.any(alloc[self.cols] > EPS)) else 0.0
        return float((alloc[dims] / deserved[dims]).max())

    def queue_order(self, a: Queue, b: Queue) -> int:
        """The queue's ``spec.priority`` first (higher first), then the smaller share (Volcano's
        proportion and capacity ``QueueOrderFn``)."""
        if a.priority != b.priority:
            return -1 if a.priority > b.priority else 1
        sa, sb = self._share(a.name), self._share(b.name)
        return (sa > sb) - (sa < sb)

    def _charge(self, task: Task, sign: int) -> None:
        job = task.job
        if job is None or job.queue not in self.queues:
            return
        delta = sign * task.request * self.cols
        for name in self._chain(job.queue):
            self.allocated[name] = self.allocated[name] + delta

    def on_allocate(self, task: Task) -> None:
        self._charge(task, +1)

    def on_deallocate(self, task: Task) -> None:
        self._charge(task, -1)

    # -- simulation (seed 003): a dry run moves queue usage without events ----------------------
    def simulate_add_task(self, task: Task, node: int) -> None:
        self._charge(task, +1)

    def simulate_remove_task(self, task: Task, node: int) -> None:
        self._charge(task, -1)

    def simulate_allocatable(self, queue: Queue, task: Task) -> bool:
        return self._within_capability(queue, task.request * self.cols)

    # -- victims ---------------------------------------------------------------------------------
    def unified_evictable(self, preemptor: Task, candidates: list[Task], action: str) -> list[Task] | None:
        """Gang-reclaim: the queue rule of :meth:`reclaimable` over a plan's victims — every candidate
        while the action lists them (``Session.listing_victims``: the rule is cumulative and counts
        only concrete victims, in plan order); gang-preempt: no answer."""
        if not action.endswith("reclaim"):
            return None
        if self.session.listing_victims:
            return list(candidates)
        return self.reclaimable(preemptor, candidates)

    #: capacity keeps a victim queue's guarantee covered (Volcano capacity); proportion does not
    keeps_guarantee = False
    #: ancestors of a victim's leaf queue the victim-side rule checks too (capacity's
    #: ``ancestorReclaimLevel``; proportion: the leaf only)
    ancestor_levels = 0

    def queue_rule_enabled(self) -> bool:
        """Reclaim applies this plugin's Reclaimable whatever tier it sits in (SPEC.md §3.2): always."""
        return True

    def queue_limits(self) -> dict[str, QueueLimit]:
        """Per queue: held less its reclaim line over the shared resources (−inf elsewhere), and held
        less its guarantee where the plugin keeps it (capacity; inf otherwise)."""
        out = {}
        for name, q in self.queues.items():
            held = self.allocated[name]
            above = np.where(self.cols, held - self._reclaim_line(name), -np.inf).tolist()
            keep = (
                np.where(self.cols, held - self._guarantee(q), np.inf)
                if self.keeps_guarantee
                else np.full(len(held), np.inf)
            ).tolist()
            out[name] = QueueLimit(above, keep)
        return out

    def queue_report(self) -> dict[str, QueueShare]:
        """Per queue: what it holds, what it deserves and its share (``corral queues``, the queue
        metrics of ``corral run``)."""
        zero = np.zeros_like(self.total)
        return {
            name: QueueShare(
                self.allocated.get(name, zero),
                self.deserved.get(name),
                self._share(name) if name in self.deserved else None,
            )
            for name in {**self.allocated, **self.deserved}
        }

    def _reclaim_line(self, name: str) -> np.ndarray:
        """What queue ``name`` is compared with: above it in some resource, the queue may give up a pod."""
        return self.deserved[name]

    def _above_line(self, name: str, held: np.ndarray | None = None) -> bool:
        """Does ``name`` hold more than its reclaim line in some shared resource?"""
        held = self.allocated[name] if held is None else held
        return bool(np.any(held[self.cols] > self._reclaim_line(name)[self.cols] + EPS))

    @property
    def reclaim_floor(self) -> dict[str, np.ndarray]:
        """Per queue, the least a reclaim can leave it with now: its guarantee (capacity) or nothing if
        it is above its reclaim line, else all it holds. ``allocated − reclaim_floor`` bounds from
        above what the queue may give up (the planning bound of gangreclaim and the oracle)."""
        out = {}
        for name, q in self.queues.items():
            if self._above_line(name):
                out[name] = self._guarantee(q) if self.keeps_guarantee else np.zeros_like(self.total)
            else:
                out[name] = self.allocated[name].copy()
        return out

    def victim_side(self, victim_queue: str, reclaimer_queue: str | None) -> list[str]:
        """The queues the rule checks: ``victim_queue`` and its :attr:`ancestor_levels` nearest
        ancestors, none at or above the lowest common ancestor with ``reclaimer_queue`` (Volcano
        capacity's ``ancestorReclaimLevel``: 0, the default, checks the leaf only)."""
        key = (victim_queue, reclaimer_queue or "")
        side = self._sides.get(key)
        if side is None:
            mine = set(self._chain(reclaimer_queue)) if reclaimer_queue in self.queues else set()
            side = []
            for name in self._chain(victim_queue)[: 1 + self.ancestor_levels]:
                if name in mine:
                    break
                side.append(name)
            self._sides[key] = side
        return side

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        """Volcano's rule (module docstring): a victim is allowed while every queue on its side of the
        tree (:meth:`victim_side`) still holds more than its reclaim line in some resource, counting the
        candidates allowed before it in the list — and, for capacity, keeps its guarantee after it."""
        rq = reclaimer.job.queue if reclaimer.job is not None else None
        cols = self._cols()
        held: dict[str, list[float]] = {}  # what each queue holds less the victims allowed so far
        out = []
        for t in candidates:
            job = t.job
            if job is None or job.queue not in self.queues:
                continue
            side = self.victim_side(job.queue, rq)
            pairs = self._held_pairs(t)
            if all(self._may_give(name, held, cols, pairs) for name in side):
                for name in side:
                    left = held[name]
                    for c, v in pairs:
                        left[c] -= v
                out.append(t)
        return out

    def _may_give(
        self, name: str, held: dict[str, list[float]], cols: list[int], pairs: list[tuple[int, float]]
    ) -> bool:
        left = held.get(name)
        if left is None:
            left = held[name] = self.allocated[name].tolist()
        line = self._lines.get(name)
        if line is None:
            line = self._lines[name] = self._reclaim_line(name).tolist()
        if not any(left[c] > line[c] + EPS for c in cols):
            return False
        if not self.keeps_guarantee:
            return True
        guard = self._guards.get(name)
        if guard is None:
            guard = self._guards[name] = self._guarantee(self.queues[name]).tolist()
        taken = dict(pairs)
        return all(left[c] - taken.get(c, 0.0) >= guard[c] - EPS for c in cols)

    def _cols(self) -> list[int]:
        if self._col_list is None:
            self._col_list = [int(c) for c in np.flatnonzero(self.cols)]
        return self._col_list

    def _chain(self, queue: str) -> list[str]:
        """``queue`` and its ancestors, leaf first (cached: the tree does not change in a session)."""
        chain = self._chains.get(queue)
        if chain is None:
            chain = self._chains[queue] = self.session.cluster.queue_chain(queue)
        return chain

    def _held_pairs(self, task: Task) -> list[tuple[int, float]]:
        """(column, amount) of each resource this plugin counts that ``task`` requests."""
        pairs = self._pairs.get(id(task))
        if pairs is None:
            req = task.request.tolist()
            pairs = self._pairs[id(task)] = [(c, req[c]) for c in self._cols() if req[c] > 0]
        return pairs

    def preemptive(self, queue: Queue, task: Task) -> bool:
        """May ``queue`` reclaim for ``task``: only while it stays within what it deserves (its reclaim
        line) in every resource the task asks for (Volcano's ``LessEqualWithDimension``)."""
        if queue.name not in self.queues:
            return False
        future = self.allocated[queue.name] + task.request * self.cols
        dims = task.request * self.cols > 0
        return bool(np.all(future[dims] <= self._reclaim_line(queue.name)[dims] + EPS))

    def _within_capability(self, queue: Queue, extra: np.ndarray) -> bool:
        """Would every queue on the chain stay within its capability after taking ``extra``?"""
        capped = self._capped.get(queue.name)
        if capped is None:
            capped = self._capped[queue.name] = any(
                self.queues[n].capability is not None for n in self._chain(queue.name)
            )
        if not capped:  # no capability anywhere on the chain
            return True
        dims = extra * self.cols > 0
        for name in self._chain(queue.name):
            cap = self._capability(self.queues[name])
            if np.any(self.allocated[name][dims] + extra[dims] > cap[dims] + EPS):
                return False
        return True

    def allocatable_refusal(self, queue: Queue, task: Task) -> str | None:
        """Why Allocatable refuses ``task`` (None when it does not): the first queue on the chain whose
        capability the pod would exceed, and the resources short."""
        extra = task.request * self.cols
        dims = extra > 0
        names = self.session.cluster.resources.names
        for name in self._chain(queue.name):
            cap = self._capability(self.queues[name])
            over = dims & (self.allocated[name] + extra > cap + EPS)
            if over.any():
                short = ", ".join(names[i] for i in np.flatnonzero(over))
                where = "" if name == queue.name else f" in the capability of its ancestor {name!r}"
                return (
                    f"queue {queue.name!r} would exceed its capability with pod {task.name} "
                    f"(short of {short}{where})"
                )
        return None

    def _enqueue_fits(self, job: Job) -> bool:
        """minResources + held + admitted-not-started within capability along the chain, in the
        resources minResources asks for (Volcano's ``LessEqualWithDimensionAndResourcesName``)."""
        queue = self.queues.get(job.queue)
        if queue is None or job.min_resources is None:
            return True
        need = job.min_resources * self.cols
        dims = need > 0
        for name in self.session.cluster.queue_chain(job.queue):
            cap = self._capability(self.queues[name])
            if np.any((need + self.allocated[name] + self.inqueue[name] > cap + EPS) & dims):
                return False
        return True

    def enqueue_refusal(self, job: Job) -> str | None:
        """Why JobEnqueueable rejects ``job``: the first queue on its chain whose capability cannot hold
        its minResources, and the resources that are short (None when it fits)."""
        queue = self.queues.get(job.queue)
        if queue is None or job.min_resources is None:
            return None
        res = self.session.cluster.resources
        need = job.min_resources * self.cols
        for name in self.session.cluster.queue_chain(job.queue):
            cap = self._capability(self.queues[name])
            left = cap - self.allocated[name] - self.inqueue[name]
            short = (need > left + EPS) & (need > 0)
            if short.any():
                names = ", ".join(n for i, n in enumerate(res.names) if short[i])
                where = "" if name == job.queue else f" of its ancestor {name!r}"
                return (
                    f"not admitted: queue {job.queue!r} capability cannot hold minResources "
                    f"({res.describe(need)}); short of {names} in the capability{where} "
                    f"({res.describe(np.where(short, np.maximum(left, 0.0), 0.0))} left)"
                )
        return None

    def on_job_enqueued(self, job: Job) -> None:
        """Count a job just moved to Inqueue by ``enqueue``."""
        if job.min_resources is None:
            return
        for name in self.session.cluster.queue_chain(job.queue):
            self.inqueue[name] = self.inqueue[name] + job.min_resources * self.cols
