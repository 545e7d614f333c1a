"""Kubernetes objects -> model: read snapshots (core, Volcano and KAI kinds) into a Cluster.

The clock the manifests read with (``parse_time``, ``format_time``, ``parse_duration``) is
:mod:`corral.model.clock`; import it from there."""

from corral.manifests.build import DEFAULT_SCHEDULERS, build_cluster, load_snapshot
from corral.manifests.load import read_objects

__all__ = [
    "DEFAULT_SCHEDULERS",
    "build_cluster",
    "load_snapshot",
    "read_objects",
]
