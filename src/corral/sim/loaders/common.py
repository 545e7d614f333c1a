"""What the trace loaders share: format options (``--format NAME:key=value,...``), what the cluster tells
a loader (how much of a resource one node holds), and gangs split over nodes."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from corral.errors import InputError
from corral.sim.jobspec import GPU, RoleSpec
from corral.sim.workload import GIB, TraceTable

__all__ = ["CPU_PER_GPU", "MEMORY_PER_GPU", "Hints", "Options", "gang_roles", "gpu_gangs", "name_table"]

# What corral assumes a GPU job asks for per GPU when the trace records no cpu or memory (as the Philly
# loader does): 4 cores and 32Gi.
CPU_PER_GPU = 4.0
MEMORY_PER_GPU = 32.0 * GIB


@dataclass(frozen=True)
class Hints:
    """What a loader may read from the cluster the workload will run on: ``per_node(resource)`` is the
    largest amount of ``resource`` (plain units) one node holds, or None when no node has it."""

    per_node: Callable[[str], float | None] = field(default=lambda resource: 8.0 if resource == GPU else None)

    def gpus_per_node(self) -> int:
        got = self.per_node(GPU)
        return max(1, int(got)) if got else 8


@dataclass
class Options:
    """The ``key=value`` options of one format, checked against what the format allows. Every fault is an
    InputError naming ``--format NAME:key``."""

    fmt: str
    values: Mapping[str, str]
    allowed: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in self.values:
            if key not in self.allowed:
                known = ", ".join(self.allowed) or "none"
                raise InputError(
                    f"unknown option {key!r} of format {self.fmt} (options: {known})", field="--format"
                )

    def _fail(self, key: str, message: str) -> InputError:
        return InputError(message, field=f"--format {self.fmt}:{key}")

    def text(self, key: str, default: str | None = None, choices: tuple[str, ...] = ()) -> str | None:
        value = self.values.get(key, default)
        if value is not None and choices and value not in choices:
            raise self._fail(key, f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    def number(self, key: str, default: float | None = None, *, low: float = 0.0) -> float | None:
        raw = self.values.get(key)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > low):
            raise self._fail(key, f"expected a number > {low:g}, got {raw!r}")
        return value

    def path(self, key: str, base: Path, why: str) -> Path:
        """A required file option, relative paths read from the current directory."""
        raw = self.values.get(key)
        if not raw:
            raise InputError(f"{why}: give it with --format {self.fmt}:{key}=FILE", file=str(base))
        return Path(raw)


def gang_roles(
    units: int, per_node: float, resource: str, extra: Mapping[str, float]
) -> tuple[RoleSpec, ...]:
    """``units`` of ``resource`` as a rigid gang of ``ceil(units / per_node)`` pods sharing them as evenly
    as possible (the larger pods form role ``""``, the smaller ones role ``"rest"``). ``extra`` is asked for
    per unit (cpu and memory per GPU)."""
    per = max(1, int(per_node))
    pods = max(1, math.ceil(units / per))
    base, rest = divmod(units, pods)

    def role(count: int, n: int, name: str = "") -> RoleSpec:
        requests = {k: v * n for k, v in extra.items()}
        if n > 0:
            requests[resource] = float(n)
        return RoleSpec(name=name, count=count, requests=requests)

    if rest == 0:
        return (role(pods, base),)
    return (role(rest, base + 1), role(pods - rest, base, "rest"))


def gpu_gangs(gpus: np.ndarray, per_node: int) -> tuple[list[tuple[RoleSpec, ...]], np.ndarray]:
    """Per row the roles of a job of ``gpus`` GPUs split over nodes of ``per_node`` GPUs (4 cores and 32Gi
    per GPU, as the Philly loader assumes), and its pod count; identical sizes share one tuple."""
    extra = {"cpu": CPU_PER_GPU, "memory": MEMORY_PER_GPU}
    sizes = gpus.astype(int).tolist()
    shapes = {g: gang_roles(g, per_node, GPU, extra) for g in set(sizes)}
    roles = [shapes[g] for g in sizes]
    return roles, np.array([sum(r.count for r in rs) for rs in roles], dtype=float)


def name_table(frame_rows: int, path: str, rows: np.ndarray | None = None) -> TraceTable:
    """An empty-columned table of ``frame_rows`` rows for :func:`~corral.sim.workload.assemble_specs`, which
    needs only the file name and each job's row number (formats that are not read as a CSV table)."""
    import pandas as pd

    table = TraceTable(pd.DataFrame(index=range(frame_rows)), path)
    if rows is not None:
        table.rows = rows
    return table
