"""Expected starts in ``corral run``: the forecast of docs/forecast.md, run on the live cluster every few
cycles, written as PodGroup annotations and exported as a Prometheus gauge.

**When.** After the apply phase of every ``every``-th cycle (``--forecast-every``, default 10; 0 turns it
off), on a copy of the cycle's cluster with the cycle's decisions carried out, from the next cycle's
time. The forward run stops once ``budget`` seconds of wall time have passed since it began
(``--forecast-budget``; the first planned cycle always runs, so "fits now" is always answered):
podgroups it has not started by then get no estimate that round. A deep backlog therefore costs at most
the budget (plus one planned cycle) every ``every`` cycles, never a slower cycle in between; the copy
before it grows with the cluster, not the backlog (``benchmarks/bench_live_forecast.py``). The time it takes is observed as
``corral_cycle_phase_seconds{phase="forecast"}``.

**Annotations** (on the PodGroup object; a pod without a PodGroup gets the gauge only):

- ``corral.io/expected-start``: RFC 3339, present while the podgroup waits and has an estimate;
- ``corral.io/expected-start-basis``: the basis (``after ns/a finishes; on rack-3``), or why there is
  no estimate (``no estimate: ...``).

Both are written with one merge patch of ``metadata.annotations`` (no ``resourceVersion``: the patch
touches only these keys) when the estimate moves by more than ``threshold`` seconds
(``--forecast-threshold``, default 300), appears or disappears; a basis that changes while the start
stays within the threshold is not written. At most ``writes`` patches per forecast (100), the largest
moves first; the rest follow at the next forecast. Both keys are removed once the podgroup starts (or
is no longer below its minimum). What is written is compared with the cached object (corral's own
writes assumed until the watch shows them), so a restarted or new leader writes nothing that is
already there. Writes go through the applier's leadership guard; ``--dry-run`` writes none.

**Gauge** ``corral_expected_start_time_seconds{namespace,podgroup,queue}``: the expected start (seconds
since the epoch, as ``process_start_time_seconds`` and kube-state-metrics' ``kube_pod_start_time``), one
series per waiting podgroup with an estimate, from the last forecast. A podgroup that starts, goes away
or loses its estimate drops out at the next forecast (Volcano's scheduler drops a job's per-job series,
such as ``e2e_job_scheduling_duration{job_name,queue,job_namespace}``, the same way:
``metrics.DeleteJobMetrics`` when the job leaves its cache); at most ``series`` (2,000) series, the
earliest starts first, so the cardinality is bounded whatever the backlog.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from corral.framework.config import Config
from corral.framework.cycle import apply_decisions
from corral.framework.decisions import Decisions
from corral.kube.api import APIError, NotLeader
from corral.kube.logs import Log
from corral.model import Cluster
from corral.model.clock import format_time, parse_time
from corral.sim.forecast import Estimate, clone_cluster, forecast, forecast_settings

__all__ = [
    "EXPECTED_BASIS",
    "EXPECTED_START",
    "ExpectedStartGauge",
    "ExpectedStarts",
    "LiveForecast",
    "annotation_patch",
]

#: the expected start of a waiting podgroup (RFC 3339)
EXPECTED_START = "corral.io/expected-start"
#: what the expected start rests on, or why there is none
EXPECTED_BASIS = "corral.io/expected-start-basis"
_BASIS_MAX = 1024  # an annotation stays readable in ``kubectl describe``


@dataclass(frozen=True)
class LiveForecast:
    """The settings of the live forecast (flags of ``corral run``; module docstring)."""

    every: int = 10  # cycles between forecasts; 0: off
    budget: float = 2.0  # seconds of wall time a forecast's forward run may take
    threshold: float = 300.0  # seconds an estimate must move before it is written again
    writes: int = 100  # annotation patches per forecast
    series: int = 2000  # gauge series at most


class ExpectedStartGauge(Collector):
    """The gauge, as a collector whose series are exactly the last forecast's estimates."""

    NAME = "corral_expected_start_time_seconds"

    def __init__(self, registry: CollectorRegistry, limit: int = 2000) -> None:
        self.limit = limit
        self.rows: list[tuple[str, str, str, float]] = []  # (namespace, podgroup, queue, start)
        registry.register(self)

    def set(self, rows: Iterable[tuple[str, str, str, float]]) -> None:
        """Replace every series (one assignment: a scrape sees the old set or the new one)."""
        self.rows = sorted(rows, key=lambda r: (r[3], r[0], r[1]))[: self.limit]

    def describe(self) -> list[GaugeMetricFamily]:
        return [self._family()]

    def collect(self) -> list[GaugeMetricFamily]:
        family = self._family()
        for ns, name, queue, start in self.rows:
            family.add_metric([ns, name, queue], start)
        return [family]

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            self.NAME,
            "Expected start of a waiting podgroup, seconds since the epoch (corral's forecast)",
            labels=["namespace", "podgroup", "queue"],
        )


def annotation_patch(estimate: Estimate | None) -> dict[str, str | None]:
    """The annotations of ``estimate`` (None: the podgroup no longer waits, both keys removed)."""
    if estimate is None:
        return {EXPECTED_START: None, EXPECTED_BASIS: None}
    basis = estimate.basis + (f"; on {estimate.where}" if estimate.where else "")
    if len(basis) > _BASIS_MAX:
        basis = basis[: _BASIS_MAX - 3] + "..."
    start = format_time(estimate.start) if estimate.start is not None else None
    return {EXPECTED_START: start, EXPECTED_BASIS: basis}


def _written_start(annotations: dict[str, Any]) -> float | None:
    try:
        return parse_time(str(annotations[EXPECTED_START]))
    except Exception:  # noqa: BLE001 - absent or not a time: treated as absent (and rewritten)
        return None


