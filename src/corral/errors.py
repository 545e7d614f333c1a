"""The one exception tree of corral (DESIGN.md convention 3).

Outcomes (a predicate that fails, a vote against) are values; exceptions are for faults. Every error
carries where it is about — a file, an object, a field — so the CLI can print one readable line and exit
with the right code: 2 for bad input or configuration, 1 for an internal fault.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ClusterAPIError",
    "CommitError",
    "ConfigError",
    "CorralError",
    "InputError",
    "PluginError",
    "short_repr",
]


class CorralError(Exception):
    """Base of every corral fault. ``exit_code`` is what the CLI exits with."""

    exit_code = 1

    def __init__(
        self, message: str, *, file: str | None = None, obj: str | None = None, field: str | None = None
    ) -> None:
        self.message = message
        self.file = file
        self.obj = obj
        self.field = field
        super().__init__(self.describe())

    def describe(self) -> str:
        """One line: ``file: object: field: message`` with the parts that are known."""
        parts = [p for p in (self.file, self.obj) if p]
        if self.field:
            parts.append(f"field {self.field}")
        parts.append(self.message)
        return ": ".join(parts)


class InputError(CorralError):
    """A snapshot, trace or other input that cannot be read as documented (exit code 2)."""

    exit_code = 2


class ConfigError(CorralError):
    """A scheduler configuration that names something unknown or has a wrong type (exit code 2)."""

    exit_code = 2


class PluginError(CorralError):
    """A plugin broke its contract at run time (an internal fault, exit code 1)."""


class CommitError(CorralError):
    """A Statement could not be applied or reverted consistently (an internal fault, exit code 1)."""


class ClusterAPIError(CorralError):
    """The Kubernetes API server refused or failed a request (exit code 1)."""


def short_repr(value: Any) -> str:
    """``repr(value)``, cut short: a hostile value must not flood the one-line message."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:50]}... ({len(text)} characters)"
