"""HyperNode ``regexMatch`` patterns, matched in linear time.

Volcano matches member patterns with Go's ``regexp`` package, which is RE2: no backreferences, no
lookaround, and a guarantee of time linear in the input — a pattern such as ``(a+)+$`` cannot backtrack
catastrophically. Python's ``re`` backtracks and can run for minutes on one long node name, so corral
uses RE2 itself (the ``google-re2`` package): the same syntax Volcano accepts, the same guarantee.
A pattern RE2 refuses (including one whose compiled program would pass RE2's memory bound) is bad
input, reported with the object and field by the caller.
"""

from __future__ import annotations

from collections.abc import Callable

import re2

__all__ = ["PatternError", "compile_name_pattern"]

_MAX_PATTERN = 4096


class PatternError(ValueError):
    """The pattern is not valid RE2 (Go regexp) syntax, or too large."""


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 would otherwise write its own complaint to stderr
    return options


_OPTIONS = _options()


def compile_name_pattern(pattern: object) -> Callable[[str], bool]:
    """A predicate: does a node name match ``pattern`` as a whole (anchored at both ends)?"""
    if not isinstance(pattern, str):
        raise PatternError(f"expected a string, got {type(pattern).__name__}")
    if len(pattern) > _MAX_PATTERN:
        raise PatternError(f"the pattern is {len(pattern)} characters long (limit {_MAX_PATTERN})")
    try:
        rx = re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PatternError(f"{detail} (patterns use RE2 / Go regexp syntax, as Volcano's)") from None
    return lambda name: rx.fullmatch(name) is not None
