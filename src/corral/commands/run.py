"""``corral run``: the live Kubernetes scheduler (docs/kubernetes.md) on the command line: the flags
become a :class:`~corral.kube.runner.Runner`, its metrics and page servers and its signal handlers. A bad
flag, configuration or unreachable API server is one ``error:`` line, exit code 2
(:func:`corral.commands.boundary.fail`); leadership lost ends the run with exit code 1.

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
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import typer

from corral.commands.boundary import boundary, fail

if TYPE_CHECKING:
    from http.server import ThreadingHTTPServer

    from corral.framework.config import Config
    from corral.kube.runner import Runner, RunOptions

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command(name="run")(run)


# ------------------------------------------------------------------------------------------ options
_CONFIG = typer.Option(None, "--config", "-c", help="scheduler configuration (YAML, or a ConfigMap's file)")
_SCHEDULER_NAME = typer.Option(
    None,
    "--scheduler-name",
    help="schedulerName values served (repeatable; default corral only: add volcano or kai-scheduler "
    "to replace their scheduler)",
)
_PERIOD = typer.Option(1.0, "--period", min=0.01, help="seconds between cycles")
_DRY_RUN = typer.Option(False, "--dry-run", help="watch and print decisions, write nothing")
_CYCLES = typer.Option(
    None,
    "--cycles",
    min=1,
    help="stop after N cycles (with --dry-run: print them as `corral schedule -o json` does)",
)
_NOW = typer.Option(None, "--now", help="fix the clock of the first cycle (RFC 3339)")
_DUMP = typer.Option(
    None, "--dump", help="write the first cycle's cache as a snapshot directory `corral schedule` reads"
)
_LEADER_ELECT = typer.Option(False, "--leader-elect", help="leader election on a coordination.k8s.io Lease")
_LEASE_NAMESPACE = typer.Option(
    None,
    "--lease-namespace",
    help="namespace of the Lease (default: the pod's own, $POD_NAMESPACE or the service account's)",
)
_LEASE_NAME = typer.Option("corral", "--lease-name")
_KUBECONFIG = typer.Option(
    None, "--kubeconfig", help="kubeconfig file (default $KUBECONFIG, ~/.kube/config, then in-cluster)"
)
_CONTEXT = typer.Option(None, "--context")
_SERVER = typer.Option(None, "--server", help="API server URL without authentication (kubectl proxy)")
_METRICS_BIND_ADDRESS = typer.Option(
    "0.0.0.0:10251",
    "--metrics-bind-address",
    help="host:port of /metrics, /healthz and /livez (kube-scheduler's metricsBindAddress default, plain "
    "HTTP; port 0 picks one, -1 or an empty value: off)",
)
_METRICS_PORT = typer.Option(
    None, "--metrics-port", help="the port alone, on all addresses (-1: off); --metrics-bind-address wins"
)
_SYNC_TIMEOUT = typer.Option(
    300.0, "--sync-timeout", min=0.1, help="seconds to wait for the first list of every kind, then exit 1"
)
_QUEUE_METRICS_INTERVAL = typer.Option(
    10.0,
    "--queue-metrics-interval",
    min=0.0,
    help="seconds between recomputations of the per-queue metrics (0: every cycle)",
)
_LOG_FORMAT = typer.Option("json", "--log-format", help="json or text")
_LOG_LEVEL = typer.Option("info", "--log-level", help="debug, info, warning or error")
_FORECAST_EVERY = typer.Option(
    10,
    "--forecast-every",
    min=0,
    help="forecast the waiting podgroups' expected starts every N cycles (annotation "
    "corral.io/expected-start and gauge corral_expected_start_time_seconds); 0: off",
)
_FORECAST_BUDGET = typer.Option(
    2.0, "--forecast-budget", min=0.01, help="seconds of wall time a forecast may take"
)
_FORECAST_THRESHOLD = typer.Option(
    300.0,
    "--forecast-threshold",
    min=0.0,
    help="seconds an expected start must move before its annotation is written again",
)
_DASHBOARD_PORT = typer.Option(
    None,
    "--dashboard-port",
    min=0,
    max=65535,
    help="serve the operator's page (read-only HTML) on this port (0 picks one); default off",
)
_DASHBOARD_ADDRESS = typer.Option(
    "127.0.0.1", "--dashboard-address", help="address the page listens on (default: this machine only)"
)
_DASHBOARD_REFRESH = typer.Option(
    5.0, "--dashboard-refresh", min=1.0, help="seconds between refreshes of the page"
)


@dataclass
class RunFlags:
    """What the command line asks of the runner (checked by :func:`_make_runner`)."""

    config: Path | None = None
    scheduler_name: Sequence[str] | None = None
    period: float = 1.0
    dry_run: bool = False
    cycles: int | None = None
    now: str | None = None
    dump: Path | None = None
    leader_elect: bool = False
    lease_namespace: str | None = None
    lease_name: str = "corral"
    kubeconfig: str | None = None
    context: str | None = None
    server: str | None = None
    log_format: str = "json"
    log_level: str = "info"
    sync_timeout: float = 300.0
    queue_metrics_interval: float = 10.0
    forecast: Any = None  # a LiveForecast; None: off


def run(
    config: Path | None = _CONFIG,
    scheduler_name: list[str] = _SCHEDULER_NAME,
    period: float = _PERIOD,
    dry_run: bool = _DRY_RUN,
    cycles: int | None = _CYCLES,
    now: str | None = _NOW,
    dump: Path | None = _DUMP,
    leader_elect: bool = _LEADER_ELECT,
    lease_namespace: str | None = _LEASE_NAMESPACE,
    lease_name: str = _LEASE_NAME,
    kubeconfig: str | None = _KUBECONFIG,
    context: str | None = _CONTEXT,
    server: str | None = _SERVER,
    metrics_bind_address: str = _METRICS_BIND_ADDRESS,
    metrics_port: int | None = _METRICS_PORT,
    sync_timeout: float = _SYNC_TIMEOUT,
    queue_metrics_interval: float = _QUEUE_METRICS_INTERVAL,
    log_format: str = _LOG_FORMAT,
    log_level: str = _LOG_LEVEL,
    forecast_every: int = _FORECAST_EVERY,
    forecast_budget: float = _FORECAST_BUDGET,
    forecast_threshold: float = _FORECAST_THRESHOLD,
    dashboard_port: int | None = _DASHBOARD_PORT,
    dashboard_address: str = _DASHBOARD_ADDRESS,
    dashboard_refresh: float = _DASHBOARD_REFRESH,
) -> None:
    """Schedule the live cluster: watch it, run a cycle every --period, apply the decisions."""
    with boundary():
        from corral.kube.expected import LiveForecast

        bind = _bind_address(metrics_bind_address, metrics_port)
        flags = RunFlags(
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
            sync_timeout,
            queue_metrics_interval,
            LiveForecast(every=forecast_every, budget=forecast_budget, threshold=forecast_threshold),
        )
        runner = _make_runner(flags)
        page = None
        if dashboard_port is not None:
            page = (dashboard_address.strip("[]") or "127.0.0.1", dashboard_port, dashboard_refresh)
    _serve_and_run(runner, bind, page)


def _bind_address(address: str, port: int | None) -> tuple[str, int] | None:
    """``(host, port)`` to listen on, None when off; ``--metrics-port`` alone keeps its old meaning."""
    from corral.errors import InputError

    if port is not None and address == "0.0.0.0:10251":
        return None if port < 0 else ("0.0.0.0", port)
    if address in ("", "-1", "0"):
        return None
    host, sep, p = address.rpartition(":")
    try:
        number = int(p)
    except ValueError:
        number = -2
    if not sep or not 0 <= number <= 65535:
        raise InputError(f"expected host:port, got {address!r}", field="--metrics-bind-address")
    return host.strip("[]") or "0.0.0.0", number


def _own_namespace() -> str:
    """The pod's namespace: ``$POD_NAMESPACE`` (the downward API), else the service account's, else
    ``default``."""
    ns = os.environ.get("POD_NAMESPACE", "").strip()
    if ns:
        return ns
    try:
        return (
            Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read_text().strip() or "default"
        )
    except OSError:
        return "default"


def _make_runner(flags: RunFlags) -> Runner:
    """The runner ``flags`` ask for, on an API server that answers (exit code 2 otherwise)."""
    from corral.kube.api import KubeAPI, load_client
    from corral.kube.logs import Log
    from corral.kube.metrics import Metrics
    from corral.kube.oneshot import probe
    from corral.kube.runner import Runner

    cfg, opts = _run_options(flags)
    log = Log(fmt=flags.log_format, level=flags.log_level)
    api = KubeAPI(load_client(flags.kubeconfig, flags.context, flags.server))
    probe(api)
    runner = Runner(api, cfg, opts, log, Metrics())
    log.info(
        "starting",
        schedulers=list(opts.schedulers),
        period=opts.period,
        dry_run=opts.dry_run,
        leader_elect=opts.leader_elect,
        lease=f"{opts.lease_namespace}/{opts.lease_name}" if opts.leader_elect else None,
        identity=opts.identity,
        config=cfg.source,
    )
    return runner


def _run_options(flags: RunFlags) -> tuple[Config, RunOptions]:
    """The configuration and the runner's options of ``flags``, checked (InputError/ConfigError: exit
    code 2 naming the flag)."""
    from corral.commands.options import load_config, parse_now
    from corral.errors import InputError
    from corral.extras import require

    require("live", "corral run")  # the Kubernetes client and the exporter: pip install 'corral[live]'
    if flags.log_format not in ("json", "text"):
        raise InputError(f"expected json or text, got {flags.log_format!r}", field="--log-format")
    if flags.log_level not in ("debug", "info", "warning", "error"):
        raise InputError(
            f"expected debug, info, warning or error, got {flags.log_level!r}", field="--log-level"
        )
    cfg = load_config(flags.config)
    from corral.kube.expected import LiveForecast
    from corral.kube.runner import RUN_SCHEDULERS, RunOptions

    return cfg, RunOptions(
        schedulers=tuple(flags.scheduler_name) if flags.scheduler_name else RUN_SCHEDULERS,
        period=flags.period,
        dry_run=flags.dry_run,
        cycles=flags.cycles,
        now=parse_now(flags.now) if flags.now is not None else None,
        dump=flags.dump,
        leader_elect=flags.leader_elect,
        lease_namespace=flags.lease_namespace or _own_namespace(),
        lease_name=flags.lease_name,
        identity=os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}",
        sync_timeout=flags.sync_timeout,
        queue_metrics_interval=flags.queue_metrics_interval,
        forecast=flags.forecast if flags.forecast is not None else LiveForecast(every=0),
    )


def _serve_and_run(
    runner: Runner, bind: tuple[str, int] | None, page: tuple[str, int, float] | None = None
) -> None:
    from corral.errors import InputError
    from corral.kube.metrics import serve

    _signals(runner)
    http = None
    dashboard = None
    if page is not None:
        try:
            dashboard = _serve_page(runner, *page)
        except OSError as exc:
            fail(InputError(f"cannot listen on {page[0]}:{page[1]}: {exc}", field="--dashboard-port"))
            return
    if bind is not None:
        try:
            http = serve(
                runner.metrics, bind[1], runner.health, host=bind[0], live=runner.alive, log=runner.log
            )
            runner.log.info(
                "serving /metrics, /healthz and /livez", address=f"{bind[0]}:{http.server_address[1]}"
            )
        except OSError as exc:
            fail(InputError(f"cannot listen on {bind[0]}:{bind[1]}: {exc}", field="--metrics-bind-address"))
            return
    try:
        runner.start()
        total = runner.run()
    except BaseException as exc:  # noqa: BLE001
        runner.stop()
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        fail(exc)
        return
    if runner.stop_signal:
        runner.log.info("stop signal: stopping", signal=runner.stop_signal)
    runner.stop()
    if http is not None:
        http.shutdown()
    if dashboard is not None:
        dashboard.shutdown()
    opts = runner.opts
    if opts.dry_run and opts.cycles is not None:
        sys.stdout.write(json.dumps(total.to_json(opts.cycles), indent=1) + "\n")
    if runner.lost:
        runner.log.error("exiting: leadership lost")
        raise typer.Exit(1)


def _serve_page(runner: Runner, host: str, port: int, refresh: float) -> ThreadingHTTPServer:
    """The live operator's page (:mod:`corral.kube.livepage`), rendered after the runner's cycles."""
    from corral.kube.livepage import LivePage, serve_page

    expected = runner.expected
    live = LivePage(
        runner.config,
        runner.log,
        refresh=refresh,
        estimates=(lambda: expected.latest) if expected is not None else None,
    )
    server = serve_page(live, host, port, runner.log)
    runner.after_cycle = live.after_cycle
    runner.log.info("serving the dashboard", address=f"{host}:{server.server_address[1]}")
    return server


def _signals(runner: Runner) -> None:
    """SIGTERM and SIGINT stop the runner at any stage (the cache sync, a cycle, the apply phase's
    backoffs); a second one exits at once, without the clean shutdown."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        # no logging here: the handler runs between two bytecodes of the main thread, which may hold the
        # log's lock; the runner logs the signal when its loop ends
        if runner.stopping.is_set():
            os.write(2, b'{"level": "error", "msg": "second stop signal: exiting now"}\n')
            os._exit(128 + signum)
        runner.stop_signal = signum
        runner.stopping.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)
