"""``capacity`` (Volcano ``plugins/capacity`` with hierarchical queues; KAI queues map onto it).

Every queue states what it deserves (``deserved``; KAI ``quota``), what it is guaranteed and its
capability (KAI ``limit``); parents bound their children. A queue without ``deserved`` deserves its
guarantee (zero when unset): it runs on idle capacity but cannot reclaim. Allocatable and
JobEnqueueable check the capability of the queue and of every ancestor; QueueOrder serves the smallest
share first; Preemptive lets a queue reclaim only while it stays within what it deserves; Reclaimable
follows Volcano's rule — a victim while its queue, counting the victims before it, still holds more
than it deserves in a resource it states, and keeps its guarantee — on the queues below the lowest
common ancestor with the reclaimer (:mod:`corral.plugins.queues`).

Arguments: ``capacity.DynamicResourceAllocationEnable`` and ``capacity.DRAConsumableCapacityEnable``
(Volcano: charge the pods' DRA ResourceClaims against the queues' ``deviceclass/<class>`` and
``<dim>.deviceclass/<class>`` quota keys) are accepted and change nothing: corral does not read DRA
objects (ResourceClaims, ResourceClaimTemplates, DeviceClasses) yet, so no pod is charged DRA quota, as
in Volcano for a pod without claims. With either one true, ``corral validate`` names each queue whose
quota has a ``deviceclass/`` key that is therefore not enforced (:mod:`corral.framework.notices`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corral.framework.config import arg
from corral.framework.extension import Vote
from corral.model import Job, Queue, Task
from corral.plugins.queues import QueuePlugin

__all__ = ["CapacityPlugin"]


_DRA = "accepted; corral does not read DRA ResourceClaims yet, so no pod is charged DRA quota"


@dataclass(frozen=True)
class CapacityArgs:
    dra: bool = arg("capacity.DynamicResourceAllocationEnable", False, _DRA)
    dra_consumable: bool = arg("capacity.DRAConsumableCapacityEnable", False, _DRA)


class CapacityPlugin(QueuePlugin):
    name = "capacity"
    Args = CapacityArgs
    keeps_guarantee = True

    def reclaim_line(self, name: str) -> np.ndarray:
        """Deserved in the resources the queue states, unlimited in the others (Volcano capacity's
        ``allocated.LessEqual(deserved, Infinity)``); a queue that states no deserved at all deserves
        its guarantee in every resource."""
        q = self.queues[name]
        if q.deserved is None or q.deserved_set is None:
            return self.deserved[name]
        return np.where(q.deserved_set, self.deserved[name], np.inf)

    def compute_deserved(self) -> dict[str, np.ndarray]:
        out = {}
        for name, q in self.queues.items():
            if q.deserved is not None:
                out[name] = np.where(self.cols, q.deserved, 0.0)
            else:
                out[name] = self.guarantee(q)
        return out

    def allocatable(self, queue: Queue, task: Task) -> bool:
        return self.within_capability(queue, task.request * self.cols)

    def job_enqueueable(self, job: Job) -> Vote:
        if job.queue not in self.queues:
            return Vote.ABSTAIN
        return Vote.PERMIT if self.enqueue_fits(job) else Vote.REJECT
