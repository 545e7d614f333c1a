"""``corral simulate`` and ``corral compare`` (SPEC.md §4): the simulator on the command line.

:func:`register` adds both commands, and ``corral sweep`` (:mod:`corral.commands.sweep`), to the
``corral`` typer app. ``corral simulate`` with no arguments
runs the built-in example (:mod:`corral.sim.example`) and writes ``./corral-report/``; ``corral compare
CONF...`` runs each configuration on the same cluster and workload and writes ``./corral-compare/``.
Every :class:`~corral.errors.CorralError` becomes one line ``error: ...`` on stderr with its exit code (2
for bad input); any other exception is ``internal error: ...`` with exit code 1 (``CORRAL_DEBUG=1``
shows the traceback). A report folder is written whole or not at all (``report.write_report``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from corral.commands.boundary import boundary
from corral.commands.options import named_config
from corral.files import check_output_folder
from corral.sim.runs import RunInputs, prepare, run_config
from corral.terminal import plain

# The simulator (engine, workloads with pandas, reports with matplotlib) and rich's console are imported
# by the functions that use them: registering these commands must not cost `corral --help` or
# `corral schedule` their import time (issue: large clusters, start-up).
if TYPE_CHECKING:
    from rich.console import Console

    from corral.framework.config import Config
    from corral.sim.result import SimResult

__all__ = ["FORMATS", "compare_command", "register", "simulate_command"]

# The --format names of the registry (corral.sim.formats, which imports pandas: not at registration).
FORMATS = (
    "corral",
    "philly",
    "alibaba",
    "alibaba-dlrm",
    "swf",
    "gavel",
    "pollux",
    "tiresias",
    "helios",
    "synthetic",
    "manifests",
)


def _notes(result: SimResult, console: Console) -> None:
    skipped = result.meta.get("skipped_rows") or {}
    if skipped:
        text = ", ".join(f"{n} ({reason})" for reason, n in skipped.items())
        console.print(f"trace rows skipped: {plain(text)}; see meta.json", markup=False, highlight=False)
    moved = result.meta.get("queues_to_default") or {}
    if moved:
        text = ", ".join(f"{q} ({n} jobs)" for q, n in moved["jobs"].items())
        console.print(
            f"queues the cluster does not list, run in {plain(moved['queue'])!r}: {plain(text)}",
            markup=False,
            highlight=False,
        )
    never = result.meta.get("never_fits") or []
    if never:
        first = never[0]
        console.print(
            f"{len(never)} job(s) can never run (first: {plain(first['job'])}: "
            f"{plain(first['reason'])}); see meta.json",
            markup=False,
            highlight=False,
        )
    if "stalled_at" in result.meta:
        console.print(f"warning: the scheduler stopped making progress at t={result.meta['stalled_at']:g} s")


# ------------------------------------------------------------------------------------------ options
_CONFIG = typer.Option(None, "--config", "-c", help="scheduler configuration (YAML; default: built-in)")
_CLUSTER = typer.Option(None, "--cluster", help="a snapshot (files/folder) or a generator spec YAML")
_WORKLOAD = typer.Option(None, "--workload", "-w", help="trace file (CSV/Parquet) or synthetic spec YAML")
_FORMAT = typer.Option(
    None,
    "--format",
    help=f"{', '.join(FORMATS)}, with options as NAME:key=value,... (default: recognised from the file; "
    "see docs/traces.md)",
)
_START = typer.Option(None, "--start", help="keep jobs submitted at or after this (seconds, 36h, 7d)")
_END = typer.Option(None, "--end", help="keep jobs submitted before this (seconds, 36h, 7d)")
_QUEUE = typer.Option(None, "--queue", "-q", help="keep only jobs of this queue (repeatable)")
_SCALE = typer.Option(None, "--scale", help="multiply submit times (< 1: more load)")
_SEED = typer.Option(0, "--seed", min=0, help="seed of the synthetic workload")
_UNTIL = typer.Option(None, "--until", help="stop the simulated clock here (seconds, 36h, 7d)")
_PERIOD = typer.Option(10.0, "--schedule-period", help="simulated seconds between cycles")
_CHECKPOINT = typer.Option(None, "--checkpoint-interval", help="seconds of progress between checkpoints")
_STARTUP = typer.Option(0.0, "--startup-delay", help="seconds from bind to running")
_GRACE = typer.Option(0.0, "--grace-period", help="seconds an evicted pod holds its node")
_RESTART = typer.Option(
    "job",
    "--restart-policy",
    help="a broken gang restarts all its pods (job) or only the evicted ones (pods)",
)
_NO_PROGRESS = typer.Option(
    False, "--no-progress", help="no progress bar (or, when not on a terminal, no progress line every 10 s)"
)
_BUCKETS = typer.Option(
    "1,8,32",
    "--size-buckets",
    help="upper edges of the job-size buckets of the report, in GPUs (1,8,32: 1 GPU, 2-8, 9-32, >32)",
)
_WHOLE = typer.Option(
    False,
    "--plot-whole-run",
    help="plots over time to the end of the run (default: to the last submit or --until)",
)
_FORCE = typer.Option(False, "--force", help="replace --output even if it is not a previous corral report")


def simulate_command(
    config: Path | None = _CONFIG,
    cluster: Path | None = _CLUSTER,
    workload: Path | None = _WORKLOAD,
    fmt: str | None = _FORMAT,
    start: str | None = _START,
    end: str | None = _END,
    queue: list[str] | None = _QUEUE,
    scale: float | None = _SCALE,
    seed: int = _SEED,
    until: str | None = _UNTIL,
    schedule_period: float = _PERIOD,
    checkpoint_interval: float | None = _CHECKPOINT,
    startup_delay: float = _STARTUP,
    grace_period: float = _GRACE,
    restart_policy: str = _RESTART,
    output: Path = typer.Option(Path("corral-report"), "--output", "-o", help="report folder"),
    no_progress: bool = _NO_PROGRESS,
    size_buckets: str = _BUCKETS,
    force: bool = _FORCE,
    plot_whole_run: bool = _WHOLE,
) -> None:
    """Replay a workload through the scheduler and write a report (no arguments: the built-in example)."""
    from corral.extras import require

    with boundary():
        require("sim", "corral simulate")  # pandas, pyarrow, matplotlib, OR-Tools: pip install 'corral[sim]'
    from corral.commands.tables import wide_console
    from corral.sim.breakdown import parse_buckets
    from corral.sim.report import size_table, summarize, summary_table, write_report

    console = wide_console()
    with boundary():
        buckets = parse_buckets(size_buckets)
        check_output_folder(output, force)
        name, cfg = named_config(config)
        inputs = prepare(
            cluster,
            workload,
            fmt,
            start,
            end,
            queue,
            scale,
            seed,
            until,
            schedule_period,
            checkpoint_interval,
            startup_delay,
            grace_period,
            restart_policy,
        )
        result = run_config(inputs, cfg, name, show_progress=not no_progress, console=console)
        folder = write_report(result, output, buckets, force=force, whole_run=plot_whole_run)
    console.print(summary_table(summarize(result), title=f"corral simulate: {name}"))
    console.print(size_table({name: result}, buckets))
    _notes(result, console)
    console.print(f"report: {plain(folder / 'index.html')}", soft_wrap=True, markup=False, highlight=False)


def compare_command(
    configs: list[Path] = typer.Argument(..., help="configuration files ('default' is the built-in one)"),
    cluster: Path | None = _CLUSTER,
    workload: Path | None = _WORKLOAD,
    fmt: str | None = _FORMAT,
    start: str | None = _START,
    end: str | None = _END,
    queue: list[str] | None = _QUEUE,
    scale: float | None = _SCALE,
    seed: int = _SEED,
    until: str | None = _UNTIL,
    schedule_period: float = _PERIOD,
    checkpoint_interval: float | None = _CHECKPOINT,
    startup_delay: float = _STARTUP,
    grace_period: float = _GRACE,
    restart_policy: str = _RESTART,
    output: Path = typer.Option(Path("corral-compare"), "--output", "-o", help="comparison folder"),
    no_progress: bool = _NO_PROGRESS,
    size_buckets: str = _BUCKETS,
    force: bool = _FORCE,
    plot_whole_run: bool = _WHOLE,
) -> None:
    """Run several configurations on the same cluster and workload and lay the results side by side."""
    from corral.extras import require

    with boundary():
        require("sim", "corral compare")  # pandas, pyarrow, matplotlib, OR-Tools: pip install 'corral[sim]'
    from corral.commands.tables import wide_console
    from corral.sim.breakdown import parse_buckets
    from corral.sim.report import write_comparison

    console = wide_console()
    with boundary():
        buckets = parse_buckets(size_buckets)
        check_output_folder(output, force)
        loaded = [named_config(path) for path in configs]  # every config is checked before any run
        inputs = prepare(
            cluster,
            workload,
            fmt,
            start,
            end,
            queue,
            scale,
            seed,
            until,
            schedule_period,
            checkpoint_interval,
            startup_delay,
            grace_period,
            restart_policy,
        )
        results = _run_each(inputs, loaded, console, not no_progress)
        folder = write_comparison(results, output, buckets, force=force, whole_run=plot_whole_run)
    _print_comparison(console, results, buckets, folder)


def _print_comparison(
    console: Console, results: dict[str, SimResult], buckets: tuple[float, ...], folder: Path
) -> None:
    """The comparison's summary and job-size tables, each run's notes and where the page is."""
    from corral.sim.report import size_table, summarize, summary_table

    console.print(summary_table({n: summarize(r) for n, r in results.items()}, title="corral compare"))
    console.print(size_table(results, buckets))
    for result in results.values():
        _notes(result, console)
    console.print(
        f"comparison: {plain(folder / 'index.html')}", soft_wrap=True, markup=False, highlight=False
    )


def _run_each(
    inputs: RunInputs, loaded: list[tuple[str, Config]], console: Console, show_progress: bool
) -> dict[str, SimResult]:
    """Each configuration run on ``inputs``, in order, by name; a name given twice gains ``-2``,
    ``-3``, ..."""
    results: dict[str, SimResult] = {}
    for name, cfg in loaded:
        unique, n = name, 2
        while unique in results:
            unique, n = f"{name}-{n}", n + 1
        results[unique] = run_config(inputs, cfg, unique, console=console, show_progress=show_progress)
    return results


def register(app: typer.Typer) -> None:
    """Add ``simulate``, ``compare`` and ``sweep`` (:mod:`corral.commands.sweep`) to ``app``."""
    from corral.commands.sweep import sweep_command

    app.command("simulate")(simulate_command)
    app.command("compare")(compare_command)
    app.command("sweep")(sweep_command)
