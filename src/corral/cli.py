"""``corral``: the console script's entry (``corral = "corral.cli:main"``). The commands live in
:mod:`corral.commands` (:mod:`corral.commands.app` registers them); :func:`schedule_snapshot` is
``corral schedule``'s front end, named here for the callers that compare with it."""

from __future__ import annotations

from corral.commands.app import app, main
from corral.commands.options import EXAMPLE
from corral.commands.schedule import schedule_snapshot

__all__ = ["EXAMPLE", "app", "main", "schedule_snapshot"]
