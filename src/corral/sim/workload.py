"""Workload loaders and generators: every one returns the jobs of a trace as :class:`JobSpec`.

Promises shared by every loader here (SPEC.md §1.3):

* the result is sorted by ``(submit, name)`` and re-based so that the first job submits at ``0.0``;
* requests are plain base units (cpu cores, memory bytes, ``nvidia.com/gpu`` devices); a pod that asks
  for no GPU carries no ``nvidia.com/gpu`` entry;
* bad input is one :class:`~corral.errors.InputError` naming the file, the 1-based data row (the header
  is not counted) and the column — never a traceback. A missing or unreadable file is an ``InputError``;
* rows a loader deliberately leaves out are counted in :attr:`JobList.skipped` and logged.

The table a loader reads its trace into, checking each cell as it is read, is
:mod:`corral.sim.trace_table` (its ``TraceTable``, ``read_table``, ``JobList`` and ``MAX_VALUE`` are
importable from here too). The schema of corral's own format, and what is taken from each public trace,
is written up in ``docs/traces.md``.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from corral.errors import InputError
from corral.model.annotations import MODEL_CLASS
from corral.sim.jobspec import GPU, JobSpec, RoleSpec
from corral.sim.trace_table import MAX_VALUE, JobList, TraceTable, read_table

__all__ = [
    "CORRAL_COLUMNS",
    "MAX_VALUE",
    "JobList",
    "TraceTable",
    "assemble_specs",
    "filter_jobs",
    "load_alibaba",
    "load_corral_trace",
    "load_philly",
    "read_table",
    "scale_arrivals",
]

log = logging.getLogger(__name__)

MIB = 2**20
GIB = 2**30
CORRAL_COLUMNS = (
    "name",
    "submit",
    "duration",
    "queue",
    "priority",
    "pods",
    "min_member",
    "gpu",
    "cpu",
    "memory",
    "topology_mode",
    "topology_tier",
    "model_class",
)
TOPOLOGY_MODES = ("hard", "soft")
# Alibaba QoS class -> priority. Guaranteed is Kubernetes' strictest QoS class, so it ranks with LS.
ALIBABA_PRIORITY = {"LS": 100, "Guaranteed": 100, "Burstable": 50, "BE": 0}


# ------------------------------------------------------------------------------------------ building


def _role(count: int, gpu: float, cpu: float, memory: float, name: str = "") -> RoleSpec:
    requests = {"cpu": cpu, "memory": memory}
    if gpu > 0:
        requests[GPU] = gpu
    return RoleSpec(name=name, count=count, requests=requests)


def _single_roles(
    pods: np.ndarray, gpu: np.ndarray, cpu: np.ndarray, memory: np.ndarray
) -> list[tuple[RoleSpec, ...]]:
    """One role of identical pods per row. Identical shapes share one (read-only) RoleSpec, which keeps
    a trace of 100,000 jobs cheap to build and to hold."""
    cache: dict[tuple, tuple[RoleSpec, ...]] = {}
    out = []
    for key in zip(pods.astype(int).tolist(), gpu.tolist(), cpu.tolist(), memory.tolist()):
        roles = cache.get(key)
        if roles is None:
            roles = cache[key] = (_role(*key),)
        out.append(roles)
    return out


def assemble_specs(
    table: TraceTable,
    names: np.ndarray,
    submit: np.ndarray,
    duration: np.ndarray,
    queues: np.ndarray,
    priority: np.ndarray,
    roles: list,
    min_member: np.ndarray,
    topology: list | None = None,
    skipped: Mapping[str, int] | None = None,
    annotations: Sequence[Mapping[str, str]] | None = None,
) -> JobList:
    """Build the JobSpecs, re-based so the first submits at 0, sorted by (submit, name). ``annotations``
    (one mapping per row) become each job's PodGroup annotations."""
    duplicated = pd.Series(names).duplicated().to_numpy()
    if duplicated.any():
        index = int(np.flatnonzero(duplicated)[0])
        table.fail(index, "name", f"duplicate job name {names[index]!r}")
    start = float(submit.min()) if len(submit) else 0.0
    relative = (submit - start).tolist()
    topology = topology if topology is not None else [None] * len(table)
    notes = annotations if annotations is not None else [{}] * len(table)
    jobs = [
        JobSpec(
            name=n,
            submit=s,
            duration=d,
            queue=q,
            roles=r,
            priority=p,
            min_member=m,
            topology=t,
            source=f"{table.path} row {row}",
            annotations=a,
        )
        for n, s, d, q, r, p, m, t, row, a in zip(
            names.tolist(),
            relative,
            duration.tolist(),
            queues.tolist(),
            roles,
            priority.astype(int).tolist(),
            min_member.astype(int).tolist(),
            topology,
            table.rows.tolist(),
            notes,
        )
    ]
    jobs.sort(key=lambda j: (j.submit, j.name))
    for reason, count in (skipped or {}).items():
        log.warning("%s: skipped %d row(s): %s", table.path, count, reason)
    return JobList(jobs, skipped)


