"""What ``corral validate`` warns about for KAI's fields: what corral accepts but will not act on, one line
per object and field, each saying what to do.

The loader records the ones it finds while reading (``Cluster.notes``: a KAI topology constraint without
its topology, a sub-group's minMember that KAI does not count, a pod naming no sub-group); this module
adds the ones that depend on the configuration: KAI GPU-sharing annotations without the ``gpushare``
plugin (only the node total is then held), KAI topology constraints without ``network-topology-aware``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.framework.config import Config
    from corral.model import Cluster

__all__ = ["config_notes"]


def config_notes(cluster: Cluster, config: Config) -> list[str]:
    """Lines for what the configuration leaves undone for this snapshot."""
    out: list[str] = []
    if config.plugin("gpushare") is None:
        for t in cluster.tasks.values():
            if t.gpu_share is not None and t.managed:
                out.append(
                    f"Pod {t.key}: its GPU-sharing annotations are held only to the node's GPU total: "
                    "add the gpushare plugin to the configuration to hold them to each device"
                )
    if config.plugin("network-topology-aware") is None:
        for job in cluster.jobs.values():
            sub = job.subgroup_tree is not None and any(
                g.constraint for g in job.subgroup_tree.groups.values()
            )
            if job.topology_family or sub:
                out.append(
                    f"PodGroup {job.uid}: its topology constraint is not enforced: add the "
                    "network-topology-aware plugin to the configuration"
                )
    return out
