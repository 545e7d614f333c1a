"""The tables and the page of a sweep (``corral sweep``, :mod:`corral.sim.sweep`).

From the records of every cell (:func:`corral.sim.sweep_cell.run_cell`) :func:`write_sweep_outputs` writes,
each file atomically (:func:`corral.files.atomic_write`):

* ``results.parquet`` / ``results.csv``: one row per run — the cell's key (config, workload, window,
  scale, cluster, seed), its folder, every metric of :data:`corral.sim.report_format.METRICS`, and the run's
  CPU time, wall time, events and cycles;
* ``results_by_size.parquet`` / ``.csv``: one row per run and job-size bucket (the columns of
  :mod:`corral.sim.breakdown`);
* ``jobs.parquet``: every job of every run, with the run's key;
* ``summary.parquet`` / ``.csv``: one row per scenario (workload, window, scale, cluster), config and
  metric — the number of seeds, the mean, the standard deviation and the 95 % confidence interval of
  the mean (Student's t with n − 1 degrees of freedom; none from one seed), the baseline config's mean
  and ``vs_baseline`` (mean ÷ baseline mean − 1), and the paired difference from the baseline over the
  seeds both ran (``diff_mean``, ``diff_ci95``: seeds draw the same random numbers in every config, so
  the paired interval is the narrower honest one);
* ``scenario-N.png``: per scenario, bar charts of four metrics with 95 % error bars;
* ``index.html``: what ran, and per scenario the headline metrics side by side with their intervals and
  those charts.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from corral.files import atomic_write
from corral.sim.breakdown import COLUMNS as SIZE_COLUMNS
from corral.sim.report_format import METRICS
from corral.sim.sweep_columns import KEYS, RUN, SCENARIO

__all__ = ["summarize_sweep", "t_quantile", "write_sweep_outputs"]

# Student's t, 0.975 quantile, for 1..30 degrees of freedom
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_quantile(df: int) -> float:
    """Student's t 0.975 quantile: tabled up to 30 degrees of freedom, then the Cornish-Fisher
    expansion around the normal quantile (within 1e-4 of the exact value from 30 on)."""
    if df < 1:
        raise ValueError("at least one degree of freedom")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def _interval(values: Sequence[float]) -> tuple[int, float | None, float | None, float | None]:
    """n, mean, standard deviation and 95 % half-width of the mean (None below two values)."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if not len(x):
        return 0, None, None, None
    if len(x) == 1:
        return 1, float(x[0]), None, None
    sd = float(x.std(ddof=1))
    return len(x), float(x.mean()), sd, t_quantile(len(x) - 1) * sd / math.sqrt(len(x))


def _frames(records: Sequence[Mapping[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    runs, sizes = [], []
    for rec in records:
        key = {k: rec["key"][k] for k in KEYS}
        runs.append({**key, "cell": rec["folder"], **rec["summary"], **{k: rec["run"].get(k) for k in RUN}})
        sizes += [
            {**key, "size": row["group"], **{c: row.get(c) for c in SIZE_COLUMNS}} for row in rec["sizes"]
        ]
    run_columns = [*KEYS, "cell", *METRICS, *RUN]
    size_columns = [*KEYS, "size", *SIZE_COLUMNS]
    counts = [k for k, (_, kind) in METRICS.items() if kind == "count"] + ["events", "cycles"]
    types = dict.fromkeys([*METRICS, *RUN], "float64") | dict.fromkeys(counts, "Int64")
    return (
        pd.DataFrame(runs, columns=run_columns).astype(types),
        pd.DataFrame(sizes, columns=size_columns).astype(
            dict.fromkeys(SIZE_COLUMNS, "float64") | dict.fromkeys(("jobs", "completed", "waiting"), "Int64")
        ),
    )


def summarize_sweep(runs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """The summary table described in the module docstring (one row per scenario, config, metric)."""
    rows = []
    metrics = [*METRICS, *RUN]
    for scenario, block in runs.groupby(list(SCENARIO), sort=False, dropna=False):
        base = block[block["config"] == baseline].set_index("seed")
        for config, group in block.groupby("config", sort=False):
            mine = group.set_index("seed")
            common = mine.index.intersection(base.index)
            for metric in metrics:
                n, mean, sd, ci = _interval(mine[metric].tolist())
                _, base_mean, _, _ = _interval(base[metric].tolist()) if len(base) else (0, None, None, None)
                diffs = (mine.loc[common, metric] - base.loc[common, metric]).tolist()
                _, diff_mean, _, diff_ci = _interval(diffs)
                rows.append(
                    {
                        **dict(zip(SCENARIO, scenario)),
                        "config": config,
                        "metric": metric,
                        "n": n,
                        "mean": mean,
                        "std": sd,
                        "ci95": ci,
                        "ci95_low": None if ci is None or mean is None else mean - ci,
                        "ci95_high": None if ci is None or mean is None else mean + ci,
                        "baseline": baseline,
                        "baseline_mean": base_mean,
                        "vs_baseline": mean / base_mean - 1 if mean is not None and base_mean else None,
                        "diff_mean": diff_mean,
                        "diff_ci95": diff_ci,
                    }
                )
    columns = [*SCENARIO, "config", "metric", "n", "mean", "std", "ci95", "ci95_low", "ci95_high"]
    columns += ["baseline", "baseline_mean", "vs_baseline", "diff_mean", "diff_ci95"]
    numeric = ["mean", "std", "ci95", "ci95_low", "ci95_high", "baseline_mean", "vs_baseline", "diff_mean"]
    return pd.DataFrame(rows, columns=columns).astype(dict.fromkeys([*numeric, "diff_ci95"], float))


def _jobs(folder: Path, records: Sequence[Mapping[str, Any]]) -> bytes:
    frames = []
    for rec in records:
        jobs = pd.read_parquet(folder / "cells" / rec["folder"] / "jobs.parquet")
        for k in reversed(KEYS):
            jobs.insert(0, k, rec["key"][k])
        frames.append(jobs)
    buffer = io.BytesIO()
    pd.concat(frames, ignore_index=True).to_parquet(buffer, index=False)
    return buffer.getvalue()


def _parquet(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def write_sweep_outputs(
    folder: Path, records: Sequence[Mapping[str, Any]], described: Mapping[str, Any], baseline: str
) -> pd.DataFrame:
    """Write the tables and the page into ``folder``; return the summary."""
    runs, sizes = _frames(records)
    summary = summarize_sweep(runs, baseline)
    for name, frame in (("results", runs), ("results_by_size", sizes), ("summary", summary)):
        atomic_write(folder / f"{name}.parquet", _parquet(frame))
        atomic_write(folder / f"{name}.csv", frame.to_csv(index=False, lineterminator="\n"))
    atomic_write(folder / "jobs.parquet", _jobs(folder, records))
    from corral.sim.sweep_page import scenario_plots, sweep_page

    plots = scenario_plots(summary, runs)
    for name, png in plots.items():
        atomic_write(folder / name, png)
    atomic_write(folder / "index.html", sweep_page(described, runs, sizes, summary, baseline, plots))
    return summary
