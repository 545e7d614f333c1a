"""The seeded synthetic workload generator (SPEC.md §1.3): Poisson arrivals, gang sizes, GPUs per pod,
lognormal durations, queues, priorities and topology constraints drawn from one numpy Generator.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from corral.errors import InputError
from corral.model.quantity import MILLI, parse_quantity
from corral.sim.jobspec import JobSpec
from corral.sim.workload import GIB, TOPOLOGY_MODES, JobList, _role

__all__ = ["SyntheticSpec", "synthetic"]


def _weights(name: str, value: Any, key: Any) -> dict:
    """A non-empty mapping of choice -> non-negative weight with a positive sum. ``key`` converts a
    choice (config files may write ``"16": 0.05``) and raises ValueError on a bad one. Keys are sorted
    so that the order a config file lists them in never changes the draws."""
    if not isinstance(value, Mapping) or not value:
        raise InputError(
            f"expected a non-empty mapping of choice -> weight, got {value!r}",
            obj="synthetic workload",
            field=name,
        )
    out = {}
    for choice, weight in value.items():
        try:
            k, w = key(choice), float(weight)
        except (TypeError, ValueError):
            raise InputError(
                f"bad entry {choice!r}: {weight!r}", obj="synthetic workload", field=name
            ) from None
        if not (w >= 0 and math.isfinite(w)):
            raise InputError(
                f"weight of {choice!r} must be a number >= 0, got {weight!r}",
                obj="synthetic workload",
                field=name,
            )
        out[k] = w
    if sum(out.values()) <= 0:
        raise InputError("weights must not all be zero", obj="synthetic workload", field=name)
    return dict(sorted(out.items()))


def _number(value: Any, low: float, high: float = math.inf, *, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(value)
    number = float(value)
    if not (low < number if open_low else low <= number) or not number <= high or number == math.inf:
        raise ValueError(value)
    return number


def _integer(value: Any, low: float = -math.inf) -> int:
    number = _number(value, low)
    if number != int(number):
        raise ValueError(value)
    return int(number)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(value)
    return value


def _memory(value: Any) -> float:
    if isinstance(value, str) and not value.strip().replace(".", "", 1).isdigit():
        return parse_quantity(value) / MILLI
    number = _number(value, 0)
    if 0 < number < _LEAST_MEMORY:  # a bare number is bytes: 32 is surely 32Gi with the unit forgotten
        raise ValueError(value)
    return number


_LEAST_MEMORY = 2**20
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _unit_hint(name: str, value: Any) -> str:
    """A suggestion for a value written with the wrong unit: a duration such as ``30m`` where plain
    seconds are expected, a memory without its unit. Empty when there is none."""
    text = str(value).strip()
    if name.startswith("duration_") and isinstance(value, str):
        match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd])", text)
        if match:
            seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
            return f" (durations here are plain seconds: write {seconds:g} for {text})"
    if name == "memory_per_gpu" and text.replace(".", "", 1).isdigit():
        return f" (a bare number is bytes: write {text}Gi for {text} GiB per GPU)"
    return ""


_positive = lambda v: _number(v, 0, open_low=True)  # noqa: E731
_KEYS = {
    "gang_sizes": lambda v: _integer(v, 1),
    "gpus_per_pod": _positive,
    "queues": str,
    "priorities": _integer,
}
# field -> (converter raising ValueError or InputError, what the field must be)
_SCALARS = {
    "n_jobs": (lambda v: _integer(v, 1), "an integer >= 1"),
    "arrival_rate": (_positive, "a positive number (jobs per second)"),
    "duration_median": (_positive, "a positive number of seconds"),
    "duration_sigma": (lambda v: _number(v, 0), "a number >= 0"),
    "duration_min": (_positive, "a positive number of seconds"),
    "duration_max": (_positive, "a positive number of seconds"),
    "cpu_per_gpu": (lambda v: _number(v, 0), "a number of cores >= 0"),
    "memory_per_gpu": (_memory, "bytes or a quantity such as 32Gi"),
    "topology_fraction": (lambda v: _number(v, 0, 1), "a fraction in [0, 1]"),
    "topology_mode": (lambda v: TOPOLOGY_MODES[TOPOLOGY_MODES.index(v)], "hard or soft"),
    "topology_tier": (lambda v: _integer(v, 1), "an integer >= 1"),
    "name_prefix": (_text, "a non-empty string"),
}


@dataclass(frozen=True)
class SyntheticSpec:
    """What :func:`synthetic` generates. Weights need not sum to 1 (they are normalised).

    Arrivals are a Poisson process of ``arrival_rate`` jobs per second. A job is a rigid gang of
    ``gang_sizes`` pods (pods -> weight), each pod with ``gpus_per_pod`` GPUs (GPUs -> weight, a
    fraction below 1 is a GPU-sharing pod), ``cpu_per_gpu`` cores and ``memory_per_gpu`` bytes per GPU.
    Durations are lognormal with median ``duration_median`` seconds and shape ``duration_sigma``,
    clipped to [``duration_min``, ``duration_max``] and rounded to whole seconds. A fraction
    ``topology_fraction`` of the multi-pod gangs carries the constraint (``topology_mode``,
    ``topology_tier``).
    """

    n_jobs: int = 200
    arrival_rate: float = 1 / 120
    gang_sizes: Mapping[int, float] = field(
        default_factory=lambda: {1: 0.5, 2: 0.2, 4: 0.15, 8: 0.1, 16: 0.05}
    )
    gpus_per_pod: Mapping[float, float] = field(default_factory=lambda: {1: 0.3, 2: 0.15, 4: 0.2, 8: 0.35})
    duration_median: float = 1800.0
    duration_sigma: float = 1.0
    duration_min: float = 60.0
    duration_max: float = 86400.0
    queues: Mapping[str, float] = field(default_factory=lambda: {"default": 1.0})
    priorities: Mapping[int, float] = field(default_factory=lambda: {0: 1.0})
    cpu_per_gpu: float = 4.0
    memory_per_gpu: float = 32.0 * GIB
    topology_fraction: float = 0.0
    topology_mode: str = "hard"
    topology_tier: int = 1
    name_prefix: str = "job"

    def __post_init__(self) -> None:
        for name, (convert, what) in _SCALARS.items():
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, convert(value))
            except (TypeError, ValueError, InputError):
                raise InputError(
                    f"expected {what}, got {value!r}{_unit_hint(name, value)}",
                    obj="synthetic workload",
                    field=name,
                ) from None
        if self.duration_min > self.duration_max:
            raise InputError(
                f"{self.duration_min} exceeds duration_max {self.duration_max}",
                obj="synthetic workload",
                field="duration_min",
            )
        for name, key in _KEYS.items():
            object.__setattr__(self, name, _weights(name, getattr(self, name), key))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> SyntheticSpec:
        """Build from a config mapping; an unknown key is an InputError naming it and the allowed keys."""
        if not isinstance(values, Mapping):
            raise InputError(f"expected a mapping, got {type(values).__name__}", obj="synthetic workload")
        allowed = [f.name for f in fields(cls)]
        for key in values:
            if key not in allowed:
                raise InputError(
                    f"unknown key {key!r} (allowed: {', '.join(allowed)})",
                    obj="synthetic workload",
                    field=str(key),
                )
        return cls(**values)


def synthetic(
    seed: int | np.random.Generator, spec: SyntheticSpec | None = None, **overrides: Any
) -> list[JobSpec]:
    """Generate a seeded synthetic workload (DESIGN.md convention 6: every draw comes from
    ``numpy.random.default_rng(seed)``, or the Generator passed in). ``overrides`` are SyntheticSpec
    fields, validated like :meth:`SyntheticSpec.from_mapping`. The same seed and spec give the same
    list, job for job. Jobs are named ``<prefix>-<index>`` with zero-padded indices in submit order.
    """
    base = {f.name: getattr(spec, f.name) for f in fields(SyntheticSpec)} if spec else {}
    spec = SyntheticSpec.from_mapping({**base, **overrides}) if overrides or spec is None else spec
    if not isinstance(seed, np.random.Generator):
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise InputError(
                f"expected an integer >= 0, got {seed!r}", obj="synthetic workload", field="seed"
            )
        seed = np.random.default_rng(seed)
    rng, n = seed, spec.n_jobs

    def pick(weights: Mapping) -> np.ndarray:
        keys = list(weights)
        p = np.array(list(weights.values()), dtype=float)
        return np.array(keys, dtype=object)[rng.choice(len(keys), size=n, p=p / p.sum())]

    gaps = rng.exponential(1.0 / spec.arrival_rate, size=n)
    submit = np.round(np.concatenate(([0.0], np.cumsum(gaps[1:]))), 3)
    pods = pick(spec.gang_sizes)
    per_pod = pick(spec.gpus_per_pod)
    duration = rng.lognormal(math.log(spec.duration_median), spec.duration_sigma, size=n)
    duration = np.maximum(1.0, np.round(np.clip(duration, spec.duration_min, spec.duration_max)))
    queues = pick(spec.queues)
    priority = pick(spec.priorities)
    constrained = rng.random(n) < spec.topology_fraction
    width = len(str(n - 1))
    jobs = []
    for i in range(n):
        g = float(per_pod[i])
        role = _role(int(pods[i]), g, spec.cpu_per_gpu * g, spec.memory_per_gpu * g)
        topology = (spec.topology_mode, spec.topology_tier) if constrained[i] and pods[i] > 1 else None
        jobs.append(
            JobSpec(
                name=f"{spec.name_prefix}-{i:0{width}d}",
                submit=float(submit[i]),
                duration=float(duration[i]),
                queue=str(queues[i]),
                roles=(role,),
                priority=int(priority[i]),
                min_member=int(pods[i]),
                topology=topology,
                source=f"synthetic job {i}",
            )
        )
    jobs.sort(key=lambda j: (j.submit, j.name))
    return JobList(jobs)
