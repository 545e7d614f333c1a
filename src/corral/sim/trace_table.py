"""A trace read into a table whose cells are checked as they are read (SPEC.md §1.3), shared by every
workload loader (:mod:`corral.sim.workload`, :mod:`corral.sim.loaders`) and by the machine lists
(:mod:`corral.sim.machines`): :func:`read_table` reads a CSV or Parquet file, :class:`TraceTable` gives
its columns as checked arrays — a bad cell is one :class:`~corral.errors.InputError` naming the file, the
1-based data row (the header is not counted) and the column, never a traceback — and :class:`JobList`
is a loader's result with the rows it left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from corral.errors import InputError
from corral.model.quantity import MILLI, parse_quantity
from corral.sim.jobspec import JobSpec
from corral.sim.tracefile import read_frame

__all__ = ["MAX_VALUE", "JobList", "TraceTable", "read_table"]

_EPOCH = pd.Timestamp("1970-01-01", tz="UTC")
MAX_VALUE = 1e10  # the largest number a trace cell may hold


class JobList(list):
    """A ``list[JobSpec]`` that also says which rows its loader left out.

    ``skipped`` maps a reason (e.g. ``"duration <= 0"``) to the number of rows dropped for it; it is
    empty when every row became a job.
    """

    def __init__(self, jobs: Iterable[JobSpec] = (), skipped: Mapping[str, int] | None = None) -> None:
        super().__init__(jobs)
        self.skipped: dict[str, int] = dict(skipped or {})


class TraceTable:
    """A trace read into a DataFrame, with the file name every error message needs."""

    def __init__(self, frame: pd.DataFrame, path: str) -> None:
        frame = frame.reset_index(drop=True)
        frame.columns = [str(c).strip() for c in frame.columns]
        self.frame = frame
        self.path = path
        self.rows = np.arange(1, len(frame) + 1)

    def __len__(self) -> int:
        return len(self.frame)

    def fail(self, index: int, column: str, message: str) -> NoReturn:
        raise InputError(message, file=self.path, obj=f"row {int(self.rows[index])}", field=column)

    def require(self, *columns: str) -> None:
        missing = [c for c in columns if c not in self.frame.columns]
        if missing:
            raise InputError(
                f"missing required column {missing[0]!r} (the file has: "
                f"{', '.join(self.frame.columns) or 'no columns'})",
                file=self.path,
                field=missing[0],
            )

    def raw(self, index: int, column: str) -> Any:
        return self.frame[column].iloc[index]

    def blank(self, column: str) -> np.ndarray:
        """True where a cell is empty (NaN, None or only whitespace)."""
        series = self.frame[column]
        mask = series.isna()
        if not (pd.api.types.is_numeric_dtype(series) or pd.api.types.is_datetime64_any_dtype(series)):
            mask = mask | (series.astype(str).str.strip() == "")
        return mask.to_numpy(dtype=bool)

    def _floats(self, column: str) -> np.ndarray:
        series = self.frame[column]
        if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
            return np.array(series.to_numpy(dtype=float, na_value=np.nan))  # a writable copy
        text = series.astype(str).str.strip()
        return np.array(pd.to_numeric(text, errors="coerce").to_numpy(dtype=float, na_value=np.nan))

    def _check(self, column: str, blank: np.ndarray, bad: np.ndarray, default: Any, what: str) -> None:
        """Fail on the first row that is blank without a default or bad."""
        if default is None:
            bad = bad | blank
        if bad.any():
            index = int(np.flatnonzero(bad)[0])
            if blank[index]:
                self.fail(index, column, "missing value")
            raw = repr(self.raw(index, column))
            raw = raw if len(raw) <= 60 else f"{raw[:50]}... ({len(raw)} characters)"
            self.fail(index, column, f"expected {what} (at most {MAX_VALUE:g}), got {raw}")

    def number(
        self,
        column: str,
        *,
        default: Any = None,
        integer: bool = False,
        low: float | None = None,
        low_open: bool = False,
        what: str = "a number",
    ) -> np.ndarray:
        """The column as float64. ``default`` (a scalar or one value per row) fills blanks and a missing
        column; ``None`` makes the column required. ``low`` is the least allowed value (excluded when
        ``low_open``)."""
        if column not in self.frame.columns:
            if default is None:
                self.require(column)
            return np.array(np.broadcast_to(np.asarray(default, dtype=float), len(self)))
        blank = self.blank(column)
        values = self._floats(column)
        with np.errstate(invalid="ignore"):
            # finite and at most 1e10 (seconds: three centuries; GPUs, pods, MiB: beyond any cluster),
            # so that clocks stay datetimes and sums stay exact
            bad = ~blank & ~(np.abs(values) <= MAX_VALUE)
            if integer:
                bad |= ~blank & (values != np.floor(values))
            if low is not None:
                bad |= ~blank & ((values <= low) if low_open else (values < low))
        self._check(column, blank, bad, default, what)
        if default is not None and blank.any():
            values = np.where(blank, np.asarray(default, dtype=float), values)
        return values

    def quantity(self, column: str, *, default: float, what: str) -> np.ndarray:
        """A resource column in base units: numbers as they are, strings may carry a Kubernetes suffix
        (``500m``, ``4Gi``)."""
        if column not in self.frame.columns:
            return np.full(len(self), float(default))
        blank = self.blank(column)
        values = self._floats(column)
        todo = ~blank & np.isnan(values)
        if todo.any():
            text = self.frame[column].astype(str).str.strip()
            parsed: dict[str, float] = {}
            for index in np.flatnonzero(todo):
                cell = text.iloc[index]
                if cell not in parsed:
                    try:
                        parsed[cell] = parse_quantity(cell) / MILLI
                    except InputError as exc:
                        self.fail(int(index), column, exc.message)
                values[index] = parsed[cell]
        with np.errstate(invalid="ignore"):
            bad = ~blank & (~np.isfinite(values) | (values < 0))
        self._check(column, blank, bad, default, what)
        return np.where(blank, float(default), values)

    def seconds(self, column: str) -> np.ndarray:
        """A required time column as seconds: plain numbers, or RFC 3339 / ``YYYY-MM-DD HH:MM:SS`` times
        (naive times are UTC) converted to seconds since the epoch. One column is all one or the other."""
        self.require(column)
        series = self.frame[column]
        blank = self.blank(column)
        if pd.api.types.is_datetime64_any_dtype(series):
            self._check(column, blank, np.zeros_like(blank), None, "a time")
            stamps = series if series.dt.tz is not None else series.dt.tz_localize("UTC")
            return (stamps - _EPOCH).dt.total_seconds().to_numpy(dtype=float)
        values = self._floats(column)
        if not np.isnan(values[~blank]).any():
            what = "a finite number of seconds or a time"
            self._check(column, blank, ~blank & ~np.isfinite(values), None, what)
            return values
        text = series.astype(str).str.strip()
        stamps = pd.to_datetime(text, format="ISO8601", utc=True, errors="coerce")
        bad = ~blank & stamps.isna().to_numpy(dtype=bool)
        self._check(column, blank, bad, None, "seconds or a time (RFC 3339 or YYYY-MM-DD HH:MM:SS)")
        return (stamps - _EPOCH).dt.total_seconds().to_numpy(dtype=float)

    def text(self, column: str, default: str | None) -> np.ndarray:
        """The column as stripped strings (an object array); blanks become ``default``."""
        if column not in self.frame.columns:
            if default is None:
                self.require(column)
            return np.full(len(self), default, dtype=object)
        blank = self.blank(column)
        self._check(column, blank, np.zeros_like(blank), default, "a value")
        values = np.array(self.frame[column].astype(str).str.strip().to_numpy(dtype=object))
        values[blank] = default
        return values

    def keep(self, mask: np.ndarray) -> None:
        """Drop the rows where ``mask`` is false, keeping their original row numbers for messages."""
        self.frame = self.frame[mask].reset_index(drop=True)
        self.rows = self.rows[mask]


def read_table(path: str | Path | TraceTable) -> TraceTable:
    """Read a CSV or Parquet file, chosen and gunzipped by content (:func:`tracefile.read_frame`); every
    cell of a CSV stays text so that ids such as ``6214e9`` are not taken for numbers, and a row with
    fewer fields than the header is an error naming the row. A table already read passes through."""
    if isinstance(path, TraceTable):
        return path
    return TraceTable(read_frame(path), str(path))
