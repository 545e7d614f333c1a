"""The generator-spec keys that bring clusters from elsewhere and route a trace's queues
(docs/simulator.md): ``machines`` (a published machine list as node shapes), ``queue_quotas`` (per-VC
node quotas as queues), ``default_queue`` (where jobs of queues the spec does not list go), and the unit
check of a node's memory.

``default_queue`` follows Volcano, whose job admission puts a job that names no queue into the
``default`` queue (``patchDefaultQueue`` in ``pkg/webhooks/admission/jobs/mutate/mutate_job.go``): a
trace's queue that the cluster spec does not list is, for this cluster, a job that names no queue of it.
Without the key such a job is refused, as before (Volcano's validating webhook refuses a job whose queue
does not exist).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from corral.errors import InputError
from corral.sim.cluster_template import ClusterTemplate
from corral.sim.jobspec import GPU, JobSpec
from corral.sim.machines import MACHINE_FORMATS, read_machines
from corral.sim.tracefile import read_csv_rows
from corral.sim.workload import TraceTable

__all__ = ["SPEC_KEYS", "default_queue", "machine_shapes", "memory_hint", "quota_queues", "route_queues"]

SPEC_KEYS = (
    "name",
    "nodes",
    "machines",
    "topology",
    "queues",
    "queue_quotas",
    "queue_weights",
    "default_queue",
)
# A node's memory written as a bare number is bytes; below this it is surely a forgotten unit.
_LEAST_NODE_MEMORY = 2**20


def machine_shapes(raw: Any, file: str) -> tuple[list[dict[str, Any]], tuple[int, ...]]:
    """``machines: {file: PATH, format: NAME}`` (format optional: recognised from the file; a relative
    path is read from the spec's folder) as node-shape mappings and topology tiers."""
    if raw is None:
        return [], ()
    if isinstance(raw, str):
        raw = {"file": raw}
    if not isinstance(raw, Mapping):
        raise InputError("expected a mapping {file, format} or a file name", file=file, field="machines")
    for key in raw:
        if key not in ("file", "format"):
            raise InputError(
                f"unknown key {key!r} (allowed: file, format)", file=file, field=f"machines.{key}"
            )
    name, fmt = raw.get("file"), raw.get("format")
    if not isinstance(name, str) or not name:
        raise InputError("expected the machine list's file name", file=file, field="machines.file")
    if fmt is not None and fmt not in MACHINE_FORMATS:
        raise InputError(
            f"unknown format {fmt!r} (allowed: {', '.join(MACHINE_FORMATS)})",
            file=file,
            field="machines.format",
        )
    path = Path(name)
    if not path.is_absolute() and Path(file).exists():
        path = Path(file).parent / path
    if not path.is_file():
        raise InputError(f"no such file {str(path)!r}", file=file, field="machines.file")
    return read_machines(path, fmt)


def quota_queues(raw: Any, file: str) -> list[dict[str, Any]]:
    """``queue_quotas: {file: PATH, gpus_per_node: 8}``: a two-column CSV of queue (virtual cluster) ->
    nodes — Helios' ``philly_vc.csv`` (``vc,node num``) or Lucid's ``vc_config.csv`` (``,num``) — as
    queues whose capability and deserved share are ``nodes x gpus_per_node`` GPUs and whose weight is
    the node count: each VC gets at most, and is owed, its quota, as those simulators give each VC its
    own nodes."""
    if raw is None:
        return []
    if isinstance(raw, str):
        raw = {"file": raw}
    if not isinstance(raw, Mapping):
        raise InputError(
            "expected a mapping {file, gpus_per_node} or a file name", file=file, field="queue_quotas"
        )
    for key in raw:
        if key not in ("file", "gpus_per_node"):
            raise InputError(
                f"unknown key {key!r} (allowed: file, gpus_per_node)", file=file, field=f"queue_quotas.{key}"
            )
    per = raw.get("gpus_per_node", 8)
    if isinstance(per, bool) or not isinstance(per, int) or per < 1:
        raise InputError(
            f"expected an integer >= 1, got {per!r}", file=file, field="queue_quotas.gpus_per_node"
        )
    path = _relative(raw.get("file"), file, "queue_quotas.file")
    table = TraceTable(read_csv_rows(path), str(path))
    if len(table.frame.columns) != 2:
        raise InputError("expected two columns: queue, nodes", file=str(path))
    name_column, nodes_column = (str(c) for c in table.frame.columns)
    names = table.text(name_column, None)
    nodes = table.number(nodes_column, integer=True, low=1, what="an integer number of nodes >= 1")
    return [
        {"name": n, "weight": k, "capability": {GPU: k * per}, "deserved": {GPU: k * per}}
        for n, k in zip(names.tolist(), nodes.astype(int).tolist())
    ]


def _relative(name: Any, file: str, field: str) -> Path:
    """A file named in a spec: a relative path is read from the spec's folder."""
    if not isinstance(name, str) or not name:
        raise InputError("expected a file name", file=file, field=field)
    path = Path(name)
    if not path.is_absolute() and Path(file).exists():
        path = Path(file).parent / path
    if not path.is_file():
        raise InputError(f"no such file {str(path)!r}", file=file, field=field)
    return path


def default_queue(raw: Any, queues: Sequence[str] | None, file: str) -> str | None:
    """``default_queue``: one of ``queues`` (the names the spec lists; None: it lists none) or
    ``default``."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw:
        raise InputError(f"expected a queue name, got {raw!r}", file=file, field="default_queue")
    if queues is None:
        raise InputError(
            "needs a 'queues' list: without one every queue the workload names is created",
            file=file,
            field="default_queue",
        )
    names = {*queues, "default"}
    if raw not in names:
        raise InputError(
            f"{raw!r} is not a queue of the spec (queues: {', '.join(sorted(names))})",
            file=file,
            field="default_queue",
        )
    return raw


def memory_hint(value: Any, file: str, path: str) -> None:
    """A node's memory as a bare number under 1 MiB is a forgotten unit: say so and suggest one."""
    text = str(value).strip()
    bare = (isinstance(value, (int, float)) and not isinstance(value, bool)) or text.replace(
        ".", "", 1
    ).isdigit()
    if bare and float(text) < _LEAST_NODE_MEMORY:
        raise InputError(
            f"memory {text} is read as bytes, too little for a node: write a unit, e.g. {text}Gi or {text}Mi",
            file=file,
            field=path,
        )


def route_queues(template: ClusterTemplate, jobs: list[JobSpec]) -> tuple[list[JobSpec], dict[str, int]]:
    """The jobs with every queue the template does not list replaced by its ``default_queue``, and how
    many jobs each replaced queue had."""
    target = template.default_queue
    if target is None:
        return jobs, {}
    known = set(template.cluster.queues)
    moved: dict[str, int] = {}
    out = []
    for job in jobs:
        if job.queue not in known:
            moved[job.queue] = moved.get(job.queue, 0) + 1
            job = replace(job, queue=target)
        out.append(job)
    return out, dict(sorted(moved.items()))
