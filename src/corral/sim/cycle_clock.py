"""When the simulator's scheduling cycles run (the **Cycles** paragraph of :mod:`corral.sim.engine`).

Contract: :class:`CycleClock` decides, the engine schedules. A cycle runs at a multiple of
``schedule_period``, after something changed (:meth:`CycleClock.wake`: a submit, a completion, a release,
a node event, or a cycle that changed anything), and only while jobs wait; the last cycle's instant is
never repeated except by a follow-up. With a heartbeat a cycle also runs at least that often while jobs
wait (:func:`heartbeat`: ``--heartbeat``, or the interval of a ``timeslice`` action whose ranks the
clock alone can change). When ``timeslice``
stopped jobs whose pods left at once, one follow-up cycle runs at the same instant. A policy whose
cycles keep changing state without binding anything for :data:`STALL_CYCLES` cycles in a row, with
nothing else happening, livelocks: the clock stops planning cycles and remembers when (``stalled``).
Every method that plans a cycle returns the instants to schedule, in the order to schedule them (the
engine's sequence numbers keep that order, which keeps a run deterministic).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from corral.actions.timeslice import ranks_move_with_clock

if TYPE_CHECKING:
    from corral.framework.config import Config, Registry
    from corral.sim.options import SimOptions

__all__ = ["STALL_CYCLES", "CycleClock", "heartbeat"]

#: cycles in a row that change state without binding, with nothing else happening: a livelock
STALL_CYCLES = 100
#: the payload of a heartbeat's cycle event (a planned cycle's is None)
BEAT = "beat"


def heartbeat(config: Config, options: SimOptions, registry: Registry) -> float | None:
    """How often a cycle runs at least while jobs wait (None: only when something changed):
    ``--heartbeat`` when given; else, with a ``timeslice`` action whose answer the clock alone can
    change (:func:`corral.actions.timeslice.ranks_move_with_clock`: ``las``'s attained service, a
    minimum lease, ``minruntime``), its ``interval`` (at least the period), as such an action needs a
    cycle while jobs wait even when no event happened; else none (``srtf``: a remaining time changes
    nothing between events)."""
    if options.heartbeat:
        return options.heartbeat
    for action in config.actions:
        if action.name == "timeslice" and ranks_move_with_clock(action.args, config, registry):
            return float(max(action.args.interval, options.schedule_period))
    return None


class CycleClock:
    """The cycle plan of one run: ``period`` between cycles, ``beat`` the heartbeat (None: none)."""

    __slots__ = ("beat", "beat_at", "cycle_at", "dirty", "follow_at", "idle", "last", "period", "stalled")

    def __init__(self, period: float, beat: float | None) -> None:
        self.period, self.beat = period, beat
        self.dirty = False  # something changed since the last cycle
        self.cycle_at: float | None = None  # the planned cycle (None: none is)
        self.beat_at: float | None = None  # the planned heartbeat cycle
        self.follow_at: float | None = None  # the instant of the last follow-up cycle
        self.last = -math.inf  # the instant of the last cycle
        self.idle = 0  # cycles in a row that changed state without binding, nothing else happening
        self.stalled: float | None = None  # when the policy was found to livelock

    def event(self) -> None:
        """An event other than a cycle or a sample happened: the livelock count starts again."""
        self.idle = 0

    def wake(self, now: float, waiting: bool) -> float | None:
        """Something changed at ``now``: the instant of the cycle to plan at the next period boundary
        after the last cycle (None: one is planned already, no job waits, or the policy stalled)."""
        self.dirty = True
        if self.cycle_at is not None or not waiting or self.stalled is not None:
            return None
        at = math.ceil(now / self.period - 1e-9) * self.period
        if at <= self.last:
            at = self.last + self.period
        self.cycle_at = at
        return at

    def begin(self, now: float, payload: str | None, waiting: bool) -> bool:
        """A cycle event at ``now`` (``payload``: :data:`BEAT` for a heartbeat's): does a cycle run?"""
        if payload == BEAT:
            self.beat_at, self.dirty = None, True
        else:
            self.cycle_at = None
        if not waiting or not self.dirty:
            self.dirty = False
            return False
        self.last = now
        return True

    def end(
        self, now: float, *, bound: bool, changed: bool, follow: bool, waiting: bool
    ) -> list[tuple[float, str | None]]:
        """A cycle at ``now`` ended (``bound``: it bound a pod; ``changed``: it changed anything;
        ``follow``: it asks for a follow-up at the same instant; ``waiting``: jobs still wait): the
        cycle events to schedule, (instant, payload) in order."""
        self.idle = 0 if bound or not changed else self.idle + 1
        if self.idle >= STALL_CYCLES:
            self.stalled = now
        self.dirty = False
        out: list[tuple[float, str | None]] = []
        if follow and self.follow_at != now:  # one follow-up per instant
            self.follow_at = self.cycle_at = now
            out.append((now, None))
        if changed:
            at = self.wake(now, waiting)
            if at is not None:
                out.append((at, None))
        if self.beat and waiting and self.beat_at is None and self.stalled is None:
            self.beat_at = now + self.beat
            out.append((self.beat_at, BEAT))
        return out
