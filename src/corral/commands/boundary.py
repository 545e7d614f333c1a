"""The command-line boundary shared by every ``corral`` command: one line and an exit code, never a
traceback (``CORRAL_DEBUG=1`` re-raises internal errors to show one). Every
:class:`~corral.errors.CorralError` becomes ``error: ...`` on stderr with its exit code (2 for bad input,
1 for an internal fault); any other exception is ``internal error: ...``, exit code 1 (:func:`fail`,
which every command reaches through :func:`boundary` or calls itself). Usage errors (an unknown option,
a value the option's type refuses) get the same one ``error:`` line and exit code 2 as bad input,
through :class:`OneLineErrors`, instead of the framed multi-line box."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup

from corral.errors import CorralError
from corral.terminal import plain

__all__ = ["OneLineErrors", "boundary", "fail"]


def fail(exc: BaseException) -> None:
    """Turn ``exc`` into ``error: ...`` (its exit code) or ``internal error: ...`` (exit 1)."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit, typer.Exit)):
        raise exc
    if isinstance(exc, CorralError):
        typer.echo(f"error: {plain(exc.describe())}", err=True)  # one line, input shown not obeyed
        raise typer.Exit(exc.exit_code)
    if os.environ.get("CORRAL_DEBUG"):
        raise exc
    typer.echo(f"internal error: {type(exc).__name__}: {plain(exc)}", err=True)
    raise typer.Exit(1)


@contextmanager
def boundary() -> Iterator[None]:
    """The boundary of a command's work: a fault ends in one line and its exit code (:func:`fail`, which
    re-raises exits and interrupts); no traceback reaches a user."""
    try:
        yield
    except BaseException as exc:  # noqa: BLE001 - the CLI boundary
        fail(exc)
        raise  # fail always raises; kept for the type checker


def _quiet_flags(params: list[Any]) -> list[Any]:
    """Flags (``--force``, ``--help``) take no value: show no type for them in --help (typer would print
    ``<bool>`` beside each)."""
    for param in params:
        if getattr(param, "is_flag", False) and getattr(param, "metavar", None) is None:
            param.metavar = ""
    return params


class OneLineErrors(TyperGroup):
    """A command group whose usage errors are one line, ``error: ...``, exit code 2 (help stays help).
    Its help and its commands' help show flags without a ``<bool>`` type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _quiet_flags(super().get_params(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _quiet_flags(command.get_params(ctx))
        return command

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        from typer._click.exceptions import ClickException, NoArgsIsHelpError

        try:
            rv = super().main(
                args,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
        except NoArgsIsHelpError as exc:
            exc.show()
            rv = exc.exit_code
        except ClickException as exc:
            if not standalone_mode:
                raise
            typer.echo(f"error: {plain(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            if not standalone_mode:
                raise
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        if standalone_mode:
            sys.exit(rv if isinstance(rv, int) else 0)
        return rv
