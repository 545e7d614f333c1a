"""Run-time estimates in the simulator, for the reservation's backfill with a plan (seed 001, SPEC.md
§3.5 "Beyond the seed").

Real users' estimates are wrong, so the plan must be judged with honest errors. An
:class:`EstimateModel` gives each job an expected run time that the engine writes into the job's
PodGroup annotation ``corral.io/expected-runtime`` when it is submitted — the scheduler reads it exactly
as it would read a user's annotation:

- ``exact``: the true run time;
- ``noisy``: the true run time times a factor drawn log-uniformly from ``[1/spread, spread]`` (``spread``
  2: off by up to 2x either way), from a generator seeded by ``seed`` and the job's name, so a job gets
  the same estimate in every configuration of one comparison and in every run.

The model is the ``simulation.estimates`` section of a configuration file (so ``corral compare`` can set
exact and noisy estimates side by side)::

    simulation:
      estimates: {model: noisy, spread: 2, seed: 7}

Without it the simulator writes no estimate (jobs then never use locked nodes).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.errors import ConfigError

__all__ = ["MODELS", "EstimateModel", "estimate_model"]

MODELS = ("exact", "noisy")


@dataclass(frozen=True)
class EstimateModel:
    model: str = "exact"
    spread: float = 1.0
    seed: int = 0

    def estimate(self, name: str, duration: float) -> float:
        """The expected run time of job ``name`` whose true run time is ``duration`` seconds."""
        if self.model == "exact" or self.spread <= 1.0:
            return float(duration)
        rng = np.random.default_rng([self.seed, zlib.crc32(name.encode("utf-8"))])
        bound = math.log(self.spread)
        return float(duration) * math.exp(rng.uniform(-bound, bound))


def estimate_model(simulation: Mapping[str, Any] | None, file: str = "<config>") -> EstimateModel | None:
    """The model of a configuration's ``simulation`` section (None without ``estimates``); a bad value is
    a ConfigError naming the file and field."""
    raw = (simulation or {}).get("estimates")
    if raw is None:
        return None
    where = "simulation.estimates"
    if isinstance(raw, str):
        raw = {"model": raw}
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping {model, spread, seed} or a model name", file=file, field=where)
    unknown = sorted(set(raw) - {"model", "spread", "seed"})
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r} (allowed: model, spread, seed)",
            file=file,
            field=f"{where}.{unknown[0]}",
        )
    model = raw.get("model", "exact")
    if model not in MODELS:
        raise ConfigError(
            f"unknown value {model!r} (allowed: {', '.join(MODELS)})", file=file, field=f"{where}.model"
        )
    spread = raw.get("spread", 2.0 if model == "noisy" else 1.0)
    if isinstance(spread, bool) or not isinstance(spread, (int, float)) or not 1.0 <= spread < math.inf:
        raise ConfigError(f"expected a number >= 1, got {spread!r}", file=file, field=f"{where}.spread")
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"expected an integer >= 0, got {seed!r}", file=file, field=f"{where}.seed")
    return EstimateModel(model, float(spread), seed)
