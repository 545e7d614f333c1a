"""How each kind of job fared: JCT, wait and slowdown by job size and by queue (``corral simulate`` and
``corral compare`` reports).

A run's averages hide who paid for them: on a congested cluster the 1-GPU jobs may start at once while
the 32-GPU jobs wait for hours. :func:`breakdown` groups the job records by size (total GPUs of the job,
in buckets whose upper edges are configurable, default ``1, 8, 32``: "1 GPU", "2-8", "9-32", ">32"; jobs
with no GPU form their own "0 GPU" group, and jobs asking for a fraction of a device — a total that is
not a whole number of GPUs, as GPU sharing gives (docs/gpushare.md) — their own "fractional" group, so
that shared-GPU jobs are not averaged in with whole-GPU ones) and by queue, and gives per group:

* ``jobs``, ``completed``, ``waiting`` (never started by the end of the run, never-fit jobs included);
* JCT (end − submit) mean and p95 over completed jobs; wait (first start − submit) mean, p95 and max
  over every job that could run: a job still waiting when the run ended counts with the wait it had
  by then (end − submit, a censored wait — leaving it out would reward a policy for starving it);
  never-fit jobs are counted apart;
* the median error of the expected start a forecast gave the job while it waited (``simulation.forecast``,
  docs/forecast.md): |expected − actual first start| over the jobs that had both;
* slowdown = JCT ÷ run time (the job's uninterrupted duration), and bounded slowdown
  max(JCT ÷ max(run time, 10 s), 1) — the 10 s floor keeps very short jobs from dominating
  (Feitelson et al., "Theory and Practice in Parallel Job Scheduling", 1997) — mean and p95 over
  completed jobs.

Statistics use numpy's linear percentiles, as :func:`corral.sim.report.summarize` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from corral.errors import InputError
from corral.sim.result import JobRecord, SimResult, run_end

__all__ = [
    "BOUNDED_FLOOR",
    "COLUMNS",
    "DEFAULT_BUCKETS",
    "bounded_slowdown",
    "breakdown",
    "parse_buckets",
    "size_label",
    "size_labels",
    "slowdown",
    "waits",
]

DEFAULT_BUCKETS: tuple[float, ...] = (1.0, 8.0, 32.0)
#: Run times below this many seconds count as this long in the bounded slowdown.
BOUNDED_FLOOR = 10.0
#: column -> (label, metric kind of :data:`corral.sim.report_format.METRICS` used to format it)
COLUMNS: dict[str, tuple[str, str]] = {
    "jobs": ("jobs", "jobs_total"),
    "completed": ("completed", "jobs_total"),
    "waiting": ("waiting at end", "jobs_total"),
    "jct_mean": ("JCT mean", "jct_mean"),
    "jct_p95": ("JCT p95", "jct_mean"),
    "wait_mean": ("wait mean", "wait_mean"),
    "wait_p95": ("wait p95", "wait_mean"),
    "wait_max": ("wait max", "wait_mean"),
    "slowdown_mean": ("slowdown mean", "slowdown_mean"),
    "bounded_slowdown_mean": ("bounded slowdown mean", "slowdown_mean"),
    "bounded_slowdown_p95": ("bounded slowdown p95", "slowdown_mean"),
    "start_error_median": ("expected-start error (median)", "wait_mean"),
}


def parse_buckets(text: str | Sequence[float] | None) -> tuple[float, ...]:
    """Upper edges of the size buckets, ascending positive GPU counts (``"1,8,32"``)."""
    if text is None:
        return DEFAULT_BUCKETS
    parts = text.split(",") if isinstance(text, str) else list(text)
    try:
        edges = tuple(float(p) for p in parts if str(p).strip())
    except ValueError:
        edges = ()
    if not edges or any(not (0 < e < math.inf) for e in edges) or list(edges) != sorted(set(edges)):
        raise InputError(
            f"expected ascending positive GPU counts separated by commas, got {text!r}",
            field="--size-buckets",
        )
    return edges


def _num(x: float) -> str:
    return f"{x:g}"


def size_labels(edges: Sequence[float]) -> list[str]:
    """The bucket labels, smallest first: "1 GPU" (or "≤e"), "a-b" for whole numbers, ">last"."""
    labels, low = [], 0.0
    for edge in edges:
        if low == 0:
            labels.append(f"{_num(edge)} GPU" if edge == 1 else f"<={_num(edge)}")
        elif float(low).is_integer() and float(edge).is_integer():
            labels.append(f"{int(low) + 1}-{int(edge)}" if edge > low + 1 else f"{int(edge)}")
        else:
            labels.append(f"({_num(low)}, {_num(edge)}]")
        low = edge
    return labels + [f">{_num(edges[-1])}"]


FRACTIONAL = "fractional"


def size_label(gpus: float, edges: Sequence[float], labels: Sequence[str]) -> str:
    if gpus <= 0:
        return "0 GPU"
    if not float(gpus).is_integer():
        return FRACTIONAL
    for edge, label in zip(edges, labels):
        if gpus <= edge:
            return label
    return labels[-1]


def slowdown(job: JobRecord) -> float | None:
    if job.jct is None or job.duration <= 0:
        return None
    return job.jct / job.duration


def bounded_slowdown(job: JobRecord) -> float | None:
    if job.jct is None:
        return None
    return max(job.jct / max(job.duration, BOUNDED_FLOOR), 1.0)


def _mean_p95(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    array = np.asarray(values, dtype=float)
    return float(array.mean()), float(np.percentile(array, 95))


def waits(jobs: Iterable[JobRecord], end: float) -> list[float]:
    """Every job's wait, a job that never started counting until ``end`` (censored); never-fit jobs
    are left out."""
    return [
        j.wait if j.wait is not None else max(0.0, end - j.submit) for j in jobs if j.status != "never_fits"
    ]


def _row(kind: str, group: str, jobs: list[JobRecord], end: float) -> dict[str, Any]:
    jct = [j.jct for j in jobs if j.jct is not None]
    wait = waits(jobs, end)
    slow = [s for s in map(slowdown, jobs) if s is not None]
    bounded = [s for s in map(bounded_slowdown, jobs) if s is not None]
    jct_mean, jct_p95 = _mean_p95(jct)
    wait_mean, wait_p95 = _mean_p95(wait)
    bs_mean, bs_p95 = _mean_p95(bounded)
    return {
        "by": kind,
        "group": group,
        "jobs": len(jobs),
        "completed": sum(j.status == "completed" for j in jobs),
        "waiting": sum(j.first_start is None for j in jobs),
        "jct_mean": jct_mean,
        "jct_p95": jct_p95,
        "wait_mean": wait_mean,
        "wait_p95": wait_p95,
        "wait_max": max(wait) if wait else None,
        "slowdown_mean": _mean_p95(slow)[0],
        "bounded_slowdown_mean": bs_mean,
        "bounded_slowdown_p95": bs_p95,
        "start_error_median": _start_error(jobs),
    }


def _start_error(jobs: list[JobRecord]) -> float | None:
    """Median |expected start - actual first start| over the jobs a forecast gave an estimate and that
    started (``simulation.forecast``; None without one)."""
    errors = [
        abs(j.expected_start - j.first_start)
        for j in jobs
        if j.expected_start is not None and j.first_start is not None
    ]
    return float(np.median(errors)) if errors else None


def _groups(
    jobs: Iterable[JobRecord], key: Callable[[JobRecord], str], order: Sequence[str]
) -> list[tuple[str, list[JobRecord]]]:
    grouped: dict[str, list[JobRecord]] = {}
    for job in jobs:
        grouped.setdefault(key(job), []).append(job)
    return [(g, grouped[g]) for g in order if g in grouped]


def breakdown(result: SimResult, edges: Sequence[float] = DEFAULT_BUCKETS) -> list[dict[str, Any]]:
    """Rows ``by="size"`` (buckets in size order, empty buckets left out) then ``by="queue"`` (by name);
    each row as the module docstring describes."""
    end = run_end(result)
    labels = size_labels(edges)
    by_size = _groups(
        result.jobs, lambda j: size_label(j.gpus, edges, labels), ["0 GPU", FRACTIONAL, *labels]
    )
    queues = sorted({j.queue for j in result.jobs})
    by_queue = _groups(result.jobs, lambda j: j.queue, queues)
    return [_row("size", g, jobs, end) for g, jobs in by_size] + [
        _row("queue", g, jobs, end) for g, jobs in by_queue
    ]
