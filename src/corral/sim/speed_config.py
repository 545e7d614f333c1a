"""``simulation.speed`` of a configuration: the settings of the job-speed model (:mod:`corral.sim.speed`).

    simulation:
      speed:                          # {} turns the model on with its built-in (measured) factors
        spread:                       # per model class: slowdown by the level a gang spans
          default: {1: 1.29}          #   level 1: several nodes in one tier-1 HyperNode (or no HyperNodes)
          imagenet: {1: 1.03, 3: 1.4}
        throughputs:                  # Gavel-style GPU-type matrix
          file: throughputs.json      #   relative to the configuration's folder
          reference: v100             #   the type the trace's durations are for (default v100)
          label: nvidia.com/gpu.product   # the node label naming a node's GPU type (the default)
        elastic:                      # per model class: [pods / minMember, speed-up] points
          default: [[1, 1.0], [2, 1.8]]

A ``spread`` given replaces the built-in factors whole (a class it does not list takes its ``default``
row, else full speed). Every key is checked: an
unknown key or a bad value is one ConfigError naming the file and the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from corral.errors import ConfigError
from corral.sim.speed import GPU_LABEL, SpeedModel

__all__ = ["speed_options"]

_KEYS = ("spread", "throughputs", "elastic")


def speed_options(simulation: Any, file: str = "") -> dict[str, Any]:
    """The :class:`~corral.sim.engine.SimOptions` field of ``simulation.speed`` (empty without one)."""
    where = "simulation.speed"
    raw = simulation.get("speed") if isinstance(simulation, Mapping) else None
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            "expected a mapping {spread, throughputs, elastic} ({} for the built-in factors)",
            file=file,
            field=where,
        )
    _only(raw, _KEYS, file, where)
    spread = None if raw.get("spread") is None else _spread(raw["spread"], file, f"{where}.spread")
    table: dict[str, dict[tuple[str, int | None], float]] = {}
    reference, label, source = "v100", GPU_LABEL, ""
    if raw.get("throughputs") is not None:
        table, reference, label, source = _throughputs(raw["throughputs"], file, f"{where}.throughputs")
    elastic = _elastic(raw.get("elastic"), file, f"{where}.elastic")
    return {"speed": SpeedModel(spread, table, reference, label, elastic, source)}


def _only(raw: Mapping[Any, Any], allowed: tuple[str, ...], file: str, where: str) -> None:
    unknown = sorted(set(map(str, raw)) - set(allowed))
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r} (allowed: {', '.join(allowed)})",
            file=file,
            field=f"{where}.{unknown[0]}",
        )


def _classes(raw: Any, file: str, where: str, what: str) -> Mapping[Any, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) and k for k in raw):
        raise ConfigError(f"expected a mapping of model class -> {what}", file=file, field=where)
    return raw


def _number(value: Any, low: float, file: str, where: str, what: str, *, strict: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or value < low or (strict and value == low):
        raise ConfigError(f"expected {what}, got {value!r}", file=file, field=where)
    return float(value)


def _spread(raw: Any, file: str, where: str) -> dict[str, tuple[tuple[int, float], ...]]:
    out = {}
    for klass, levels in _classes(raw, file, where, "{level: slowdown}").items():
        at = f"{where}.{klass}"
        if not isinstance(levels, Mapping) or not levels:
            raise ConfigError("expected {level: slowdown}, e.g. {1: 1.1, 2: 1.3}", file=file, field=at)
        rows = []
        for key, factor in levels.items():
            level = int(key) if isinstance(key, int) or (isinstance(key, str) and key.isdigit()) else 0
            if isinstance(key, bool) or level < 1:
                raise ConfigError(f"expected a level >= 1 as the key, got {key!r}", file=file, field=at)
            rows.append((level, _number(factor, 1.0, file, f"{at}.{key}", "a slowdown factor >= 1")))
        out[klass] = tuple(sorted(rows))
    return out


def _throughputs(raw: Any, file: str, where: str) -> tuple[Any, str, str, str]:
    from corral.sim.loaders.gavel import read_all_throughputs

    if not isinstance(raw, Mapping) or "file" not in raw:
        raise ConfigError("expected a mapping {file, reference, label}", file=file, field=where)
    _only(raw, ("file", "reference", "label"), file, where)
    for key in raw:
        if not isinstance(raw[key], str) or not raw[key]:
            raise ConfigError(
                f"expected a non-empty string, got {raw[key]!r}", file=file, field=f"{where}.{key}"
            )
    path = Path(raw["file"])
    if not path.is_absolute() and file:
        path = Path(file).parent / path
    if not path.is_file():
        raise ConfigError(f"no such file: {path}", file=file, field=f"{where}.file")
    table = read_all_throughputs(path)
    reference = raw.get("reference", "v100")
    if reference not in table:
        raise ConfigError(
            f"the table has no worker type {reference!r} (it has: {', '.join(table)})",
            file=file,
            field=f"{where}.reference",
        )
    return table, reference, raw.get("label", GPU_LABEL), str(path)


def _elastic(raw: Any, file: str, where: str) -> dict[str, tuple[tuple[float, float], ...]]:
    out = {}
    for klass, points in _classes(raw, file, where, "[[pods / minMember, speed-up], ...]").items():
        at = f"{where}.{klass}"
        if not isinstance(points, list) or not points:
            raise ConfigError("expected a list of [pods / minMember, speed-up] points", file=file, field=at)
        curve: list[tuple[float, float]] = []
        for i, point in enumerate(points):
            if not isinstance(point, list) or len(point) != 2:
                raise ConfigError("expected [pods / minMember, speed-up]", file=file, field=f"{at}[{i}]")
            ratio = _number(point[0], 1.0, file, f"{at}[{i}]", "a ratio of pods to minMember >= 1")
            speedup = _number(point[1], 0.0, file, f"{at}[{i}]", "a speed-up > 0", strict=True)
            if curve and ratio <= curve[-1][0]:
                raise ConfigError("expected points in ascending ratio", file=file, field=f"{at}[{i}]")
            curve.append((ratio, speedup))
        out[klass] = tuple(curve)
    return out
