"""Kubernetes objects <-> model: read snapshots (core, Volcano and KAI kinds) into a Cluster."""

from corral.manifests.build import DEFAULT_SCHEDULERS, build_cluster, load_snapshot
from corral.manifests.fields import format_time, parse_duration, parse_time
from corral.manifests.load import read_objects

__all__ = [
    "DEFAULT_SCHEDULERS",
    "build_cluster",
    "format_time",
    "load_snapshot",
    "parse_duration",
    "parse_time",
    "read_objects",
]
