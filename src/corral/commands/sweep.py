"""``corral sweep SPEC.yaml`` on the command line (registered with ``simulate`` and ``compare`` by
:func:`corral.commands.simulate.register`): run the grid (:mod:`corral.sim.sweep`), write its tables and page
(:mod:`corral.sim.sweep_report`), print the headline figures per scenario. A bad spec or a cell's bad
input is one ``error:`` line with exit code 2; the cells finished before it stay for the next run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from corral.commands.boundary import fail
from corral.terminal import cell, plain

__all__ = ["sweep_command"]

_SHOWN = (
    "wait_mean",
    "bounded_slowdown_mean",
    "max_wait_largest_5pct",
    "gpu_utilisation_window",
    "jobs_completed",
)


def sweep_command(
    spec: Path = typer.Argument(
        ..., help="sweep spec (YAML: configs, workloads, clusters, seeds; docs/simulator.md)"
    ),
    output: Path = typer.Option(
        Path("corral-sweep"), "--output", "-o", help="sweep folder (resumed if it holds one)"
    ),
    workers: int | None = typer.Option(
        None, "--workers", min=1, max=1024, help="cells at once (default: the spec's, else the CPUs)"
    ),
    executor: str | None = typer.Option(
        None,
        "--executor",
        help="local (a process pool) or ray (default: the spec's, else ray with an address, else local)",
    ),
    address: str | None = typer.Option(
        None,
        "--address",
        help="a Ray cluster to run on; asks for --executor ray (default: the spec's, else RAY_ADDRESS)",
    ),
    no_progress: bool = typer.Option(False, "--no-progress", help="no progress bar or progress lines"),
) -> None:
    """Run a grid of configs × workloads × clusters × seeds in parallel; resumable."""
    from corral.commands.tables import wide_console

    console = wide_console()
    try:
        sweep, summary = _sweep(spec, output, executor, workers, address, None if no_progress else console)
    except BaseException as exc:  # noqa: BLE001 - the CLI boundary
        fail(exc)
        return
    _print(console, summary, sweep.baseline)
    console.print(
        f"sweep: {plain(output.resolve() / 'index.html')}", soft_wrap=True, markup=False, highlight=False
    )


def _sweep(
    spec: Path, output: Path, executor: str | None, workers: int | None, address: str | None, console: Any
) -> tuple[Any, Any]:
    """The spec loaded, its grid run (:func:`corral.sim.sweep.run_sweep`; with a progress bar on
    ``console`` unless it is None, closed however the run ends) and its tables and page written; the
    spec and the summary table."""
    import json

    from corral.errors import InputError
    from corral.extras import require

    require("sim", "corral sweep")  # pandas, pyarrow, matplotlib, OR-Tools: pip install 'corral[sim]'
    from corral.sim.progress import CellProgress
    from corral.sim.sweep import SWEEP_MARKER, run_sweep
    from corral.sim.sweep_report import write_sweep_outputs
    from corral.sim.sweep_spec import EXECUTORS, load_sweep_spec

    if executor is not None and executor not in EXECUTORS:
        raise InputError(f"expected local or ray, got {executor!r}", field="--executor")
    sweep = load_sweep_spec(spec)
    progress = None if console is None else CellProgress(console)
    try:
        records = run_sweep(
            sweep,
            output,
            executor=executor,
            workers=workers,
            address=address,
            progress=progress.update if progress else None,
        )
    finally:
        if progress:
            progress.close()
    described = json.loads((output / SWEEP_MARKER).read_text(encoding="utf-8"))
    return sweep, write_sweep_outputs(output, records, described, sweep.baseline)


def _print(console: Any, summary: Any, baseline: str) -> None:
    from rich.table import Table

    from corral.sim.report_format import METRICS, format_metric
    from corral.sim.sweep_columns import SCENARIO

    for key, block in summary.groupby(list(SCENARIO), sort=False, dropna=False):
        table = Table(title=cell("sweep: " + ", ".join(f"{k} {v}" for k, v in zip(SCENARIO, key))))
        table.add_column("config")
        for metric in _SHOWN:
            table.add_column(METRICS[metric][0], justify="right")
        index = {(r["config"], r["metric"]): r for r in block.to_dict("records")}
        for config in dict.fromkeys(block["config"]):
            row: list[Any] = [cell(config + (" (baseline)" if config == baseline else ""))]
            for metric in _SHOWN:
                r = index[(config, metric)]
                text = format_metric(metric, None if r["mean"] != r["mean"] else r["mean"])
                if r["ci95"] == r["ci95"] and r["ci95"] > 0:
                    text += " ± " + format_metric(metric, r["ci95"])
                row.append(text)
            table.add_row(*row)
        console.print(table)
