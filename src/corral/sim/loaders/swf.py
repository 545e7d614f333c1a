"""The Parallel Workloads Archive's Standard Workload Format (SWF 2.2), the HPC logs that backfill and
reservation studies replay.

A job line has 18 whitespace-separated numbers, ``-1`` where unknown; ``;`` lines are header comments.
corral takes the job number (name ``swf-<number>``), Submit Time, Run Time (the truth: how long the job
runs), Requested Number of Processors (Allocated when it is unknown) and Requested Time (the user's
estimate, written as the job's ``corral.io/expected-runtime`` annotation, which the reservation's plan
and the SJF/shortest-remaining baselines read — the same inputs EASY backfilling uses). Processors become
a configurable resource per node: ``resource`` (default ``nvidia.com/gpu``, so the report's utilisation
and size buckets measure processors) and ``per_node`` (default: the most any node of the cluster has, else
the log header's MaxProcs / MaxNodes). A job of more processors than a node holds is a rigid gang of
``ceil(procs / per_node)`` pods sharing them evenly — a parallel job starts on all its nodes at once.
"""

from __future__ import annotations

import io
import logging
import math
from pathlib import Path
from typing import NoReturn

import numpy as np
import pandas as pd

from corral.errors import InputError
from corral.model.annotations import EXPECTED_RUNTIME
from corral.sim.jobspec import GPU
from corral.sim.loaders.common import Hints, Options, gang_roles, name_table
from corral.sim.tracefile import read_lines
from corral.sim.workload import MAX_VALUE, JobList, assemble_specs

__all__ = ["FIELDS", "OPTIONS", "load_swf"]

log = logging.getLogger(__name__)

FIELDS = (
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "average_cpu_time",
    "used_memory",
    "requested_processors",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable",
    "queue",
    "partition",
    "preceding_job",
    "think_time",
)
OPTIONS = {
    "resource": "the resource a processor is (default nvidia.com/gpu)",
    "per_node": "processors of one node (default: the cluster's largest node, else MaxProcs/MaxNodes)",
    "queues": "none (every job in queue default), number (queue-<Queue Number>) or partition",
}
_JOB, _SUBMIT, _RUN, _ALLOC, _REQ_PROCS, _REQ_TIME, _QUEUE, _PARTITION = 0, 1, 3, 4, 7, 8, 14, 15


def _line_of(lines: list[str], row: int) -> int:
    """The file line (1-based) of the ``row``-th job line."""
    seen = 0
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if text and not text.startswith(";"):
            seen += 1
            if seen == row:
                return number
    return len(lines)


def _parse(path: str, lines: list[str]) -> tuple[np.ndarray, dict[str, str]]:
    """(values, header) — every job line whole and numeric, else an InputError naming the data row
    (1-based over job lines, with its file line) and the field."""
    header: dict[str, str] = {}
    body: list[str] = []
    for line in lines:
        text = line.strip()
        if text.startswith(";"):
            key, _, value = text[1:].partition(":")
            header.setdefault(key.strip(), value.strip())
        elif text:
            body.append(text)
    if not body:
        return np.zeros((0, len(FIELDS))), header
    values = _read_values(body)
    bad = _first_fault(body, values)
    if bad is not None or values is None:
        _refuse(path, lines, bad or (0, 0, None, 0))
    assert values is not None
    return values, header


#: a faulty row: (row index over job lines, column, the cell found or None for a wrong width, width)
Fault = tuple[int, int, str | None, int]


def _read_values(body: list[str]) -> np.ndarray | None:
    """The job lines as a float table, one column per field (None: pandas refused them, or a row is
    longer than SWF's fields); a cell that is not a number is NaN."""
    try:
        frame = pd.read_csv(
            io.StringIO("\n".join(body)),
            sep=r"\s+",
            header=None,
            names=range(len(FIELDS) + 1),  # one more: a row too long fills it instead of shifting
            index_col=False,
            dtype=float,
        )
        wide = frame.to_numpy(dtype=float)
        return wide[:, : len(FIELDS)] if np.isnan(wide[:, -1]).all() else None
    except (ValueError, pd.errors.ParserError):
        return None


def _first_fault(body: list[str], values: np.ndarray | None) -> Fault | None:
    """The first row of the wrong width or with a cell that is not a number >= -1 within
    :data:`MAX_VALUE` (None: every row is whole)."""
    if values is not None and not np.isnan(values).any():
        with np.errstate(invalid="ignore"):
            wrong = ~(np.abs(values) <= MAX_VALUE) | (values < -1)
        if not wrong.any():
            return None
        index, column = (int(i) for i in np.argwhere(wrong)[0])
        return (index, column, body[index].split()[column], len(FIELDS))
    for index, text in enumerate(body):
        fields = text.split()
        if len(fields) != len(FIELDS):
            return (index, min(len(fields), len(FIELDS)), None, len(fields))
        for column, cell in enumerate(fields):
            try:
                float(cell)
            except ValueError:
                return (index, column, cell, len(fields))
    # "nan" spelled out, or a parse pandas refused for another reason
    where = np.argwhere(np.isnan(values)) if values is not None else np.zeros((1, 2), dtype=int)
    row, col = int(where[0][0]), int(where[0][1])
    return (row, col, body[row].split()[col], len(FIELDS))


