"""The snapshot reader's warnings and expansions are the one warning channel, :mod:`corral.model.notes`
(one type, one collection, one way to print); this name stays for the readers that import it here."""

from __future__ import annotations

from corral.model.notes import Note, Notes

__all__ = ["Note", "Notes"]
