"""Keeping what ``corral run`` holds for its whole life out of the garbage collector's passes.

The watch cache (every object as JSON and parsed) and the kept model are millions of container objects
that live as long as the process. CPython's collector walks all of them in every full collection, and a
cycle allocates enough that one comes every other cycle: 0.5 s of CPU at 50,000 pods, more than the
scheduling itself (measured by ``benchmarks/bench_live.py``). ``corral schedule`` freezes its loaded
model for the same reason (``gc.freeze`` in :func:`corral.commands.schedule.schedule_snapshot`).

:class:`LongLived` freezes what is alive after each model build, so the collector's passes during the
cycle walk only what the cycle made; every ``full_every`` seconds it unfreezes and runs one full
collection first, so a reference cycle among the frozen objects that died since (an old job's model
replaced by the incremental build) is reclaimed within that time: memory stays bounded by what
``full_every`` seconds leave behind, and the full pass costs once per ``full_every`` seconds instead of
every other cycle.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

__all__ = ["LongLived"]


class LongLived:
    """``after_build`` once per cycle, after the model is brought up to date; ``release`` on stop."""

    def __init__(self, full_every: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.full_every = full_every
        self.clock = clock
        self.last_full = clock()
        self.frozen = False
        self.full_collections = 0

    def after_build(self) -> None:
        if self.full_every <= 0:
            return
        now = self.clock()
        if self.frozen and now - self.last_full >= self.full_every:
            gc.unfreeze()
            gc.collect()
            self.last_full = now
            self.full_collections += 1
        gc.freeze()
        self.frozen = True

    def release(self) -> None:
        """Give every frozen object back to the collector (the runner stops)."""
        if self.frozen:
            gc.unfreeze()
            self.frozen = False
