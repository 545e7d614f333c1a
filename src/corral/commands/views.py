"""``corral whatif`` (would a job start if submitted now: :mod:`corral.commands.whatif`) and ``corral
queues`` (the queue tree: :mod:`corral.queueview`): views of a snapshot, or with ``--live`` of the cluster
listed once through ``corral run``'s client flags (:func:`corral.kube.oneshot.live_objects`). Both write
nothing. ``whatif`` exits 0 when the job would start in the next cycle, 3 when it would wait."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from corral.commands.boundary import boundary
from corral.commands.options import EXAMPLE, check_output, load_config, parse_now
from corral.errors import InputError

__all__ = ["queues", "register", "whatif"]


def register(app: typer.Typer) -> None:
    """Add ``whatif`` and ``queues`` to ``app``."""
    app.command()(whatif)
    app.command()(queues)


_LIVE_HELP = "read the cluster from the API server (one list of each kind) instead of snapshot files"


def _source(
    snapshot: list[Path] | None,
    live: bool,
    kubeconfig: str | None,
    context: str | None,
    server: str | None,
) -> tuple[list[Path], list[Any] | None]:
    """The snapshot files to read, or (``--live``) the objects listed from the cluster with the flags
    ``corral run`` takes (:func:`corral.kube.oneshot.live_objects`)."""
    if live and snapshot:
        raise InputError("give snapshot files or --live, not both", field="--live")
    if not live:
        if kubeconfig or context or server:
            raise InputError(
                "--kubeconfig, --context and --server read the live cluster: add --live", field="--live"
            )
        return (list(snapshot) if snapshot else [EXAMPLE]), None
    from corral.kube.oneshot import live_objects

    return [], live_objects(kubeconfig, context, server)


_KUBECONFIG = typer.Option(None, "--kubeconfig", help="with --live: kubeconfig file (as corral run)")
_CONTEXT = typer.Option(None, "--context", help="with --live: kubeconfig context")
_SERVER = typer.Option(None, "--server", help="with --live: API server URL without authentication")


def whatif(
    job: Path = typer.Argument(..., help="the job to try: a PodGroup and its pods, or bare pods (YAML/JSON)"),
    snapshot: list[Path] = typer.Argument(
        None, help="snapshot files or directories (default: built-in example)"
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help="scheduler configuration (YAML)"),
    now: str | None = typer.Option(None, "--now", help="fix the clock (RFC 3339)"),
    output: str = typer.Option("table", "--output", "-o", help="json or table"),
    scheduler_name: list[str] = typer.Option(
        None, "--scheduler-name", help="schedulerName values corral owns (repeatable)"
    ),
    live: bool = typer.Option(False, "--live", help=_LIVE_HELP),
    kubeconfig: str | None = _KUBECONFIG,
    context: str | None = _CONTEXT,
    server: str | None = _SERVER,
) -> None:
    """Would JOB schedule if submitted now? Admission, placement, evictions, expected start; writes
    nothing. Exit code 0: it would start in the next cycle; 3: it would wait."""
    with boundary():
        check_output(output)
        from corral.commands.whatif import what_if
        from corral.manifests.build import DEFAULT_SCHEDULERS

        names = tuple(scheduler_name) if scheduler_name else DEFAULT_SCHEDULERS
        cfg, at = load_config(config), parse_now(now)
        paths, objects = _source(snapshot, live, kubeconfig, context, server)
        answer = what_if(job, paths, cfg, at, names, base=objects)
    if output == "json":
        sys.stdout.write(json.dumps(answer.to_json(), indent=1) + "\n")
    else:
        from corral.commands.tables import print_whatif

        print_whatif(answer)
    raise typer.Exit(0 if answer.would_start else 3)


def queues(
    snapshot: list[Path] = typer.Argument(
        None, help="snapshot files or directories (default: built-in example)"
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help="scheduler configuration (YAML)"),
    now: str | None = typer.Option(None, "--now", help="fix the clock (RFC 3339)"),
    output: str = typer.Option("table", "--output", "-o", help="json or table"),
    scheduler_name: list[str] = typer.Option(
        None, "--scheduler-name", help="schedulerName values corral owns (repeatable)"
    ),
    live: bool = typer.Option(False, "--live", help=_LIVE_HELP),
    kubeconfig: str | None = _KUBECONFIG,
    context: str | None = _CONTEXT,
    server: str | None = _SERVER,
) -> None:
    """Show the queue tree: deserved, allocated, share, guarantee, capability, demand and podgroups."""
    with boundary():
        check_output(output)
        from corral.manifests.build import DEFAULT_SCHEDULERS, build_cluster, load_snapshot
        from corral.queueview import queue_rows

        names = tuple(scheduler_name) if scheduler_name else DEFAULT_SCHEDULERS
        cfg, at = load_config(config), parse_now(now)
        paths, objects = _source(snapshot, live, kubeconfig, context, server)
        cluster = load_snapshot(paths, names) if objects is None else build_cluster(objects, names)
        rows, source = queue_rows(cluster, cfg, at)
    resources = list(cluster.resources.names)
    if output == "json":
        record = {"deservedFrom": source, "queues": [r.to_json(resources) for r in rows]}
        sys.stdout.write(json.dumps(record, indent=1) + "\n")
    else:
        from corral.commands.tables import print_queues

        print_queues(rows, resources, source)
