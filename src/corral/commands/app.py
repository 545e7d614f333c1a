"""The ``corral`` command group (SPEC.md §4): every command registered, in the order ``corral --help``
lists them — ``schedule``, ``whatif``, ``queues``, ``validate`` (:mod:`corral.commands.schedule`,
:mod:`corral.commands.views`), ``simulate``, ``compare``, ``sweep`` (:mod:`corral.commands.simulate`,
:mod:`corral.commands.sweep`), ``run`` (:mod:`corral.commands.run`) — and ``--version``. Usage errors
and every command's faults are one line and an exit code (:mod:`corral.commands.boundary`).

Registering imports only the commands' modules: the scheduling core, the simulator and the Kubernetes
client are imported by the commands that run them (tests/test_startup.py)."""

from __future__ import annotations

import typer

from corral.commands import run, schedule, simulate, views
from corral.commands.boundary import OneLineErrors

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=OneLineErrors,
    help="corral: a gang-aware batch scheduler for GPU clusters.",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"corral {version('corral')}")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            typer.echo("corral (not installed)")
        raise typer.Exit(0)


@app.callback()
def _main(
    _v: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="print the version and exit"
    ),
) -> None:
    """corral: a gang-aware batch scheduler for GPU clusters."""


schedule.register(app)
views.register(app)
app.command()(schedule.validate)
simulate.register(app)
run.register(app)


def main() -> None:
    """The console script ``corral``."""
    app()
