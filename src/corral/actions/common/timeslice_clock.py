"""When the clock alone changes what ``timeslice`` decides (issue 29): the simulator's heartbeat.

Between events (a submit, a completion, a stop, a bind, a node change) only the clock moves. Whether that
can change ``timeslice``'s answer is a property of the configuration (:func:`clock_dependence`):

- ``"none"``: never. Under keys that move as a clock (``srtf``, KeyClock: a running job's remaining time
  falls, a waiting job's stays) time only moves running jobs ahead: no waiting job comes to outrank a
  running one, and a job the walk keeps that moves ahead leaves every job it passes what it needed
  (they all fitted beside it before), so the walk keeps the same jobs — Lucid's quota walk too. The
  simulator runs no heartbeat.
- ``"horizon"``: only when a running job's key reaches an instant its plugin names (``las``,
  KeyHorizon: attained service crosses a threshold and the job drops a queue). Each cycle reports the
  earliest such instant (:func:`clock_horizon`, ``Decisions.clock_horizon``) and the simulator's
  heartbeat skips the interval boundaries before it: the cycles it leaves out could only repeat the
  last one's answer.
- ``"any"``: at any instant, as far as corral can tell — a minimum lease (a run's lease ends),
  starvation promotion (a wait reaches its factor), a JobOrder whose keys of running jobs move in
  another way or which has no key to look into, a JobStarving or VictimFilter answer that moves with
  the clock (``minruntime``: a run's protection ends; a plugin says its answers do not with
  ``starving_moves_with_clock`` / ``victims_move_with_clock`` False), a plugin the registry does not
  know. The heartbeat runs every ``interval``.

A key's context (``job_order_key_context``, e.g. ``drf``'s shares) is taken to change only with the
cluster's objects.
"""

from __future__ import annotations

from typing import Literal

from corral.actions.common.timeslice_running import kept_running
from corral.framework.config import Config, PluginConfig, Registry
from corral.framework.extension import (
    POINTS,
    JobOrder,
    JobOrderKey,
    JobStarving,
    KeyClock,
    KeyHorizon,
    VictimFilter,
)
from corral.framework.points import declares
from corral.framework.session import Session

__all__ = ["ANY", "HORIZON", "NONE", "ClockDependence", "clock_dependence", "clock_horizon"]

ClockDependence = Literal["none", "horizon", "any"]
NONE: ClockDependence = "none"
HORIZON: ClockDependence = "horizon"
ANY: ClockDependence = "any"
_RANK = {NONE: 0, HORIZON: 1, ANY: 2}

#: the points the action asks whose answers could move with the clock alone (JobOrder's switch keys too)
_ASKED = [p for p in POINTS if p.protocol in (JobOrder, JobStarving, VictimFilter)]


def clock_dependence(
    min_lease: float, starvation_factor: float, config: Config, registry: Registry
) -> ClockDependence:
    """How the clock alone can change what ``timeslice`` decides under ``config`` with these arguments
    (see the module docstring)."""
    if min_lease > 0 or starvation_factor > 0:
        return ANY
    got = NONE
    for tier in config.tiers:
        for conf in tier:
            mine = _dependence(registry.plugin_class(conf.name), conf)
            if _RANK[mine] > _RANK[got]:
                got = mine
    return got


def _dependence(cls: type | None, conf: PluginConfig) -> ClockDependence:
    """How a configured plugin's answers to the points :data:`_ASKED` move with the clock."""
    if cls is None:
        return ANY
    mro = cls.__mro__
    got = NONE
    for point in _ASKED:
        if point.protocol not in mro or not conf.enabled(point.switch):
            continue
        if point.protocol is JobOrder:
            if JobOrderKey not in mro:
                return ANY
            if getattr(cls, "running_keys_move", False) and KeyClock not in mro:
                if KeyHorizon not in mro:
                    return ANY
                got = HORIZON
        elif getattr(
            cls, "starving_moves_with_clock" if point.protocol is JobStarving else "victims_move_with_clock"
        ):
            return ANY
    return got


def clock_horizon(session: Session, min_lease: float, starvation_factor: float) -> float | None:
    """Under a ``"horizon"`` dependence, the earliest instant at which a running job's key may change
    with the clock alone (the least ``key_until`` of the KeyHorizon plugins over the running jobs;
    infinity with none running); None under any other dependence, or without a kept job index (then
    the heartbeat runs every interval). Each running job's instant is kept beside the kept running
    jobs until the job changes or the instant passes (``CORRAL_CHECK_INDEX=1`` compares the kept
    instants with fresh ones)."""
    if clock_dependence(min_lease, starvation_factor, session.config, session.registry) != HORIZON:
        return None
    kept = kept_running(session)
    if kept is None:
        return None
    plugins = [
        p
        for tier in session.members["JobOrder"]
        for p in tier
        if declares(p, KeyHorizon) and p.running_keys_move
    ]
    now, until = session.now, kept.until
    check = session.history.check_index
    earliest = float("inf")
    for uid, job in kept.jobs.items():
        at = until.get(uid)
        if at is None or at <= now:
            at = until[uid] = min(p.key_until(job) for p in plugins)
        elif check and abs(at - min(p.key_until(job) for p in plugins)) > 1e-6:
            raise AssertionError(f"the kept horizon of running job {uid} differs from a fresh one")
        earliest = min(earliest, at)
    return earliest
