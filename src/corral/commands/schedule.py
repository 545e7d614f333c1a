"""``corral schedule`` (SPEC.md §4: cycles over a snapshot, the decisions printed as JSON or tables, the
forecast and the operator's page on request) and ``corral validate`` (the input checked, nothing
scheduled). :func:`schedule_snapshot` is the front end both ``corral schedule`` and the tests that compare
with it run: the snapshot loaded, :func:`corral.framework.cycle.run_cycles` over it."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from corral.commands.boundary import boundary
from corral.commands.options import EXAMPLE, check_output, load_config, parse_now
from corral.terminal import plain

if TYPE_CHECKING:  # the scheduling core (numpy, every plugin) is imported by the commands that run it
    from corral.framework.config import Config
    from corral.framework.decisions import Decisions
    from corral.framework.memo import ClusterHistory
    from corral.model import Cluster

__all__ = ["register", "schedule", "schedule_snapshot", "validate"]


def register(app: typer.Typer) -> None:
    """Add ``schedule`` to ``app`` (``validate`` is added after the views: :mod:`corral.commands.app`)."""
    app.command()(schedule)


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
    """Run ``cycles`` cycles over a snapshot (:func:`corral.framework.cycle.run_cycles`); between cycles
    bound pods run, evicted pods are gone, nominations and podgroup updates persist (SPEC.md §4); each
    cycle's decisions gain kube-scheduler's conditions of scheduling.k8s.io PodGroups
    (:func:`corral.kube.native_status.native_conditions`). ``schedulers`` defaults to
    ``DEFAULT_SCHEDULERS``. The loaded model lives through every cycle: it is kept out of the garbage
    collector's passes (``gc.freeze``) until the cycles are done. With ``estimates`` (a list), the last
    cycle's decisions are carried out too and the expected start of every podgroup still waiting is
    appended to it (:func:`corral.sim.forecast.forecast`, from the configuration's ``forecast``). ``after``
    is called last with the cluster as the decisions left it (the forecast runs on a copy then) and the
    time after the cycles. ``report`` receives the snapshot's warnings, one line per object (the first
    20, then a count), once before the first cycle (:class:`~corral.model.notes.Notes`). ``history``
    (default: one that tracks the jobs' changes when there is more than one cycle) is what the cycles
    remember (:class:`~corral.framework.memo.history.ClusterHistory`)."""
    from corral.framework.cycle import run_cycles
    from corral.kube.native_status import native_conditions
    from corral.registry import REGISTRY

    cluster = _load_frozen(paths, schedulers)
    if report is not None:
        for line in cluster.notes.warning_lines(most=20):
            report(line)

    def conditions(cluster: Cluster, decisions: Decisions, cycle: int) -> None:
        decisions.conditions.extend(native_conditions(cluster, decisions, cycle))

    try:
        out, now = run_cycles(
            cluster,
            config,
            REGISTRY,
            now,
            cycles,
            period,
            history=history,
            derive=conditions,
            carry_out_last=estimates is not None or after is not None,
        )
        _after_cycles(cluster, config, now, estimates, after)
    finally:
        gc.unfreeze()
    return out


def _load_frozen(paths: list[Path], schedulers: tuple[str, ...] | None) -> Cluster:
    """The snapshot loaded with the garbage collector off, then frozen (``gc.freeze``) before the
    collector runs again: a first collection would walk every object loaded. The caller unfreezes."""
    from corral.manifests.build import DEFAULT_SCHEDULERS, load_snapshot

    schedulers = DEFAULT_SCHEDULERS if schedulers is None else schedulers
    collecting = gc.isenabled()
    gc.disable()
    try:
        cluster = load_snapshot(paths, schedulers)
        gc.freeze()
    finally:
        if collecting:
            gc.enable()
    return cluster


def _after_cycles(
    cluster: Cluster,
    config: Config,
    now: float,
    estimates: list[Any] | None,
    after: Callable[[Cluster, float], None] | None,
) -> None:
    """After the cycles: the forecast appended to ``estimates`` (on a copy of the cluster when ``after``
    still needs it), then ``after`` called with the cluster and the time."""
    if estimates is not None:
        from corral.sim.forecast import clone_cluster, forecast, forecast_settings

        plan = clone_cluster(cluster) if after is not None else cluster
        estimates.extend(forecast(plan, config, now, forecast_settings(config.forecast, config.source)))
    if after is not None:
        after(cluster, now)


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
    with boundary():
        check_output(output)
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
            _write_page(html_dir, force, page, decisions, estimates)
    _print(decisions, output, cycles, estimates)


def _print(decisions: Decisions, output: str, cycles: int, estimates: list[Any] | None) -> None:
    """The decisions (and the forecast) on stdout as JSON or tables; their warnings on stderr."""
    for w in decisions.warnings:  # once, on stderr: the decisions stay machine-readable
        typer.echo(w.note().line(), err=True)
    if output == "json":
        record = decisions.to_json(cycles)
        if estimates is not None:
            from corral.model.clock import format_time

            record["expectedStarts"] = [e.to_json(format_time) for e in estimates]
        sys.stdout.write(json.dumps(record, indent=1) + "\n")
    else:
        from corral.commands.tables import print_decisions, print_estimates

        print_decisions(decisions, cycles)
        if estimates is not None:
            print_estimates(estimates)


def _write_page(
    html_dir: Path, force: bool, page: dict[str, Any], decisions: Decisions, estimates: list[Any] | None
) -> None:
    """``--html``: the operator's page of the state the cycles left, written whole or not at all."""
    from corral.dashboard import render_page
    from corral.files import atomic_folder

    text = render_page(page["cluster"], decisions, page["rows"], page["source"], page["at"], estimates)
    atomic_folder(html_dir, lambda tmp: (tmp / "index.html").write_text(text, encoding="utf-8"), force=force)


def validate(
    snapshot: list[Path] = typer.Argument(..., help="snapshot files or directories"),
    config: Path | None = typer.Option(None, "--config", "-c", help="scheduler configuration (YAML)"),
) -> None:
    """Check a snapshot (and a configuration) without scheduling."""
    with boundary():
        from corral.manifests.build import load_snapshot, off_nodes_line

        cfg = load_config(config)
        cluster = load_snapshot(list(snapshot))
        from corral.framework.notices import configuration_notes
        from corral.registry import REGISTRY

        notices = configuration_notes(cluster, cfg, REGISTRY).warnings
    invalid = sum(1 for j in cluster.jobs.values() if j.invalid_reason)
    notes = cluster.notes
    warned = len(notes.by_object())
    typer.echo(
        f"ok: {len(cluster.nodes)} nodes, {len(cluster.tasks)} pods, {len(cluster.jobs)} podgroups, "
        f"{len(cluster.queues)} queues, {len(cluster.hypernodes.hypernodes)} "
        f"hypernodes; config {plain(cfg.source)}"
        + (f"; {invalid} podgroups cannot be honoured (see corral schedule)" if invalid else "")
        + (f"; {warned} objects with warnings" if warned else "")
        + (f"; {len(notices)} warnings" if notices else "")
        + (f"; {off_nodes_line(cluster.off_nodes)}" if cluster.off_nodes else "")
    )
    # what it read of reported kinds, made from workloads, will not act on; then what the configuration
    # leaves undone, one line each on stderr (model/notes.py: the one warning channel)
    for line in [*map(plain, notes.readings), *notes.expansion_lines(), *notes.warning_lines()]:
        typer.echo(line)
    for n in notices:
        typer.echo(n.line(), err=True)
