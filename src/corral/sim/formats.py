"""The one registry of workload formats: what ``--format`` accepts, how a format is recognised when
``--format`` is not given, and which options each takes (docs/traces.md documents every one).

``--format NAME`` or ``--format NAME:key=value,key=value`` (for example ``swf:resource=cpu,per_node=2``
or ``gavel:throughputs=simulation_throughputs.json``). Without ``--format`` the format is recognised by
content — a folder or a ``.json`` file is Kubernetes objects, a YAML file is Kubernetes objects when it
holds objects with ``apiVersion`` and ``kind`` and a synthetic spec otherwise; an SWF log by its ``;`` header or 18-number lines; a Gavel
trace by its 7 tab-separated fields; a CSV by its header — and corral's own schema otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral.errors import InputError
from corral.sim.jobspec import JobSpec
from corral.sim.loaders.common import Hints, Options

__all__ = ["FORMATS", "TraceFormat", "detect", "format_names", "load_trace", "load_workload", "parse_format"]


def _swf(path: Path, options: Options, hints: Hints) -> Any:
    from corral.sim.loaders.swf import load_swf

    return load_swf(path, options, hints)


def _gavel(path: Path, options: Options, hints: Hints) -> Any:
    from corral.sim.loaders.gavel import load_gavel

    return load_gavel(path, options, hints)


def _pollux(path: Path, options: Options, hints: Hints) -> Any:
    from corral.sim.loaders.pollux import load_pollux

    return load_pollux(path, options, hints)


def _tables(name: str) -> Callable[[Path, Options, Hints], Any]:
    def load(path: Path, options: Options, hints: Hints) -> Any:
        from corral.sim.loaders import gpu_tables

        return getattr(gpu_tables, f"load_{name}")(path, options, hints)

    return load


def _corral(path: Path, options: Options, hints: Hints) -> Any:
    from corral.sim.workload import load_corral_trace

    return load_corral_trace(path)


def _philly(path: Path, options: Options, hints: Hints) -> Any:
    from corral.sim.workload import load_philly

    return load_philly(path, gpus_per_node=hints.gpus_per_node())


def _alibaba(path: Path, options: Options, hints: Hints) -> Any:
    from corral.sim.workload import load_alibaba

    return load_alibaba(path)


def _manifests(path: Path, options: Options, hints: Hints) -> Any:
    from corral.sim.manifest_workload import load_manifest_workload

    return load_manifest_workload(path)


def _synthetic(path: Path, options: Options, hints: Hints, seed: int = 0) -> Any:
    from corral.inputs import load_yaml, read_text
    from corral.sim.synthetic import SyntheticSpec, synthetic

    raw = load_yaml(read_text(path), str(path)) or {}
    try:
        return synthetic(seed, SyntheticSpec.from_mapping(raw))
    except InputError as exc:  # name the file the spec came from
        raise InputError(exc.message, file=str(path), obj=exc.obj, field=exc.field) from None


@dataclass(frozen=True)
class TraceFormat:
    """One ``--format`` value: its loader ``load(path, options, hints)``, a one-line summary, its options
    (name -> meaning) and the CSV header columns that identify it (empty: not recognised by header)."""

    name: str
    summary: str
    load: Callable[[Path, Options, Hints], Any]
    options: Mapping[str, str] = field(default_factory=dict)
    header: frozenset[str] = frozenset()


def _registry() -> dict[str, TraceFormat]:
    from corral.sim.loaders.gavel import OPTIONS as GAVEL
    from corral.sim.loaders.pollux import OPTIONS as POLLUX
    from corral.sim.loaders.swf import OPTIONS as SWF

    formats = [
        TraceFormat("corral", "corral's own schema (CSV or Parquet)", _corral),
        TraceFormat(
            "philly",
            "Microsoft Philly (Pollux's philly.csv)",
            _philly,
            header=frozenset({"timestamp", "num_gpus", "cluster"}),
        ),
        TraceFormat(
            "alibaba",
            "Alibaba GPU-2023 (openb) pod list",
            _alibaba,
            header=frozenset({"creation_time", "num_gpu"}),
        ),
        TraceFormat(
            "alibaba-dlrm",
            "Alibaba GPU-2025 DLRM serving instances",
            _tables("dlrm"),
            header=frozenset({"instance_sn", "gpu_request", "creation_time"}),
        ),
        TraceFormat("swf", "Parallel Workloads Archive Standard Workload Format", _swf, SWF),
        TraceFormat("gavel", "Gavel per-VC trace (steps; needs a throughput table)", _gavel, GAVEL),
        TraceFormat(
            "pollux",
            "Pollux workload (needs a durations table)",
            _pollux,
            POLLUX,
            frozenset({"name", "time", "application", "num_replicas"}),
        ),
        TraceFormat(
            "tiresias",
            "Tiresias job trace",
            _tables("tiresias"),
            header=frozenset({"job_id", "num_gpu", "submit_time", "duration"}),
        ),
        TraceFormat(
            "helios",
            "Helios cluster_log.csv",
            _tables("helios"),
            header=frozenset({"job_id", "vc", "gpu_num", "submit_time", "duration"}),
        ),
        TraceFormat("synthetic", "a synthetic workload spec (YAML)", _synthetic),
        TraceFormat(
            "manifests", "Kubernetes objects: Volcano Jobs, batch Jobs, PodGroups and pods", _manifests
        ),
    ]
    return {f.name: f for f in formats}


FORMATS: dict[str, TraceFormat] = _registry()


def format_names() -> str:
    return ", ".join(FORMATS)


def parse_format(text: str | None) -> tuple[str | None, dict[str, str]]:
    """``NAME`` or ``NAME:key=value,...`` -> (name, options); None stays (None, {})."""
    if text is None:
        return None, {}
    name, _, rest = str(text).partition(":")
    name = name.strip()
    if name not in FORMATS:
        raise InputError(f"unknown format {name!r} (allowed: {format_names()})", field="--format")
    options: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise InputError(f"expected key=value after {name}:, got {part!r}", field="--format")
        options[key.strip()] = value.strip()
    return name, options


_SWF_LINE = re.compile(r"^\s*-?\d+(\.\d+)?(\s+-?\d+(\.\d+)?){17}\s*$")


def detect(path: Path) -> str:
    """The format of ``path`` from its name (YAML: synthetic) and content; ``corral`` when nothing else
    matches."""
    from corral.sim.tracefile import head_text

    if path.is_dir() or path.suffix.lower() == ".json":
        return "manifests"
    if path.suffix.lower() in (".yaml", ".yml"):
        from corral.inputs import read_text
        from corral.sim.manifest_workload import looks_like_manifests

        # Kubernetes objects (a Volcano Job, a batch Job, PodGroups and pods) or a synthetic spec
        return "manifests" if looks_like_manifests(read_text(path)) else "synthetic"
    lines = [
        line for line in head_text(path).splitlines()[:-1] or head_text(path).splitlines() if line.strip()
    ]
    if not lines:
        return "corral"
    first = lines[0]
    if first.lstrip().startswith(";") or _SWF_LINE.match(first):
        return "swf"
    if first.count("\t") == 6:
        return "gavel"
    header = {c.strip() for c in first.split(",")}
    for fmt in FORMATS.values():
        if fmt.header and fmt.header <= header:
            return fmt.name
    return "corral"


def load_workload(path: Path, fmt: str | None, hints: Hints | None = None, seed: int = 0) -> Any:
    """The jobs of ``path`` in ``fmt`` (``NAME[:options]``; None: :func:`detect`) as a ``JobList``.
    ``hints`` tell a loader what the cluster's nodes hold (default: nodes of 8 GPUs); ``seed`` seeds a
    synthetic spec. Every fault is an InputError naming the file."""
    name, values = parse_format(fmt)
    if not path.exists():
        raise InputError("no such file", file=str(path))
    name = name or detect(path)
    spec = FORMATS[name]
    options = Options(name, values, spec.options)
    if name == "synthetic":
        return _synthetic(path, options, hints or Hints(), seed)
    return spec.load(path, options, hints or Hints())


def load_trace(path: str | Path, kind: str | None = None) -> list[JobSpec]:
    """Load any trace file format of the registry (``corral``, ``philly``, ``alibaba``,
    ``alibaba-dlrm``, ``swf``, ``gavel``, ``pollux``, ``tiresias``, ``helios``, with options as
    ``NAME:key=value,...``); ``None`` recognises the format from the content. Gangs are split for nodes
    of 8 GPUs (the simulator passes the cluster's own)."""
    name = (kind or "").partition(":")[0]
    if kind is not None and (name not in FORMATS or name == "synthetic"):
        allowed = ", ".join(f for f in FORMATS if f != "synthetic")
        raise InputError(f"unknown trace kind {kind!r} (allowed: {allowed})", file=str(path), field="kind")
    jobs: list[JobSpec] = load_workload(Path(path), kind, Hints())
    return jobs
