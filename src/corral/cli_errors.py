"""The command-line boundary shared by every ``corral`` command: one line and an exit code, never a
traceback (``CORRAL_DEBUG=1`` re-raises internal errors to show one)."""

from __future__ import annotations

import os

import typer

from corral.errors import CorralError
from corral.terminal import plain

__all__ = ["fail"]


def fail(exc: BaseException) -> None:
    """Turn ``exc`` into ``error: ...`` (its exit code) or ``internal error: ...`` (exit 1)."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit, typer.Exit)):
        raise exc
    if isinstance(exc, CorralError):
        typer.echo(f"error: {plain(exc.describe())}", err=True)   # one line, input shown not obeyed
        raise typer.Exit(exc.exit_code)
    if os.environ.get("CORRAL_DEBUG"):
        raise exc
    typer.echo(f"internal error: {type(exc).__name__}: {plain(exc)}", err=True)
    raise typer.Exit(1)
