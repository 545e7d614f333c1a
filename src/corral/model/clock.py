"""The clock of the model: RFC 3339 times and Go/Kubernetes durations as seconds (UTC), as the API
server writes and reads them (``metav1.Time``, ``metav1.Duration``); every bad value is one
:class:`~corral.errors.InputError` naming the file, object and field it came from."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from corral.errors import InputError, short_repr

__all__ = ["PARSED_TIMES", "annotated_duration", "format_time", "parse_duration", "parse_time"]

#: RFC 3339 text -> seconds, of the strings :func:`parse_time` has read (callers only look up)
PARSED_TIMES: dict[str, float] = {}


def parse_time(
    value: Any, *, file: str | None = None, obj: str | None = None, field: str | None = None
) -> float:
    """RFC 3339 time → seconds since the epoch (UTC when no offset is given). Strings are cached:
    a snapshot repeats the same timestamps thousands of times."""
    if isinstance(value, str):
        got = PARSED_TIMES.get(value)
        if got is not None:
            return got
        seconds = _parse_time(value, file, obj, field)
        if len(PARSED_TIMES) < 65536:
            PARSED_TIMES[value] = seconds
        return seconds
    return _parse_time(value, file, obj, field)


def _parse_time(value: Any, file: str | None, obj: str | None, field: str | None) -> float:
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip().replace("z", "Z"))
        except ValueError:
            raise InputError(
                f"malformed time {value!r} (expected RFC 3339, e.g. 2026-01-01T00:00:00Z)",
                file=file,
                obj=obj,
                field=field,
            ) from None
    else:
        raise InputError(f"expected an RFC 3339 time, got {value!r}", file=file, obj=obj, field=field)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def annotated_duration(key: str, *annotations: Any) -> float | None:
    """Seconds of the first readable duration under ``key`` in ``annotations`` (mappings, searched in
    order); None when absent, empty or malformed everywhere. Annotations are free text written by many
    tools: an unreadable one counts as absent rather than refusing the snapshot."""
    for notes in annotations:
        value = notes.get(key) if notes else None
        if value is None or value == "":
            continue
        try:
            return parse_duration(value)
        except Exception:  # noqa: BLE001 - InputError and friends: look further
            continue
    return None


def format_time(seconds: float) -> str:
    """RFC 3339 UTC; a time outside the years 1-9999 (no RFC 3339 form) is written as seconds."""
    try:
        return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError, OSError):
        return f"{seconds:.0f}s"


_DUR = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(
    value: Any, *, file: str | None = None, obj: str | None = None, field: str | None = None
) -> float:
    """A Go/Kubernetes duration (``90s``, ``5m``, ``1h30m``) or a number of seconds → seconds."""
    if isinstance(value, bool):
        raise InputError(f"expected a duration, got {value!r}", file=file, obj=obj, field=field)
    if isinstance(value, (int, float)):
        if not value < float("inf"):
            raise InputError(
                f"expected a finite duration, got {short_repr(value)}", file=file, obj=obj, field=field
            )
        if value < 0:
            raise InputError(
                f"expected a non-negative duration, got {value!r}", file=file, obj=obj, field=field
            )
        return float(value)
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"\d+(\.\d+)?", s) and float(s) < float("inf"):
            return float(s)
        pos, total = 0, 0.0
        for m in _DUR.finditer(s):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNIT[m.group(2)]
            pos = m.end()
        if pos == len(s) and s and math.isfinite(total):
            return total
    raise InputError(
        f"malformed duration {short_repr(value)} (expected e.g. 90s, 5m, 1h30m)",
        file=file,
        obj=obj,
        field=field,
    )