def _default_names(table: TraceTable, prefix: str) -> np.ndarray:
    names = table.text("name", "")
    for index in np.flatnonzero(names == ""):
        names[index] = f"{prefix}-{table.rows[index]}"
    return names


# --------------------------------------------------------------------------------------- corral schema


def load_corral_trace(path: str | Path | TraceTable) -> list[JobSpec]:
    """Load corral's own trace schema from CSV or Parquet (chosen by extension), one row per job.

    Columns (only ``submit`` and ``duration`` are required; docs/traces.md has the table and an example):
    ``name`` (default ``job-<row>``), ``submit`` (seconds, or RFC 3339 / ``YYYY-MM-DD HH:MM:SS``),
    ``duration`` (seconds > 0), ``queue`` ("default"), ``priority`` (integer, 0), ``pods`` (integer >= 1,
    1), ``min_member`` (integer 1..pods, default pods), ``gpu``, ``cpu``, ``memory`` (per pod; numbers
    in devices, cores and bytes, or Kubernetes quantities such as ``500m`` and ``4Gi``; defaults 0, 1,
    ``4Gi``), ``topology_mode`` (``hard``/``soft``; default ``hard`` when only a tier is given) and
    ``topology_tier`` (integer >= 1; default 1 when only a mode is given) and ``model_class`` (the job's
    model class for the speed model of ``simulation.speed``; default ``default``). An unknown column is an error
    (it is usually a misspelt one); a duplicate name is an error.
    """
    table = read_table(path)
    unknown = [c for c in table.frame.columns if c not in CORRAL_COLUMNS]
    if unknown:
        raise InputError(
            f"unknown column {unknown[0]!r} (allowed: {', '.join(CORRAL_COLUMNS)})",
            file=table.path,
            field=unknown[0],
        )
    table.require("submit", "duration")
    names = _default_names(table, "job")
    submit = table.seconds("submit")
    duration = table.number("duration", low=0, low_open=True, what="a positive number of seconds")
    queues = table.text("queue", "default")
    priority = table.number("priority", default=0, integer=True, what="an integer")
    pods = table.number("pods", default=1, integer=True, low=1, what="an integer >= 1")
    min_member = table.number("min_member", default=pods, integer=True, low=1, what="an integer >= 1")
    over = np.flatnonzero(min_member > pods)
    if len(over):
        table.fail(
            int(over[0]),
            "min_member",
            f"min_member {int(min_member[over[0]])} exceeds pods {int(pods[over[0]])}",
        )
    gpu = table.quantity("gpu", default=0.0, what="a non-negative number of GPUs")
    cpu = table.quantity("cpu", default=1.0, what="a non-negative number of cores or a quantity")
    memory = table.quantity("memory", default=4 * GIB, what="a non-negative quantity (bytes or 4Gi)")
    roles = _single_roles(pods, gpu, cpu, memory)
    classes = table.text("model_class", "") if "model_class" in table.frame.columns else None
    return assemble_specs(
        table,
        names,
        submit,
        duration,
        queues,
        priority,
        roles,
        min_member,
        _topology(table),
        annotations=None if classes is None else [{MODEL_CLASS: c} if c else {} for c in classes.tolist()],
    )


