"""``corral simulate`` and ``corral compare`` (SPEC.md §4): the simulator on the command line.

:func:`register` adds both commands to the ``corral`` typer app. ``corral simulate`` with no arguments
runs the built-in example (:mod:`corral.sim.example`) and writes ``./corral-report/``; ``corral compare
CONF...`` runs each configuration on the same cluster and workload and writes ``./corral-compare/``.
Every :class:`~corral.errors.CorralError` becomes one line ``error: ...`` on stderr with its exit code (2
for bad input); any other exception is ``internal error: ...`` with exit code 1 (``CORRAL_DEBUG=1``
shows the traceback). A report folder is written whole or not at all (``report.write_report``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from corral.cli_errors import fail
from corral.errors import InputError
from corral.files import check_output_folder
from corral.terminal import plain

# The simulator (engine, workloads with pandas, reports with matplotlib) and rich's console are imported
# by the functions that use them: registering these commands must not cost `corral --help` or
# `corral schedule` their import time (issue: large clusters, start-up).
if TYPE_CHECKING:
    from rich.console import Console

    from corral.framework.config import Config
    from corral.sim.cluster_template import ClusterTemplate
    from corral.sim.engine import SimOptions
    from corral.sim.jobspec import JobSpec
    from corral.sim.loaders.common import Hints
    from corral.sim.result import SimResult

__all__ = ["FORMATS", "RunInputs", "parse_seconds", "prepare", "register", "run_config"]

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
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_seconds(text: str | None, option: str) -> float | None:
    """``3600``, ``90m``, ``36h``, ``7d`` or ``1d12h`` as seconds; None stays None; anything else (or a
    negative number) is an InputError naming the option."""
    if text is None:
        return None
    s = str(text).strip()
    try:
        value = float(s)
    except ValueError:
        parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", s)
        if not parts or "".join(n + u for n, u in parts) != s:
            raise InputError(
                f"expected seconds or a duration such as 90m, 36h, 7d, got {text!r}", field=option
            ) from None
        value = sum(float(n) * _UNITS[u] for n, u in parts)
    if not 0 <= value <= MAX_SECONDS:
        raise InputError(
            f"expected a number of seconds from 0 to {MAX_SECONDS:g}, got {text!r}", field=option
        )
    return value


# Simulated times stay within three centuries and steps at least a millisecond: a float64 clock near
# 1e10 s still moves by 1e-3 s, so no cycle can stop the clock (a step that vanishes in rounding would
# loop for ever), and every time has an RFC 3339 form.
MAX_SECONDS = 1e10
MIN_STEP = 1e-3


def _check_options(
    scale: float | None,
    schedule_period: float,
    checkpoint_interval: float | None,
    startup_delay: float,
    eviction_grace: float,
) -> None:
    for option, value, low in (
        ("--schedule-period", schedule_period, MIN_STEP),
        ("--checkpoint-interval", checkpoint_interval, MIN_STEP),
        ("--startup-delay", startup_delay, 0.0),
        ("--grace-period", eviction_grace, 0.0),
    ):
        if value is not None and not low <= value <= MAX_SECONDS:
            raise InputError(f"expected seconds from {low:g} to {MAX_SECONDS:g}, got {value!r}", field=option)
    if scale is not None and not 1e-6 <= scale <= 1e6:
        raise InputError(f"expected a factor from 1e-06 to 1e+06, got {scale!r}", field="--scale")


@dataclass
class RunInputs:
    """What every configuration of one ``simulate``/``compare`` run shares."""

    template: ClusterTemplate
    jobs: list[JobSpec]
    options: SimOptions
    meta: dict[str, Any]


def _hints(template: ClusterTemplate) -> Hints:
    """What a loader may read from the cluster: the most of a resource one node holds."""
    from corral.model.quantity import MILLI
    from corral.sim.loaders.common import Hints

    cluster = template.cluster

    def per_node(resource: str) -> float | None:
        pos = cluster.resources.get(resource)
        if pos is None or not len(cluster.nodes):
            return None
        most = float(cluster.nodes.allocatable[:, pos].max()) / MILLI
        return most or None

    return Hints(per_node)


def _load_workload(path: Path, fmt: str | None, template: ClusterTemplate, seed: int) -> list[JobSpec]:
    from corral.sim.formats import load_workload

    jobs: list[JobSpec] = load_workload(path, fmt, _hints(template), seed)
    return jobs


def prepare(
    cluster: Path | None = None,
    workload: Path | None = None,
    fmt: str | None = None,
    start: str | None = None,
    end: str | None = None,
    queues: list[str] | None = None,
    scale: float | None = None,
    seed: int = 0,
    until: str | None = None,
    schedule_period: float = 10.0,
    checkpoint_interval: float | None = None,
    startup_delay: float = 0.0,
    eviction_grace: float = 0.0,
    restart_policy: str = "job",
) -> RunInputs:
    """Read the cluster and the workload and shape the workload (window, queues, arrival scale).
    Without ``workload``: the built-in example's jobs; without ``cluster``: the example's cluster (with
    its three queues for the example, with the workload's own queues otherwise)."""
    from corral.sim.cluster_keys import route_queues
    from corral.sim.clusters import from_spec, load_cluster
    from corral.sim.engine import SimOptions
    from corral.sim.example import EXAMPLE_CLUSTER, example_cluster, example_workload
    from corral.sim.workload import filter_jobs, scale_arrivals

    _check_options(scale, schedule_period, checkpoint_interval, startup_delay, eviction_grace)
    if cluster is not None:
        template = load_cluster(cluster)
    elif workload is None:
        template = example_cluster()
    else:
        template = from_spec(
            replace(EXAMPLE_CLUSTER, queues=None, name="64 nodes x 8 GPUs"), "built-in example cluster"
        )
    jobs = example_workload(seed) if workload is None else _load_workload(workload, fmt, template, seed)
    skipped = dict(getattr(jobs, "skipped", None) or {})
    lo, hi = parse_seconds(start, "--start"), parse_seconds(end, "--end")
    if lo is not None or hi is not None or queues:
        jobs = filter_jobs(jobs, lo, hi, queues or None)
    if scale is not None:
        jobs = scale_arrivals(jobs, scale)
    if not jobs:
        raise InputError(
            "the workload has no jobs (check --start/--end/--queue)", file=str(workload) if workload else None
        )
    jobs, moved = route_queues(template, list(jobs))
    options = SimOptions(
        schedule_period=schedule_period,
        startup_delay=startup_delay,
        eviction_grace=eviction_grace,
        checkpoint_interval=checkpoint_interval,
        until=parse_seconds(until, "--until"),
        restart_policy=restart_policy,
    )
    meta = {
        "cluster": template.description,
        "seed": seed,
        "workload": str(workload) if workload else f"built-in example (seed {seed})",
        "jobs": len(jobs),
    }
    if start is not None or end is not None:
        meta["window"] = {"start": start, "end": end}
    if skipped:
        meta["skipped_rows"] = skipped
    if moved:
        meta["queues_to_default"] = {"queue": template.default_queue, "jobs": moved}
    return RunInputs(template, list(jobs), options, meta)


def run_config(
    inputs: RunInputs,
    config: Config,
    name: str,
    *,
    show_progress: bool = False,
    console: Console | None = None,
    seed: int = 0,
) -> SimResult:
    """Simulate ``inputs`` under ``config`` on a fresh copy of the cluster. ``seed`` (a sweep's cell)
    is added to the seed of a noisy estimate model, so that each seed draws other estimates."""
    from corral.sim.engine import simulate
    from corral.sim.estimates import estimate_model

    cluster = inputs.template.instantiate(j.queue for j in inputs.jobs)
    meta = {"config": name, "config_source": getattr(config, "source", name), **inputs.meta}
    from corral.sim.forecast import sim_forecast_every

    source = getattr(config, "source", name)
    estimates = estimate_model(getattr(config, "simulation", None), source)
    if estimates is not None and seed:
        estimates = replace(estimates, seed=estimates.seed + seed)
    options = inputs.options if estimates is None else replace(inputs.options, estimates=estimates)
    if estimates is not None:
        meta["estimates"] = f"{estimates.model} (spread {estimates.spread:g}, seed {estimates.seed})"
    from corral.sim.preemption import preemption_options

    costs = preemption_options(getattr(config, "simulation", None), source)
    if costs:
        options = replace(options, **costs)
        meta["preemption"] = ", ".join(f"{k}={v}" for k, v in costs.items())
    from corral.sim.speed_config import speed_options

    speed = speed_options(getattr(config, "simulation", None), source)
    if speed:
        options = replace(options, **speed)
        meta["speed"] = str(speed["speed"])
    every = sim_forecast_every(getattr(config, "simulation", None), source)
    if every is not None:
        options = replace(options, forecast_every=every)
        meta["forecast_every"] = every
    if not show_progress:
        return simulate(cluster, inputs.jobs, config, options=options, meta=meta)
    from corral.sim.engine import Engine
    from corral.sim.progress import sim_progress

    with sim_progress(len(inputs.jobs), options.until, name, console) as bar:
        engine = Engine(cluster, inputs.jobs, config, options=options, meta=meta, progress=bar.update)
        bar.attach(engine)
        return engine.run()


def check_simulation_section(config: Any, file: str) -> None:
    """The configuration's ``simulation`` section and ``forecast`` section, checked before any run: an
    unknown key or a bad value is one error naming the file and field."""
    from corral.errors import ConfigError
    from corral.sim.estimates import estimate_model
    from corral.sim.forecast import forecast_settings, sim_forecast_every
    from corral.sim.preemption import preemption_options
    from corral.sim.speed_config import speed_options

    unknown = sorted(set(map(str, config.simulation)) - {"estimates", "forecast", "preemption", "speed"})
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r} (allowed: estimates, forecast, preemption, speed)",
            file=file,
            field=f"simulation.{unknown[0]}",
        )
    estimate_model(config.simulation, file)
    sim_forecast_every(config.simulation, file)
    preemption_options(config.simulation, file)
    speed_options(config.simulation, file)
    forecast_settings(config.forecast, file)


