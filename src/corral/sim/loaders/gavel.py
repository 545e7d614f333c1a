"""Gavel's per-VC Philly traces (``scheduler/traces/msr/seed=*/<vc>.trace``): tab-separated, no header,
seven fields — ``job_type, command, num_steps_arg, needs_data_dir, total_steps, arrival_time,
scale_factor`` (the layout read by Gavel's 2019 ``parse_trace``).

A job's length is in training steps, not seconds: its run time is ``total_steps`` divided by the job
type's throughput (steps per second) on one worker type, read from a Gavel throughput table (the JSON of
``scheduler/*throughputs*.json``: worker type -> job type -> ``{"null": steps/s, ...}``, where the job type
key is either ``"ResNet-50 (batch size 16)"`` or ``"('ResNet-50 (batch size 16)', 1)"`` with the scale
factor). Options: ``throughputs=FILE`` (required) and ``worker=v100`` (the worker type; Gavel's
homogeneous Philly sweep simulates V100s). ``scale_factor`` GPUs form a rigid gang split over nodes like
a Philly job; the queue is the file's name without extension (the VC id). Jobs with ``scale_factor`` 0
are skipped (Gavel's parse_trace skips them too); ``command``, ``num_steps_arg`` and ``needs_data_dir``
are not used. ``job_type`` is each job's model class (``corral.io/model-class``, read by the speed model
of ``simulation.speed``: the same key as the throughput table's rows).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from corral.errors import InputError
from corral.inputs import read_text
from corral.model.annotations import MODEL_CLASS
from corral.sim.loaders.common import Hints, Options, gpu_gangs
from corral.sim.tracefile import read_csv_rows
from corral.sim.workload import JobList, TraceTable, assemble_specs

__all__ = ["COLUMNS", "OPTIONS", "load_gavel", "read_all_throughputs", "read_throughputs"]

COLUMNS = [
    "job_type",
    "command",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "arrival_time",
    "scale_factor",
]
OPTIONS = {
    "throughputs": "Gavel throughput table (JSON): steps per second of each job type per worker type",
    "worker": "worker type whose throughputs give run times (default v100)",
}


def read_throughputs(path: Path, worker: str) -> dict[tuple[str, int | None], float]:
    """``{(job_type, scale_factor or None): steps per second}`` of ``worker`` in a Gavel table."""
    tables = read_all_throughputs(path)
    table = tables.get(worker)
    if table is None:
        raise InputError(f"no worker type {worker!r} (the table has: {', '.join(tables)})", file=str(path))
    return table


def read_all_throughputs(path: Path) -> dict[str, dict[tuple[str, int | None], float]]:
    """Every worker type's ``{(job_type, scale_factor or None): steps per second}`` in a Gavel table
    (the ``"null"`` entry of each job type: its throughput alone on the worker)."""
    where = str(path)
    try:
        raw = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc}", file=where) from None
    if not isinstance(raw, Mapping) or not raw:
        raise InputError("expected a mapping of worker type -> job type -> throughputs", file=where)
    tables: dict[str, dict[tuple[str, int | None], float]] = {}
    for worker, table in raw.items():
        if not isinstance(table, Mapping):
            raise InputError("expected a mapping of job type -> throughputs", file=where, field=str(worker))
        out = tables[str(worker)] = {}
        for key, entry in table.items():
            value = entry.get("null") if isinstance(entry, Mapping) else None
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(
                    "expected a number of steps per second under 'null'",
                    file=where,
                    field=f"{worker}.{key}",
                )
            out[_key(str(key))] = float(value)
    return tables


def _key(text: str) -> tuple[str, int | None]:
    """``"('A (batch size 8)', 2)"`` -> ("A (batch size 8)", 2); a plain job type -> (type, None)."""
    if text.startswith("(") and text.endswith(")"):
        body, _, scale = text[1:-1].rpartition(",")
        body = body.strip()
        if len(body) >= 2 and body[0] == body[-1] and body[0] in "'\"" and scale.strip().isdigit():
            return body[1:-1], int(scale)
    return text, None


def load_gavel(path: str | Path, options: Options | None = None, hints: Hints | None = None) -> JobList:
    """Load one Gavel trace file; see the module doc. A job type without a positive throughput for the
    worker type is an InputError naming the row."""
    options = options or Options("gavel", {}, OPTIONS)
    hints = hints or Hints()
    p = Path(path)
    table = TraceTable(read_csv_rows(p, delimiter="\t", header=COLUMNS), str(path))
    worker = options.text("worker", "v100") or "v100"
    rates = read_throughputs(
        options.path("throughputs", p, "a Gavel trace gives steps, not seconds: it needs a throughput table"),
        worker,
    )
    scale = table.number("scale_factor", integer=True, low=0, what="an integer number of GPUs >= 0")
    positive = scale > 0
    skipped = {} if positive.all() else {"scale_factor 0": int((~positive).sum())}
    table.keep(positive)
    scale = scale[positive]
    steps = table.number("total_steps", low=0, low_open=True, what="a positive number of steps")
    arrival = table.number("arrival_time", low=0, what="seconds >= 0")
    types = table.text("job_type", None)
    duration = np.empty(len(table))
    for index, (kind, gpus) in enumerate(zip(types.tolist(), scale.astype(int).tolist())):
        rate = rates.get((kind, gpus), rates.get((kind, None), 0.0))
        if not rate > 0:
            table.fail(
                index,
                "job_type",
                f"no positive throughput for {kind!r} on {worker} in {options.values['throughputs']}",
            )
        duration[index] = steps[index] / rate
    roles, pods = gpu_gangs(scale, hints.gpus_per_node())
    names = np.array([f"gavel-{row}" for row in table.rows.tolist()], dtype=object)
    queues = np.full(len(table), p.name.split(".")[0] or "default", dtype=object)
    return assemble_specs(
        table,
        names,
        arrival,
        duration,
        queues,
        np.zeros(len(table)),
        roles,
        pods,
        skipped=skipped,
        annotations=[{MODEL_CLASS: kind} for kind in types.tolist()],
    )
