"""One cell of a sweep (``corral sweep``, :mod:`corral.sim.sweep`): :func:`run_cell` runs it as ``corral
simulate`` would (:func:`corral.sim.runs.prepare` and
:func:`~corral.sim.runs.run_config`) and returns its figures. Every executor runs cells through
it: in this process, in a process pool, or as Ray tasks (:mod:`corral.sim.sweep_ray`); each worker
process keeps the inputs and configurations its last cells used."""

from __future__ import annotations

import io
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corral.sim.runs import load_config, prepare, run_config

if TYPE_CHECKING:
    from corral.sim.sweep_spec import Cell, WorkloadSpec

__all__ = ["RUN_FIELDS", "run_cell"]

#: what a cell's run reports beside its metrics
RUN_FIELDS = ("cpu_time", "wall_time", "events", "cycles", "end_time", "load_time")

# per worker process: the inputs and configurations its last cells used (a worker often runs the same
# workload under every configuration, and every cell of one configuration)
_INPUTS: dict[tuple[Any, ...], Any] = {}
_CONFIGS: dict[tuple[Path | None, str], Any] = {}


def _config(path: Path | None, digest: str) -> Any:
    if (path, digest) not in _CONFIGS:
        _CONFIGS[(path, digest)] = load_config(path)[1]
    return _CONFIGS[(path, digest)]


def _inputs(cell: Cell) -> Any:
    w, options = cell.workload, cell.options
    seed = cell.seed if _drawn(w) else None  # a trace is read once for every seed
    key = (w, cell.sources, cell.window, cell.scale, cell.cluster_file, seed, tuple(sorted(options.items())))
    if key not in _INPUTS:
        if len(_INPUTS) >= 2:
            _INPUTS.pop(next(iter(_INPUTS)))
        _INPUTS[key] = prepare(
            cell.cluster_file,
            w.file,
            w.format,
            cell.window[0],
            cell.window[1],
            list(w.queues),
            None if cell.scale == 1.0 else cell.scale,
            cell.seed,
            options["until"],
            options["schedule_period"],
            options["checkpoint_interval"],
            options["startup_delay"],
            options["grace_period"],
            options["restart_policy"],
        )
    return _INPUTS[key]


def _drawn(workload: WorkloadSpec) -> bool:
    """Whether the workload's jobs depend on the seed: the built-in example and synthetic specs."""
    from corral.sim.formats import detect, parse_format

    if workload.file is None:
        return True
    name = parse_format(workload.format)[0] or detect(workload.file)
    return name == "synthetic"


def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell; return its figures (``key``, ``digest``, ``summary``, ``sizes``, ``run``, ``notes``)
    and ``jobs``, its per-job records as Parquet bytes. Picklable both ways (pool and Ray workers)."""
    import pandas as pd

    from corral.sim.breakdown import breakdown
    from corral.sim.report import _sig, summarize

    t0 = time.perf_counter()
    inputs = _inputs(cell)
    inputs = replace(inputs, meta={**inputs.meta, "seed": cell.seed})
    config = _config(cell.config_file, cell.digest)
    load_time = time.perf_counter() - t0
    wall, cpu = time.perf_counter(), time.process_time()
    result = run_config(inputs, config, cell.config, seed=cell.seed)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    meta = result.meta
    sizes = [
        {k: _sig(v) if k not in ("by", "group") else v for k, v in row.items() if k != "by"}
        for row in breakdown(result, cell.size_buckets)
        if row["by"] == "size"
    ]
    jobs = pd.DataFrame([asdict(j) for j in result.jobs])
    buffer = io.BytesIO()
    jobs.to_parquet(buffer, index=False)
    notes = {
        k: meta[k]
        for k in ("skipped_rows", "queues_to_default", "stalled_at", "estimates", "preemption")
        if meta.get(k)
    }
    notes["never_fits"] = len(meta.get("never_fits") or [])
    return {
        "key": cell.key,
        "digest": cell.digest,
        "summary": summarize(result),
        "sizes": sizes,
        "run": {
            "cpu_time": round(cpu, 3),
            "wall_time": round(wall, 3),
            "events": meta.get("events"),
            "cycles": meta.get("cycles"),
            "end_time": meta.get("end_time"),
            "load_time": round(load_time, 3),
        },
        "notes": notes,
        "jobs": buffer.getvalue(),
    }
