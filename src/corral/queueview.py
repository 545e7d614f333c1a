"""``corral queues``: the queue tree as the configuration sees it — the ``vcctl queue list`` an operator
expects, with what the fair-share plugin computes.

Each row is one queue (children indented under their parent): its state, weight and priority; what it
deserves, holds and its share of what it deserves; its guarantee and capability; the demand of its
waiting pods; its running and waiting podgroups; whether it is overused. Deserved and share come from
the first plugin of the configuration that computes them (``proportion`` or ``capacity``, in tier
order), read from a session opened on the snapshot exactly as a cycle opens one — so the numbers are the
ones the cycle's decisions use. Without either plugin there is no deserved share: those columns are
empty and the source says so. ``corral run`` exports the same rows as its per-queue metrics
(:mod:`corral.kube.queuemetrics`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from corral.framework.config import Config
from corral.framework.extension import Overused, QueueReport
from corral.framework.queries import job_usage, queue_usage
from corral.framework.session import Session
from corral.model import Cluster, Job, Queue, TaskStatus
from corral.model.quantity import format_quantity
from corral.model.resources import PODS
from corral.registry import REGISTRY

__all__ = ["COLUMNS", "QueueRow", "queue_rows", "queue_table_rows", "view_config"]

#: the columns of :func:`queue_table_rows` (``corral queues`` and the operator's page)
COLUMNS = (
    "queue",
    "state",
    "weight",
    "deserved",
    "allocated",
    "share",
    "guarantee",
    "capability",
    "pending",
    "running",
    "waiting",
)

_WAITING = (TaskStatus.PENDING, TaskStatus.PIPELINED)


@dataclass(frozen=True)
class QueueRow:
    """One queue; vectors are milli-units by the cluster's resource columns (``inf``: unlimited)."""

    name: str
    depth: int  # 0 for a root queue
    parent: str
    state: str
    weight: float
    priority: int
    deserved: np.ndarray | None  # None: no plugin computes it
    allocated: np.ndarray
    share: float | None
    guarantee: np.ndarray
    capability: np.ndarray
    pending: np.ndarray  # requests of the queue's waiting pods (leaf queues; summed up the tree)
    running: int  # podgroups at their minimum (summed up the tree)
    waiting: int  # podgroups below it with pods waiting
    overused: bool | None = None  # None: no plugin computes deserved shares

    def to_json(self, names: list[str]) -> dict[str, Any]:
        def vec(v: np.ndarray | None) -> dict[str, str] | None:
            if v is None:
                return None
            return {n: _amount(x, n) for n, x in zip(names, v) if x != 0 and n != PODS}

        limits = {n: _amount(x, n) for n, x in zip(names, self.capability) if np.isfinite(x) and n != PODS}

        return {
            "name": self.name,
            "parent": self.parent or None,
            "state": self.state,
            "weight": self.weight,
            "priority": self.priority,
            "deserved": vec(self.deserved),
            "allocated": vec(self.allocated),
            "share": self.share,
            "guarantee": vec(self.guarantee),
            "capability": limits,  # only the resources it limits
            "pending": vec(self.pending),
            "runningPodgroups": self.running,
            "waitingPodgroups": self.waiting,
            "overused": self.overused,
        }


def queue_rows(cluster: Cluster, config: Config, now: float) -> tuple[list[QueueRow], str]:
    """Every queue of ``cluster`` in tree order, and where deserved shares come from (a plugin name, or
    a sentence saying none is configured). A session is opened and discarded: nothing is decided."""
    session = Session(cluster, view_config(config), REGISTRY, now, 1, explain=False)
    plugin = next(iter(session.implementers("QueueReport")), None)
    n = len(cluster.resources)
    report = plugin.queue_report() if plugin is not None else {}
    if plugin is not None:
        allocated = {name: np.asarray(r.allocated, dtype=float) for name, r in report.items()}
        source = next(pc.name for row in session.tiers for p, pc in row if p is plugin)
    else:
        allocated = _summed_up(cluster, queue_usage(cluster, job_usage(cluster)))
        source = "no deserved shares: the configuration has neither proportion nor capacity"
    pending, running, waiting = _demand(cluster)
    pending, running, waiting = (
        _summed_up(cluster, pending),
        _summed_up(cluster, running),
        _summed_up(cluster, waiting),
    )
    rows = []
    for name, depth in _tree_order(cluster):
        q = cluster.queues[name]
        deserved = share = overused = None
        got = report.get(name)
        if got is not None and got.deserved is not None:
            deserved, share = np.asarray(got.deserved, dtype=float), got.share
            overused = _overused(session, q, share)
        rows.append(
            QueueRow(
                name=name,
                depth=depth,
                parent=q.parent or "",
                state=q.state or "Open",
                weight=q.weight,
                priority=q.priority,
                deserved=deserved,
                allocated=allocated.get(name, np.zeros(n)),
                share=share,
                guarantee=q.guarantee if q.guarantee is not None else np.zeros(n),
                capability=q.capability if q.capability is not None else np.full(n, np.inf),
                pending=pending.get(name, np.zeros(n)),
                running=int(running.get(name, np.zeros(1))[0]),
                waiting=int(waiting.get(name, np.zeros(1))[0]),
                overused=overused,
            )
        )
    return rows, source


