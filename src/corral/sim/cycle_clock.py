"""When the simulator's scheduling cycles run (the **Cycles** paragraph of :mod:`corral.sim.engine`).

Contract: :class:`CycleClock` decides, the engine schedules. A cycle runs at a multiple of
``schedule_period``, after something changed (:meth:`CycleClock.wake`: a submit, a completion, a release,
a node event, or a cycle that changed anything), and only while jobs wait; the last cycle's instant is
never repeated except by a follow-up. With a heartbeat a cycle also runs at least that often while jobs
wait (:func:`heartbeat`: the ``heartbeat`` option, or the interval of a ``timeslice`` action whose ranks the
clock alone can change; under ``las`` alone the boundaries before the next threshold crossing are
skipped: the cycle's ``Decisions.clock_horizon``). When ``timeslice``
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

__all__ = ["BEAT", "FOLLOW", "STALL_CYCLES", "CycleClock", "heartbeat"]

#: cycles in a row that change state without binding, with nothing else happening: a livelock
STALL_CYCLES = 100
#: the payload of a heartbeat's cycle event (a planned cycle's is None)
BEAT = "beat"
#: the payload of a follow-up's cycle event: it leaves the planned cycle planned
FOLLOW = "follow"


def heartbeat(config: Config, options: SimOptions, registry: Registry) -> float | None:
    """How often a cycle runs at least while jobs wait (None: only when something changed): the
    ``heartbeat`` option when given (literally: every ``heartbeat`` seconds); else, with a ``timeslice``
    action whose answer the clock alone can change (:func:`corral.actions.timeslice.ranks_move_with_clock`:
    ``las``'s attained service, a minimum lease, ``minruntime``), its ``interval`` (at least the period),
    as such an action needs a cycle while jobs wait even when no event happened — under ``las`` alone
    only at the boundaries from the next threshold crossing on (``Decisions.clock_horizon``,
    :meth:`CycleClock.end`); else none (``srtf``: a remaining time changes nothing between events)."""
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
        """A cycle event at ``now`` (``payload``: :data:`BEAT` for a heartbeat's): does a cycle run? A
        heartbeat moved to another instant since it was scheduled is passed over."""
        if payload == BEAT:
            if self.beat_at != now:
                return False
            self.beat_at, self.dirty = None, True
        elif payload != FOLLOW:
            self.cycle_at = None
        if not waiting or not self.dirty:
            self.dirty = False
            return False
        self.last = now
        return True

    def end(
        self,
        now: float,
        *,
        bound: bool,
        changed: bool,
        follow: bool,
        waiting: bool,
        horizon: float | None = None,
    ) -> list[tuple[float, str | None]]:
        """A cycle at ``now`` ended (``bound``: it bound a pod; ``changed``: it changed anything;
        ``follow``: it asks for a follow-up at the same instant; ``waiting``: jobs still wait;
        ``horizon``: the earliest instant the clock alone may change the cycle's answer, None: any
        instant): the cycle events to schedule, (instant, payload) in order."""
        self.idle = 0 if bound or not changed else self.idle + 1
        if self.idle >= STALL_CYCLES:
            self.stalled = now
        self.dirty = False
        out: list[tuple[float, str | None]] = []
        if follow and self.follow_at != now:  # one follow-up per instant
            # its own event: a cycle planned for a later instant stays planned (and is not planned twice)
            self.follow_at = now
            self.dirty = True
            out.append((now, FOLLOW))
        if changed:
            at = self.wake(now, waiting)
            if at is not None:
                out.append((at, None))
        if self.beat and waiting and self.stalled is None:
            at = self._next_beat(now, horizon)
            if at != self.beat_at:
                self.beat_at = at
                if at is not None:
                    out.append((at, BEAT))
        return out

    def _next_beat(self, now: float, horizon: float | None) -> float | None:
        """The heartbeat to plan after a cycle at ``now``: the next boundary of the heartbeat's grid (every
        ``beat`` from the planned heartbeat, or from ``now`` when none is planned) at or after
        ``horizon`` — the boundaries before it could only repeat this cycle's answer — or None when
        ``horizon`` is infinite (nothing but an event can change the answer)."""
        beat = self.beat
        assert beat is not None
        if self.beat_at is None:
            at = now + beat
        elif self.beat_at <= now:  # planned for this instant, not run yet: it runs after this cycle
            at = self.beat_at
        else:  # the first boundary of the planned heartbeat's grid after now
            at = self.beat_at - beat * math.floor((self.beat_at - now) / beat - 1e-9)
        if horizon is None or horizon <= at:
            return at
        if math.isinf(horizon):
            return None
        return at + beat * math.ceil((horizon - at) / beat - 1e-9)
