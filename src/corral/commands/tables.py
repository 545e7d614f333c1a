"""The commands' tables (rich): the decisions of SPEC.md §4 (``corral schedule -o table``), the expected
starts (``--forecast``), the queue tree (``corral queues``) and the answer of ``corral whatif``; and the
console every command prints its tables on (:func:`wide_console`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from corral.terminal import cell

if TYPE_CHECKING:
    from corral.framework.decisions import Decisions

__all__ = ["print_decisions", "print_estimates", "print_queues", "print_whatif", "wide_console"]

_SECTIONS = (
    ("binds", "Binds", ("cycle", "pod", "node")),
    ("evictions", "Evictions", ("cycle", "pod", "node", "action", "preemptor")),
    ("nominations", "Nominations", ("cycle", "pod", "node")),
    ("podgroups", "PodGroup updates", ("cycle", "podgroup", "phase", "annotations")),
    ("node_locks", "Node locks", ("cycle", "node", "job")),
    ("unschedulable", "Unschedulable podgroups", ("cycle", "podgroup", "reason")),
)
#: kube-scheduler's conditions of scheduling.k8s.io PodGroups (corral.kube.native_status)
_CONDITIONS = (
    "conditions",
    "PodGroup conditions",
    ("cycle", "podgroup", "type", "status", "reason", "message"),
)
#: Dynamic Resource Allocation: the devices of each claim of a bound pod (corral.dra.records)
_CLAIMS = ("claim_allocations", "Claim allocations", ("cycle", "claim", "pod", "node", "devices", "template"))


def wide_console(pipe_width: int = 160) -> Console:
    """The terminal's console; into a pipe or file, at least ``pipe_width`` columns wide (tables are not
    wrapped into narrow columns when the output is not a terminal)."""
    console = Console()
    return console if console.is_terminal else Console(width=max(console.width, pipe_width))


def print_decisions(decisions: Decisions, cycles: int, console: Console | None = None) -> None:
    """One table per kind of decision. Every cell is literal text (:func:`corral.terminal.cell`): names
    from input are shown, never read as markup. On a terminal the tables fit its width (long cells fold);
    into a pipe or file they are up to 160 columns wide."""
    console = console or wide_console(160)
    counts = []
    sections: tuple[tuple[str, str, tuple[str, ...]], ...] = _SECTIONS
    if decisions.conditions:  # Kubernetes' own PodGroups only: listed when there are some
        sections = (*sections, _CONDITIONS)
    if decisions.claim_allocations:  # pods with resource claims only
        sections = (*sections, _CLAIMS)
    for attr, title, columns in sections:
        rows = getattr(decisions, attr)
        counts.append(f"{len(rows)} {title.lower()}")
        if not rows:
            continue
        table = Table(title=f"{title} ({len(rows)})", title_justify="left", expand=False, highlight=False)
        for col in columns:
            table.add_column(col, overflow="fold")
        for row in rows:
            cells = []
            for col in columns:
                value = getattr(row, col)
                if isinstance(value, dict):
                    value = ", ".join(f"{k}={v}" for k, v in value.items())
                elif isinstance(value, list):  # a claim's devices: request=driver/pool/device
                    value = ", ".join(
                        f"{d['request']}={d['driver']}/{d['pool']}/{d['device']}" for d in value
                    )
                cells.append(cell(value))
            table.add_row(*cells)
        console.print(table)
    console.print(f"{cycles} cycle(s): " + ", ".join(counts), markup=False, highlight=False)


def print_estimates(estimates: list[Any], console: Console | None = None) -> None:
    """``corral schedule --forecast``: each waiting podgroup's expected start, basis and place."""
    from corral.model.clock import format_time

    console = console or wide_console(160)
    table = Table(
        title=f"Expected starts ({len(estimates)})", title_justify="left", expand=False, highlight=False
    )
    for col in ("podgroup", "expected start", "basis", "where"):
        table.add_column(col, overflow="fold")
    for e in estimates:
        start = format_time(e.start) if e.start is not None else "-"
        table.add_row(cell(e.podgroup), cell(start), cell(e.basis), cell(e.where))
    console.print(table)


def print_queues(rows: list[Any], resources: list[str], source: str, console: Console | None = None) -> None:
    """``corral queues``: one row per queue, children indented under their parent."""
    from corral.queueview import COLUMNS, queue_table_rows

    console = console or wide_console(200)
    table = Table(
        title=f"Queues ({len(rows)}; deserved: {source})", title_justify="left", expand=False, highlight=False
    )
    for col in COLUMNS:
        table.add_column(col, overflow="fold")
    for cells in queue_table_rows(rows, resources):
        table.add_row(*(cell(c) for c in cells))
    console.print(table)


def print_whatif(answer: Any, console: Console | None = None) -> None:
    """``corral whatif``: per podgroup of the job, the verdict, then what the cycle would do for it."""
    from corral.model.clock import format_time

    console = console or wide_console(160)
    table = Table(title="What if it were submitted now", title_justify="left", expand=False, highlight=False)
    for col in ("podgroup", "admitted", "starts now", "why it would wait", "expected start", "basis"):
        table.add_column(col, overflow="fold")
    for p in answer.podgroups:
        e = answer.expected.get(p)
        start = format_time(e.start) if e is not None and e.start is not None else "-"
        table.add_row(
            cell(p),
            "yes" if answer.admitted.get(p) else "no",
            "yes" if answer.starts.get(p) else "no",
            cell(answer.reasons.get(p, "")),
            cell(start if not answer.starts.get(p) else "now"),
            cell(e.basis if e is not None else ""),
        )
    console.print(table)
    for title, rows, cols in (
        ("Binds", answer.binds, ("pod", "node")),
        ("Nominations", answer.nominations, ("pod", "node")),
        ("Evictions for it", answer.evictions, ("victim pod", "node", "action")),
    ):
        if rows:
            t = Table(title=f"{title} ({len(rows)})", title_justify="left", expand=False, highlight=False)
            for col in cols:
                t.add_column(col, overflow="fold")
            for row in rows:
                t.add_row(*(cell(x) for x in row))
            console.print(t)
