"""Small typed accessors over manifest dicts that fail with the object and field named."""

from __future__ import annotations

import math
from typing import Any

from corral.errors import InputError, short_repr
from corral.model.clock import PARSED_TIMES, parse_duration, parse_time

__all__ = ["Obj"]


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


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
            raise self.error(f"expected an integer, got {short_repr(value)}", path)
        try:
            n = int(value)
        except ValueError:
            raise self.error(f"expected an integer, got {short_repr(value)}", path) from None
        if minimum is not None and n < minimum:
            raise self.error(f"expected an integer >= {minimum}, got {short_repr(n)}", path)
        if not INT32_MIN <= n <= INT32_MAX:
            raise self.error(
                f"expected an integer between {INT32_MIN} and {INT32_MAX}, got {short_repr(n)}", path
            )
        return n

    def number(self, value: Any, path: str) -> float:
        """A finite number."""
        if isinstance(value, bool):
            raise self.error(f"expected a number, got {value!r}", path)
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            raise self.error(f"expected a number, got {short_repr(value)}", path) from None
        if not math.isfinite(number):
            raise self.error(f"expected a finite number, got {short_repr(value)}", path)
        return number

    def time(self, value: Any, path: str) -> float:
        got = PARSED_TIMES.get(value) if type(value) is str else None  # seen: no message to prepare
        return got if got is not None else parse_time(value, file=self.file, obj=self.ident, field=path)

    def duration(self, value: Any, path: str) -> float:
        return parse_duration(value, file=self.file, obj=self.ident, field=path)
