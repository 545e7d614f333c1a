"""The per-queue and per-outcome metrics of ``corral run``: what Volcano's ``pkg/scheduler/metrics``
(``volcano_queue_*``, ``volcano_unschedule_*``) and KAI's scheduler and queue controller
(``kai_queue_fair_share_*``, ``kai_queue_allocated_*``) export, under names that follow Prometheus'
conventions (base units, ``_total`` counters, ``_seconds`` histograms). docs/kubernetes.md maps every
Volcano and KAI metric to its corral counterpart.

Per queue (label ``queue_name``, Volcano's and KAI's), gauges from the rows ``corral queues`` shows
(:func:`corral.queueview.queue_rows`, a session of the queue plugins opened on a cycle's snapshot before
the cycle's own — the state at session open, where Volcano's proportion and capacity plugins set theirs),
recomputed once ``--queue-metrics-interval`` seconds passed (:class:`corral.kube.runner.Runner`):

- resource vectors, one series per resource (labels ``resource`` and ``unit``, the kube-state-metrics
  shape of ``kube_node_status_allocatable``: cpu in cores (``core``), memory, ephemeral-storage and
  hugepages in bytes (``byte``), any other resource in its own count (``integer``)):
  ``corral_queue_allocated``, ``corral_queue_deserved`` (only with ``proportion`` or ``capacity``),
  ``corral_queue_pending_requests`` (the requests of the queue's waiting pods), ``corral_queue_guarantee``
  and ``corral_queue_capability`` (only the resources it limits). A parent queue counts its children's.
- ``corral_queue_share`` (held over deserved, the largest over the resources it deserves),
  ``corral_queue_overused`` (1 or 0), ``corral_queue_weight``, ``corral_queue_podgroups{state}``
  (``running``: at their minimum; ``waiting``: below it with pods waiting).
- ``corral_queue_unschedulable_podgroups`` and ``corral_queue_unschedulable_pods``: the podgroups the
  cycle could not start (its ``unschedulable`` decisions) and their pods still waiting at the cycle's
  end (the pods that get ``FailedScheduling``), by leaf queue.

The unschedulable counts are every cycle's own. Each update replaces the whole set (a queue that
disappears leaves every series at once; a scrape sees one update's set, never a mix).

Outcomes, counted as the applier writes them (a dry run writes nothing and counts nothing):
``corral_binds_total{queue_name,result}`` and ``corral_evictions_total{queue_name,action,result}``
(result: ``done``, ``uncertain``, ``failed``, ``skipped``, ``refused``; action: the action that chose the
victim, ``gang-release`` for the pods of a partly bound gang released), and
``corral_pod_scheduling_duration_seconds{queue_name}``, a histogram of the time from a pod's creation to
the end of the apply phase that bound it, on the cycle's clock (kube-scheduler's
``scheduler_pod_scheduling_sli_duration_seconds``, Volcano's ``task_scheduling_latency_milliseconds``).
"""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from corral.model import TaskStatus

if TYPE_CHECKING:
    from corral.framework.decisions import Decisions
    from corral.kube.apply_report import ApplyReport
    from corral.model import Cluster, Job
    from corral.queueview import QueueRow

__all__ = ["QueueCollector", "QueueOutcomes", "unit_of", "unschedulable_by_queue", "unschedulable_kept"]

#: the queue label of Volcano's and KAI's queue metrics
QUEUE = "queue_name"

#: resource vectors of a queue row: metric -> (row field, help)
VECTORS = {
    "corral_queue_allocated": (
        "allocated",
        "Resources held by the queue's pods (a parent: its children's too)",
    ),
    "corral_queue_deserved": ("deserved", "Resources the queue deserves (proportion or capacity plugin)"),
    "corral_queue_pending_requests": ("pending", "Requests of the queue's waiting pods"),
    "corral_queue_guarantee": ("guarantee", "Resources guaranteed to the queue"),
    "corral_queue_capability": ("capability", "Most the queue may hold, for the resources it limits"),
}
#: one value per queue: metric -> help
SCALARS = {
    "corral_queue_share": "Held over deserved, the largest over the resources the queue deserves",
    "corral_queue_overused": "1 while the queue holds at least what it deserves",
    "corral_queue_weight": "The queue's weight",
}
PODGROUPS = "corral_queue_podgroups"
UNSCHEDULABLE_PODGROUPS = "corral_queue_unschedulable_podgroups"
UNSCHEDULABLE_PODS = "corral_queue_unschedulable_pods"

