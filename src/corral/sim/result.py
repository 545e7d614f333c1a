"""The flat records a simulation produces (DESIGN.md convention 7: they load straight into a DataFrame).

The engine fills a :class:`SimResult`; the report module reads it. Times are simulated seconds from the
start of the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ClusterSample", "JobRecord", "QueueSample", "SimResult", "run_end"]


@dataclass
class JobRecord:
    """What one job experienced. ``status`` is ``completed``, ``running``, ``pending`` (still waiting at
    the end of the run) or ``never_fits`` (larger than the cluster or its queue could ever give).
    ``wait`` is first start minus submit; ``jct`` is end minus submit; both ``None`` when not reached.
    ``reason``: the last unschedulable reason the job had while it waited ("" if it never waited).
    ``notes``: fields of the job the configuration does not act on (:mod:`corral.framework.notices`)."""

    job: str
    queue: str
    priority: int
    pods: int
    min_member: int
    gpus: float
    duration: float
    submit: float
    first_start: float | None = None
    end: float | None = None
    wait: float | None = None
    jct: float | None = None
    restarts: int = 0
    evictions: int = 0
    gpu_hours_lost: float = 0.0
    status: str = "pending"
    #: pods of this job ``consolidate`` moved (of ``evictions``), and the GPU-hours of progress the
    #: restarts they caused lost (of ``gpu_hours_lost``)
    moves: int = 0
    gpu_hours_lost_to_moves: float = 0.0
    reason: str = ""  # the last reason it waited (e.g. a node locked for another job)
    #: the first expected start a forecast gave it while it waited, and when that forecast was made
    #: (``simulation.forecast``; None without one)
    expected_start: float | None = None
    expected_at: float | None = None
    #: restarts caused by the scheduler's own evictions (preempt, reclaim, ...), of ``restarts``
    preemptions: int = 0
    #: GPU-hours spent restoring after stops (``resume_overhead``), beside ``gpu_hours_lost``
    restore_gpu_hours: float = 0.0
    #: a completed job's time without its gang running: the first wait plus every wait after a stop
    #: (``jct`` minus the time it held its nodes at its minimum, restores included)
    queue_time: float | None = None
    notes: str = ""  # what the configuration did not act on (e.g. a topology no plugin enforced)
    #: with the speed model (``simulation.speed``): the widest placement of any of its runs — ``node``,
    #: ``tier<N>`` (one tier-N HyperNode held it) or ``cluster`` — and the GPU-hours its spread cost
    #: (wall time x GPUs x (1 - 1 / slowdown)); "" and 0 without the model or before it ran
    span: str = ""
    spread_gpu_hours: float = 0.0
    #: where a gang (two or more pods) ran when it first started: the smallest topology domain holding
    #: all its placed pods — "node", "tier 1", "tier 2", ... (hypernode tiers), "cluster" (no hypernode
    #: holds them), "nodes" (a cluster without hypernodes); "" for a one-pod job or one never started
    placement: str = ""


@dataclass
class QueueSample:
    """One queue at one instant: GPUs allocated and its allocated and deserved shares of the cluster."""

    time: float
    queue: str
    allocated_gpus: float
    allocated_share: float
    deserved_share: float
    pending_jobs: int


@dataclass
class ClusterSample:
    """The cluster at one instant. ``pending_gpus``: GPUs asked for by the pods of active jobs that hold
    no node (the demand waiting beside the GPUs in use). ``fragmented_gpus``: free GPUs on live nodes
    that cannot host one whole waiting pod of the most common GPU size (the size is re-read on the queue
    sampling grid; 0 while no pod waits). ``evictions`` and ``restarts``: pods evicted and gangs
    restarted since the start of the run (cumulative counts, so their plot shows when they happened)."""

    time: float
    gpu_used: float
    gpu_total: float
    utilisation: float
    pending_jobs: int
    running_jobs: int
    pending_gpus: float = 0.0
    fragmented_gpus: float = 0.0
    evictions: int = 0
    restarts: int = 0


@dataclass
class SimResult:
    """Everything one simulation run produced, plus what it was run on (``meta``: config name, cluster and
    workload descriptions, simulated end time, wall time, event count, seed)."""

    jobs: list[JobRecord] = field(default_factory=list)
    queues: list[QueueSample] = field(default_factory=list)
    cluster: list[ClusterSample] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def run_end(result: SimResult) -> float:
    """When the run ended: ``meta["end_time"]`` when set, else the latest time the result mentions."""
    end = result.meta.get("end_time")
    if isinstance(end, (int, float)) and not isinstance(end, bool) and math.isfinite(end):
        return float(end)
    times = [s.time for s in result.cluster] + [s.time for s in result.queues]
    times += [j.end for j in result.jobs if j.end is not None] + [j.submit for j in result.jobs]
    return max(times, default=0.0)