def _load_config(path: Path | None) -> tuple[str, Config]:
    from corral.framework.config import load_config_file
    from corral.registry import REGISTRY, default_config

    if path is None or (str(path) == "default" and not path.exists()):
        return "default", default_config()
    config = load_config_file(path, REGISTRY)
    check_simulation_section(config, str(path))  # a bad simulation section fails before any run
    return path.stem or str(path), config


_fail = fail


def _console() -> Console:
    """A console that does not wrap tables into narrow columns when output is not a terminal."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 160))
    return console


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

    try:
        require("sim", "corral simulate")  # pandas, pyarrow, matplotlib, OR-Tools: pip install 'corral[sim]'
    except BaseException as exc:  # noqa: BLE001 - the CLI boundary
        _fail(exc)
        return
    from corral.sim.breakdown import parse_buckets
    from corral.sim.report import size_table, summarize, summary_table, write_report

    console = _console()
    try:
        buckets = parse_buckets(size_buckets)
        check_output_folder(output, force)
        name, cfg = _load_config(config)
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
    except BaseException as exc:  # noqa: BLE001 - the CLI boundary: no traceback reaches a user
        _fail(exc)
        return
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

    try:
        require("sim", "corral compare")  # pandas, pyarrow, matplotlib, OR-Tools: pip install 'corral[sim]'
    except BaseException as exc:  # noqa: BLE001 - the CLI boundary
        _fail(exc)
        return
    from corral.sim.breakdown import parse_buckets
    from corral.sim.report import size_table, summarize, summary_table, write_comparison

    console = _console()
    try:
        buckets = parse_buckets(size_buckets)
        check_output_folder(output, force)
        loaded = [_load_config(path) for path in configs]  # every config is checked before any run
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
        results: dict[str, SimResult] = {}
        for name, cfg in loaded:
            unique, n = name, 2
            while unique in results:
                unique, n = f"{name}-{n}", n + 1
            results[unique] = run_config(inputs, cfg, unique, console=console, show_progress=not no_progress)
        folder = write_comparison(results, output, buckets, force=force, whole_run=plot_whole_run)
    except BaseException as exc:  # noqa: BLE001
        _fail(exc)
        return
    console.print(summary_table({n: summarize(r) for n, r in results.items()}, title="corral compare"))
    console.print(size_table(results, buckets))
    for result in results.values():
        _notes(result, console)
    console.print(
        f"comparison: {plain(folder / 'index.html')}", soft_wrap=True, markup=False, highlight=False
    )


def register(app: typer.Typer) -> None:
    """Add ``simulate``, ``compare`` and ``sweep`` (:mod:`corral.sim.sweep_cli`) to ``app``."""
    from corral.sim.sweep_cli import sweep_command

    app.command("simulate")(simulate_command)
    app.command("compare")(compare_command)
    app.command("sweep")(sweep_command)