_BYTES = ("memory", "ephemeral-storage")
_WAITING = (TaskStatus.PENDING, TaskStatus.PIPELINED)
#: pods wait seconds to days for a batch scheduler: 0.1 s to a day
LATENCY_BUCKETS = (
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
    300,
    600,
    1800,
    3600,
    7200,
    14400,
    43200,
    86400,
)


def unit_of(resource: str) -> str:
    """kube-state-metrics' ``unit`` label: ``core`` for cpu, ``byte`` for memory-like resources,
    ``integer`` for counted ones (GPUs, pods, extended resources)."""
    if resource == "cpu":
        return "core"
    if resource in _BYTES or resource.startswith("hugepages-"):
        return "byte"
    return "integer"


class QueueCollector(Collector):
    """The per-queue gauges: one set per cycle (:meth:`update`), swapped in whole under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: list[GaugeMetricFamily] = self._empty()

    @staticmethod
    def _empty() -> list[GaugeMetricFamily]:
        families: list[GaugeMetricFamily] = [
            GaugeMetricFamily(name, doc, labels=[QUEUE, "resource", "unit"])
            for name, (_, doc) in VECTORS.items()
        ]
        families += [GaugeMetricFamily(name, doc, labels=[QUEUE]) for name, doc in SCALARS.items()]
        families.append(
            GaugeMetricFamily(
                PODGROUPS, "Podgroups of the queue by state (running, waiting)", labels=[QUEUE, "state"]
            )
        )
        families.append(
            GaugeMetricFamily(
                UNSCHEDULABLE_PODGROUPS, "Podgroups the last cycle could not start", labels=[QUEUE]
            )
        )
        families.append(
            GaugeMetricFamily(
                UNSCHEDULABLE_PODS,
                "Waiting pods of the podgroups the last cycle could not start",
                labels=[QUEUE],
            )
        )
        return families

    def describe(self) -> Iterable[Metric]:
        return self._empty()

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            return list(self._families)

    def update(
        self, rows: list[QueueRow], resources: list[str], unschedulable: dict[str, tuple[int, int]]
    ) -> None:
        """Replace every series with those of ``rows`` (resource columns named by ``resources``) and
        ``unschedulable`` (leaf queue -> podgroups, pods)."""
        families = {f.name: f for f in self._empty()}
        shown = [i for i, name in enumerate(resources) if name != "pods"]
        for row in rows:
            for metric, (attr, _) in VECTORS.items():
                vec = getattr(row, attr)
                if vec is None:
                    continue
                fam = families[metric]
                for i in shown:
                    value = float(vec[i])
                    if np.isfinite(value):  # an unlimited capability has no series
                        fam.add_metric([row.name, resources[i], unit_of(resources[i])], value / 1000.0)
            if row.share is not None:
                families["corral_queue_share"].add_metric([row.name], row.share)
            if row.overused is not None:
                families["corral_queue_overused"].add_metric([row.name], 1.0 if row.overused else 0.0)
            families["corral_queue_weight"].add_metric([row.name], row.weight)
            families[PODGROUPS].add_metric([row.name, "running"], row.running)
            families[PODGROUPS].add_metric([row.name, "waiting"], row.waiting)
            groups, pods = unschedulable.get(row.name, (0, 0))
            families[UNSCHEDULABLE_PODGROUPS].add_metric([row.name], groups)
            families[UNSCHEDULABLE_PODS].add_metric([row.name], pods)
        with self._lock:
            self._families = list(families.values())


def unschedulable_by_queue(cluster: Cluster, decisions: Decisions) -> dict[str, tuple[int, int]]:
    """Per leaf queue: the podgroups of the cycle's ``unschedulable`` decisions and their managed pods
    still waiting (the cluster in the session's end state, as :func:`run_cycle` leaves it)."""
    return _by_queue(
        cluster, decisions, lambda job: sum(1 for t in job.tasks if t.managed and t.status in _WAITING)
    )


def unschedulable_kept(
    cluster: Cluster, decisions: Decisions, waiting: dict[str, int]
) -> dict[str, tuple[int, int]]:
    """:func:`unschedulable_by_queue` from each job's waiting pods as built (``waiting``, kept by the
    model: :class:`~corral.kube.jobfacts.JobFacts`) and the pods the cycle's operations moved
    (``decisions.touched``, each with its state before): the same counts, at the cost of the decisions."""
    moved: Tally[str] = Tally()
    for t, before, _nominated in decisions.touched or ():
        if t.managed and t.job is not None:
            moved[t.job.uid] += (t.status in _WAITING) - (before in _WAITING)
    return _by_queue(cluster, decisions, lambda job: waiting.get(job.uid, 0) + moved.get(job.uid, 0))


def _by_queue(
    cluster: Cluster, decisions: Decisions, waiting_pods: Callable[[Job], int]
) -> dict[str, tuple[int, int]]:
    """Per leaf queue: the podgroups of ``decisions.unschedulable`` and ``waiting_pods`` of each."""
    groups: Tally[str] = Tally()
    pods: Tally[str] = Tally()
    for u in decisions.unschedulable:
        job = cluster.jobs.get(u.podgroup)
        if job is None:
            continue
        groups[job.queue] += 1
        pods[job.queue] += waiting_pods(job)
    return {q: (groups[q], pods[q]) for q in groups}


class QueueOutcomes:
    """The counters and the latency histogram of what the applier wrote, by queue."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.binds = Counter(
            "corral_binds",
            "Binds written, by the pod's queue and result",
            [QUEUE, "result"],
            registry=registry,
        )
        self.evictions = Counter(
            "corral_evictions",
            "Evictions written, by the pod's queue, the action that chose it and result",
            [QUEUE, "action", "result"],
            registry=registry,
        )
        self.latency = Histogram(
            "corral_pod_scheduling_duration_seconds",
            "Time from a pod's creation to the end of the apply phase that bound it",
            [QUEUE],
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )

    def observe(self, cluster: Cluster, decisions: Decisions, report: ApplyReport, end: float) -> None:
        """Count the outcomes of ``report``; ``end`` is the end of the apply phase on the cycle's clock."""
        written = {kind: report.outcomes.get(kind, {}) for kind in ("binds", "evictions")}
        if not any(written.values()):
            return
        wanted = {p for outcomes in written.values() for pods in outcomes.values() for p in pods}
        # the pods the cycle bound or evicted are among those its operations changed; only a released
        # gang's pods (evicted by the applier, not the cycle) are looked for among every pod
        tasks = {t.key: t for t, _s, _n in decisions.touched or () if t.key in wanted}
        if len(tasks) < len(wanted):
            tasks.update({t.key: t for t in cluster.tasks.values() if t.key in wanted and t.key not in tasks})

        def queue(pod: str) -> str:
            task = tasks.get(pod)
            return task.job.queue if task is not None and task.job is not None else ""

        for result, pods in written["binds"].items():
            for pod in pods:
                q = queue(pod)
                self.binds.labels(q, result).inc()
                task = tasks.get(pod)
                if result == "done" and task is not None and task.creation > 0:
                    self.latency.labels(q).observe(max(0.0, end - task.creation))
        action = {e.pod: e.action for e in decisions.evictions}
        for result, pods in written["evictions"].items():
            for pod in pods:
                self.evictions.labels(queue(pod), action.get(pod, "gang-release"), result).inc()
