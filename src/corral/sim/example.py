"""The built-in example ``corral simulate`` runs with no arguments: a few thousand synthetic jobs on a
64-node GPU cluster (8 GPUs per node, 512 in all) with three weighted queues and a two-tier network
topology (8 leaf switches of 8 nodes, 2 spines of 4 leaves). The load averages about 0.7 of the cluster,
with bursts that build queues, so fairness matters and topology-constrained gangs compete with loose
ones; the whole run takes well under a minute.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.sim.cluster_template import ClusterTemplate
from corral.sim.clusters import ClusterSpec, NodeShape, QueueSpec, from_spec
from corral.sim.jobspec import JobSpec
from corral.sim.synthetic import SyntheticSpec, synthetic

__all__ = ["EXAMPLE_CLUSTER", "EXAMPLE_WORKLOAD", "example_cluster", "example_workload"]

#: 64 nodes x 8 GPUs; tier 1 = 8-node leaf switches, tier 2 = spines over 4 leaves.
EXAMPLE_CLUSTER = ClusterSpec(
    nodes=(NodeShape("gpu", 64, gpus=8, cpu=96, memory="768Gi", pods=110),),
    tiers=(8, 4),
    queues=(QueueSpec("production", weight=4), QueueSpec("research", weight=2), QueueSpec("batch", weight=1)),
    name="example: 64 nodes x 8 GPUs",
)

#: The example's jobs (drawn with the run's seed): mostly small jobs, some 8- and 16-pod gangs, a
#: third of the multi-pod gangs bound to one leaf switch or spine.
EXAMPLE_WORKLOAD: dict[str, Any] = {
    "n_jobs": 2500,
    "arrival_rate": 1 / 70,
    "gang_sizes": {1: 0.55, 2: 0.2, 4: 0.15, 8: 0.08, 16: 0.02},
    "gpus_per_pod": {1: 0.35, 2: 0.15, 4: 0.2, 8: 0.3},
    "duration_median": 1800.0,
    "duration_sigma": 1.0,
    "duration_min": 60.0,
    "duration_max": 36 * 3600.0,
    "queues": {"production": 0.3, "research": 0.45, "batch": 0.25},
    "priorities": {0: 0.8, 100: 0.2},
    "topology_fraction": 0.3,
    "topology_mode": "soft",
    "topology_tier": 1,
    "name_prefix": "example",
}


def example_cluster() -> ClusterTemplate:
    """The example cluster as a template (its queues are explicit)."""
    return from_spec(EXAMPLE_CLUSTER, "built-in example cluster")


def example_workload(seed: int | np.random.Generator = 0) -> list[JobSpec]:
    """The example's jobs; the same seed gives the same jobs."""
    return synthetic(seed, SyntheticSpec(**EXAMPLE_WORKLOAD))
