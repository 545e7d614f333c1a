"""How a simulation's metrics are shown to a person and written as JSON: :data:`METRICS` (key -> label
and kind, in report order), :func:`metric_label`, :func:`format_metric`, the columns of the queue summary,
and :func:`plain` (a JSON-safe copy). Shared by the report's files and tables (:mod:`corral.sim.report`),
its HTML pages (:mod:`corral.sim.report_html`) and the sweep's (:mod:`corral.sim.sweep_report`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from corral.sim.speed import placement_label

__all__ = ["METRICS", "QUEUE_COLUMNS", "QUEUE_KINDS", "format_metric", "metric_label", "plain"]

# metric key -> (label, kind); the kind decides how a value is shown to a person.
METRICS: dict[str, tuple[str, str]] = {
    "jobs_total": ("jobs", "count"),
    "jobs_completed": ("completed", "count"),
    "jobs_running": ("running at end", "count"),
    "jobs_pending": ("pending at end", "count"),
    "jobs_never_fits": ("never fit", "count"),
    "jct_mean": ("JCT mean", "seconds"),
    "jct_p50": ("JCT p50", "seconds"),
    "jct_p95": ("JCT p95", "seconds"),
    "jct_p99": ("JCT p99", "seconds"),
    "wait_mean": ("wait mean", "seconds"),
    "wait_p50": ("wait p50", "seconds"),
    "wait_p95": ("wait p95", "seconds"),
    "wait_p99": ("wait p99", "seconds"),
    "makespan": ("makespan", "seconds"),
    "submission_window": ("submission window (first to last submit, or to --until)", "seconds"),
    "gpu_utilisation": ("GPU utilisation, whole run", "fraction"),
    "gpu_utilisation_window": ("GPU utilisation, submission window", "fraction"),
    "broken_gangs": ("broken gangs (restarts)", "count"),
    "evictions": ("evictions", "count"),
    "gpu_hours_lost": ("GPU-hours lost", "hours"),
    "moves": ("pods moved (consolidate)", "count"),
    "gpu_hours_lost_to_moves": ("GPU-hours lost to moves", "hours"),
    "max_wait_largest_5pct": ("max wait, largest 5% of jobs", "seconds"),
    "jain_fairness": ("Jain fairness across queues", "index"),
    "slowdown_mean": ("slowdown mean (JCT / run time)", "index"),
    "bounded_slowdown_mean": ("bounded slowdown mean (10 s floor)", "index"),
    "pending_gpus_mean": ("pending GPU demand, time mean", "gpus"),
    "fragmented_gpus_mean": ("fragmented free GPUs, time mean", "gpus"),
}


QUEUE_COLUMNS = {
    "queue": "queue",
    "jobs": "jobs",
    "completed": "completed",
    "pending": "pending",
    "jct_mean": "JCT mean",
    "wait_mean": "wait mean",
    "wait_p95": "wait p95",
    "allocated_share": "allocated share",
    "deserved_share": "deserved share",
    "share_ratio": "allocated / deserved",
    "evictions": "evictions",
    "gpu_hours_lost": "GPU-hours lost",
}
QUEUE_KINDS = {
    "jobs": "jobs_total",
    "completed": "jobs_total",
    "pending": "jobs_total",
    "jct_mean": "jct_mean",
    "wait_mean": "wait_mean",
    "wait_p95": "wait_mean",
    "allocated_share": "gpu_utilisation",
    "deserved_share": "gpu_utilisation",
    "share_ratio": "jain_fairness",
    "evictions": "evictions",
    "gpu_hours_lost": "gpu_hours_lost",
}


def metric_label(key: str) -> str:
    """A metric's label for a person (a placement metric of the speed model's, or the key itself)."""
    return METRICS[key][0] if key in METRICS else placement_label(key) or key


def format_metric(key: str, value: Any) -> str:
    """A value for a person: counts with separators, times in s/min/h, fractions as percentages."""
    if value is None:
        return "—"
    kind = METRICS.get(key, ("", "count" if key.startswith("gangs_span_") else "number"))[1]
    if key == "spread_gpu_hours":
        kind = "hours"
    if kind == "count":
        return f"{int(value):,}"
    if kind == "seconds":
        seconds = float(value)
        if abs(seconds) < 120:
            return f"{seconds:.1f} s"
        if abs(seconds) < 7200:
            return f"{seconds / 60:.1f} min"
        return f"{seconds / 3600:,.2f} h"
    if kind == "fraction":
        return f"{float(value):.1%}"
    if kind == "hours":
        return f"{float(value):,.2f} GPU-h"
    if kind == "gpus":
        return f"{float(value):,.1f} GPUs"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def plain(value: Any) -> Any:
    """A JSON-safe copy: numpy scalars to Python, non-finite floats to None, paths and others to str."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [plain(v) for v in items]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    return str(value)
