"""The queue bookkeeping shared by ``proportion`` and ``capacity``: per queue, what it holds (kept
current by allocate/deallocate events, summed up the queue tree), what it deserves, its capability and
guarantee, and the minResources of its admitted jobs that have not started (Volcano's ``inqueue``).

Only the columns that are shared resources take part (the ``pods`` count and resources no node offers
are left out), so an unset dimension never makes a queue look full.

Reclaim floor: a reclaim never takes a victim queue below what it deserves in a *scarce* resource —
one the queues together request more of than the cluster has (pending pods included), so that the
deserved amounts are real shares. In a resource everyone can have all they ask for, proportion's
deserved is just the queue's request (capped by nothing), and protecting it would forbid every
reclaim on a GPU cluster whose pods also ask for CPU; there the floor is the queue's guarantee.
``reclaim_floor`` holds the floor per queue.
"""

from __future__ import annotations

import numpy as np

from corral.framework.plugin import Plugin
from corral.model import Job, PodGroupPhase, Queue, Task
from corral.model.resources import EPS, PODS
from corral.plugins.shares import queue_requests, queue_usage

__all__ = ["QueuePlugin"]


class QueuePlugin(Plugin):
    """Base of proportion and capacity: usage, shares and the victim rule they have in common."""

    def on_session_open(self) -> None:
        cluster = self.session.cluster
        total = cluster.total_allocatable().astype(float)
        self.cols = np.isfinite(total) & (total > 0)
        self.cols[cluster.resources.pos(PODS)] = False
        self.total = np.where(self.cols, total, 0.0)
        self._pairs: dict[int, list[tuple[int, float]]] = {}     # task id -> its counted requests
        self._col_list: list[int] | None = None                   # the columns counted, as ints
        self.queues = cluster.queues
        self._chains: dict[str, list[str]] = {}
        self._capped: dict[str, bool] = {}               # queue -> any capability on its chain
        self.allocated = {name: v * self.cols for name, v in queue_usage(cluster).items()}
        for name, q in self.queues.items():              # leaf usage summed into every ancestor
            if q.children:
                continue
            for parent in cluster.queue_chain(name)[1:]:
                self.allocated[parent] = self.allocated[parent] + self.allocated[name]
        self.inqueue = {name: np.zeros_like(self.total) for name in self.queues}
        for job in cluster.jobs.values():
            if job.phase is PodGroupPhase.INQUEUE and job.queue in self.queues and job.min_resources is not None \
                    and job.ready_count() < job.min_member:
                for name in cluster.queue_chain(job.queue):
                    self.inqueue[name] = self.inqueue[name] + job.min_resources * self.cols
        self.deserved = self.compute_deserved()
        asked = sum(queue_requests(cluster).values(), np.zeros_like(self.total)) * self.cols
        self.scarce = self.cols & (asked > self.total + EPS)
        self.reclaim_floor = {name: np.where(self.scarce, self.deserved[name], self.guarantee(q))
                              for name, q in self.queues.items()}

    def compute_deserved(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def vec(self, v: np.ndarray | None, fill: float) -> np.ndarray:
        if v is None:
            return np.full_like(self.total, fill)
        return np.where(self.cols, v, fill if fill else 0.0)

    def capability(self, q: Queue) -> np.ndarray:
        return self.vec(q.capability, np.inf)

    def guarantee(self, q: Queue) -> np.ndarray:
        return self.vec(q.guarantee, 0.0)

    # -- shares ----------------------------------------------------------------------------------
    def share(self, name: str) -> float:
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
        sa, sb = self.share(a.name), self.share(b.name)
        return (sa > sb) - (sa < sb)

    def _charge(self, task: Task, sign: int) -> None:
        job = task.job
        if job is None or job.queue not in self.queues:
            return
        delta = sign * task.request * self.cols
        for name in self.chain(job.queue):
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
        return self.within_capability(queue, task.request * self.cols)

    # -- victims ---------------------------------------------------------------------------------
    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        """A victim is allowed only while its queue (and every ancestor) stays at or above its reclaim
        floor — what it deserves in the scarce resources, its guarantee in the others — in every
        resource the victim holds, counting the candidates allowed before it in the list (stricter than
        Volcano, which allows the task that crosses the line: a reclaim must never push a queue below
        its deserved share)."""
        # what each queue may still give up, per resource, as plain floats (a per-pod numpy check is
        # most of a gang reclaim's time)
        slack: dict[str, list[float]] = {}
        out = []
        for t in candidates:
            job = t.job
            if job is None or job.queue not in self.queues:
                continue
            chain = self.chain(job.queue)
            pairs = self._held_pairs(t)
            ok = True
            for name in chain:
                left = slack.get(name)
                if left is None:
                    left = slack[name] = (self.allocated[name] - self.reclaim_floor[name]).tolist()
                if any(left[c] - v < -EPS for c, v in pairs):
                    ok = False
                    break
            if ok:
                for name in chain:
                    left = slack[name]
                    for c, v in pairs:
                        left[c] -= v
                out.append(t)
        return out

    def chain(self, queue: str) -> list[str]:
        """``queue`` and its ancestors, leaf first (cached: the tree does not change in a session)."""
        chain = self._chains.get(queue)
        if chain is None:
            chain = self._chains[queue] = self.session.cluster.queue_chain(queue)
        return chain

    def _held_pairs(self, task: Task) -> list[tuple[int, float]]:
        """(column, amount) of each resource this plugin counts that ``task`` requests."""
        pairs = self._pairs.get(id(task))
        if pairs is None:
            if self._col_list is None:
                self._col_list = [int(c) for c in np.flatnonzero(self.cols)]
            req = task.request.tolist()
            pairs = self._pairs[id(task)] = [(c, req[c]) for c in self._col_list if req[c] > 0]
        return pairs

    def preemptive(self, queue: Queue, task: Task) -> bool:
        """May ``queue`` reclaim for ``task``: only while it stays within what it deserves."""
        if queue.name not in self.queues:
            return False
        future = self.allocated[queue.name] + task.request * self.cols
        dims = task.request * self.cols > 0
        return bool(np.all(future[dims] <= self.deserved[queue.name][dims] + EPS))

    def within_capability(self, queue: Queue, extra: np.ndarray) -> bool:
        """Would every queue on the chain stay within its capability after taking ``extra``?"""
        capped = self._capped.get(queue.name)
        if capped is None:
            capped = self._capped[queue.name] = any(self.queues[n].capability is not None
                                                    for n in self.chain(queue.name))
        if not capped:                                     # no capability anywhere on the chain
            return True
        dims = extra * self.cols > 0
        for name in self.chain(queue.name):
            cap = self.capability(self.queues[name])
            if np.any(self.allocated[name][dims] + extra[dims] > cap[dims] + EPS):
                return False
        return True

    def enqueue_fits(self, job: Job) -> bool:
        """minResources + held + admitted-not-started within capability along the chain."""
        queue = self.queues.get(job.queue)
        if queue is None or job.min_resources is None:
            return True
        need = job.min_resources * self.cols
        for name in self.session.cluster.queue_chain(job.queue):
            cap = self.capability(self.queues[name])
            if np.any(need + self.allocated[name] + self.inqueue[name] > cap + EPS):
                return False
        return True

    def on_job_enqueued(self, job: Job) -> None:
        """Count a job just moved to Inqueue by ``enqueue``."""
        if job.min_resources is None:
            return
        for name in self.session.cluster.queue_chain(job.queue):
            self.inqueue[name] = self.inqueue[name] + job.min_resources * self.cols
