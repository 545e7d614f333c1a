"""The operator's page: what the scheduler sees and would do, as one server-rendered HTML document.

Written by ``corral schedule --html DIR`` (``DIR/index.html``, replaced atomically). Sections:

- **Queues**: the queue tree of ``corral queues`` (deserved, allocated, share as a bar, guarantee,
  capability, waiting demand, podgroups);
- **Waiting podgroups**: each with the reason of its last cycle and, when the page was asked for with a
  forecast, its expected start and basis (docs/forecast.md);
- **Reservation**: the target job of ``elect``/``reserve`` and the nodes locked for it (seed 001);
- **Evictions**: each victim with the action that chose it and the gang it made room for ("why was I
  preempted");
- **Topology**: each HyperNode (tiers, parents before children) with its nodes and free GPUs.

Plain HTML and inline CSS: no script, no chart library, nothing fetched — the page opens from disk and
from a read-only server alike. Every name comes from users (pods, podgroups, queues, nodes, reasons) and
is escaped (``html.escape``) wherever it is written.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import numpy as np

from corral.framework.decisions import Decisions
from corral.framework.reservation import current_target
from corral.model import Cluster
from corral.model.clock import format_time
from corral.model.quantity import MILLI
from corral.model.resources import GPU
from corral.queueview import COLUMNS, QueueRow, queue_table_rows

__all__ = ["render_page"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.4em 0} td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;
vertical-align:top;font-size:.9em} th{background:#f3f3f3}
.bar{display:inline-block;height:.8em;background:#4a7;vertical-align:middle}
.over{background:#c54} .muted{color:#777} .num{text-align:right} .nowrap{white-space:nowrap}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(section: str, headers: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> str:
    """A table whose cells are already escaped HTML; ``empty`` (escaped here) when there is no row."""
    if not rows:
        return f'<p class="muted" id="{section}-empty">{_e(empty)}</p>'
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table id="{section}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _share_bar(share: float | None) -> str:
    if share is None:
        return '<span class="muted">-</span>'
    width = min(share, 2.0) * 60
    over = " over" if share > 1.0 + 1e-9 else ""
    return (
        f'<span class="nowrap"><span class="bar{over}" style="width:{width:.0f}px"></span> {share:.2f}</span>'
    )


def _queues(rows: list[QueueRow], resources: list[str], source: str) -> str:
    cells = queue_table_rows(rows, resources)
    out = []
    for row, text in zip(rows, cells):
        name = "&nbsp;&nbsp;" * row.depth + _e(row.name)
        shown = [name, *(_e(c) for c in text[1:5]), _share_bar(row.share), *(_e(c) for c in text[6:])]
        out.append(shown)
    return f'<p class="muted">deserved: {_e(source)}</p>' + _table("queues", COLUMNS, out, "no queues")


def _waiting(decisions: Decisions, estimates: Sequence[Any] | None) -> str:
    reasons: dict[str, str] = {}
    for u in decisions.unschedulable:
        reasons[u.podgroup] = u.reason
    expected = {e.podgroup: e for e in estimates or ()}
    names = sorted(set(reasons) | set(expected))
    rows = []
    for name in names:
        e = expected.get(name)
        start = format_time(e.start) if e is not None and e.start is not None else "-"
        rows.append(
            [
                _e(name),
                _e(reasons.get(name, "")),
                _e(start),
                _e(e.basis if e else ""),
                _e(e.where if e else ""),
            ]
        )
    headers = ("podgroup", "why it waits", "expected start", "basis", "where")
    return _table("waiting", headers, rows, "no podgroup is waiting")


_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _shares_over_time(history: Sequence[tuple[float, dict[str, float]]]) -> str:
    """Each queue's share (allocated over deserved) at every sample of ``history`` as an inline SVG
    line chart — drawn on the server, no script, no chart library; the dashed line is a share of 1."""
    names = sorted({q for _, shares in history for q in shares})
    if len(history) < 2 or not names:
        return '<p class="muted" id="shares-empty">not enough samples yet</p>'
    w, h, pad = 640, 200, 30
    t0, t1 = history[0][0], history[-1][0]
    top = max(1.5, *(v for _, shares in history for v in shares.values()))

    def x(t: float) -> float:
        return pad + (w - 2 * pad) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)

    def y(v: float) -> float:
        return h - pad - (h - 2 * pad) * min(v, top) / top

    lines = [
        f'<line x1="{pad}" x2="{w - pad}" y1="{y(1.0):.1f}" y2="{y(1.0):.1f}" stroke="#999" '
        'stroke-dasharray="4 3"/>',
        f'<text x="2" y="{y(1.0) + 4:.1f}" font-size="10">1.0</text>',
        f'<text x="2" y="{y(top) + 4:.1f}" font-size="10">{top:.1f}</text>',
        f'<text x="2" y="{y(0.0) + 4:.1f}" font-size="10">0</text>',
    ]
    legend = []
    for i, name in enumerate(names):
        color = _COLORS[i % len(_COLORS)]
        points = " ".join(f"{x(t):.1f},{y(sh[name]):.1f}" for t, sh in history if name in sh)
        lines.append(
            f'<polyline class="share" data-queue="{_e(name)}" fill="none" stroke="{color}" '
            f'stroke-width="1.5" points="{points}"/>'
        )
        legend.append(f'<span style="color:{color}">&#9632;</span> {_e(name)}')
    span = f"{_e(format_time(t0))} to {_e(format_time(t1))}, {len(history)} samples"
    return (
        f'<svg id="shares" width="{w}" height="{h}" role="img" aria-label="queue shares over time">'
        + "".join(lines)
        + f'</svg><p class="muted">{" &nbsp; ".join(legend)}<br>{span}</p>'
    )


def _reservation(cluster: Cluster) -> str:
    target = current_target(cluster)
    locked = [(n, j) for n, j in zip(cluster.nodes.names, cluster.nodes.locked_for) if j]
    if target is None and not locked:
        return '<p class="muted" id="reservation-empty">no reservation target, no locked node</p>'
    head = f"<p id='target'>target: <b>{_e(target.uid)}</b></p>" if target is not None else ""
    rows = [[_e(n), _e(j)] for n, j in locked]
    return head + _table("locked", ("node", "locked for"), rows, "no node is locked")


def _evictions(decisions: Decisions) -> str:
    rows = [[_e(x.pod), _e(x.node), _e(x.action), _e(x.preemptor), _e(x.cycle)] for x in decisions.evictions]
    headers = ("victim pod", "node", "chosen by", "to make room for", "cycle")
    return _table("evictions", headers, rows, "no eviction")


def _topology(cluster: Cluster) -> str:
    tree = cluster.hypernodes
    if not tree:
        return '<p class="muted" id="topology-empty">no HyperNodes in this snapshot</p>'
    nodes = cluster.nodes
    gpu = cluster.resources.get(GPU)
    free = nodes.idle
    rows = []
    for tier in sorted(tree.tiers, reverse=True):
        for hn in tree.domains(tier):
            members = np.flatnonzero(hn.mask)
            total = float(nodes.allocatable[members, gpu].sum()) / MILLI if gpu is not None else 0.0
            idle = float(free[members, gpu].clip(min=0).sum()) / MILLI if gpu is not None else 0.0
            rows.append(
                [
                    _e(hn.name),
                    _e(tier),
                    _e(hn.parent or ""),
                    _e(len(members)),
                    f'<span class="num">{idle:g} / {total:g}</span>',
                ]
            )
    return _table(
        "topology", ("HyperNode", "tier", "parent", "nodes", "free / all GPUs"), rows, "no HyperNode"
    )


def render_page(
    cluster: Cluster,
    decisions: Decisions,
    rows: list[QueueRow],
    source: str,
    now: float,
    estimates: Sequence[Any] | None = None,
    title: str = "corral",
    refresh: int | None = None,
    history: Sequence[tuple[float, dict[str, float]]] | None = None,
) -> str:
    """The whole page for ``cluster`` (as the decisions left it) after ``decisions``; with ``refresh``
    (seconds), the page reloads itself that often, and ``history`` (time, queue -> share samples) adds
    the queues' shares over time (``corral run --dashboard-port``)."""
    resources = list(cluster.resources.names)
    sections = [("Queues", _queues(rows, resources, source))]
    if history is not None:
        sections.append(("Shares over time", _shares_over_time(history)))
    sections += [
        ("Waiting podgroups", _waiting(decisions, estimates)),
        ("Reservation", _reservation(cluster)),
        ("Evictions", _evictions(decisions)),
        ("Topology", _topology(cluster)),
    ]
    body = "".join(f"<h2>{_e(name)}</h2>\n{html_}\n" for name, html_ in sections)
    reload = f"<meta http-equiv='refresh' content='{int(refresh)}'>" if refresh else ""
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>{reload}"
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{_e(title)}</h1><p class='muted' id='as-of'>as of {_e(format_time(now))}; "
        f"{len(cluster.nodes)} nodes, {len(cluster.jobs)} podgroups</p>\n{body}</body></html>\n"
    )