def _topology(table: TraceTable) -> list[tuple[str, int] | None]:
    """Per row ``(mode, highest_tier)`` or None. Volcano's defaults fill a half-given constraint: mode
    ``hard``, highestTierAllowed 1."""
    has_mode = "topology_mode" in table.frame.columns
    has_tier = "topology_tier" in table.frame.columns
    if not (has_mode or has_tier):
        return [None] * len(table)
    modes = table.text("topology_mode", "") if has_mode else np.full(len(table), "", object)
    tiers = (
        table.number("topology_tier", default=0, integer=True, low=1, what="an integer tier >= 1")
        if has_tier
        else np.zeros(len(table))
    )
    tier_blank = table.blank("topology_tier") if has_tier else np.ones(len(table), bool)
    out: list[tuple[str, int] | None] = []
    for index, (mode, tier, no_tier) in enumerate(zip(modes.tolist(), tiers.tolist(), tier_blank)):
        mode = mode.lower()
        if mode and mode not in TOPOLOGY_MODES:
            table.fail(index, "topology_mode", f"expected one of {', '.join(TOPOLOGY_MODES)}, got {mode!r}")
        if not mode and no_tier:
            out.append(None)
        else:
            out.append((mode or "hard", 1 if no_tier else int(tier)))
    return out


# ------------------------------------------------------------------------------------------- Philly


def load_philly(path: str | Path | TraceTable, gpus_per_node: int = 8) -> list[JobSpec]:
    """Load the Philly trace (columns ``timestamp, duration, num_gpus, gpu_time, cluster``).

    Each row is one job in queue ``cluster`` (the virtual cluster id), priority 0, named
    ``philly-<row>``. A job of at most ``gpus_per_node`` GPUs is one pod; a larger one is a rigid gang
    (min_member = pods) of ``ceil(num_gpus / gpus_per_node)`` pods sharing the GPUs as evenly as
    possible — 16 GPUs are 2 pods of 8, the trace's 12-GPU jobs are 2 pods of 6 (when the split is
    uneven, the larger pods form role ``""`` and the smaller ones role ``"rest"``). Per pod, cpu is
    4 cores and memory 32Gi per GPU, an assumption: the trace records neither. ``gpu_time`` is not
    used (it is duration x num_gpus). A duration <= 0, a non-integer or non-positive ``num_gpus`` or a
    malformed timestamp is an InputError naming the row: the published file (82,247 rows) has none, so
    no row is ever skipped silently.
    """
    table = read_table(path)
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise InputError(
            f"gpus_per_node must be a positive integer, got {gpus_per_node!r}",
            file=table.path,
            field="gpus_per_node",
        )
    table.require("timestamp", "duration", "num_gpus", "cluster")
    submit = table.seconds("timestamp")
    duration = table.number("duration", low=0, low_open=True, what="a positive number of seconds")
    gpus = table.number("num_gpus", integer=True, low=1, what="an integer number of GPUs >= 1")
    queues = table.text("cluster", None)
    names = np.array([f"philly-{row}" for row in table.rows.tolist()], dtype=object)
    sizes = gpus.astype(int).tolist()
    shapes = {g: _philly_roles(g, gpus_per_node) for g in set(sizes)}
    roles = [shapes[g] for g in sizes]
    pods = np.array([sum(r.count for r in rs) for rs in roles], dtype=float)
    return assemble_specs(table, names, submit, duration, queues, np.zeros(len(table)), roles, pods)


def _philly_roles(gpus: int, per_node: int) -> tuple[RoleSpec, ...]:
    pods = max(1, math.ceil(gpus / per_node))
    base, extra = divmod(gpus, pods)
    shape = lambda g: (float(g), 4.0 * g, 32.0 * GIB * g)  # noqa: E731 - gpu, cpu, memory of a pod
    if extra == 0:
        return (_role(pods, *shape(base)),)
    return (_role(extra, *shape(base + 1)), _role(pods - extra, *shape(base), name="rest"))


