"""The simulator's progress bar (rich): simulated time reached (and the span of submissions), jobs done
and waiting, events per second, and an estimate of the wall time left.

The estimate is the wall time so far times the share of jobs not done over the share done, taken over the
last minute of wall time when there is one (a backlog's cycles slow down and speed up as it grows and
drains; a recent rate follows that better than the average since the start). Until the first job is done
it shows ``?`` rather than a number it cannot know.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from corral.sim.engine import Engine

__all__ = ["SimProgress", "clock"]


def clock(seconds: float) -> str:
    """A simulated duration in the unit a person reads best."""
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _wall(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class SimProgress:
    """A progress bar for one simulation; ``attach(engine)`` before the run, pass ``update`` as the
    engine's ``progress`` callback, ``close()`` after (also a context manager)."""

    WINDOW = 60.0

    def __init__(
        self,
        total: int,
        span: float | None = None,
        name: str = "simulating",
        console: Console | None = None,
        transient: bool = True,
    ) -> None:
        columns = (
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "done, {task.fields[waiting]} waiting, simulated {task.fields[clock]}, "
                "{task.fields[rate]} events/s, ETA {task.fields[eta]}"
            ),
            TimeElapsedColumn(),
        )
        self.bar = Progress(*columns, console=console, transient=transient)
        self.span = span
        self.engine: Engine | None = None
        self.task = self.bar.add_task(name, total=total, waiting=0, clock="0 min", rate="-", eta="?")
        self.start = time.monotonic()
        self.history: deque[tuple[float, int, int]] = deque()  # (wall, done, events)
        self.bar.start()

    def attach(self, engine: Engine) -> None:
        self.engine = engine
        if self.span is None:
            self.span = (
                engine.options.until
                if engine.options.until is not None
                else (engine.specs[-1].submit if engine.specs else 0.0)
            )

    def update(self, now: float, done: int, total: int) -> None:
        wall = time.monotonic()
        events = self.engine.events if self.engine is not None else 0
        waiting = len(self.engine._waiting) if self.engine is not None else 0
        self.history.append((wall, done, events))
        while len(self.history) > 2 and wall - self.history[1][0] >= self.WINDOW:
            self.history.popleft()
        w0, d0, e0 = self.history[0]
        rate = (events - e0) / (wall - w0) if wall > w0 else 0.0
        eta = None
        if done >= total:
            eta = 0.0
        elif done > d0 and wall > w0:
            eta = (total - done) * (wall - w0) / (done - d0)
        elif done > 0:
            eta = (wall - self.start) * (total - done) / done
        span = f" of {clock(self.span)} submissions" if self.span else ""
        self.bar.update(
            self.task,
            completed=done,
            total=total,
            waiting=f"{waiting:,}",
            clock=clock(now) + span,
            rate=f"{rate:,.0f}",
            eta=_wall(eta),
        )

    def close(self) -> None:
        self.bar.stop()

    def __enter__(self) -> SimProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
