"""``corral run``: the live Kubernetes scheduler (docs/kubernetes.md).

The ``kubernetes`` client and the rest of :mod:`corral.kube` are imported when the command runs, so the
other commands do not pay for them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from corral.kube.runner import Runner

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command(name="run")(run)


def run(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="scheduler configuration (YAML, or a ConfigMap's file)"
    ),
    scheduler_name: list[str] = typer.Option(
        None,
        "--scheduler-name",
        help="schedulerName values served (repeatable; default corral, volcano, kai-scheduler)",
    ),
    period: float = typer.Option(1.0, "--period", min=0.01, help="seconds between cycles"),
    dry_run: bool = typer.Option(False, "--dry-run", help="watch and print decisions, write nothing"),
    cycles: int | None = typer.Option(
        None,
        "--cycles",
        min=1,
        help="stop after N cycles (with --dry-run: print them as `corral schedule -o json` does)",
    ),
    now: str | None = typer.Option(None, "--now", help="fix the clock of the first cycle (RFC 3339)"),
    dump: Path | None = typer.Option(
        None, "--dump", help="write the first cycle's cache as a snapshot directory `corral schedule` reads"
    ),
    leader_elect: bool = typer.Option(
        False, "--leader-elect", help="leader election on a coordination.k8s.io Lease"
    ),
    lease_namespace: str = typer.Option("kube-system", "--lease-namespace"),
    lease_name: str = typer.Option("corral", "--lease-name"),
    kubeconfig: str | None = typer.Option(
        None, "--kubeconfig", help="kubeconfig file (default $KUBECONFIG, ~/.kube/config, then in-cluster)"
    ),
    context: str | None = typer.Option(None, "--context"),
    server: str | None = typer.Option(
        None, "--server", help="API server URL without authentication (kubectl proxy)"
    ),
    metrics_port: int = typer.Option(8080, "--metrics-port", help="port of /metrics and /healthz (-1: off)"),
    log_format: str = typer.Option("json", "--log-format", help="json or text"),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error"),
) -> None:
    """Schedule the live cluster: watch it, run a cycle every --period, apply the decisions."""
    from corral.cli import _fail

    try:
        runner = _make_runner(
            config,
            scheduler_name,
            period,
            dry_run,
            cycles,
            now,
            dump,
            leader_elect,
            lease_namespace,
            lease_name,
            kubeconfig,
            context,
            server,
            log_format,
            log_level,
        )
    except BaseException as exc:  # noqa: BLE001 - the CLI boundary
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        _fail(exc)
        return
    _serve_and_run(runner, metrics_port)


def _make_runner(
    config: Path | None,
    scheduler_name: Sequence[str] | None,
    period: float,
    dry_run: bool,
    cycles: int | None,
    now: str | None,
    dump: Path | None,
    leader_elect: bool,
    lease_namespace: str,
    lease_name: str,
    kubeconfig: str | None,
    context: str | None,
    server: str | None,
    log_format: str,
    log_level: str,
) -> Runner:
    from corral.cli import _config, _now
    from corral.errors import InputError

    if log_format not in ("json", "text"):
        raise InputError(f"expected json or text, got {log_format!r}", field="--log-format")
    if log_level not in ("debug", "info", "warning", "error"):
        raise InputError(f"expected debug, info, warning or error, got {log_level!r}", field="--log-level")
    cfg = _config(config)
    start = _now(now) if now is not None else None
    from corral.kube.api import KubeAPI, load_client
    from corral.kube.logs import Log
    from corral.kube.metrics import Metrics
    from corral.kube.runner import Runner, RunOptions
    from corral.manifests.build import DEFAULT_SCHEDULERS

    names = tuple(scheduler_name) if scheduler_name else DEFAULT_SCHEDULERS
    identity = os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    opts = RunOptions(
        schedulers=names,
        period=period,
        dry_run=dry_run,
        cycles=cycles,
        now=start,
        dump=dump,
        leader_elect=leader_elect,
        lease_namespace=lease_namespace,
        lease_name=lease_name,
        identity=identity,
    )
    log = Log(fmt=log_format, level=log_level)
    api = KubeAPI(load_client(kubeconfig, context, server))
    runner = Runner(api, cfg, opts, log, Metrics())
    log.info(
        "starting",
        schedulers=list(names),
        period=period,
        dry_run=dry_run,
        leader_elect=leader_elect,
        identity=identity,
        config=cfg.source,
    )
    return runner


def _serve_and_run(runner: Runner, metrics_port: int) -> None:
    from corral.cli import _fail
    from corral.errors import InputError
    from corral.kube.metrics import serve

    http = None
    if metrics_port >= 0:
        try:
            http = serve(runner.metrics, metrics_port, runner.health)
            runner.log.info("serving /metrics and /healthz", port=http.server_address[1])
        except OSError as exc:
            _fail(InputError(f"cannot listen on port {metrics_port}: {exc}", field="--metrics-port"))
            return
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: runner.stopping.set())
    try:
        runner.start()
        total = runner.run()
    except BaseException as exc:  # noqa: BLE001
        runner.stop()
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        _fail(exc)
        return
    runner.stop()
    if http is not None:
        http.shutdown()
    opts = runner.opts
    if opts.dry_run and opts.cycles is not None:
        sys.stdout.write(json.dumps(total.to_json(opts.cycles), indent=1) + "\n")
    if runner.lost:
        runner.log.error("exiting: leadership lost")
        raise typer.Exit(1)
