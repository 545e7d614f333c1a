"""``proportion`` (Volcano ``plugins/proportion``): queues share the cluster by weight.

Each leaf queue's deserved share comes from Volcano's water-filling: the remaining capacity is dealt out
in proportion to the weights of the queues not yet satisfied, each capped by its capability and by what
its jobs request, raised to its guarantee; rounds repeat until nothing is left or nothing changes.
QueueOrder serves the smallest share (held / deserved) first; Overused skips a queue holding at least
what it deserves in every resource; Allocatable keeps a queue within its capability; JobEnqueueable
admits a job only if minResources fit under the capability with what is held and already admitted;
Reclaimable and Preemptive follow the shared queue rules (:mod:`corral.plugins.queues`).
"""

from __future__ import annotations

import numpy as np

from corral.framework.extension import Allocatable, JobEnqueueable, Overused, OverusedReason, Vote
from corral.model import Job, Queue, Task
from corral.model.resources import EPS
from corral.plugins.queues import QueuePlugin

__all__ = ["ProportionPlugin"]


class ProportionPlugin(QueuePlugin, JobEnqueueable, Allocatable, Overused, OverusedReason):
    name = "proportion"

    def _compute_deserved(self) -> dict[str, np.ndarray]:
        cluster = self.session.cluster
        leaves = [q for q in sorted(self.queues.values(), key=lambda q: q.name) if not q.children]
        request = {n: v * self.cols for n, v in self.session.queue_requests().items()}
        for name, q in self.queues.items():  # requests of children roll up to a parent
            if not q.children:
                for parent in cluster.queue_chain(name)[1:]:
                    request[parent] = request[parent] + request[name]
        deserved = {q.name: np.zeros_like(self.total) for q in self.queues.values()}
        remaining = self.total.copy()
        meet: set[str] = set()
        for _ in range(len(leaves) + 2):
            active = [q for q in leaves if q.name not in meet]
            weight = sum(max(q.weight, 0.0) for q in active)
            if weight <= 0:
                break
            before = remaining.copy()
            increased = np.zeros_like(remaining)
            for q in active:
                old = deserved[q.name]
                new = old + remaining * (max(q.weight, 0.0) / weight)
                new = np.minimum(new, self._capability(q))
                new = np.minimum(new, request[q.name])
                new = np.maximum(new, self._guarantee(q))
                deserved[q.name] = new
                increased += new - old
                if np.all(request[q.name] <= new + EPS):
                    meet.add(q.name)
            remaining = np.maximum(remaining - increased, 0.0)
            if not remaining.any() or np.allclose(remaining, before):
                break
        for q in leaves:  # parents deserve what their children do
            for parent in cluster.queue_chain(q.name)[1:]:
                deserved[parent] = deserved[parent] + deserved[q.name]
        return deserved

    def overused(self, queue: Queue) -> bool:
        if queue.name not in self.queues:
            return False
        alloc, des = self.allocated[queue.name], self.deserved[queue.name]
        return bool(np.all(des[self.cols] <= alloc[self.cols] + EPS))

    def overused_reason(self, queue: Queue, task: Task) -> str | None:
        """Why Overused holds ``task`` back; None when the queue deserves all the cluster has of every
        resource the pod asks for (one queue, or one that alone asks for a resource): then its share is
        not the cause, the full nodes are, and the action says so."""
        dims = task.request * self.cols > 0
        des = self.deserved.get(queue.name)
        if des is not None and dims.any() and bool(np.all(des[dims] >= self.total[dims] - EPS)):
            return None
        return f"queue {queue.name!r} already holds its deserved share"

    def allocatable(self, queue: Queue, task: Task) -> bool:
        return self._within_capability(queue, task.request * self.cols)

    def job_enqueueable(self, job: Job) -> Vote:
        queue = self.queues.get(job.queue)
        if queue is None:
            return Vote.ABSTAIN
        if queue.capability is None and not any(
            self.queues[n].capability is not None for n in self.session.cluster.queue_chain(job.queue)
        ):
            return Vote.PERMIT
        return Vote.PERMIT if self._enqueue_fits(job) else Vote.REJECT
