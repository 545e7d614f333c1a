"""What the snapshot reader tells the user besides the model: warnings and expansions.

A **warning** is about a field corral accepts but does not act on as its peer would (its status in
docs/compatibility.md is ``warned``): the snapshot is read, and the user is told, once per object, what
corral leaves out. An **expansion** is an object corral made from a workload the user submits (a
Volcano ``Job``, a ``batch/v1`` Job or JobSet for KAI): its controller would have made the same
PodGroup and pods. Both are filled while the snapshot is read (:func:`corral.manifests.build.parse_objects`)
and printed by ``corral validate`` and ``corral schedule`` (SPEC.md §5: no field is dropped silently).

Any reader of input may add to the channel: :meth:`Notes.warn` with the object, the field and what
corral does instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Note", "Notes"]


@dataclass(frozen=True)
class Note:
    obj: str  # "Queue q1", "Job ns/train"
    field: str  # the field path, "" when about the whole object
    message: str
    file: str = ""


@dataclass
class Notes:
    """Warnings and expansions of one snapshot, in the order they were found, each once."""

    warnings: list[Note] = field(default_factory=list)
    expansions: list[Note] = field(default_factory=list)
    #: what was read of kinds corral reports on (Kubernetes' gang API, DRA objects), one line each
    readings: list[str] = field(default_factory=list)
    _seen: set[Note] = field(default_factory=set, repr=False)

    def warn(self, obj: str, field_path: str, message: str, file: str = "") -> None:
        note = Note(obj, field_path, message, file)
        if note not in self._seen:
            self._seen.add(note)
            self.warnings.append(note)

    def read(self, line: str) -> None:
        self.readings.append(line)

    def made(self, obj: str, message: str, file: str = "") -> None:
        self.expansions.append(Note(obj, "", message, file))

    def warning_lines(self, most: int | None = None) -> list[str]:
        """One line per object: every field warned about, in the order found; with ``most``, the first
        ``most`` objects and one line counting the others."""
        by_obj: dict[str, list[str]] = {}
        for n in self.warnings:
            by_obj.setdefault(n.obj, []).append(f"{n.field}: {n.message}" if n.field else n.message)
        lines = [f"warning: {obj}: " + "; ".join(parts) for obj, parts in by_obj.items()]
        if most is not None and len(lines) > most:
            rest = len(lines) - most
            lines = lines[:most] + [
                f"warning: {rest} more objects with warnings (corral validate lists them)"
            ]
        return lines

    def expansion_lines(self) -> list[str]:
        return [f"made from {n.obj}: {n.message}" for n in self.expansions]
