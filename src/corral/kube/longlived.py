"""Keeping what ``corral run`` holds for its whole life out of the garbage collector's passes.

The watch cache (every object as JSON and parsed) and the kept model are millions of container objects
that live as long as the process. CPython's collector walks all of them in every full collection, and a
cycle allocates enough that one comes every other cycle: 0.5 s of CPU at 50,000 pods, more than the
scheduling itself (measured by ``benchmarks/bench_live.py``). ``corral schedule`` freezes its loaded
model for the same reason (``gc.freeze`` in :func:`corral.commands.schedule.schedule_snapshot`).

:class:`LongLived` runs one full collection at the start of each cycle, after the model is brought up to
date, and then freezes what is alive: the collection walks only what was made since the last freeze
(the last cycle's objects and what the watch brought in), never the frozen cache, and nothing that is
garbage is ever frozen. A cycle itself leaves no reference cycles behind: :func:`~corral.framework.cycle.run_cycle`
drops its session's references as it ends, so the session, its plugins and their per-pod records (some
37,000 objects at 50,000 pods, which this collection used to walk every cycle) are freed at once. The collector's own full passes are held back while objects are frozen (its third
threshold raised), since this collection does their work once a cycle at the cycle's start instead of
in the middle of the scheduling, where they would walk the cycle's live objects for nothing; its young
generations run as usual. A frozen object that later dies inside a reference cycle (an old job's model
replaced by the incremental build) waits for the next unfreeze: every ``full_every`` seconds, and at every
full assembly (the old model is garbage then), the objects are unfrozen before that collection, so
memory stays bounded by what that time leaves behind.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

__all__ = ["LongLived"]

#: the collector's third threshold while objects are frozen: its own full passes held back
_HELD = 1_000_000
#: the thresholds before the first holder raised them, and how many runners hold them (one process may
#: run several runners: tests, the soak)
_saved: list[tuple[int, int, int]] = []
_holders = [0]


def _hold() -> None:
    if _holders[0] == 0:
        _saved[:] = [gc.get_threshold()]
        gc.set_threshold(_saved[0][0], _saved[0][1], _HELD)
    _holders[0] += 1


def _unhold() -> None:
    _holders[0] -= 1
    if _holders[0] == 0 and _saved:
        gc.set_threshold(*_saved[0])


class LongLived:
    """``after_build`` once per cycle (and per standby period), after the model is brought up to date;
    ``release`` on stop. ``seconds`` is what the last ``after_build`` took."""

    def __init__(self, full_every: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.full_every = full_every
        self.clock = clock
        self.last_full = clock()
        self.frozen = False
        self.full_collections = 0
        self.seconds = 0.0
        self._holding = False

    def after_build(self, assembled: bool = False) -> None:
        """``assembled``: the model was assembled whole in this build (the old one is garbage now)."""
        if self.full_every <= 0:
            return
        t = time.perf_counter()
        now = self.clock()
        if not self.frozen or assembled or now - self.last_full >= self.full_every:
            gc.unfreeze()  # everything walked once: frozen garbage of earlier cycles is reclaimed too
            self.last_full = now
            self.full_collections += 1
        gc.collect()
        gc.freeze()
        if not self._holding:
            _hold()
            self._holding = True
        self.frozen = True
        self.seconds = time.perf_counter() - t

    def release(self) -> None:
        """Give every frozen object back to the collector and its thresholds back (the runner stops)."""
        if self._holding:
            _unhold()
            self._holding = False
        if self.frozen:
            gc.unfreeze()
            self.frozen = False
