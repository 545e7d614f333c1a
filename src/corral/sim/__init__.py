"""The trace-driven simulator: workloads, clusters, the event engine, metrics and reports.

The names below are loaded on first use (PEP 562): importing a submodule such as
:mod:`corral.sim.runs` — which ``corral --help`` and ``corral schedule`` do when they register the
simulator's commands (:mod:`corral.commands.simulate`) — must not pull in pandas and matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ClusterSpec",
    "Engine",
    "JobSpec",
    "RoleSpec",
    "SimOptions",
    "SimResult",
    "build_cluster",
    "check_workload",
    "filter_jobs",
    "load_cluster",
    "load_trace",
    "scale_arrivals",
    "simulate",
    "summarize",
    "write_comparison",
    "write_report",
]

_HOME = {
    "ClusterSpec": "clusters",
    "build_cluster": "clusters",
    "check_workload": "clusters",
    "load_cluster": "clusters",
    "Engine": "engine",
    "SimOptions": "engine",
    "simulate": "engine",
    "JobSpec": "jobspec",
    "RoleSpec": "jobspec",
    "summarize": "report",
    "write_comparison": "report",
    "write_report": "report",
    "SimResult": "result",
    "filter_jobs": "workload",
    "load_trace": "formats",
    "scale_arrivals": "workload",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'corral.sim' has no attribute {name!r}")
    return getattr(importlib.import_module(f"corral.sim.{home}"), name)
