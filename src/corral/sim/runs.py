"""One simulator run, as the commands and the sweep's cells set it up: times given as text (``3600``,
``36h``, ``7d``: :func:`parse_seconds`), the checks of the run options (:func:`check_options`), a run's
inputs read and shaped (:func:`prepare`: cluster, workload, window, queues, arrival scale), one
configuration run on them (:func:`run_config`), a configuration loaded by name with its ``simulation``
section checked (:func:`load_config`). Used by ``corral simulate`` and ``compare``
(:mod:`corral.commands.simulate`) and by ``corral sweep``'s cells (:mod:`corral.sim.sweep_cell`).

The simulator (engine, workloads with pandas, reports with matplotlib) is imported by the functions that
use it: registering the commands must not cost ``corral --help`` or ``corral schedule`` their import time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corral.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console

    from corral.framework.config import Config
    from corral.sim.cluster_template import ClusterTemplate
    from corral.sim.jobspec import JobSpec
    from corral.sim.loaders.common import Hints
    from corral.sim.options import SimOptions
    from corral.sim.result import SimResult

__all__ = [
    "MAX_SECONDS",
    "MIN_STEP",
    "RunInputs",
    "check_options",
    "check_simulation_section",
    "load_config",
    "parse_seconds",
    "prepare",
    "run_config",
]

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


def check_options(
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
    from corral.sim.example import example_workload
    from corral.sim.options import SimOptions

    check_options(scale, schedule_period, checkpoint_interval, startup_delay, eviction_grace)
    template = _template(cluster, workload)
    jobs = example_workload(seed) if workload is None else _load_workload(workload, fmt, template, seed)
    skipped = dict(getattr(jobs, "skipped", None) or {})
    jobs = _shape(jobs, start, end, queues, scale, workload)
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


def _template(cluster: Path | None, workload: Path | None) -> ClusterTemplate:
    """The cluster of a run: read from ``cluster``; else the built-in example's, with its three queues
    for the example workload and with none of its own (the workload's queues) for any other."""
    from corral.sim.clusters import from_spec, load_cluster
    from corral.sim.example import EXAMPLE_CLUSTER, example_cluster

    if cluster is not None:
        return load_cluster(cluster)
    if workload is None:
        return example_cluster()
    return from_spec(
        replace(EXAMPLE_CLUSTER, queues=None, name="64 nodes x 8 GPUs"), "built-in example cluster"
    )


def _shape(
    jobs: list[JobSpec],
    start: str | None,
    end: str | None,
    queues: list[str] | None,
    scale: float | None,
    workload: Path | None,
) -> list[JobSpec]:
    """The jobs of the window ``[start, end)`` and of ``queues``, re-based (:func:`filter_jobs`), their
    arrivals scaled by ``scale``; none left is an InputError."""
    from corral.sim.workload import filter_jobs, scale_arrivals

    lo, hi = parse_seconds(start, "--start"), parse_seconds(end, "--end")
    if lo is not None or hi is not None or queues:
        jobs = filter_jobs(jobs, lo, hi, queues or None)
    if scale is not None:
        jobs = scale_arrivals(jobs, scale)
    if not jobs:
        raise InputError(
            "the workload has no jobs (check --start/--end/--queue)", file=str(workload) if workload else None
        )
    return jobs


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
    from corral.sim.workload import ties_options

    ties = ties_options(getattr(config, "simulation", None), source)
    if ties:
        options = replace(options, **ties)
        meta["ties"] = ties["ties"] + (f" (seed {ties['tie_seed']})" if ties["ties"] == "shuffle" else "")
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

    unknown = sorted(
        set(map(str, config.simulation)) - {"estimates", "forecast", "preemption", "speed", "ties"}
    )
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r} (allowed: estimates, forecast, preemption, speed, ties)",
            file=file,
            field=f"simulation.{unknown[0]}",
        )
    estimate_model(config.simulation, file)
    sim_forecast_every(config.simulation, file)
    preemption_options(config.simulation, file)
    speed_options(config.simulation, file)
    from corral.sim.workload import ties_options

    ties_options(config.simulation, file)
    forecast_settings(config.forecast, file)


def load_config(path: Path | None) -> tuple[str, Config]:
    from corral.framework.config import load_config_file
    from corral.registry import REGISTRY, default_config

    if path is None or (str(path) == "default" and not path.exists()):
        return "default", default_config()
    config = load_config_file(path, REGISTRY)
    check_simulation_section(config, str(path))  # a bad simulation section fails before any run
    return path.stem or str(path), config
