"""``capacity`` (Volcano ``plugins/capacity`` with hierarchical queues; KAI queues map onto it).

Every queue states what it deserves (``deserved``; KAI ``quota``), what it is guaranteed and its
capability (KAI ``limit``); parents bound their children. A queue without ``deserved`` deserves its
guarantee (zero when unset): it runs on idle capacity but cannot reclaim. Allocatable and
JobEnqueueable check the capability of the queue and of every ancestor (JobEnqueueable in the resources
minResources asks for); QueueOrder serves the smallest share first.

Preemptive (may the queue reclaim for a pod) is Volcano capacity's ``PreemptiveFn``: after taking the
pod the queue stays within its *real capability* in every resource the pod requests, and within what it
deserves in at least one of them (resources that the queue's use and its deserved both leave at zero
are not counted; a resource ``deserved`` leaves out is deserved 0 here); with ``ancestorReclaimLevel``
N, when the leaf queue is not within deserved, one of its N nearest ancestors (the root aside) that is
within deserved in such a resource lets it reclaim too. The real capability is Volcano's: the parent's
(the cluster's, for a top-level queue) less the guarantees of the queue and its siblings, plus the
queue's own guarantee, capped by its capability.

Reclaimable follows Volcano's rule — a victim while its queue, counting the victims before it, still
holds more than it deserves in a resource it states, and keeps its guarantee — on the victim's leaf
queue and, with ``ancestorReclaimLevel`` N (an integer ≥ 0, default 0: the leaf only), its N nearest
ancestors below the lowest common ancestor with the reclaimer (:mod:`corral.plugins.queues`).

Arguments: ``capacity.DynamicResourceAllocationEnable`` (Volcano 1.15, default false): true charges the
devices of pods' ResourceClaims to queue usage and to the queues' ``deviceclass/<class>`` quota keys
(a claim shared by several pods once; :mod:`corral.dra.inventory`); false leaves them out, as Volcano
does. ``capacity.DRAConsumableCapacityEnable`` (``<dim>.deviceclass/<class>`` keys) is accepted and
changes nothing: corral refuses consumable-capacity claims (:mod:`corral.framework.notices` says so).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corral.framework.config import arg
from corral.framework.extension import Allocatable, JobEnqueueable, Vote
from corral.model import Job, Queue, Task
from corral.model.resources import EPS
from corral.plugins.queues import QueuePlugin

__all__ = ["CapacityArgs", "CapacityPlugin"]

_DRA = "charge the devices of pods' resource claims to queue usage and deviceclass/<class> quota keys"
_DRA_CONSUMABLE = "accepted, no effect: corral refuses consumable-capacity claims"


@dataclass(frozen=True)
class CapacityArgs:
    ancestor_levels: int = arg(
        "ancestorReclaimLevel",
        0,
        "ancestors of a victim's leaf queue (below the lowest common ancestor with the reclaimer) whose "
        "deserved the reclaim queue rule checks too; 0: the leaf only",
        minimum=0,
    )
    dra: bool = arg("capacity.DynamicResourceAllocationEnable", False, _DRA)
    dra_consumable: bool = arg("capacity.DRAConsumableCapacityEnable", False, _DRA_CONSUMABLE)


class CapacityPlugin(QueuePlugin, JobEnqueueable, Allocatable):
    name = "capacity"
    Args = CapacityArgs
    keeps_guarantee = True

    @property
    def ancestor_levels(self) -> int:  # type: ignore[override]
        return int(self.args.ancestor_levels)

    @property
    def counts_claims(self) -> bool:  # type: ignore[override]
        return bool(self.args.dra)

    def on_session_open(self) -> None:
        super().on_session_open()
        self._real: dict[str, np.ndarray] = {}

    def _real_capability(self, name: str) -> np.ndarray:
        """Volcano's ``realCapability``: the parent's real capability (the cluster, for a top-level
        queue) less the guarantees of the queue and its siblings, plus its own guarantee, capped by its
        capability."""
        real = self._real.get(name)
        if real is None:
            q = self.queues[name]
            parent = self.queues.get(q.parent or "")
            if parent is not None:
                above, siblings = self._real_capability(parent.name), parent.children
            else:
                above = self.total
                siblings = [n for n, o in self.queues.items() if not o.parent or o.parent not in self.queues]
            guaranteed = sum((self._guarantee(self.queues[n]) for n in siblings if n in self.queues), 0.0)
            real = np.maximum(above - guaranteed, 0.0) + self._guarantee(q)
            real = self._real[name] = np.minimum(real, self._capability(q))
        return real

    def preemptive(self, queue: Queue, task: Task) -> bool:
        """Volcano capacity's ``PreemptiveFn`` (module docstring): within the real capability in every
        requested resource, within deserved in at least one (the leaf's, else one of its
        ``ancestorReclaimLevel`` nearest ancestors')."""
        if queue.name not in self.queues:
            return False
        req = task.request * self.cols
        dims = req > 0
        future = self.allocated[queue.name] + req
        if np.any(future[dims] > self._real_capability(queue.name)[dims] + EPS):
            return False
        chain = self._chain(queue.name)
        for name in chain[: 1 + self.ancestor_levels]:
            if name != queue.name and name == "root":
                continue  # Volcano never checks the root queue
            future = self.allocated[name] + req
            deserved = self.deserved[name]
            counted = dims & ~((future < EPS) & (deserved < EPS))
            if np.any(future[counted] <= deserved[counted] + EPS):
                return True
        return False

    def _reclaim_line(self, name: str) -> np.ndarray:
        """Deserved in the resources the queue states, unlimited in the others (Volcano capacity's
        ``allocated.LessEqual(deserved, Infinity)``); a queue that states no deserved at all deserves
        its guarantee in every resource."""
        q = self.queues[name]
        if q.deserved is None or q.deserved_set is None:
            return self.deserved[name]
        return np.where(q.deserved_set, self.deserved[name], np.inf)

    def _compute_deserved(self) -> dict[str, np.ndarray]:
        out = {}
        for name, q in self.queues.items():
            if q.deserved is not None:
                out[name] = np.where(self.cols, q.deserved, 0.0)
            else:
                out[name] = self._guarantee(q)
        return out

    def allocatable(self, queue: Queue, task: Task) -> bool:
        return self._within_capability(queue, task.request * self.cols)

    def job_enqueueable(self, job: Job) -> Vote:
        if job.queue not in self.queues:
            return Vote.ABSTAIN
        return Vote.PERMIT if self._enqueue_fits(job) else Vote.REJECT