def _refuse(path: str, lines: list[str], bad: Fault) -> NoReturn:
    """The InputError of a faulty row: its data row, its file line and the field."""
    row, col, found, width = bad
    at = _line_of(lines, row + 1)
    if found is None:
        short = width < len(FIELDS)
        raise InputError(
            f"truncated row (line {at}): {width} of SWF's {len(FIELDS)} fields"
            if short
            else f"{width} fields (line {at}), more than SWF's {len(FIELDS)}",
            file=path,
            obj=f"row {row + 1}",
            field=FIELDS[col] if short else None,
        )
    raise InputError(
        f"expected a number >= -1 (-1: unknown) of at most {MAX_VALUE:g} (line {at}), got {found!r}",
        file=path,
        obj=f"row {row + 1}",
        field=FIELDS[col],
    )


def _per_node(options: Options, hints: Hints, resource: str, header: dict[str, str]) -> float:
    given = options.number("per_node")
    if given is not None:
        if given != int(given):
            raise InputError(f"expected an integer, got {given:g}", field="--format swf:per_node")
        return given
    from_cluster = hints.per_node(resource)
    if from_cluster:
        return float(from_cluster)
    try:
        procs, nodes = float(header.get("MaxProcs", "")), float(header.get("MaxNodes", ""))
    except ValueError:
        return 1.0
    return max(1.0, procs // nodes) if procs > 0 and nodes > 0 else 1.0


def load_swf(path: str | Path, options: Options | None = None, hints: Hints | None = None) -> JobList:
    """Load an SWF log (plain or gzip-compressed, by content). Rows skipped and counted in ``skipped``:
    an unknown (-1) submit time, an unknown or zero run time (jobs cancelled before they ran), and an
    unknown processor count. Every status is kept: a failed or cancelled job that ran held its
    processors. A job without a Requested Time carries no estimate. Wait Time (the original scheduler's
    outcome), memory, user, group, executable and the preceding-job fields are not used."""
    options = options or Options("swf", {}, OPTIONS)
    hints = hints or Hints()
    values, header = _parse(str(path), read_lines(path))
    resource = options.text("resource", GPU) or GPU
    per_node = _per_node(options, hints, resource, header)
    queues = options.text("queues", "none", ("none", "number", "partition"))
    procs = np.where(values[:, _REQ_PROCS] > 0, values[:, _REQ_PROCS], values[:, _ALLOC])
    reasons = [
        ("submit time unknown (-1)", values[:, _SUBMIT] < 0),
        ("run time unknown (-1)", values[:, _RUN] < 0),
        ("run time 0 (never ran)", values[:, _RUN] == 0),
        ("processor count unknown", procs <= 0),
    ]
    keep = np.ones(len(values), dtype=bool)
    skipped: dict[str, int] = {}
    for reason, mask in reasons:
        count = int((keep & mask).sum())
        if count:
            skipped[reason] = count
        keep &= ~mask
    rows = np.flatnonzero(keep)
    values, procs = values[keep], procs[keep]
    whole = procs == np.floor(procs)
    if not whole.all():
        index = int(np.flatnonzero(~whole)[0])
        raise InputError(
            f"expected a whole number of processors, got {procs[index]:g}",
            file=str(path),
            obj=f"row {rows[index] + 1}",
            field=FIELDS[_REQ_PROCS],
        )
    table = name_table(len(values), str(path), rows + 1)
    names = np.array([f"swf-{int(n)}" for n in values[:, _JOB].tolist()], dtype=object)
    shapes = {p: gang_roles(p, per_node, resource, {}) for p in set(procs.astype(int).tolist())}
    roles = [shapes[p] for p in procs.astype(int).tolist()]
    pods = np.array([sum(r.count for r in rs) for rs in roles], dtype=float)
    queue_names = _queues(values, queues)
    return assemble_specs(
        table,
        names,
        values[:, _SUBMIT],
        values[:, _RUN],
        queue_names,
        np.zeros(len(values)),
        roles,
        pods,
        skipped=skipped,
        annotations=_estimates(values[:, _REQ_TIME]),
    )


def _queues(values: np.ndarray, how: str | None) -> np.ndarray:
    if how == "number":
        column = values[:, _QUEUE]
    elif how == "partition":
        column = values[:, _PARTITION]
    else:
        return np.full(len(values), "default", dtype=object)
    prefix = "queue" if how == "number" else "partition"
    return np.array([f"{prefix}-{int(v)}" if v >= 0 else "default" for v in column.tolist()], dtype=object)


def _estimates(requested: np.ndarray) -> list[dict[str, str]]:
    """Each job's Requested Time as its expected run time (``corral.io/expected-runtime``); none when
    the log does not know it (-1)."""
    missing = int((requested <= 0).sum())
    if missing:
        log.info("%d job(s) have no Requested Time: they carry no run-time estimate", missing)
    return [{EXPECTED_RUNTIME: f"{math.ceil(t)}s"} if t > 0 else {} for t in requested.tolist()]