# ------------------------------------------------------------------------------------------ Alibaba


def load_alibaba(path: str | Path | TraceTable) -> list[JobSpec]:
    """Load an Alibaba GPU-2023 (openb) pod list: each row is a single-pod job.

    ``submit`` = creation_time; ``duration`` = deletion_time - scheduled_time, or - creation_time when
    scheduled_time is blank (pods still Pending when the trace was cut; their duration is then the time
    they existed). Rows whose duration is <= 0 are skipped and counted in ``JobList.skipped`` (the
    default list has 1 such row). Every phase (Running, Failed, ...) is kept. Per pod: cpu =
    cpu_milli / 1000, memory = memory_mib MiB, gpu = num_gpu, except a GPU-sharing pod (num_gpu 1,
    0 < gpu_milli < 1000) which asks for the fraction gpu_milli / 1000 of a device. Queue = ``qos``;
    priority LS 100, Guaranteed 100, Burstable 50, BE 0, any other class 0. ``gpu_spec`` (GPU model
    constraints) is not used. Files without times (``openb_pod_list_multigpu50.csv``) cannot be a
    workload: their missing ``creation_time`` is an InputError.
    """
    table = read_table(path)
    table.require("creation_time", "deletion_time", "name", "cpu_milli", "memory_mib", "num_gpu", "qos")
    created = table.number("creation_time", what="seconds")
    deleted = table.number("deletion_time", what="seconds")
    scheduled = table.number("scheduled_time", default=np.nan, what="seconds")
    duration = deleted - np.where(np.isnan(scheduled), created, scheduled)
    positive = duration > 0
    skipped = {"duration <= 0": int((~positive).sum())} if not positive.all() else {}
    table.keep(positive)
    created, duration = created[positive], duration[positive]
    cpu = table.number("cpu_milli", low=0, what="non-negative millicores") / 1000.0
    memory = table.number("memory_mib", low=0, what="non-negative MiB") * MIB
    gpus = table.number("num_gpu", integer=True, low=0, what="an integer number of GPUs >= 0")
    milli = table.number("gpu_milli", default=gpus * 1000, low=0, what="non-negative GPU millis")
    sharing = (gpus == 1) & (milli > 0) & (milli < 1000)
    gpu = np.where(sharing, milli / 1000.0, gpus)
    queues = table.text("qos", None)
    priority = np.array([ALIBABA_PRIORITY.get(q, 0) for q in queues.tolist()], dtype=float)
    names = _default_names(table, "pod")
    roles = _single_roles(np.ones(len(table)), gpu, cpu, memory)
    return assemble_specs(
        table, names, created, duration, queues, priority, roles, np.ones(len(table)), skipped=skipped
    )


# ----------------------------------------------------------------------------------------- shaping


def filter_jobs(
    jobs: Iterable[JobSpec],
    start: float | None = None,
    end: float | None = None,
    queues: Iterable[str] | None = None,
) -> list[JobSpec]:
    """Keep the jobs with ``start <= submit < end`` (seconds on the trace's re-based clock) and, when
    ``queues`` is given, in one of those queues; then re-base so the first kept job submits at 0 (a
    window is simulated as a workload of its own). A queue that no job uses, or an empty window
    (``end <= start``), is an InputError: both are almost always a typo.
    """
    skipped = getattr(jobs, "skipped", None)
    jobs = list(jobs)
    if start is not None and end is not None and end <= start:
        raise InputError(f"empty window: end {end} <= start {start}", obj="workload filter", field="end")
    wanted = None
    if queues is not None:
        wanted = {str(q) for q in queues}
        present = {j.queue for j in jobs}
        for queue in sorted(wanted - present):
            raise InputError(
                f"no job is in queue {queue!r} (queues: {', '.join(sorted(present))})",
                obj="workload filter",
                field="queues",
            )
    kept = [
        j
        for j in jobs
        if (start is None or j.submit >= start)
        and (end is None or j.submit < end)
        and (wanted is None or j.queue in wanted)
    ]
    origin = min((j.submit for j in kept), default=0.0)
    kept = [replace(j, submit=j.submit - origin) if origin else j for j in kept]
    kept.sort(key=lambda j: (j.submit, j.name))
    return JobList(kept, skipped)


