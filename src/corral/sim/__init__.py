"""The trace-driven simulator: workloads, clusters, the event engine, metrics and reports.

The names below are loaded on first use (PEP 562): importing a submodule such as
:mod:`corral.sim.commands` — which ``corral --help`` and ``corral schedule`` do to register the
simulator's commands — must not pull in pandas and matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ClusterSpec", "build_cluster", "check_workload", "load_cluster", "Engine", "SimOptions", "simulate",
           "JobSpec", "RoleSpec", "summarize", "write_comparison", "write_report", "SimResult", "filter_jobs",
           "load_trace", "scale_arrivals"]

_HOME = {"ClusterSpec": "clusters", "build_cluster": "clusters", "check_workload": "clusters",
         "load_cluster": "clusters", "Engine": "engine", "SimOptions": "engine", "simulate": "engine",
         "JobSpec": "jobspec", "RoleSpec": "jobspec", "summarize": "report", "write_comparison": "report",
         "write_report": "report", "SimResult": "result", "filter_jobs": "workload", "load_trace": "workload",
         "scale_arrivals": "workload"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'corral.sim' has no attribute {name!r}")
    return getattr(importlib.import_module(f"corral.sim.{home}"), name)
