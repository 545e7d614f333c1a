"""The preemption cost model the research simulators use (``simulation.preemption`` of a configuration).

Tiresias (Gu et al., NSDI 2019) and Lucid (Hu et al., ASPLOS 2023) charge a preempted job two things: it
checkpoints when it is stopped (no progress is lost), and every resume costs a fixed restore time that
depends on the job's size (Lucid's simulator: 40 s up to 8 GPUs, 60 s above). corral's default keeps its
own model: periodic checkpoints (``--checkpoint-interval``) and no restore time.

    simulation:
      preemption:
        checkpoint: true            # the scheduler's evictions checkpoint the gang they stop
        resumeOverhead:             # bands by the job's GPUs, smallest first; the last may omit upToGpus
          - {upToGpus: 8, overhead: 40s}
          - {overhead: 60s}

The checkpoint covers the scheduler's own evictions (preempt, reclaim, gangpreempt, gangreclaim, flow);
a node failure or an injected eviction still loses the progress since the last periodic checkpoint. The
restore applies to every run after the first: the gang holds its nodes, makes no progress, and the
GPU-time it spends is reported as ``restore_gpu_hours``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from corral.errors import ConfigError
from corral.model.clock import parse_duration

__all__ = ["preemption_options", "resume_overhead"]


def preemption_options(simulation: Any, file: str = "") -> dict[str, Any]:
    """The :class:`~corral.sim.engine.SimOptions` fields of ``simulation.preemption`` (empty without)."""
    where = "simulation.preemption"
    raw = simulation.get("preemption") if isinstance(simulation, Mapping) else None
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("expected a mapping {checkpoint, resumeOverhead}", file=file, field=where)
    unknown = sorted(set(map(str, raw)) - {"checkpoint", "resumeOverhead"})
    if unknown:
        raise ConfigError(
            f"unknown key {unknown[0]!r} (allowed: checkpoint, resumeOverhead)",
            file=file,
            field=f"{where}.{unknown[0]}",
        )
    out: dict[str, Any] = {}
    if "checkpoint" in raw:
        if not isinstance(raw["checkpoint"], bool):
            raise ConfigError(
                f"expected true or false, got {raw['checkpoint']!r}", file=file, field=f"{where}.checkpoint"
            )
        out["checkpoint_on_preempt"] = raw["checkpoint"]
    bands = raw.get("resumeOverhead")
    if bands is not None:
        out["resume_overhead"] = _bands(bands, file, f"{where}.resumeOverhead")
    return out


def _bands(bands: Any, file: str, where: str) -> tuple[tuple[float, float], ...]:
    if not isinstance(bands, list) or not bands:
        raise ConfigError("expected a list of {upToGpus, overhead}", file=file, field=where)
    out: list[tuple[float, float]] = []
    for i, band in enumerate(bands):
        at = f"{where}[{i}]"
        if (
            not isinstance(band, Mapping)
            or set(map(str, band)) - {"upToGpus", "overhead"}
            or "overhead" not in band
        ):
            raise ConfigError("expected {upToGpus, overhead} (overhead a duration)", file=file, field=at)
        upto = band.get("upToGpus", math.inf)
        if isinstance(upto, bool) or not isinstance(upto, (int, float)) or not upto > 0:
            raise ConfigError(
                f"expected a positive GPU count, got {upto!r}", file=file, field=f"{at}.upToGpus"
            )
        try:
            seconds = parse_duration(band["overhead"])
        except Exception:  # noqa: BLE001 - InputError, ValueError: one message either way
            seconds = -1.0
        if not 0 <= seconds < math.inf:
            raise ConfigError(
                f"expected a duration (e.g. 40s), got {band['overhead']!r}", file=file, field=f"{at}.overhead"
            )
        if out and upto <= out[-1][0]:
            raise ConfigError("expected bands in ascending upToGpus", file=file, field=f"{at}.upToGpus")
        out.append((float(upto), seconds))
    return tuple(out)


def resume_overhead(bands: tuple[tuple[float, float], ...], gpus: float) -> float:
    """Seconds a job of ``gpus`` GPUs restores before it progresses again: the first band of
    ``bands`` (``SimOptions.resume_overhead``, by ``upToGpus`` ascending) it fits; 0 past the last."""
    for upto, seconds in bands:
        if gpus <= upto:
            return seconds
    return 0.0
