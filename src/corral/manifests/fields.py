"""Small typed accessors over manifest dicts that fail with the object and field named."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from corral.errors import InputError

__all__ = ["Obj", "annotated_duration", "format_time", "parse_duration", "parse_time"]


_TIMES: dict[str, float] = {}


def parse_time(
    value: Any, *, file: str | None = None, obj: str | None = None, field: str | None = None
) -> float:
    """RFC 3339 time → seconds since the epoch (UTC when no offset is given). Strings are cached:
    a snapshot repeats the same timestamps thousands of times."""
    if isinstance(value, str):
        got = _TIMES.get(value)
        if got is not None:
            return got
        seconds = _parse_time(value, file, obj, field)
        if len(_TIMES) < 65536:
            _TIMES[value] = seconds
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
                f"expected a finite duration, got {_short(value)}", file=file, obj=obj, field=field
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
        f"malformed duration {_short(value)} (expected e.g. 90s, 5m, 1h30m)", file=file, obj=obj, field=field
    )


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _short(value: Any) -> str:
    """``repr(value)``, cut short: a hostile value must not flood the one-line message."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:50]}... ({len(text)} characters)"


class Obj:
    """A manifest object with its file and identity, for error messages."""

    __slots__ = ("file", "kind", "meta", "name", "namespace", "raw")

    def __init__(self, raw: dict, file: str, kind: str, namespaced: bool) -> None:
        self.raw = raw
        self.file = file
        self.kind = kind
        meta = raw.get("metadata")
        if not isinstance(meta, dict):
            raise InputError("missing metadata", file=file, obj=kind, field="metadata")
        self.meta = meta
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InputError("missing name", file=file, obj=kind, field="metadata.name")
        self.name = name
        self.namespace = str(meta.get("namespace") or "default") if namespaced else ""

    @property
    def ident(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def error(self, message: str, field: str | None = None) -> InputError:
        return InputError(message, file=self.file, obj=self.ident, field=field)

    def section(self, key: str) -> dict:
        value = self.raw.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error("expected a mapping", key)
        return value

    def mapping(self, value: Any, path: str) -> dict:
        """``value`` as a mapping (``None`` is empty), else an error naming ``path``."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(f"expected a mapping, got {type(value).__name__} {value!r}", path)
        return value

    def string(self, value: Any, path: str) -> str:
        """A name-like field: a string (numbers are taken as written), ``None`` is empty."""
        if value is None:
            return ""
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.error(f"expected a string, got {type(value).__name__} {value!r}", path)
        return str(value)

    def boolean(self, value: Any, path: str, default: bool) -> bool:
        """``true``/``false`` (YAML booleans or those words), ``None`` gives ``default``."""
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise self.error(f"expected true or false, got {value!r}", path)

    def listof(self, value: Any, path: str) -> list:
        """``value`` as a list (``None`` is empty), else an error naming ``path``."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(f"expected a list, got {type(value).__name__} {value!r}", path)
        return value

    def strmap(self, value: Any, path: str) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error("expected a mapping of strings", path)
        return {str(k): "" if v is None else str(v) for k, v in value.items()}

    def integer(self, value: Any, path: str, *, minimum: int | None = None) -> int:
        """An integer within Kubernetes' int32 range (replicas, minMember, priorities are int32)."""
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, str))
            or (isinstance(value, str) and len(value) > 40)
        ):
            raise self.error(f"expected an integer, got {_short(value)}", path)
        try:
            n = int(value)
        except ValueError:
            raise self.error(f"expected an integer, got {_short(value)}", path) from None
        if minimum is not None and n < minimum:
            raise self.error(f"expected an integer >= {minimum}, got {_short(n)}", path)
        if not INT32_MIN <= n <= INT32_MAX:
            raise self.error(
                f"expected an integer between {INT32_MIN} and {INT32_MAX}, got {_short(n)}", path
            )
        return n

    def number(self, value: Any, path: str) -> float:
        """A finite number."""
        if isinstance(value, bool):
            raise self.error(f"expected a number, got {value!r}", path)
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            raise self.error(f"expected a number, got {_short(value)}", path) from None
        if not math.isfinite(number):
            raise self.error(f"expected a finite number, got {_short(value)}", path)
        return number

    def time(self, value: Any, path: str) -> float:
        got = _TIMES.get(value) if type(value) is str else None  # seen: no message to prepare
        return got if got is not None else parse_time(value, file=self.file, obj=self.ident, field=path)

    def duration(self, value: Any, path: str) -> float:
        return parse_duration(value, file=self.file, obj=self.ident, field=path)
