"""``corral``: the command line (SPEC.md §4).

Commands: ``schedule`` (cycles over a snapshot, printing decisions), ``validate`` (check input only),
``simulate`` and ``compare`` (the trace-driven simulator, :mod:`corral.sim.commands`), ``run`` (the live
Kubernetes scheduler, :mod:`corral.kube.command`). Every
:class:`~corral.errors.CorralError` becomes one line on stderr and its exit code (2 for bad input, 1 for
an internal fault); any other exception is an internal error, exit 1, one line, no traceback (set
``CORRAL_DEBUG=1`` to see it).
"""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from corral.cli_errors import OneLineErrors, fail
from corral.cli_inputs import load_config, parse_now
from corral.errors import InputError
from corral.terminal import plain

if TYPE_CHECKING:  # the scheduling core (numpy, every plugin) is imported by the commands that run it
    from collections.abc import Callable

    from corral.framework.config import Config
    from corral.framework.decisions import Decisions
    from corral.framework.memo import ClusterHistory
    from corral.model import Cluster

__all__ = ["app", "main", "schedule_snapshot"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=OneLineErrors,
    help="corral: a gang-aware batch scheduler for GPU clusters.",
)

EXAMPLE = Path(__file__).parent / "examples" / "snapshot.yaml"


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


_fail = fail


def _check_output(output: str) -> None:
    if output not in ("json", "table"):
        raise InputError(f"expected json or table, got {output!r}", field="--output")


@contextmanager
def _boundary() -> Iterator[None]:
    """The CLI boundary of a command: a fault ends in one line and its exit code
    (:func:`corral.cli_errors.fail`, which re-raises exits and interrupts); no traceback reaches a user."""
    try:
        yield
    except BaseException as exc:  # noqa: BLE001 - the CLI boundary
        _fail(exc)
        raise  # fail always raises; kept for the type checker


def schedule_snapshot(
    paths: list[Path],
    config: Config,
    now: float,
    cycles: int = 1,
    period: float = 1.0,
    schedulers: tuple[str, ...] | None = None,
    estimates: list[Any] | None = None,
    after: Callable[[Cluster, float], None] | None = None,
    report: Callable[[str], None] | None = None,
    history: ClusterHistory | None = None,
) -> Decisions:
    """Run ``cycles`` cycles over a snapshot; between cycles bound pods run, evicted pods are gone,
    nominations and podgroup updates persist (SPEC.md §4). ``schedulers`` defaults to
    ``DEFAULT_SCHEDULERS``. The loaded model lives through every cycle: it is kept out of the garbage
    collector's passes (``gc.freeze``) until the cycles are done. With ``estimates`` (a list), the last
    cycle's decisions are carried out too and the expected start of every podgroup still waiting is
    appended to it (:func:`corral.sim.forecast.forecast`, from the configuration's ``forecast``). ``after``
    is called last with the cluster as the decisions left it (the forecast runs on a copy then) and the
    time after the cycles. ``report`` receives the snapshot's warnings, one line per object (the first
    20, then a count), once before the first cycle (:class:`~corral.manifests.notes.Notes`). ``history``
    (default: one that tracks the jobs' changes when there is more than one cycle) is what the cycles
    remember (:class:`~corral.framework.memo.history.ClusterHistory`)."""
    from corral.framework.cycle import apply_decisions, run_cycle
    from corral.framework.decisions import Decisions
    from corral.framework.memo import ClusterHistory
    from corral.kube.native_status import native_conditions
    from corral.manifests.build import DEFAULT_SCHEDULERS, load_snapshot
    from corral.registry import REGISTRY

    schedulers = DEFAULT_SCHEDULERS if schedulers is None else schedulers
    collecting = gc.isenabled()
    gc.disable()
    try:  # frozen before the collector runs again: a first collection would walk every object loaded
        cluster = load_snapshot(paths, schedulers)
        gc.freeze()
    finally:
        if collecting:
            gc.enable()
    if report is not None and cluster.input_notes is not None:
        for line in cluster.input_notes.warning_lines(most=20):
            report(plain(line))
    out = Decisions()
    if history is None:
        # every change between cycles is the sessions' own, so the history can track the jobs'
        # changes: the cycles keep the job index (framework/memo/) instead of walking every job
        history = ClusterHistory(tracked=cycles > 1)
    try:
        for c in range(1, cycles + 1):
            decisions = run_cycle(cluster, config, REGISTRY, now, c, history=history)
            decisions.conditions.extend(native_conditions(cluster, decisions, c))
            out.extend(decisions)
            if c < cycles or estimates is not None or after is not None:  # else it is not read again
                apply_decisions(cluster, decisions, now)
            now += period
        if estimates is not None:
            from corral.sim.forecast import clone_cluster, forecast, forecast_settings

            plan = clone_cluster(cluster) if after is not None else cluster
            estimates.extend(forecast(plan, config, now, forecast_settings(config.forecast, config.source)))
        if after is not None:
            after(cluster, now)
    finally:
        gc.unfreeze()
    return out