def view_config(config: Config) -> Config:
    """``config`` with only the plugins the view reads, in their tiers and with their arguments and
    switches: those that report deserved shares (QueueReport) and those that answer Overused.
    What they compute when a session opens reads the cluster alone, never another plugin, so the numbers
    are the full session's, without the cost of opening every other plugin (``corral run`` computes the
    view for its metrics while it schedules)."""

    def kept(name: str) -> bool:
        cls = REGISTRY.plugin_class(name)
        return cls is not None and (issubclass(cls, QueueReport) or issubclass(cls, Overused))

    tiers = tuple(row for row in (tuple(pc for pc in tier if kept(pc.name)) for tier in config.tiers) if row)
    return replace(config, tiers=tiers)


def _overused(session: Session, queue: Queue, share: float) -> bool:
    """Whether ``queue`` holds at least what it deserves, as the cycle's Overused check answers it
    (``proportion``: every resource it deserves is held, Volcano's ``deserved.LessEqual(allocated)``).
    Where no plugin of the configuration answers Overused (``capacity``), a share above 1, as Volcano's
    capacity plugin reports ``volcano_queue_overused`` when its session closes."""
    if session.fns("Overused"):
        return session.overused(queue)
    return share > 1.0


def _demand(cluster: Cluster) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per leaf queue: the requests of its waiting pods, its running and its waiting podgroups."""
    n = len(cluster.resources)
    pending: dict[str, np.ndarray] = {}
    running: dict[str, np.ndarray] = {}
    waiting: dict[str, np.ndarray] = {}
    for job in cluster.jobs.values():
        if job.queue not in cluster.queues:
            continue
        asks = [t.request for t in job.tasks if t.managed and t.status in _WAITING]
        if asks:
            pending[job.queue] = pending.get(job.queue, np.zeros(n)) + np.sum(asks, axis=0)
        counts = running if _started(job) else waiting if asks else None
        if counts is not None:
            counts[job.queue] = counts.get(job.queue, np.zeros(1)) + 1
    return pending, running, waiting


def _started(job: Job) -> bool:
    return job.ready_count() >= job.min_member and any(t.status is TaskStatus.RUNNING for t in job.tasks)


def _summed_up(cluster: Cluster, leaf: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Leaf values added into every ancestor (as the hierarchical plugins count a parent's use)."""
    out = {name: v.copy() for name, v in leaf.items()}
    for name, v in leaf.items():
        if name in cluster.queues and not cluster.queues[name].children:
            for parent in cluster.queue_chain(name)[1:]:
                out[parent] = out.get(parent, np.zeros_like(v)) + v
    return out


def _tree_order(cluster: Cluster) -> list[tuple[str, int]]:
    queues = cluster.queues
    out: list[tuple[str, int]] = []

    def visit(name: str, depth: int) -> None:
        out.append((name, depth))
        for child in sorted(queues[name].children):
            if child in queues:
                visit(child, depth + 1)

    for name in sorted(n for n, q in queues.items() if not q.parent or q.parent not in queues):
        visit(name, 0)
    return out


def _amount(milli: float, resource: str) -> str:
    return "unlimited" if not np.isfinite(milli) else format_quantity(milli, resource)


def queue_table_rows(rows: list[QueueRow], names: list[str]) -> list[list[str]]:
    """The rows as table cells: one cell per column, vectors as ``gpu 8, cpu 32`` (zeros left out)."""
    short = {"nvidia.com/gpu": "gpu"}

    def vec(v: np.ndarray | None, empty: str = "-") -> str:
        if v is None:
            return empty
        parts = [f"{short.get(n, n)} {_amount(x, n)}" for n, x in zip(names, v) if x != 0 and n != PODS]
        return ", ".join(parts) or "0"

    def limit(v: np.ndarray) -> str:  # the finite entries; a capability of 0 is shown
        parts = [
            f"{short.get(n, n)} {_amount(x, n)}" for n, x in zip(names, v) if np.isfinite(x) and n != PODS
        ]
        return ", ".join(parts) or "unlimited"

    cells = []
    for r in rows:
        cells.append(
            [
                "  " * r.depth + r.name,
                r.state,
                f"{r.weight:g}",
                vec(r.deserved),
                vec(r.allocated),
                "-" if r.share is None else f"{r.share:.2f}",
                vec(r.guarantee),
                limit(r.capability),
                vec(r.pending),
                str(r.running),
                str(r.waiting),
            ]
        )
    return cells