class ExpectedStarts:
    """Runs the forecast every ``settings.every`` cycles, sets the gauge and writes the annotations.

    ``find`` is the cache's lookup (kind, key) -> (type, dict) with assumptions applied; ``patch`` and
    ``assume`` write an object and overlay it in the cache; ``pool`` runs the writes (the applier's)."""

    def __init__(
        self,
        settings: LiveForecast,
        config: Config,
        registry: CollectorRegistry,
        log: Log,
        *,
        find: Callable[[str, str], tuple[Any, dict] | None],
        patch: Callable[[str, dict], dict] | None,
        assume: Callable[[str, str, dict, dict], None],
        pool: Executor | None = None,
        observe: Callable[[float], None] | None = None,
    ) -> None:
        self.settings = settings
        self.config = config
        self.plan = forecast_settings(config.forecast, config.source)
        self.gauge = ExpectedStartGauge(registry, settings.series)
        self.log = log
        self.find, self.patch, self.assume, self.pool = find, patch, assume, pool
        self.observe = observe
        self.latest: list[Estimate] = []  # the last forecast (the dashboard shows it)
        self.annotated: set[str] = set()  # podgroups that may carry corral's annotations
        self.seconds: dict[str, float] = {}  # the last forecast's copy, plan and total times

    def due(self, cycle: int) -> bool:
        return self.settings.every > 0 and cycle % self.settings.every == 0

    def run(self, cluster: Cluster, decisions: Decisions, at: float) -> float:
        """One forecast of ``cluster`` after ``decisions``, from ``at``; never raises (a fault is logged
        and the last estimates stay). Returns the seconds it took."""
        t0 = time.perf_counter()
        parts = self.seconds = {}
        try:
            plan = clone_cluster(cluster)
            # the decisions' record of changed pods names the original's objects: recount the copy
            apply_decisions(plan, dataclasses.replace(decisions, touched=None), at)
            parts["copy"] = time.perf_counter() - t0
            estimates = forecast(plan, self.config, at, self.plan, self.settings.budget)
            parts["plan"] = time.perf_counter() - t0 - parts["copy"]
            self.latest = estimates
            self._gauge(cluster, estimates)
            if self.patch is not None:
                self._write(cluster, estimates)
        except Exception as exc:  # noqa: BLE001 - a forecast never stops the scheduler
            self.log.error("forecast failed", error=f"{type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - t0
        parts["total"] = seconds
        self.log.debug(
            "forecast",
            waiting=len(self.latest),
            estimated=sum(1 for e in self.latest if e.start is not None),
            seconds={k: round(v, 3) for k, v in parts.items()},
        )
        if self.observe is not None:
            self.observe(seconds)
        return seconds

    def _gauge(self, cluster: Cluster, estimates: list[Estimate]) -> None:
        rows = []
        for e in estimates:
            job = cluster.jobs.get(e.podgroup)
            if e.start is not None and job is not None:
                rows.append((job.namespace, job.name, job.queue, e.start))
        self.gauge.set(rows)

    def _write(self, cluster: Cluster, estimates: list[Estimate]) -> None:
        wanted: dict[str, Estimate | None] = {e.podgroup: e for e in estimates}
        # podgroups corral annotated earlier (or that carry the keys) and no longer wait: remove them
        for uid in self.annotated | {u for u, j in cluster.jobs.items() if EXPECTED_BASIS in j.annotations}:
            wanted.setdefault(uid, None)
        moves: list[tuple[float, str, dict]] = []
        for uid, e in wanted.items():
            found = self.find("PodGroup", uid)
            if found is None:  # a pod without a PodGroup, or gone
                self.annotated.discard(uid)
                continue
            have = (found[1].get("metadata") or {}).get("annotations") or {}
            move = self._move(have, e)
            if move is not None:
                moves.append((move, uid, annotation_patch(e)))
            elif e is None:
                self.annotated.discard(uid)
        moves.sort(key=lambda m: (-m[0], m[1]))
        chosen = moves[: self.settings.writes]
        try:
            if self.pool is not None:
                for f in [self.pool.submit(self._patch, uid, ann) for _, uid, ann in chosen]:
                    f.result()
            else:
                for _, uid, ann in chosen:
                    self._patch(uid, ann)
        except NotLeader:  # the next cycle finds it out and stops; nothing more is written here
            self.log.warning("leadership lost: expected starts not written")
            return
        if chosen:
            self.log.info("expected starts written", podgroups=len(chosen), left=len(moves) - len(chosen))

    def _move(self, have: dict[str, Any], e: Estimate | None) -> float | None:
        """How far ``e`` is from what the object carries, when that is worth a write (None: it is not)."""
        if e is None:
            return float("inf") if EXPECTED_START in have or EXPECTED_BASIS in have else None
        if EXPECTED_BASIS not in have:
            return float("inf")
        before = _written_start(have)
        if (before is None) != (e.start is None):
            return float("inf")
        if before is None or e.start is None:
            return None
        moved = abs(e.start - before)
        return moved if moved > self.settings.threshold else None

    def _patch(self, uid: str, annotations: dict[str, str | None]) -> None:
        found = self.find("PodGroup", uid)
        if found is None or self.patch is None:
            return
        rtype, _raw = found
        ns, _, name = uid.partition("/")
        body = {"metadata": {"annotations": annotations}}
        try:
            self.patch(rtype.item(name, ns), body)
        except APIError as exc:
            self.log.warning(
                "write failed", kind="expected-start", object=uid, status=exc.status, error=exc.message
            )
            return
        if annotations.get(EXPECTED_BASIS) is None:
            self.annotated.discard(uid)
        else:
            self.annotated.add(uid)
        self.assume("PodGroup", uid, body, body)
