"""The HTML pages of simulation reports (``index.html`` of ``corral simulate`` and ``corral compare``,
written by :mod:`corral.sim.report`): one self-contained page each, every plot embedded, every value
from the input escaped, no script.

What a page must not do is mislead (issue: an honest report): the run page and the comparison page
state what ran — cluster, workload, window, seeds, each configuration and its difference from the
first — every plot has a caption saying what it shows, tables scroll inside the page instead of
stretching it whatever the number of configs, and a column that repeats another in every row is shown
once, under both names.
"""

from __future__ import annotations

import difflib
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from corral.sim.breakdown import COLUMNS as _BREAKDOWN_COLUMNS
from corral.sim.plots import CAPTIONS, data_uri
from corral.sim.report_format import METRICS, QUEUE_COLUMNS, QUEUE_KINDS, format_metric, metric_label, plain
from corral.sim.result import SimResult
from corral.sim.speed import placement_label

__all__ = ["comparison_page", "run_page"]

_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}
.scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right;vertical-align:top}
th:first-child,td:first-child,table.text td{text-align:left}thead th{background:#f3f3f3}
td{white-space:nowrap}td:first-child,table.text td{white-space:normal}
figure{display:inline-block;margin:.5em;max-width:100%;vertical-align:top}img{max-width:100%;border:1px solid #eee}
figcaption{max-width:800px;color:#444;font-size:.9em}p.note{color:#555;font-size:.9em;max-width:60em}
code{background:#f5f5f5;padding:0 .2em}pre{background:#f7f7f7;padding:.5em;overflow-x:auto;font-size:.85em}"""

#: metric pairs shown once when they are equal in every row (the slowdowns agree when no job ran under
#: the 10 s floor; restarts and evictions when every gang is one pod; the two utilisations without a drain)
SAME = (
    ("slowdown_mean", "bounded_slowdown_mean"),
    ("broken_gangs", "evictions"),
    ("gpu_utilisation", "gpu_utilisation_window"),
)


def _table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], *, kind: str = "", raw: bool = False
) -> str:
    """A table in a box that scrolls sideways when it is wider than the page; cells escaped unless
    ``raw``."""
    esc = (lambda c: str(c)) if raw else (lambda c: html.escape(str(c)))
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>\n" for row in rows)
    return f'<div class="scroll"><table class="{kind}">{thead}<tbody>\n{body}</tbody></table></div>'


def repeated(keys: Sequence[str], value: Any) -> dict[str, str]:
    """Of the :data:`SAME` pairs among ``keys``, the second key -> the first, for pairs whose values
    (``value(key)`` -> one value per row) are equal in every row and present."""
    out = {}
    for a, b in SAME:
        if a in keys and b in keys:
            va, vb = value(a), value(b)
            if va == vb and any(v is not None for v in va):
                out[b] = a
    return out


def _figures(plots: Mapping[str, bytes], captions: Mapping[str, str] | None = None) -> str:
    captions = {**CAPTIONS, **(captions or {})}
    return "\n".join(
        f'<figure><img alt="{html.escape(name)}" src="{data_uri(png)}">'
        f"<figcaption>{html.escape(captions.get(name, name))}</figcaption></figure>"
        for name, png in plots.items()
    )


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
        f'content="width=device-width, initial-scale=1"><title>{html.escape(title)}</title><style>{_CSS}</style></head>\n'
        f"<body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )


def _breakdown_table(groups: Sequence[Mapping[str, Any]], by: str) -> str:
    mine = [g for g in groups if g["by"] == by]
    # a column no group has a value in (the expected-start error of a run without forecasts) is left out
    columns = {c: v for c, v in _BREAKDOWN_COLUMNS.items() if any(g[c] is not None for g in mine)}
    same = repeated(list(columns), lambda c: [g[c] for g in mine])
    labels = {c: label for c, (label, _) in columns.items()}
    for b, a in same.items():
        labels[a] = f"{labels[a]} = {labels.pop(b)}"
    shown = [c for c in columns if c in labels]
    rows = [[g["group"]] + [format_metric(columns[c][1], g[c]) for c in shown] for g in mine]
    return _table([by] + [labels[c] for c in shown], rows)


def _breakdown_side_by_side(
    groups: Mapping[str, Sequence[Mapping[str, Any]]],
    by: str,
    columns: Sequence[str] = ("wait_mean", "wait_p95", "jct_mean", "bounded_slowdown_mean"),
) -> str:
    """One row per group and config (configs grow downwards, so any number of them fits), the
    group's job count once."""
    names = list(groups)
    order = list(dict.fromkeys(g["group"] for rs in groups.values() for g in rs if g["by"] == by))
    index = {(n, g["group"]): g for n, rs in groups.items() for g in rs if g["by"] == by}
    headers = [by, "config", "jobs"] + [_BREAKDOWN_COLUMNS[c][0] for c in columns]
    rows = []
    for grp in order:
        for i, n in enumerate(names):
            row = index.get((n, grp))
            jobs = format_metric("jobs_total", row["jobs"]) if row and i == 0 else ""
            cells = [format_metric(_BREAKDOWN_COLUMNS[c][1], row[c]) if row else "—" for c in columns]
            rows.append([grp if i == 0 else "", n, jobs, *cells])
    return _table(headers, rows)


def _what_ran(meta: Mapping[str, Any], configs: Sequence[tuple[str, str]] = ()) -> str:
    """Cluster, workload, window, seed, jobs; and each config's source."""
    options = meta.get("options") or {}
    window = meta.get("window") or {}
    span = (
        f"[{window.get('start') or 'start'}, {window.get('end') or 'end'}) of the trace's clock"
        if window
        else "the whole workload"
    )
    if options.get("until") is not None:
        span += f"; the clock stopped at {format_metric('makespan', options['until'])}"
    rows = [
        ("cluster", meta.get("cluster", "")),
        ("workload", meta.get("workload", "")),
        ("window", span),
        ("seed", meta.get("seed", "")),
        ("jobs", meta.get("jobs", "")),
        ("schedule period", format_metric("makespan", options.get("schedule_period")) if options else ""),
    ]
    rows += [(f"config {name}", source) for name, source in configs]
    return _table(["", ""], rows, kind="text")


def _config_text(source: str) -> str:
    if source == "built-in default":
        import yaml

        from corral.registry import DEFAULT_CONFIG

        return yaml.safe_dump(DEFAULT_CONFIG, sort_keys=False)
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else ""
    except (OSError, UnicodeDecodeError):
        return ""


def _diffs(sources: Sequence[tuple[str, str]]) -> str:
    """Each config's configuration against the first one's, as a unified diff."""
    if len(sources) < 2:
        return ""
    first_name, first = sources[0][0], _config_text(sources[0][1])
    parts = []
    for name, source in sources[1:]:
        text = _config_text(source)
        diff = "".join(
            difflib.unified_diff(
                first.splitlines(keepends=True), text.splitlines(keepends=True), first_name, name, n=1
            )
        )
        body = html.escape(diff) if diff else "(the same configuration text)"
        if not first or not text:
            body = "(configuration text not available)"
        parts.append(
            f"<details><summary>{html.escape(name)} against {html.escape(first_name)}</summary><pre>{body}</pre></details>"
        )
    return "<h3>Each configuration against the first</h3>" + "".join(parts)


def _reasons(reasons: Sequence[Mapping[str, Any]], longest: Sequence[Mapping[str, Any]]) -> str:
    top = [r for r in reasons if r["by"] == "all"]
    rows = [
        [
            r["reason"],
            f"{r['jobs']:,}",
            f"{r['jobs_share']:.0%}",
            f"{r['wait_hours']:,.1f} h",
            f"{r['wait_share']:.0%}",
        ]
        for r in top
    ]
    groups = []
    for by in ("queue", "size"):
        mine = [r for r in reasons if r["by"] == by]
        for group in dict.fromkeys(r["group"] for r in mine):
            rs = [r for r in mine if r["group"] == group]
            by_jobs = max(rs, key=lambda r: (r["jobs"], r["wait_hours"]))
            by_wait = max(rs, key=lambda r: (r["wait_hours"], r["jobs"]))
            groups.append(
                [
                    f"{by} {group}",
                    f"{by_jobs['reason']} ({by_jobs['jobs']:,} jobs)",
                    f"{by_wait['reason']} ({by_wait['wait_hours']:,.1f} h)",
                ]
            )
    long_rows = [
        [
            r["job"],
            r["queue"],
            f"{r['gpus']:g}",
            format_metric("wait_mean", r["wait"]) + (" (still waiting)" if r["still_waiting"] else ""),
            r["reason"],
        ]
        for r in longest
    ]
    return (
        '<h2>Why jobs waited</h2><p class="note">Each job counts once, under the last reason it waited for, with its whole wait '
        "(up to the end of the run for a job still waiting); names and numbers in the reasons are replaced by placeholders "
        "so that jobs waiting for the same thing share a row.</p>"
        + _table(["reason", "jobs", "of waiting jobs", "waiting time", "of waiting time"], rows)
        + "<h3>By queue and size: the top reason by jobs and by waiting time</h3>"
        + _table(["group", "most jobs", "most waiting time"], groups)
        + "<h3>Longest waits</h3>"
        + _table(["job", "queue", "GPUs", "wait", "last reason"], long_rows)
    )


def _placement_counts(result: SimResult) -> dict[str, int]:
    counts: dict[str, int] = {}
    for job in result.jobs:
        if job.placement:
            counts[job.placement] = counts.get(job.placement, 0) + 1
    return counts


def _placement_order(keys: Iterable[str]) -> list[str]:
    def rank(key: str) -> tuple[int, int]:
        if key == "node":
            return (0, 0)
        if key.startswith("tier "):
            return (1, int(key.split()[1]))
        return (2, 0)

    return sorted(set(keys), key=rank)


def _placement(results: Mapping[str, SimResult]) -> str:
    """Gangs (jobs of two or more pods) by the smallest topology domain that held them at their first
    start, one row per config: placement quality beside the waits it cost."""
    counts = {n: _placement_counts(r) for n, r in results.items()}
    columns = _placement_order(k for c in counts.values() for k in c)
    if not columns:
        return ""
    rows = [[n, *(f"{c.get(k, 0):,}" for k in columns), f"{sum(c.values()):,}"] for n, c in counts.items()]
    return (
        '<h2>Placement of gangs</h2><p class="note">Jobs of two or more pods by the smallest topology domain '
        "that held all their pods when they first started (one node; one hypernode of tier N; no hypernode: "
        "spread over the cluster).</p>" + _table(["config", *columns, "gangs started"], rows)
    )


_WAIT_NOTE = (
    '<p class="note">Waits count every job that could run: a job still waiting when the run ended counts '
    "the wait it had by then (censored, so a policy that starves jobs is not rewarded for it); never-fit jobs "
    "are counted apart. The submission window runs from the first submit to the last (or to --until); "
    "the whole-run utilisation includes the drain after it.</p>"
)


def run_page(
    result: SimResult,
    summary: Mapping[str, Any],
    queues: list[dict[str, Any]],
    plots: Mapping[str, bytes],
    groups: Sequence[Mapping[str, Any]] = (),
    reasons: Sequence[Mapping[str, Any]] = (),
    longest: Sequence[Mapping[str, Any]] = (),
) -> str:
    config = result.meta.get("config") or result.meta.get("config_name") or ""
    keys = list(summary)
    same = repeated(keys, lambda k: [summary[k]])
    labels = {k: metric_label(k) for k in keys}
    for b, a in same.items():
        labels[a] = f"{labels[a]} = {labels.pop(b)}"
    metrics = _table(
        ["metric", "value"], [(labels[k], format_metric(k, summary[k])) for k in keys if k in labels]
    )
    queue_rows = [[format_metric(QUEUE_KINDS.get(c, ""), row[c]) for c in QUEUE_COLUMNS] for row in queues]
    meta = _table(
        ["key", "value"],
        [(k, v if isinstance(v, str) else json.dumps(plain(v))) for k, v in result.meta.items()],
        kind="text",
    )
    files = ", ".join(
        f'<a href="{n}"><code>{n}</code></a>'
        for n in (
            "summary.json", "meta.json", "jobs.csv", "jobs.json", "queues.csv", "cluster.csv",
            "queue_summary.csv", "breakdown.csv", "breakdown.json", "reasons.csv", "longest_waits.csv",
        )
    )  # fmt: skip
    source = str(result.meta.get("config_source") or config)
    body = (
        f"<h2>What ran</h2>{_what_ran(result.meta, [(str(config), source)])}"
        f"<h2>Summary</h2>{metrics}{_WAIT_NOTE}"
        f"<h2>By job size (GPUs)</h2>{_breakdown_table(groups, 'size')}"
        f"<h2>By queue</h2>{_breakdown_table(groups, 'queue')}"
        f"{_reasons(reasons, longest)}"
        f"{_placement({str(config) or 'run': result})}"
        f"<h2>Plots</h2>{_figures(plots)}"
        f"<h2>Queues</h2>{_table(list(QUEUE_COLUMNS.values()), queue_rows)}"
        f"<h2>Run</h2>{meta}<p>Data: {files}</p>"
    )
    return _page(f"corral simulation report{': ' + str(config) if config else ''}", body)


def comparison_page(
    rows: list[dict[str, Any]],
    plots: Mapping[str, bytes],
    groups: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    results: Mapping[str, SimResult] | None = None,
    reasons: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> str:
    """Metrics as rows and configs as columns (a table that scrolls in place when the configs are
    many), what ran, each config's diff against the first, the breakdowns, top reasons, plots."""
    results = results or {}
    headers = ["metric"] + [str(r["config"]) for r in rows]
    # the known metrics, then any other key the rows give (the speed model's placement metrics)
    keys = list(METRICS) + list(
        dict.fromkeys(k for r in rows for k in r if k not in METRICS and placement_label(k))
    )
    same = repeated(keys, lambda k: [r.get(k) for r in rows])
    labels = {k: metric_label(k) for k in keys}
    for b, a in same.items():
        labels[a] = f"{labels[a]} = {labels.pop(b)}"
    table = _table(
        headers, [[labels[k]] + [format_metric(k, r.get(k)) for r in rows] for k in keys if k in labels]
    )
    links = "".join(
        f'<li><a href="{html.escape(r["report"])}/index.html">{html.escape(str(r["config"]))}</a></li>'
        for r in rows
    )
    first = next(iter(results.values()), None)
    sources = [(str(n), str(r.meta.get("config_source") or n)) for n, r in results.items()]
    what = _what_ran(first.meta, sources) + _diffs(sources) if first is not None else ""
    top = []
    for name, rs in (reasons or {}).items():
        for r in [r for r in rs if r["by"] == "all"][:3]:
            top.append([name, r["reason"], f"{r['jobs']:,}", f"{r['wait_hours']:,.1f} h"])
    by_size = _breakdown_side_by_side(groups or {}, "size")
    by_queue = _breakdown_side_by_side(groups or {}, "queue")
    body = (
        f"<h2>What ran</h2>{what}"
        f"<h2>Metrics</h2>{table}{_WAIT_NOTE}<h2>By job size (GPUs)</h2>{by_size}<h2>By queue</h2>{by_queue}"
        "<h2>Why jobs waited: the top three reasons of each config</h2>"
        + _table(["config", "reason", "jobs", "waiting time"], top)
        + _placement(results)
        + f"<h2>Plots</h2>{_figures(plots)}"
        f"<h2>Reports</h2><ul>{links}</ul>"
        '<p>Data: <a href="comparison.csv"><code>comparison.csv</code></a>, '
        '<a href="breakdown.csv"><code>breakdown.csv</code></a>, '
        '<a href="comparison.json"><code>comparison.json</code></a></p>'
    )
    return _page("corral comparison", body)
