"""``corral schedule -o table``: the decisions of SPEC.md §4 as readable tables (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from corral.framework.decisions import Decisions

__all__ = ["print_decisions"]

_SECTIONS = (
    ("binds", "Binds", ("cycle", "pod", "node")),
    ("evictions", "Evictions", ("cycle", "pod", "node", "action", "preemptor")),
    ("nominations", "Nominations", ("cycle", "pod", "node")),
    ("podgroups", "PodGroup updates", ("cycle", "podgroup", "phase", "annotations")),
    ("node_locks", "Node locks", ("cycle", "node", "job")),
    ("unschedulable", "Unschedulable podgroups", ("cycle", "podgroup", "reason")),
)


def print_decisions(decisions: Decisions, cycles: int, console: Console | None = None) -> None:
    console = console or Console(width=160)
    counts = []
    for attr, title, columns in _SECTIONS:
        rows = getattr(decisions, attr)
        counts.append(f"{len(rows)} {title.lower()}")
        if not rows:
            continue
        table = Table(title=f"{title} ({len(rows)})", title_justify="left", expand=False)
        for col in columns:
            table.add_column(col, overflow="fold")
        for row in rows:
            cells = []
            for col in columns:
                value = getattr(row, col)
                if isinstance(value, dict):
                    value = ", ".join(f"{k}={v}" for k, v in value.items())
                cells.append(str(value))
            table.add_row(*cells)
        console.print(table)
    console.print(f"{cycles} cycle(s): " + ", ".join(counts))
