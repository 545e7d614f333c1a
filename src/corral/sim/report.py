"""Metrics and report folders of simulation runs (SPEC.md §4: ``corral simulate`` and ``corral compare``).

:func:`summarize` turns a :class:`~corral.sim.result.SimResult` into flat metrics; :func:`write_report`
and :func:`write_comparison` write a report folder (JSON, CSV, PNG and one self-contained HTML page);
:func:`summary_table` renders metrics for the terminal. Promises:

* the same SimResult gives the same JSON and CSV bytes (summary floats are rounded to 6 significant
  digits; records are written with Python's shortest round-trip float repr; in JSON a non-finite
  number becomes ``null``, in CSV a missing value is an empty cell);
* a report folder is written beside its destination and renamed into place at the end: a failure leaves
  the previous report (or nothing) there, never half a report (SPEC.md §5: nothing already written is
  lost). An unwritable destination is an :class:`~corral.errors.InputError`.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from corral.errors import InputError
from corral.files import atomic_folder
from corral.sim.breakdown import COLUMNS as _BREAKDOWN_COLUMNS
from corral.sim.breakdown import DEFAULT_BUCKETS, bounded_slowdown, breakdown, slowdown, waits
from corral.sim.plots import comparison_plots, report_plots
from corral.sim.reasons import longest_waits, reason_rows
from corral.sim.report_format import METRICS, QUEUE_COLUMNS, format_metric, metric_label, plain
from corral.sim.result import ClusterSample, JobRecord, QueueSample, SimResult, run_end
from corral.sim.speed import placement_metrics
from corral.terminal import cell

__all__ = [
    "METRICS",
    "queue_summary",
    "run_end",
    "size_table",
    "summarize",
    "summary_table",
    "time_average",
    "window_average",
    "window_end",
    "write_comparison",
    "write_report",
]

_JOB_FIELDS = [f.name for f in dataclasses.fields(JobRecord)]
_QUEUE_FIELDS = [f.name for f in dataclasses.fields(QueueSample)]
_CLUSTER_FIELDS = [f.name for f in dataclasses.fields(ClusterSample)]


# ------------------------------------------------------------------------------------------- metrics


def _sig(value: Any) -> Any:
    """Round a float to 6 significant digits (stable JSON); ints, strings and None pass; non-finite
    floats become None."""
    if value is None or isinstance(value, (bool, int, str, np.integer)):
        return int(value) if isinstance(value, np.integer) else value
    value = float(value)
    if not math.isfinite(value):
        return None
    return float(f"{value:.6g}") + 0.0  # + 0.0 turns -0.0 into 0.0


def time_average(times: Sequence[float], values: Sequence[float], end: float | None) -> float | None:
    """Mean of a step function: each sample holds until the next (of equal times the later wins), the
    last until ``end``; averaged from the first sample to ``end``. None without samples; the last value
    when the samples span no time."""
    if len(times) == 0:
        return None
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    stop = max(t[-1], end if end is not None else t[-1])
    widths = np.diff(np.append(t, stop))
    total = widths.sum()
    if total <= 0:
        return float(v[-1])
    return float((widths * v).sum() / total)


def window_end(result: SimResult) -> float:
    """The end of the submission window: ``--until`` when the run had one, else the last submit. The
    cluster drains after it — a utilisation averaged over the drain says more about the trace's tail
    than about the policy."""
    until = (result.meta.get("options") or {}).get("until")
    if isinstance(until, (int, float)) and not isinstance(until, bool) and math.isfinite(until):
        return float(until)
    return max((j.submit for j in result.jobs), default=0.0)


def window_average(times: Sequence[float], values: Sequence[float], lo: float, hi: float) -> float | None:
    """Mean of the step function (as :func:`time_average`) over ``[lo, hi]``; before the first sample
    it holds the first value. None without samples or for an empty window."""
    if len(times) == 0 or hi <= lo:
        return None
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    # the value in force at lo, then every change inside the window
    at = max(int(np.searchsorted(t, lo, side="right")) - 1, 0)
    inside = (t > lo) & (t < hi)
    tt = np.concatenate(([lo], t[inside], [hi]))
    vv = np.concatenate(([v[at]], v[inside]))
    return float((np.diff(tt) * vv).sum() / (hi - lo))


def _stats(values: list[float]) -> tuple[float | None, ...]:
    """Mean, p50, p95, p99 (numpy's linear interpolation); all None for no values."""
    if not values:
        return None, None, None, None
    array = np.asarray(values, dtype=float)
    p50, p95, p99 = np.percentile(array, [50, 95, 99])
    return float(array.mean()), float(p50), float(p95), float(p99)


def _share_averages(result: SimResult, end: float) -> dict[str, tuple[float, float]]:
    """Queue -> (time-averaged allocated share, time-averaged deserved share)."""
    by_queue: dict[str, list[QueueSample]] = {}
    for sample in result.queues:
        by_queue.setdefault(sample.queue, []).append(sample)
    out = {}
    for queue, samples in sorted(by_queue.items()):
        times = [s.time for s in samples]
        allocated = time_average(times, [s.allocated_share for s in samples], end)
        deserved = time_average(times, [s.deserved_share for s in samples], end)
        assert allocated is not None and deserved is not None  # every queue here has samples
        out[queue] = (allocated, deserved)
    return out


def _jain(result: SimResult, end: float) -> float | None:
    """Jain's index over queues with a positive (time-averaged) deserved share of x = allocated /
    deserved: (sum x)^2 / (n * sum x^2), 1 when every queue gets the same fraction of what it deserves.
    None when no queue deserves anything or no queue got anything."""
    ratios = [a / d for a, d in _share_averages(result, end).values() if d and d > 0]
    squares = sum(x * x for x in ratios)
    if not ratios or squares <= 0:
        return None
    return sum(ratios) ** 2 / (len(ratios) * squares)


def _max_wait_largest(jobs: list[JobRecord], end: float) -> float | None:
    """Max wait over the 5% of jobs (at least one) with the most GPUs; a job tied with the smallest of
    them is in too, so ties never decide membership. Jobs that never fit are left out (they are counted
    apart, and would otherwise always be the largest); a job that never started waited until ``end``."""
    population = [j for j in jobs if j.status != "never_fits"]
    if not population:
        return None
    k = max(1, math.ceil(0.05 * len(population)))
    threshold = sorted((j.gpus for j in population), reverse=True)[k - 1]
    return max(
        j.wait if j.wait is not None else max(0.0, end - j.submit) for j in population if j.gpus >= threshold
    )


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def summarize(result: SimResult) -> dict[str, int | float | None]:
    """The run's metrics, keyed as :data:`METRICS` (in that order); floats rounded to 6 significant
    digits, None where there is nothing to measure.

    JCT statistics cover completed jobs; wait statistics every job but the never-fit ones, a job still
    waiting at the end counting the wait it had by then (censored: :func:`corral.sim.breakdown.waits`).
    ``makespan`` is the last end minus the first submit; ``submission_window`` the span the workload
    loads the cluster, from the first submit to :func:`window_end`. ``gpu_utilisation`` is the
    time-weighted mean of the cluster samples over the whole run (:func:`time_average` up to
    :func:`run_end`), ``gpu_utilisation_window`` the same over the submission window
    (:func:`window_average`): a run that drains a long tail after the last submission shows a low whole-run
    figure whatever the policy did while jobs arrived. ``broken_gangs`` sums the jobs'
    restarts. ``max_wait_largest_5pct`` and ``jain_fairness`` are described at their helpers; the
    slowdowns (over completed jobs) in :mod:`corral.sim.breakdown`; ``pending_gpus_mean`` and
    ``fragmented_gpus_mean`` are time means of the cluster samples' fields of those names.
    """
    jobs = result.jobs
    end = run_end(result)
    status = [j.status for j in jobs]
    jct = _stats([j.jct for j in jobs if j.jct is not None])
    wait = _stats(waits(jobs, end))
    ends = [j.end for j in jobs if j.end is not None]
    first = min((j.submit for j in jobs), default=0.0)
    makespan = max(ends) - first if ends else None
    cluster = sorted(result.cluster, key=lambda s: s.time)
    times, used = [s.time for s in cluster], [s.utilisation for s in cluster]
    window = window_end(result)
    values = [
        len(jobs),
        status.count("completed"),
        status.count("running"),
        status.count("pending"),
        status.count("never_fits"),
        *jct,
        *wait,
        makespan,
        window - first if window > first else None,
        time_average(times, used, end),
        window_average(times, used, first, window),
        sum(j.restarts for j in jobs),
        sum(j.evictions for j in jobs),
        sum(j.gpu_hours_lost for j in jobs),
        sum(j.moves for j in jobs),
        sum(j.gpu_hours_lost_to_moves for j in jobs),
        _max_wait_largest(jobs, end),
        _jain(result, end),
        _mean([slowdown(j) for j in jobs]),
        _mean([bounded_slowdown(j) for j in jobs]),
        time_average([s.time for s in cluster], [s.pending_gpus for s in cluster], end),
        time_average([s.time for s in cluster], [s.fragmented_gpus for s in cluster], end),
    ]
    out = {key: _sig(value) for key, value in zip(METRICS, values)}
    out.update((k, _sig(v)) for k, v in placement_metrics(jobs).items())  # with the speed model only
    return out


def queue_summary(result: SimResult) -> list[dict[str, Any]]:
    """One row per queue (sorted by name): its jobs, how they fared, and its time-averaged shares."""
    end = run_end(result)
    shares = _share_averages(result, end)
    by_queue: dict[str, list[JobRecord]] = {q: [] for q in shares}
    for job in result.jobs:
        by_queue.setdefault(job.queue, []).append(job)
    rows = []
    for queue, jobs in sorted(by_queue.items()):
        allocated, deserved = shares.get(queue, (None, None))
        jct = _stats([j.jct for j in jobs if j.jct is not None])
        wait = _stats(waits(jobs, end))
        row = {
            "queue": queue,
            "jobs": len(jobs),
            "completed": sum(j.status == "completed" for j in jobs),
            "pending": sum(j.status in ("pending", "never_fits") for j in jobs),
            "jct_mean": jct[0],
            "wait_mean": wait[0],
            "wait_p95": wait[2],
            "allocated_share": allocated,
            "deserved_share": deserved,
            "share_ratio": allocated / deserved if allocated is not None and deserved else None,
            "evictions": sum(j.evictions for j in jobs),
            "gpu_hours_lost": sum(j.gpu_hours_lost for j in jobs),
        }
        rows.append({k: _sig(v) for k, v in row.items()} | {"queue": queue})
    return rows


# -------------------------------------------------------------------------------------- file writers


def _json_text(value: Any) -> str:
    return json.dumps(plain(value), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _write_records_json(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """A JSON array with one record per line: compact for 100,000 jobs, still diffable."""
    lines = [_json_line(row) for row in rows]
    path.write_text("[\n" + ",\n".join(lines) + ("\n" if lines else "") + "]\n", encoding="utf-8")


def _json_line(row: Mapping[str, Any]) -> str:
    try:  # records are plain numbers and strings: the fast path almost always holds
        return json.dumps(row, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(plain(row), ensure_ascii=False, allow_nan=False)


def _write_csv(path: Path, columns: Sequence[str], rows: Iterable[Any], *, records: bool = False) -> None:
    """One line per row: mappings by key, or objects by attribute (``records``). None is an empty
    cell; floats are written in Python's shortest round-trip form."""
    get = (operator.attrgetter if records else operator.itemgetter)(*columns)
    single = len(columns) == 1
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(((get(row),) if single else get(row)) for row in rows)


def _breakdown_rows(result: SimResult, buckets: Sequence[float]) -> list[dict[str, Any]]:
    return [
        {k: _sig(v) if k not in ("by", "group") else v for k, v in row.items()}
        for row in breakdown(result, buckets)
    ]


def _write_run(
    result: SimResult, folder: Path, buckets: Sequence[float] = DEFAULT_BUCKETS, whole_run: bool = False
) -> dict[str, Any]:
    """Every file of one run's report into an existing empty ``folder``; returns the summary."""
    from corral.sim.report_html import run_page

    summary = summarize(result)
    groups = _breakdown_rows(result, buckets)
    _write_csv(folder / "breakdown.csv", ["by", "group", *_BREAKDOWN_COLUMNS], groups)
    (folder / "breakdown.json").write_text(_json_text(groups), encoding="utf-8")
    (folder / "summary.json").write_text(_json_text(summary), encoding="utf-8")
    (folder / "meta.json").write_text(_json_text(result.meta), encoding="utf-8")
    _write_csv(folder / "jobs.csv", _JOB_FIELDS, result.jobs, records=True)
    _write_records_json(folder / "jobs.json", ({c: getattr(j, c) for c in _JOB_FIELDS} for j in result.jobs))
    _write_csv(folder / "queues.csv", _QUEUE_FIELDS, result.queues, records=True)
    _write_csv(folder / "cluster.csv", _CLUSTER_FIELDS, result.cluster, records=True)
    queues = queue_summary(result)
    _write_csv(folder / "queue_summary.csv", list(QUEUE_COLUMNS), queues)
    end = run_end(result)
    reasons = reason_rows(result, end, buckets)
    longest = longest_waits(result, end)
    _write_csv(folder / "reasons.csv", _REASON_FIELDS, [{k: _sig(v) for k, v in r.items()} for r in reasons])
    _write_csv(
        folder / "longest_waits.csv", _LONGEST_FIELDS, [{k: _sig(v) for k, v in r.items()} for r in longest]
    )
    plots = report_plots(result, end, groups, None if whole_run else window_end(result))
    for name, png in plots.items():
        (folder / name).write_bytes(png)
    page = run_page(result, summary, queues, plots, groups, reasons, longest)
    (folder / "index.html").write_text(page, encoding="utf-8")
    return summary


_REASON_FIELDS = ["by", "group", "reason", "jobs", "jobs_share", "wait_hours", "wait_share"]
_LONGEST_FIELDS = ["job", "queue", "gpus", "submit", "wait", "still_waiting", "status", "reason"]


def write_report(
    result: SimResult,
    folder: str | Path,
    buckets: Sequence[float] = DEFAULT_BUCKETS,
    *,
    force: bool = False,
    whole_run: bool = False,
) -> Path:
    """Write one run's report folder and return its path. Files: ``summary.json`` (:func:`summarize`),
    ``meta.json``, ``jobs.csv`` / ``jobs.json`` (one record per job), ``queues.csv`` (queue samples:
    shares over time), ``cluster.csv`` (cluster samples: utilisation, pending GPU demand and fragmented
    GPUs over time), ``queue_summary.csv``, ``breakdown.csv`` / ``breakdown.json`` (JCT, wait and
    slowdown by job size — ``buckets``, upper edges in GPUs — and by queue: :mod:`corral.sim.breakdown`),
    PNG plots (``utilisation``, ``demand``, ``fragmentation``, ``pending``, ``shares``, ``jct_cdf``,
    ``wait_cdf``, ``wait_by_size``, ``slowdown_by_size``) and ``index.html``, which embeds them and needs
    no other file. Plots over time stop at the end of the submission window (:func:`window_end`) unless
    ``whole_run``. An existing folder is replaced only once the new report is complete, and only if it
    is a previous report or ``force`` is given (:func:`corral.files.atomic_folder`)."""
    return atomic_folder(folder, lambda tmp: _write_run(result, tmp, buckets, whole_run), force=force)


_RESERVED = {
    "index.html",
    "comparison.json",
    "comparison.csv",
    "breakdown.csv",
    "utilisation.png",
    "jct_cdf.png",
    "wait_cdf.png",
    "demand.png",
    "fragmentation.png",
    "wait_by_size.png",
    "slowdown_by_size.png",
    "evictions.png",
    "restarts.png",
    "reasons.csv",
    "longest_waits.csv",
}


def _folder_names(names: Iterable[str]) -> dict[str, str]:
    """Config name -> a safe, unique subfolder name (letters, digits, ``._-``)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).strip("._") or "config"
        candidate, n = slug, 2
        while candidate.lower() in used or candidate.lower() in _RESERVED:
            candidate, n = f"{slug}-{n}", n + 1
        used.add(candidate.lower())
        out[name] = candidate
    return out


def write_comparison(
    results: Mapping[str, SimResult],
    folder: str | Path,
    buckets: Sequence[float] = DEFAULT_BUCKETS,
    *,
    force: bool = False,
    whole_run: bool = False,
) -> Path:
    """Write a comparison of several configs run on the same workload: ``comparison.json`` and
    ``comparison.csv`` (one row per config: ``config``, ``report`` subfolder, then every metric),
    ``breakdown.csv`` (each config's rows of :func:`~corral.sim.breakdown.breakdown`, with a ``config``
    column), overlaid ``utilisation``/``demand``/``fragmentation``/``jct_cdf``/``wait_cdf`` plots and
    side-by-side ``wait_by_size``/``slowdown_by_size`` bars, ``index.html`` with the tables side by
    side, and each run's own report (as :func:`write_report`) in a subfolder named after its config. Written
    atomically like :func:`write_report`. No results, or one that is not a SimResult, is an InputError.
    """
    if not results:
        raise InputError("nothing to compare: no results", file=str(folder))
    for name, result in results.items():
        if not isinstance(result, SimResult):
            raise InputError(
                f"expected a SimResult, got {type(result).__name__}", file=str(folder), obj=str(name)
            )
    subfolders = _folder_names(results)
    from corral.sim.report_html import comparison_page

    def fill(tmp: Path) -> None:
        rows, groups = [], {}
        for name, result in results.items():
            (tmp / subfolders[name]).mkdir()
            rows.append(
                {
                    "config": name,
                    "report": subfolders[name],
                    **_write_run(result, tmp / subfolders[name], buckets, whole_run),
                }
            )
            groups[name] = _breakdown_rows(result, buckets)
        reasons = {n: reason_rows(r, run_end(r), buckets) for n, r in results.items()}
        (tmp / "comparison.json").write_text(_json_text(rows), encoding="utf-8")
        _write_csv(tmp / "comparison.csv", ["config", "report", *METRICS], rows)
        _write_csv(
            tmp / "breakdown.csv",
            ["config", "by", "group", *_BREAKDOWN_COLUMNS],
            [{"config": n, **g} for n, rs in groups.items() for g in rs],
        )
        window = None if whole_run else max(window_end(r) for r in results.values())
        plots = comparison_plots(results, {n: run_end(r) for n, r in results.items()}, groups, window)
        for file_name, png in plots.items():
            (tmp / file_name).write_bytes(png)
        page = comparison_page(rows, plots, groups, results, reasons)
        (tmp / "index.html").write_text(page, encoding="utf-8")

    return atomic_folder(folder, fill, force=force)


# ------------------------------------------------------------------------------------------ terminal


def summary_table(
    summary: Mapping[str, Any] | Mapping[str, Mapping[str, Any]], title: str | None = None
) -> Table:
    """A rich Table of one summary (metric, value) or of several (config -> summary: one column per
    config, side by side). Other keys (the speed model's placement metrics) follow the known ones in
    the order the summaries give them."""
    several = bool(summary) and all(isinstance(v, Mapping) for v in summary.values())
    columns: dict[str, Mapping[str, Any]] = dict(summary) if several else {"value": summary}
    table = Table(title=cell(title) if title else None)
    table.add_column("metric")
    for name in columns:
        table.add_column(cell(name), justify="right")  # config names are shown, never read as markup
    keys = [k for k in METRICS if any(k in s for s in columns.values())]
    keys += list(dict.fromkeys(k for s in columns.values() for k in s if k not in METRICS))
    for key in keys:
        table.add_row(metric_label(key), *(format_metric(key, s.get(key)) for s in columns.values()))
    return table


def size_table(results: Mapping[str, SimResult], buckets: Sequence[float] = DEFAULT_BUCKETS) -> Table:
    """A rich Table of how each job size fared: per size bucket, its job count and, for each run, the
    mean and p95 wait and the mean bounded slowdown (runs side by side)."""
    table = Table(title="by job size (GPUs)")
    table.add_column("size")
    names = list(results)
    groups = {n: [g for g in breakdown(r, buckets) if g["by"] == "size"] for n, r in results.items()}
    cells = (
        ("wait_mean", "wait mean"),
        ("wait_p95", "wait p95"),
        ("bounded_slowdown_mean", "bounded slowdown"),
    )
    table.add_column("jobs", justify="right")
    for _, label in cells:
        for n in names:
            table.add_column(label if len(names) == 1 else cell(f"{label} · {n}"), justify="right")
    order = list(dict.fromkeys(g["group"] for rows in groups.values() for g in rows))
    index = {(n, g["group"]): g for n, rows in groups.items() for g in rows}
    for grp in order:
        first = next(index[(n, grp)] for n in names if (n, grp) in index)
        row = [grp, format_metric("jobs_total", first["jobs"])]
        for key, _ in cells:
            kind = _BREAKDOWN_COLUMNS[key][1]
            row += [format_metric(kind, index[(n, grp)][key]) if (n, grp) in index else "—" for n in names]
        table.add_row(*row)
    return table
