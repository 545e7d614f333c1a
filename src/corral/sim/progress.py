"""The simulator's progress: on a terminal a bar (rich), elsewhere (CI, ``nohup``, ``| tee``) one line
on stderr every :data:`LOG_EVERY` seconds — simulated time reached (and the span of submissions), jobs
done and waiting, events per second, and an estimate of the wall time left. :func:`sim_progress` picks
one; :class:`CellProgress` does the same for the cells of a sweep.

The estimate is the wall time so far times the share of jobs not done over the share done, taken over the
last minute of wall time when there is one (a backlog's cycles slow down and speed up as it grows and
drains; a recent rate follows that better than the average since the start). Until the first job is done
it shows ``?`` rather than a number it cannot know.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from corral.sim.engine import Engine

__all__ = ["LOG_EVERY", "CellProgress", "LogProgress", "SimProgress", "clock", "sim_progress"]

#: seconds between two progress lines when the output is not a terminal
LOG_EVERY = 10.0


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


def _span_of(engine: Engine) -> float:
    """The simulated time a run's progress is measured against: its ``until``, else the last submit."""
    if engine.options.until is not None:
        return engine.options.until
    return engine.specs[-1].submit if engine.specs else 0.0


class _Rate:
    """Jobs done and events over the last :attr:`WINDOW` seconds of wall time, and the ETA they give."""

    WINDOW = 60.0

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.history: deque[tuple[float, int, int]] = deque()  # (wall, done, events)

    def __call__(self, done: int, total: int, events: int) -> tuple[float, float | None]:
        wall = time.monotonic()
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
        return rate, eta


class SimProgress:
    """A progress bar for one simulation; ``attach(engine)`` before the run, pass ``update`` as the
    engine's ``progress`` callback, ``close()`` after (also a context manager)."""

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
        self.rate = _Rate()
        self.bar.start()

    def attach(self, engine: Engine) -> None:
        self.engine = engine
        if self.span is None:
            self.span = _span_of(engine)

    def update(self, now: float, done: int, total: int) -> None:
        events = self.engine.events if self.engine is not None else 0
        waiting = len(self.engine.book.waiting) if self.engine is not None else 0
        rate, eta = self.rate(done, total, events)
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


class LogProgress:
    """The progress of one simulation as a line on ``stream`` (stderr) every ``every`` seconds of wall
    time, for output that is not a terminal; the same interface as :class:`SimProgress`."""

    def __init__(
        self,
        total: int,
        span: float | None = None,
        name: str = "simulating",
        every: float = LOG_EVERY,
        stream: TextIO | None = None,
    ) -> None:
        self.total, self.span, self.name, self.every = total, span, name, every
        self.stream = stream
        self.engine: Engine | None = None
        self.rate = _Rate()
        self.last = time.monotonic()

    def attach(self, engine: Engine) -> None:
        self.engine = engine
        if self.span is None:
            self.span = _span_of(engine)

    def update(self, now: float, done: int, total: int) -> None:
        events = self.engine.events if self.engine is not None else 0
        rate, eta = self.rate(done, total, events)
        wall = time.monotonic()
        if wall - self.last < self.every:
            return
        self.last = wall
        waiting = len(self.engine.book.waiting) if self.engine is not None else 0
        span = f" of {clock(self.span)} submissions" if self.span else ""
        print(
            f"{self.name}: {done:,}/{total:,} jobs done, {waiting:,} waiting, simulated {clock(now)}{span}, "
            f"{rate:,.0f} events/s, ETA {_wall(eta)}",
            file=self.stream or sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        pass

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sim_progress(
    total: int, span: float | None, name: str, console: Console | None = None
) -> SimProgress | LogProgress:
    """A bar on a terminal, log lines elsewhere."""
    if console is not None and console.is_terminal:
        return SimProgress(total, span, name, console=console)
    return LogProgress(total, span, name)


class CellProgress:
    """The cells of a sweep: a bar on a terminal, else a line on stderr every ``every`` seconds (and one
    when the sweep ends). Call ``update(done, reused, total)``; ``close()`` after."""

    def __init__(
        self, console: Console | None = None, every: float = LOG_EVERY, stream: TextIO | None = None
    ) -> None:
        self.console, self.every, self.stream = console, every, stream
        self.start = self.last = time.monotonic()
        self.bar: Progress | None = None
        self.state = self.printed = (0, 0, 0)
        if console is not None and console.is_terminal:
            self.bar = Progress(
                TextColumn("sweep"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("cells ({task.fields[note]})"),
                TimeElapsedColumn(),
                console=console,
                transient=False,
            )
            self.task = self.bar.add_task("sweep", total=None, note="")
            self.bar.start()

    def _eta(self, done: int, reused: int, total: int) -> float | None:
        ran = done - reused
        if ran <= 0:
            return None if done < total else 0.0
        return (time.monotonic() - self.start) * (total - done) / ran

    def update(self, done: int, reused: int, total: int) -> None:
        self.state = (done, reused, total)
        note = f"{reused} reused, ETA {_wall(self._eta(done, reused, total))}"
        if self.bar is not None:
            self.bar.update(self.task, completed=done, total=total, note=note)
            return
        if time.monotonic() - self.last >= self.every:
            self._line()

    def _line(self) -> None:
        done, reused, total = self.state
        self.last, self.printed = time.monotonic(), self.state
        print(
            f"sweep: {done}/{total} cells done ({reused} reused), {_wall(self.last - self.start)} elapsed, "
            f"ETA {_wall(self._eta(done, reused, total))}",
            file=self.stream or sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
        elif self.state[2] and self.state != self.printed:
            self._line()
