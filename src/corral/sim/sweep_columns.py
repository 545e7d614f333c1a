"""The columns of a sweep's tables and what its page shows (:mod:`corral.sim.sweep_report`,
:mod:`corral.sim.sweep_page`, the terminal summary of :mod:`corral.commands.sweep`): a run's key, a
scenario's key, the run's own measures, and the metrics shown and plotted per scenario."""

from __future__ import annotations

__all__ = ["HEADLINE", "KEYS", "PLOTTED", "RUN", "SCENARIO"]

KEYS = ("config", "workload", "window", "scale", "cluster", "seed")
SCENARIO = ("workload", "window", "scale", "cluster")
RUN = {"cpu_time": "CPU time (s)", "wall_time": "wall time (s)", "events": "events", "cycles": "cycles"}
#: the metrics the page shows per scenario (all of them are in the tables)
HEADLINE = (
    "wait_mean",
    "wait_p95",
    "max_wait_largest_5pct",
    "bounded_slowdown_mean",
    "jct_mean",
    "gpu_utilisation_window",
    "makespan",
    "jobs_completed",
    "jobs_pending",
    "evictions",
)
PLOTTED = ("wait_mean", "bounded_slowdown_mean", "max_wait_largest_5pct", "gpu_utilisation_window")
