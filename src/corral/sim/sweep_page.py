"""The HTML page of a sweep (``index.html``, written by :mod:`corral.sim.sweep_report`): what ran, then
per scenario (workload, window, scale, cluster) the headline metrics of every config side by side — the
mean over seeds ± the 95 % confidence half-width, and the change against the baseline config — bar
charts of four metrics with 95 % error bars and the value on each bar, and the mean wait by job size.
One self-contained page (plots embedded); wide tables scroll inside the page instead of stretching it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from corral.sim.plots import _figure, _png, _time_unit, data_uri
from corral.sim.report_format import METRICS, format_metric
from corral.sim.sweep_columns import HEADLINE, PLOTTED, SCENARIO

__all__ = ["scenario_plots", "sweep_page"]

_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}
.scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right;vertical-align:top}
th:first-child,td:first-child,table.text td,table.text th{text-align:left}thead th{background:#f3f3f3}
td small,th small{display:block;color:#666;font-weight:normal}td{white-space:nowrap}
td:first-child{white-space:normal;min-width:8em}tr.baseline td{background:#f7fbff}
figure{margin:.5em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#444;font-size:.9em;max-width:60em}code{background:#f5f5f5;padding:0 .2em}"""


def _executor(described: Mapping[str, Any]) -> str:
    """Where the cells ran: a local pool of N processes, a local Ray instance of N CPUs, or the Ray
    cluster at an address (whose size, not ``workers``, set how many ran at once)."""
    workers = described["workers"]
    if described["executor"] != "ray":
        return f"local ({workers} at once)"
    address = described.get("address")
    if address:
        return f"ray, on the cluster at <code>{_esc(address)}</code>"
    return f"ray, a local instance of {workers} CPUs"


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str] = (), kind: str = ""
) -> str:
    """Cells are HTML already (escaped by the caller)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join(
        f'<tr class="{classes[i] if i < len(classes) else ""}">'
        + "".join(f"<td>{c}</td>" for c in row)
        + "</tr>\n"
        for i, row in enumerate(rows)
    )
    return f'<div class="scroll"><table class="{kind}"><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table></div>'


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _cell(row: Mapping[str, Any] | None, metric: str, baseline: bool) -> str:
    """ "mean ± half-width" and, below, the change against the baseline."""
    if row is None or _missing(row["mean"]):
        return "—"
    text = format_metric(metric, row["mean"])
    if not _missing(row["ci95"]) and row["ci95"] > 0:
        half = format_metric(metric, row["ci95"])
        text += " ± " + (half.replace("%", " pp") if METRICS.get(metric, ("", ""))[1] == "fraction" else half)
    note = ""
    if not baseline and not _missing(row["vs_baseline"]):
        note = f"<small>{row['vs_baseline']:+.1%} vs baseline</small>"
    return _esc(text) + note


def _what_ran(described: Mapping[str, Any], runs: pd.DataFrame) -> str:
    configs = [
        [
            _esc(name) + (" <small>baseline</small>" if name == described["baseline"] else ""),
            f"<code>{_esc(f)}</code>",
        ]
        for name, f in described["configs"].items()
    ]
    workloads = [
        [
            _esc(w["name"]),
            f"<code>{_esc(w['file'])}</code>",
            _esc(w["format"] or "recognised"),
            _esc(", ".join(f"[{a or 'start'}, {b or 'end'})" for a, b in w["windows"])),
            _esc(", ".join(f"{s:g}" for s in w["scales"])),
            _esc(", ".join(w["queues"]) or "all"),
        ]
        for w in described["workloads"]
    ]
    clusters = [[_esc(n), f"<code>{_esc(f)}</code>"] for n, f in described["clusters"].items()]
    options = ", ".join(f"{k}={v}" for k, v in described["options"].items() if v is not None)
    options = f"options {options}; " if options else ""
    cpu = runs["cpu_time"].sum()
    return (
        f"<p>Spec <code>{_esc(described['spec'])}</code>: {len(runs)} runs — {len(described['configs'])} "
        f"configs × {sum(len(w['windows']) * len(w['scales']) for w in described['workloads'])} workload "
        f"variants × {len(described['clusters'])} clusters × {len(described['seeds'])} seeds "
        f"({_esc(', '.join(map(str, described['seeds'])))}); {_esc(options)}executor "
        f"{_executor(described)}; {cpu:,.0f} s of CPU in the runs.</p>"
        f"<h3>Configs</h3>{_table(['config', 'file'], configs, kind='text')}"
        f"<h3>Workloads</h3>{_table(['workload', 'file', 'format', 'windows', 'scales', 'queues'], workloads, kind='text')}"
        f"<h3>Clusters</h3>{_table(['cluster', 'file'], clusters, kind='text')}"
    )


def _bars(summary: pd.DataFrame, configs: Sequence[str]) -> bytes:
    """Four panels (2 × 2) of horizontal bars, one per config: the mean with its 95 % interval and the
    value written beside the bar. Horizontal, so that any number of configs stays readable: the figure
    grows in height, never in width."""
    from matplotlib.axes import Axes

    fig, _ = _figure(width=11.0, height=1.6 + 0.55 * len(configs))
    fig.clear()
    axes: list[Axes] = [fig.add_subplot(2, 2, i + 1) for i in range(len(PLOTTED))]
    y = np.arange(len(configs))
    for i, (ax, metric) in enumerate(zip(axes, PLOTTED)):
        rows = summary[summary["metric"] == metric].set_index("config")
        got_mean = dict(zip(rows.index, rows["mean"].astype(float)))
        got_ci = dict(zip(rows.index, rows["ci95"].astype(float)))
        means = [got_mean.get(c, math.nan) for c in configs]
        cis = [got_ci.get(c, math.nan) for c in configs]
        kind = METRICS[metric][1]
        scale, unit = {"fraction": (100.0, " (%)")}.get(kind, (1.0, ""))
        if kind == "seconds":
            divisor, name = _time_unit(max((m for m in means if not _missing(m)), default=0.0))
            scale, unit = 1.0 / divisor, f" ({name})"
        values = np.nan_to_num(np.asarray(means, float)) * scale
        errors = np.nan_to_num(np.asarray(cis, float)) * scale
        ax.barh(y, values, xerr=errors, color="#4c78a8", capsize=3)
        for yi, m, v, e in zip(y, means, values, errors):
            if not _missing(m):
                ax.annotate(format_metric(metric, m), (v + e, yi), va="center", fontsize=8,
                            xytext=(3, 0), textcoords="offset points")  # fmt: skip
        ax.set_title(METRICS[metric][0] + unit, fontsize=10)
        ax.set_yticks(y, [str(c) if i % 2 == 0 else "" for c in configs], fontsize=8)
        ax.invert_yaxis()  # the first config on top, as in the table
        ax.grid(True, axis="x", alpha=0.3)
        ax.margins(x=0.25)
    return _png(fig, axes[0], empty=summary.empty)


def _sizes(sizes: pd.DataFrame, configs: Sequence[str]) -> str:
    """One row per config, one column per size bucket (configs grow downwards, as in every table)."""
    if sizes.empty:
        return ""
    means = sizes.groupby(["config", "size"], sort=False)[["jobs", "wait_mean"]].mean()
    order = list(dict.fromkeys(sizes["size"]))
    jobs = sizes.groupby("size", sort=False)["jobs"].mean()
    rows = [
        [_esc(c)]
        + [
            _esc(format_metric("wait_mean", means.loc[(c, size), "wait_mean"]))
            if (c, size) in means.index and not _missing(means.loc[(c, size), "wait_mean"])
            else "—"
            for size in order
        ]
        for c in configs
    ]
    headers = ["config"] + [
        f"{_esc(size)} <small>{format_metric('jobs_total', jobs[size])} jobs</small>" for size in order
    ]
    return "<h3>Mean wait by job size (GPUs), mean over seeds</h3>" + _table(headers, rows)


def _scenario(
    key: Mapping[str, Any],
    summary: pd.DataFrame,
    sizes: pd.DataFrame,
    configs: Sequence[str],
    baseline: str,
    png: bytes,
    file: str,
) -> str:
    index: dict[tuple[str, str], dict[str, Any]] = {
        (str(r["config"]), str(r["metric"])): {str(k): v for k, v in r.items()}
        for r in summary.to_dict("records")
    }
    rows = [[_esc(c)] + [_cell(index.get((c, m)), m, c == baseline) for m in HEADLINE] for c in configs]
    classes = ["baseline" if c == baseline else "" for c in configs]
    title = f"workload {key['workload']}, window {key['window']}, load scale ×{key['scale']:g}, cluster {key['cluster']}"
    n = int(summary["n"].max()) if len(summary) else 0
    caption = (
        f"Mean over {n} seed(s) of each config; the whiskers are 95 % confidence intervals of the mean "
        "(Student's t; none from a single seed). GPU utilisation in percent."
    )
    return (
        f"<h2>{_esc(title)}</h2>"
        + _table(["config", *(_esc(METRICS[m][0]) for m in HEADLINE)], rows, classes)
        + f'<figure><img alt="{_esc(title)}" src="{data_uri(png)}"><figcaption>{_esc(caption)} (<a href="{_esc(file)}">{_esc(file)}</a>)</figcaption></figure>'
        + _sizes(sizes, configs)
    )


def scenario_plots(summary: pd.DataFrame, runs: pd.DataFrame) -> dict[str, bytes]:
    """One bar chart per scenario (workload, window, scale, cluster): file name -> PNG, the names
    ``scenario-1.png``, ``scenario-2.png``, ... in the summary's order."""
    configs = list(dict.fromkeys(runs["config"]))
    groups = summary.groupby(list(SCENARIO), sort=False, dropna=False)
    return {f"scenario-{i}.png": _bars(block, configs) for i, (_, block) in enumerate(groups, 1)}


