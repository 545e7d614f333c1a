"""The one channel of what corral tells the user besides its decisions: warnings and expansions.

A **warning** (:class:`Note`) is about a field corral accepts but does not act on as its peer would
(SPEC.md §5: no field is dropped silently): the object ("PodGroup ns/name", "Queue q", "config"), the
field path ("" when the message names it or is about the whole object), what corral does instead and
what to do. Two kinds of producers fill the same type:

- the snapshot reader, about the objects as read (:mod:`corral.manifests`: fields of a kind corral
  does not honour, a Volcano ``Job``'s lifecycle policies, a KAI sub-group's unused ``minMember``); they
  are kept on the cluster (``Cluster.notes``);
- :mod:`corral.framework.notices`, about what one configuration leaves undone for the cluster (a
  topology constraint no plugin enforces, arguments read without effect); recomputed per configuration.

An **expansion** is an object corral made from a workload the user submits (a Volcano ``Job``, a
``batch/v1`` Job or JobSet for KAI); a **reading** is one line about what was read of kinds corral
reports on (Kubernetes' gang API, DRA objects).

Every front end prints through :class:`Notes`: ``corral validate`` and ``corral schedule`` (lines),
the decisions' ``warnings`` section (the podgroups' configuration warnings, first cycle), the
simulator's job records (``notes``, :func:`record_text`) and ``corral run`` (an Event on the object and
a log line, once per object and text, :class:`corral.framework.notices.Warned`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from corral.terminal import plain

__all__ = ["Note", "Notes", "record_text"]


@dataclass(frozen=True)
class Note:
    """One warning: ``obj`` ("Queue q1", "Job ns/train", "config"), the field path ("" when the message
    names it or is about the whole object), the message, and the file it was read from (if any)."""

    obj: str
    field: str
    message: str
    file: str = ""

    def text(self) -> str:
        """``field: message`` (the message alone without a field)."""
        return f"{self.field}: {self.message}" if self.field else self.message

    def line(self) -> str:
        """``warning: <obj>: <field>: <message>``, control characters escaped."""
        return plain(f"warning: {self.obj}: {self.text()}")


def record_text(notes: Iterable[Note]) -> str:
    """The warnings of one object as one text: each ``field: message``, joined by ``; `` (the
    simulator's job record, ``corral run``'s Event message)."""
    return "; ".join(n.text() for n in notes)


@dataclass
class Notes:
    """Warnings, expansions and readings, in the order they were found; each warning once."""

    warnings: list[Note] = field(default_factory=list)
    expansions: list[Note] = field(default_factory=list)
    #: what was read of kinds corral reports on (Kubernetes' gang API, DRA objects), one line each
    readings: list[str] = field(default_factory=list)
    _seen: set[Note] = field(default_factory=set, repr=False)

    def warn(self, obj: str, field_path: str, message: str, file: str = "") -> None:
        self.add(Note(obj, field_path, message, file))

    def add(self, note: Note) -> None:
        if note not in self._seen:
            self._seen.add(note)
            self.warnings.append(note)

    def extend(self, notes: Iterable[Note]) -> None:
        for n in notes:
            self.add(n)

    def read(self, line: str) -> None:
        self.readings.append(line)

    def made(self, obj: str, message: str, file: str = "") -> None:
        self.expansions.append(Note(obj, "", message, file))

    def by_object(self) -> dict[str, list[Note]]:
        """The warnings grouped per object, objects in the order first warned about."""
        out: dict[str, list[Note]] = {}
        for n in self.warnings:
            out.setdefault(n.obj, []).append(n)
        return out

    def warning_lines(self, most: int | None = None, *, grouped: bool = True) -> list[str]:
        """The warnings as ``warning:`` lines: one per object, every field warned about in the order
        found (``grouped``), else one per warning; with ``most``, the first ``most`` lines and one line
        counting the other objects."""
        if grouped:
            lines = [Note(obj, "", record_text(ns)).line() for obj, ns in self.by_object().items()]
        else:
            lines = [n.line() for n in self.warnings]
        if most is not None and len(lines) > most:
            rest = len(lines) - most
            lines = lines[:most] + [
                f"warning: {rest} more objects with warnings (corral validate lists them)"
            ]
        return lines

    def expansion_lines(self) -> list[str]:
        return [plain(f"made from {n.obj}: {n.message}") for n in self.expansions]