@app.command()
def schedule(
    snapshot: list[Path] = typer.Argument(
        None, help="snapshot files or directories (default: built-in example)"
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help="scheduler configuration (YAML)"),
    now: str | None = typer.Option(None, "--now", help="fix the clock (RFC 3339)"),
    cycles: int = typer.Option(1, "--cycles", min=1, help="number of cycles to run"),
    period: float = typer.Option(1.0, "--period", min=0.0, help="seconds between cycles"),
    output: str = typer.Option("table", "--output", "-o", help="json or table"),
    scheduler_name: list[str] = typer.Option(
        None, "--scheduler-name", help="schedulerName values corral owns (repeatable)"
    ),
    expected_starts: bool = typer.Option(
        False,
        "--forecast",
        help="after the cycles, estimate when each waiting podgroup starts (a forward run with no new "
        "arrivals; see docs/forecast.md)",
    ),
    html_dir: Path | None = typer.Option(
        None,
        "--html",
        help="also write the operator's page (queues, waiting podgroups, reservation, evictions, topology) "
        "as DIR/index.html",
    ),
    force: bool = typer.Option(False, "--force", help="with --html: replace a folder corral did not write"),
) -> None:
    """Run scheduling cycles over a Kubernetes snapshot and print the decisions."""
    with _boundary():
        _check_output(output)
        paths = list(snapshot) if snapshot else [EXAMPLE]
        names = tuple(scheduler_name) if scheduler_name else None  # None: DEFAULT_SCHEDULERS
        estimates: list[Any] | None = [] if expected_starts else None
        cfg = load_config(config)
        page: dict[str, Any] = {}

        def keep(cluster: Cluster, at: float) -> None:
            from corral.queueview import queue_rows

            page["cluster"], page["at"] = cluster, at
            page["rows"], page["source"] = queue_rows(cluster, cfg, at)

        decisions = schedule_snapshot(
            paths,
            cfg,
            parse_now(now),
            cycles,
            period,
            names,
            estimates,
            keep if html_dir is not None else None,
            report=lambda line: typer.echo(line, err=True),
        )
        if html_dir is not None:
            from corral.dashboard import render_page
            from corral.files import atomic_folder

            text = render_page(
                page["cluster"], decisions, page["rows"], page["source"], page["at"], estimates
            )
            atomic_folder(
                html_dir, lambda tmp: (tmp / "index.html").write_text(text, encoding="utf-8"), force=force
            )
    for w in decisions.warnings:  # once, on stderr: the decisions stay machine-readable
        typer.echo(f"warning: PodGroup {w.podgroup}: {w.field}: {w.warning}", err=True)
    if output == "json":
        record = decisions.to_json(cycles)
        if estimates is not None:
            from corral.model.clock import format_time

            record["expectedStarts"] = [e.to_json(format_time) for e in estimates]
        sys.stdout.write(json.dumps(record, indent=1) + "\n")
    else:
        from corral.tables import print_decisions, print_estimates

        print_decisions(decisions, cycles)
        if estimates is not None:
            print_estimates(estimates)


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


@app.command()
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
    with _boundary():
        _check_output(output)
        from corral.manifests.build import DEFAULT_SCHEDULERS
        from corral.whatif import what_if

        names = tuple(scheduler_name) if scheduler_name else DEFAULT_SCHEDULERS
        cfg, at = load_config(config), parse_now(now)
        paths, objects = _source(snapshot, live, kubeconfig, context, server)
        answer = what_if(job, paths, cfg, at, names, base=objects)
    if output == "json":
        sys.stdout.write(json.dumps(answer.to_json(), indent=1) + "\n")
    else:
        from corral.tables import print_whatif

        print_whatif(answer)
    raise typer.Exit(0 if answer.would_start else 3)


@app.command()
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
    with _boundary():
        _check_output(output)
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
        from corral.tables import print_queues

        print_queues(rows, resources, source)


@app.command()
def validate(
    snapshot: list[Path] = typer.Argument(..., help="snapshot files or directories"),
    config: Path | None = typer.Option(None, "--config", "-c", help="scheduler configuration (YAML)"),
) -> None:
    """Check a snapshot (and a configuration) without scheduling."""
    with _boundary():
        from corral.manifests.build import load_snapshot, off_nodes_line

        cfg = load_config(config)
        cluster = load_snapshot(list(snapshot))
        from corral.framework.notices import cluster_notices, config_notices, queue_notices
        from corral.registry import REGISTRY

        notices = config_notices(cfg) + queue_notices(cluster, cfg) + cluster_notices(cluster, cfg, REGISTRY)
    invalid = sum(1 for j in cluster.jobs.values() if j.invalid_reason)
    notes = cluster.input_notes
    warned = len({n.obj for n in notes.warnings}) if notes is not None else 0
    typer.echo(
        f"ok: {len(cluster.nodes)} nodes, {len(cluster.tasks)} pods, {len(cluster.jobs)} podgroups, "
        f"{len(cluster.queues)} queues, {len(cluster.hypernodes.hypernodes)} "
        f"hypernodes; config {plain(cfg.source)}"
        + (f"; {invalid} podgroups cannot be honoured (see corral schedule)" if invalid else "")
        + (f"; {warned} objects with warnings" if warned else "")
        + (f"; {len(notices)} warnings" if notices else "")
        + (f"; {off_nodes_line(cluster.off_nodes)}" if cluster.off_nodes else "")
    )
    if notes is not None:  # what it read of reported kinds, made from workloads, will not act on
        for line in notes.readings + notes.expansion_lines() + notes.warning_lines():
            typer.echo(plain(line))
    for n in notices:
        typer.echo(n.line(), err=True)
    from corral.manifests.kai_notes import config_notes

    for line in cluster.notes + config_notes(cluster, cfg):
        typer.echo(f"warning: {plain(line)}")


def _register_sim() -> None:
    try:
        from corral.sim.commands import register
    except ModuleNotFoundError as exc:  # the simulator package is optional only while it is being built
        if exc.name != "corral.sim.commands":
            raise
        return
    register(app)


_register_sim()


def _register_run() -> None:
    from corral.kube.command import register as register_run  # ``corral run`` (docs/kubernetes.md)

    register_run(app)


_register_run()


def main() -> None:
    app()