def sweep_page(
    described: Mapping[str, Any],
    runs: pd.DataFrame,
    sizes: pd.DataFrame,
    summary: pd.DataFrame,
    baseline: str,
    plots: Mapping[str, bytes] | None = None,
) -> str:
    """The page; ``plots`` (from :func:`scenario_plots`, drawn again when not given) holds one bar
    chart per scenario, in the order of the summary's scenarios."""
    configs = list(dict.fromkeys(runs["config"]))
    plots = plots if plots is not None else scenario_plots(summary, runs)
    parts = []
    for (key, block), (file, png) in zip(
        summary.groupby(list(SCENARIO), sort=False, dropna=False), plots.items()
    ):
        mine = dict(zip(SCENARIO, key))
        scenario_sizes = sizes
        for k, v in mine.items():
            scenario_sizes = scenario_sizes[scenario_sizes[k] == v]
        parts.append(_scenario(mine, block, scenario_sizes, configs, baseline, png, file))
    files = ", ".join(
        f'<a href="{n}"><code>{n}</code></a>'
        for n in (
            "results.csv",
            "results.parquet",
            "results_by_size.csv",
            "results_by_size.parquet",
            "summary.csv",
            "summary.parquet",
            "jobs.parquet",
            "sweep.json",
        )
    )
    title = f"corral sweep: {described['name']}"
    body = (
        f"<h2>What ran</h2>{_what_ran(described, runs)}"
        + "".join(parts)
        + f"<h2>Data</h2><p>{files}; each run's records in <code>cells/</code>. "
        "Relative changes are against the baseline config in the same scenario.</p>"
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
        f'content="width=device-width, initial-scale=1"><title>{_esc(title)}</title><style>{_CSS}</style></head>\n'
        f"<body><h1>{_esc(title)}</h1>\n{body}\n</body></html>\n"
    )
