"""A cluster to run workloads on (:mod:`corral.sim.clusters` makes one from a generator spec, a
machine list or a snapshot), before the workload's queues are known."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from corral.model import Cluster, Queue
from corral.model.quantity import MILLI
from corral.model.resources import GPU

__all__ = ["ClusterTemplate"]


@dataclass
class ClusterTemplate:
    """A cluster to run workloads on, before its queues are known. ``explicit_queues``: the source
    lists its queues, so a job naming another queue is an error; otherwise :meth:`instantiate` creates
    one queue per name the workload uses."""

    cluster: Cluster
    explicit_queues: bool
    description: str
    queue_weights: Mapping[str, float] = field(default_factory=dict)
    default_queue: str | None = None  # where jobs of queues the cluster does not list run

    def instantiate(self, queue_names: Iterable[str] = ()) -> Cluster:
        """A fresh copy (the engine mutates the cluster it runs on) with the workload's queues added
        when the template does not list its own."""
        cluster = copy.deepcopy(self.cluster)
        if not self.explicit_queues:
            for name in sorted(set(queue_names)):
                if name not in cluster.queues:
                    cluster.queues[name] = Queue(
                        name=name, weight=float(self.queue_weights.get(name, 1.0)), source="implicit"
                    )
        return cluster

    def gpus_per_node(self) -> int:
        """The largest GPU count of a node (how the Philly loader splits large jobs into pods)."""
        pos = self.cluster.resources.get(GPU)
        if pos is None or not len(self.cluster.nodes):
            return 8
        return max(1, int(self.cluster.nodes.allocatable[:, pos].max() // MILLI))