def scale_arrivals(jobs: Iterable[JobSpec], factor: float) -> list[JobSpec]:
    """Multiply every submit time by ``factor`` (< 1 packs arrivals closer: more load; > 1 spreads
    them). Durations are unchanged. ``factor`` must be a finite number > 0, else InputError."""
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not (0 < factor < math.inf):
        raise InputError(f"expected a positive number, got {factor!r}", obj="arrival scaling", field="factor")
    return JobList([replace(j, submit=j.submit * factor) for j in jobs], getattr(jobs, "skipped", None))


# ------------------------------------------------------------------------------------------------ ties

#: how jobs submitted at the same instant are ordered (``simulation.ties.order``)
TIE_ORDERS = ("name", "natural", "shuffle")


def natural_key(name: str) -> tuple[Any, ...]:
    """``name`` with its runs of digits compared as numbers: ``philly-999`` before ``philly-1000``."""
    parts = re.split(r"(\d+)", name)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


def tie_times(jobs: Sequence[JobSpec], order: str = "name", seed: int = 0) -> dict[str, float]:
    """Creation times that order the jobs submitted at one instant as ``order`` says, for the scheduler's
    JobOrder (whose last word is the creation time, then the name): ``name`` — none (the default: ties
    fall to the names compared as text, ``philly-1000`` before ``philly-999``, the order of the Lucid
    parity runs); ``natural`` — names with numbers compared as numbers (``philly-999`` first: for the
    traces whose jobs are named by their row, the file's order); ``shuffle`` — a random order drawn from
    ``seed``. A tied job's creation is its submit time moved up by as many of the smallest float steps
    as jobs precede it in its tie (nothing else reads it: waits and JCTs count from the submit time);
    the steps never reach the next submit time."""
    if order == "name":
        return {}
    groups: dict[float, list[JobSpec]] = {}
    for j in jobs:
        groups.setdefault(j.submit, []).append(j)
    rng = np.random.default_rng(seed)
    later = sorted(groups)
    out: dict[str, float] = {}
    for at, submit in enumerate(later):
        tied = groups[submit]
        if len(tied) < 2:
            continue
        if order == "natural":
            tied = sorted(tied, key=lambda j: (natural_key(j.name), j.name))
        else:
            tied = sorted(tied, key=lambda j: j.name)
            tied = [tied[i] for i in rng.permutation(len(tied)).tolist()]
        t = last = submit
        for j in tied:
            out[j.name] = last = t
            t = math.nextafter(t, math.inf)
        if at + 1 < len(later) and last >= later[at + 1]:
            raise InputError(
                f"{len(tied)} jobs submitted at {submit:g} s are too close to the next submit time to order",
                field="simulation.ties",
            )
    return out


def ties_options(simulation: Any, file: str = "") -> dict[str, Any]:
    """The :class:`~corral.sim.options.SimOptions` fields of ``simulation.ties`` (``{order, seed}``)."""
    from corral.errors import ConfigError

    where = "simulation.ties"
    raw = simulation.get("ties") if isinstance(simulation, Mapping) else None
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("expected a mapping {order, seed}", file=file, field=where)
    unknown = sorted(set(map(str, raw)) - {"order", "seed"})
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r} (allowed: order, seed)", file=file, field=f"{where}.{unknown[0]}"
        )
    order = raw.get("order", "name")
    if order not in TIE_ORDERS:
        raise ConfigError(
            f"expected one of {', '.join(TIE_ORDERS)}, got {order!r}", file=file, field=f"{where}.order"
        )
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"expected an integer >= 0, got {seed!r}", file=file, field=f"{where}.seed")
    if "seed" in raw and order != "shuffle":
        raise ConfigError("a seed orders ties only with order: shuffle", file=file, field=f"{where}.seed")
    return {"ties": order, "tie_seed": seed}
