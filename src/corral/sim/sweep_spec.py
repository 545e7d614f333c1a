"""The spec of ``corral sweep`` (docs/simulator.md, "Sweeps"): a grid of configurations × workloads
(files, windows, load scales) × clusters × seeds, read from one YAML file.

::

    configs:                        # name -> configuration file ('default': the built-in one); or a list
      fifo: baselines/fifo.yaml
      greedy: baselines/greedy.yaml
    baseline: fifo                  # the configuration the summary compares with (default: the first)
    workloads:                      # at least one; a bare string is a file
    - name: week                    # default: the file's stem
      file: philly.csv              # omitted: the built-in example's synthetic jobs (drawn per seed)
      format: philly                # as --format (default: recognised from the content)
      windows: [[14d, 21d]]         # [start, end] pairs as --start/--end (null: open); default the whole
      scales: [1, 0.8]              # as --scale; default [1]
      queues: [vc1, vc2]            # as --queue; default every queue
    clusters:                       # default: the built-in example's cluster
    - {name: c80, file: cluster.yaml}
    seeds: 4                        # 0, 1, 2, 3; or a list [0, 7]; default [0]
    options: {until: 7d, schedule_period: 10}   # the simulate options shared by every cell
    size_buckets: [1, 8, 32]
    executor: local                 # or ray (default: ray when an address is given, else local)
    workers: 2                      # local processes (default: the CPUs)
    address: null                   # a Ray cluster: asks for executor ray (default: RAY_ADDRESS, else a local instance)

Relative file paths are read from the spec's folder. Every key is checked before any run: an unknown key,
a missing file, a wrong type or a bad duration is one :class:`~corral.errors.ConfigError` naming the spec
file and the key (exit code 2). A cell's identity (:attr:`Cell.digest`) hashes everything that decides
its result — the configuration's, cluster's and workload's bytes, the window, scale, queues, seed, options
and size buckets — so a finished cell is reused only while none of that changed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral.errors import ConfigError, CorralError

__all__ = ["OPTION_KEYS", "Cell", "SweepSpec", "WorkloadSpec", "load_sweep_spec"]

_TOP = (
    "name",
    "configs",
    "baseline",
    "workloads",
    "clusters",
    "seeds",
    "options",
    "size_buckets",
    "executor",
    "workers",
    "address",
)
_WORKLOAD_KEYS = ("name", "file", "format", "windows", "scales", "queues")
#: the simulate options a sweep may set, as ``prepare`` names them, with their defaults
OPTION_KEYS: dict[str, Any] = {
    "until": None,
    "schedule_period": 10.0,
    "checkpoint_interval": None,
    "startup_delay": 0.0,
    "grace_period": 0.0,
    "restart_policy": "job",
}
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    file: Path | None
    format: str | None
    windows: tuple[tuple[str | None, str | None], ...]
    scales: tuple[float, ...]
    queues: tuple[str, ...]


@dataclass(frozen=True)
class Cell:
    """One run of the grid. ``key`` names it for a person (config, workload, window, scale, cluster,
    seed); ``digest`` is its identity on disk."""

    config: str
    config_file: Path | None
    workload: WorkloadSpec
    window: tuple[str | None, str | None]
    scale: float
    cluster: str
    cluster_file: Path | None
    seed: int
    options: Mapping[str, Any]
    size_buckets: tuple[float, ...]
    digest: str = ""
    #: the bytes of the workload and cluster files, hashed: a worker's cached inputs are reused only
    #: while they are the same
    sources: str = ""

    @property
    def window_label(self) -> str:
        start, end = self.window
        return "all" if start is None and end is None else f"{start or ''}-{end or ''}"

    @property
    def key(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "workload": self.workload.name,
            "window": self.window_label,
            "scale": self.scale,
            "cluster": self.cluster,
            "seed": self.seed,
        }

    @property
    def folder_name(self) -> str:
        parts = [self.config, self.workload.name, self.window_label, f"x{self.scale:g}", self.cluster]
        slug = "__".join(re.sub(r"[^A-Za-z0-9.-]+", "_", p)[:40] for p in parts)
        return f"{slug}__s{self.seed}-{self.digest[:12]}"


@dataclass(frozen=True)
class SweepSpec:
    file: Path
    name: str
    configs: dict[str, Path | None]
    baseline: str
    workloads: tuple[WorkloadSpec, ...]
    clusters: dict[str, Path | None]
    seeds: tuple[int, ...]
    options: dict[str, Any]
    size_buckets: tuple[float, ...]
    executor: str
    workers: int
    address: str | None
    cells: tuple[Cell, ...] = field(default=())


def _err(spec: Path, key: str, message: str) -> ConfigError:
    return ConfigError(message, file=str(spec), field=key)


def _only(raw: Mapping[str, Any], allowed: Sequence[str], spec: Path, prefix: str) -> None:
    for key in raw:
        if key not in allowed:
            where = f"{prefix}.{key}" if prefix else str(key)
            raise _err(spec, where, f"unknown key (allowed: {', '.join(allowed)})")


def _file(value: Any, spec: Path, key: str) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise _err(spec, key, f"expected a file path, got {value!r}")
    path = Path(os.path.expanduser(value))
    path = path if path.is_absolute() else spec.parent / path
    if not path.exists():
        raise _err(spec, key, f"no such file: {value}")
    return path


def _name(value: Any, spec: Path, key: str) -> str:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool) or not str(value).strip():
        raise _err(spec, key, f"expected a name, got {value!r}")
    return str(value)


def _named_files(raw: Any, spec: Path, key: str) -> dict[str, Path | None]:
    """``{name: file}``, ``[file, ...]`` or ``[{name, file}, ...]`` -> name -> path; the file
    ``default`` (or none) is the built-in one."""
    items: list[tuple[str | None, Any, str]] = []
    if isinstance(raw, Mapping):
        items = [(_name(k, spec, key), v, f"{key}.{k}") for k, v in raw.items()]
    elif isinstance(raw, list):
        for i, item in enumerate(raw):
            where = f"{key}[{i}]"
            if isinstance(item, Mapping):
                _only(item, ("name", "file"), spec, where)
                name = _name(item["name"], spec, f"{where}.name") if "name" in item else None
                items.append((name, item.get("file"), f"{where}.file"))
            else:
                items.append((None, item, where))
    else:
        raise _err(spec, key, f"expected a mapping of names to files or a list, got {type(raw).__name__}")
    if not items:
        raise _err(spec, key, "expected at least one entry")
    out: dict[str, Path | None] = {}
    for name, value, where in items:
        path = None if value in (None, "default") else _file(value, spec, where)
        label = name or ("default" if path is None else path.stem)
        if label in out:
            raise _err(spec, where, f"the name {label!r} is used twice; give each entry its own name")
        out[label] = path
    return out


def _durations(value: Any, spec: Path, key: str) -> str | None:
    from corral.sim.runs import parse_seconds

    if value is None:
        return None
    try:
        parse_seconds(str(value), key)
    except CorralError:
        raise _err(spec, key, f"expected seconds or a duration such as 90m, 36h, 7d, got {value!r}") from None
    return str(value)


def _windows(raw: Any, spec: Path, key: str) -> tuple[tuple[str | None, str | None], ...]:
    if raw is None:
        return ((None, None),)
    if not isinstance(raw, list) or not raw:
        raise _err(spec, key, "expected a list of [start, end] pairs")
    out = []
    for i, pair in enumerate(raw):
        where = f"{key}[{i}]"
        if isinstance(pair, Mapping):
            _only(pair, ("start", "end"), spec, where)
            pair = [pair.get("start"), pair.get("end")]
        if not isinstance(pair, list) or len(pair) != 2:
            raise _err(spec, where, f"expected [start, end] (null for an open end), got {pair!r}")
        out.append((_durations(pair[0], spec, f"{where}[0]"), _durations(pair[1], spec, f"{where}[1]")))
    return tuple(out)


def _number_list(raw: Any, spec: Path, key: str, low: float, high: float) -> tuple[float, ...]:
    values = raw if isinstance(raw, list) else [raw]
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (low <= v <= high) or math.isnan(v):
            raise _err(
                spec,
                f"{key}[{i}]" if isinstance(raw, list) else key,
                f"expected a number from {low:g} to {high:g}, got {v!r}",
            )
        out.append(float(v))
    if not out:
        raise _err(spec, key, "expected at least one number")
    return tuple(out)


def _workload(raw: Any, spec: Path, key: str) -> WorkloadSpec:
    if isinstance(raw, str):
        raw = {"file": raw}
    if not isinstance(raw, Mapping):
        raise _err(
            spec, key, f"expected a mapping {{name, file, format, windows, scales, queues}}, got {raw!r}"
        )
    _only(raw, _WORKLOAD_KEYS, spec, key)
    path = _file(raw["file"], spec, f"{key}.file") if raw.get("file") is not None else None
    fmt = raw.get("format")
    if fmt is not None:
        from corral.sim.formats import parse_format

        try:
            parse_format(str(fmt))
        except CorralError as exc:
            raise _err(spec, f"{key}.format", exc.message) from None
    queues = raw.get("queues") or []
    if not isinstance(queues, list) or not all(isinstance(q, str) for q in queues):
        raise _err(spec, f"{key}.queues", f"expected a list of queue names, got {queues!r}")
    default = path.stem if path is not None else "example"
    return WorkloadSpec(
        name=_name(raw.get("name", default), spec, f"{key}.name"),
        file=path,
        format=None if fmt is None else str(fmt),
        windows=_windows(raw.get("windows"), spec, f"{key}.windows"),
        scales=_number_list(raw.get("scales", [1.0]), spec, f"{key}.scales", 1e-6, 1e6),
        queues=tuple(queues),
    )


def _seeds(raw: Any, spec: Path) -> tuple[int, ...]:
    if isinstance(raw, int) and not isinstance(raw, bool):
        if not 1 <= raw <= 10_000:
            raise _err(spec, "seeds", f"expected a count from 1 to 10000 or a list of seeds, got {raw!r}")
        return tuple(range(raw))
    if not isinstance(raw, list) or not raw:
        raise _err(spec, "seeds", f"expected a count or a list of integers >= 0, got {raw!r}")
    for i, s in enumerate(raw):
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise _err(spec, f"seeds[{i}]", f"expected an integer >= 0, got {s!r}")
    if len(set(raw)) != len(raw):
        raise _err(spec, "seeds", "a seed is listed twice")
    return tuple(raw)


def _options(raw: Any, spec: Path) -> dict[str, Any]:
    from corral.sim.runs import check_options, parse_seconds

    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise _err(spec, "options", f"expected a mapping, got {raw!r}")
    _only(raw, list(OPTION_KEYS), spec, "options")
    out = dict(OPTION_KEYS)
    for key, value in raw.items():
        where = f"options.{key}"
        if key == "restart_policy":
            if value not in ("job", "pods"):
                raise _err(spec, where, f"expected job or pods, got {value!r}")
            out[key] = value
        elif key == "until":
            out[key] = _durations(value, spec, where)
        else:
            try:
                seconds = parse_seconds(None if value is None else str(value), where)
            except CorralError:
                raise _err(spec, where, f"expected seconds or a duration, got {value!r}") from None
            out[key] = seconds
    try:
        check_options(
            None,
            out["schedule_period"],
            out["checkpoint_interval"],
            out["startup_delay"],
            out["grace_period"],
        )
    except CorralError as exc:
        option = (exc.field or "").lstrip("-").replace("-", "_")  # --grace-period -> grace_period
        raise _err(spec, f"options.{option}", exc.message) from None
    return out


def _read(path: Path) -> Mapping[str, Any]:
    from corral.inputs import load_text_documents

    docs = load_text_documents(path, ConfigError)
    if len(docs) != 1 or not isinstance(docs[0], Mapping):
        raise ConfigError(
            "expected one YAML mapping (configs, workloads, clusters, seeds, ...)", file=str(path)
        )
    return docs[0]


def load_sweep_spec(path: str | Path) -> SweepSpec:
    """Read and check a sweep spec and lay out its cells (configs outermost, seeds innermost)."""
    from corral.sim.breakdown import DEFAULT_BUCKETS, parse_buckets

    spec = Path(path)
    if not spec.is_file():
        raise ConfigError("no such sweep spec", file=str(spec))
    raw = _read(spec)
    _only(raw, _TOP, spec, "")
    if "configs" not in raw:
        raise _err(spec, "configs", "missing: name at least one configuration file ('default': built-in)")
    configs = _named_files(raw["configs"], spec, "configs")
    baseline = _name(raw.get("baseline", next(iter(configs))), spec, "baseline")
    if baseline not in configs:
        raise _err(spec, "baseline", f"{baseline!r} is not one of the configs ({', '.join(configs)})")
    workloads_raw = raw.get("workloads", [{}])
    if not isinstance(workloads_raw, list) or not workloads_raw:
        raise _err(spec, "workloads", "expected a list of workloads")
    workloads = tuple(_workload(w, spec, f"workloads[{i}]") for i, w in enumerate(workloads_raw))
    names = [w.name for w in workloads]
    if len(set(names)) != len(names):
        raise _err(spec, "workloads", "two workloads have the same name; give each a name")
    clusters: dict[str, Path | None] = {"example": None}
    if raw.get("clusters") is not None:
        clusters = _named_files(raw["clusters"], spec, "clusters")
    try:
        buckets = parse_buckets(raw.get("size_buckets") or DEFAULT_BUCKETS)
    except CorralError as exc:
        raise _err(spec, "size_buckets", exc.message) from None
    executor = raw.get("executor", "local")
    if executor not in EXECUTORS:
        raise _err(spec, "executor", f"expected local or ray, got {executor!r}")
    workers = raw.get("workers", os.cpu_count() or 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 1024:
        raise _err(spec, "workers", f"expected an integer from 1 to 1024, got {workers!r}")
    address = raw.get("address")
    if address is not None and not isinstance(address, str):
        raise _err(spec, "address", f"expected a Ray address such as ray://host:10001, got {address!r}")
    if address is not None and "executor" not in raw:
        executor = "ray"  # an address is where Ray runs: it asks for the Ray executor
    elif address is not None and executor != "ray":
        raise _err(spec, "address", "a Ray cluster's address needs executor: ray (or remove the address)")
    sweep = SweepSpec(
        file=spec,
        name=_name(raw.get("name", spec.stem), spec, "name"),
        configs=configs,
        baseline=baseline,
        workloads=workloads,
        clusters=clusters,
        seeds=_seeds(raw.get("seeds", [0]), spec),
        options=_options(raw.get("options"), spec),
        size_buckets=buckets,
        executor=executor,
        workers=workers,
        address=address,
    )
    return _with_cells(sweep)


def _bytes_digest(path: Path | None, cache: dict[Path, str]) -> str:
    """The sha256 of a file (of every file under a folder, in name order); "" for the built-in."""
    if path is None:
        return ""
    if path not in cache:
        h = hashlib.sha256()
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            h.update(str(f.relative_to(path) if path.is_dir() else "").encode())
            with f.open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    h.update(chunk)
        cache[path] = h.hexdigest()
    return cache[path]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("corral")
    except PackageNotFoundError:
        return ""


def _with_cells(sweep: SweepSpec) -> SweepSpec:
    from dataclasses import replace

    cache: dict[Path, str] = {}
    cells = []
    for config, config_file in sweep.configs.items():
        for workload in sweep.workloads:
            for window in workload.windows:
                for scale in workload.scales:
                    for cluster, cluster_file in sweep.clusters.items():
                        for seed in sweep.seeds:
                            cell = Cell(
                                config,
                                config_file,
                                workload,
                                window,
                                scale,
                                cluster,
                                cluster_file,
                                seed,
                                sweep.options,
                                sweep.size_buckets,
                            )
                            identity = {
                                "version": _version(),
                                "config": _bytes_digest(config_file, cache) or "default",
                                "cluster": _bytes_digest(cluster_file, cache) or "example",
                                "workload": _bytes_digest(workload.file, cache) or "example",
                                "format": workload.format,
                                "queues": list(workload.queues),
                                "window": list(window),
                                "scale": scale,
                                "seed": seed,
                                "options": sweep.options,
                                "buckets": list(sweep.size_buckets),
                            }
                            text = json.dumps(identity, sort_keys=True)
                            sources = f"{identity['workload']}:{identity['cluster']}"
                            digest = hashlib.sha256(text.encode()).hexdigest()
                            cells.append(replace(cell, digest=digest, sources=sources))
    return replace(sweep, cells=tuple(cells))
