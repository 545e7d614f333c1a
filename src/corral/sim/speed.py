"""The simulator's job-speed model (``simulation.speed`` of a configuration; off by default).

Without it every job progresses at one second of work per second while its gang runs, wherever it
landed. With it, a running job's **rate** is

    rate = gpu_factor(class, GPU type) × elastic_speedup(class, pods ÷ minMember) ÷ spread(class, level)

and its ``duration`` from the trace is work: the seconds it takes at rate 1 (one node's worth of
consolidation, the reference GPU type, its minimum of pods). The rate is worked out again whenever
the job's running pods change — at its start, when elastic pods start or are evicted, after a stop and
resume — and the work done so far is kept, so a rate change mid-run is exact: the completion moves to
``now + work left ÷ new rate``.

**Spread.** The *level* of a placement is 0 when every running pod of the job is on one node; else the
lowest HyperNode tier with one HyperNode holding all its nodes (Volcano's ``highestTierAllowed``
counts tiers the same way); else one above the highest tier (the gang spans top-tier domains — and
on a cluster without HyperNodes, any gang on several nodes is level 1). ``spread`` gives per model
class a slowdown factor per level; a level with no entry takes the nearest lower level's factor, and
level 0 is always 1. A configured ``spread`` replaces the built-in table whole: a class it does not list
uses its ``default`` row, or runs at full speed when it has none (``{default: {1: 1}}`` counts spans
without slowing anything).

The built-in factors are measured, not guessed: Pollux's artifact (Qiao et al., OSDI '21,
``petuum/adaptdl`` ``simulator/traces/<app>/placements.csv``) records the step time of each
application at each placement and local batch size on nodes of 4 GPUs. The factor of a class is the
median, over the measured batch sizes, of step time on four nodes × 1 GPU over step time on one node
× 4 GPUs (placements ``1111`` and ``4``): ``imagenet`` (ResNet-50) 1.03, ``cifar10`` (ResNet-18)
1.19, ``yolov3`` 1.39, ``bert`` 1.77, and 1.29 for every other class (the median of the four). The
measurements are of one flat network, so the built-in factors are the same at every level above the
node; a factor per tier is the configuration's to give. Tiresias' simulator does not model this at
all (its README: it "can't simulate the performance impact from different placement schemes"), and
Lucid's simulator places consolidated without a speed penalty, and in Blox's simulation
(``blox/deployment/grpc_client_rm.py``) a job's iteration time does not depend on its placement;
Tiresias' paper is the source of the observation that the sensitivity depends on the model (its skew
of tensor sizes).

**GPU type** (Gavel, Narayanan et al., OSDI '20). ``throughputs`` names a Gavel throughput table — the
JSON of Gavel's ``scheduler/*throughputs*.json``: worker type -> job type (``"ResNet-50 (batch size
64)"`` or ``"('ResNet-50 (batch size 64)', 4)"`` with a scale factor) -> ``{"null": steps per second,
...}`` (the other keys, co-location throughputs, are not read). A node's type is the value of a node
label (``label``, default ``nvidia.com/gpu.product``, the label NVIDIA's GPU Feature Discovery
writes, e.g. ``Tesla-V100-SXM2-16GB``) matched to a worker type of the table: the same name, else the
longest worker name the value contains (case and ``-``/``_``/space ignored). The factor is the
class's throughput on that type over its throughput on ``reference`` (default ``v100``, the type
Gavel's homogeneous Philly runs simulate): the scale-factor row of the job's GPU count, else the plain
row, else the scale-1 row. A gang on several types runs at its slowest (synchronous training); a node
without a matching type, or a class the table lacks, runs at the reference speed.

**Elastic pods.** ``elastic`` gives per model class a speed-up curve: points ``[pods ÷ minMember,
speed-up]``, linear between points and flat beyond the ends. Without one, extra pods do not make a job
faster (corral's behaviour without the model).

**Model class.** The PodGroup annotation ``corral.io/model-class``, which the trace loaders write from
the trace's own field: Gavel's ``job_type``, Tiresias' ``model_name``, Pollux's ``application``,
corral's ``model_class`` column. A job without one is of class ``default``. A class with its own
entry in ``spread`` or ``elastic`` uses it; any other uses the ``default`` entry.

**Accounting.** Per job the widest level it ran at (``span``: ``node``, ``tier<N>`` or ``cluster``)
and the GPU-hours lost to spread: over each stretch of its runs, wall time × GPUs of its running pods
× (1 − 1 ÷ spread factor), the GPU-time that consolidated placement would not have needed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from corral.model import TaskStatus
from corral.model.annotations import MODEL_CLASS
from corral.model.quantity import MILLI
from corral.model.resources import GPU
from corral.sim.simjob import SimJob, SpeedState

if TYPE_CHECKING:
    from corral.model import Cluster, Job
    from corral.sim.result import JobRecord

__all__ = [
    "DEFAULT_CLASS",
    "GPU_LABEL",
    "SPREAD_DEFAULTS",
    "SpeedModel",
    "SpeedTracker",
    "placement_label",
    "placement_metrics",
    "span_label",
]

DEFAULT_CLASS = "default"
GPU_LABEL = "nvidia.com/gpu.product"
#: class -> ((level, slowdown), ...): Pollux's placements.csv, medians of step time 1111 / 4 (module doc)
SPREAD_DEFAULTS: dict[str, tuple[tuple[int, float], ...]] = {
    DEFAULT_CLASS: ((1, 1.29),),
    "imagenet": ((1, 1.03),),
    "cifar10": ((1, 1.19),),
    "yolov3": ((1, 1.39),),
    "bert": ((1, 1.77),),
}
Curve = tuple[tuple[float, float], ...]
Table = Mapping[str, Mapping[tuple[str, "int | None"], float]]


class SpeedModel:
    """The factors of the model (see the module doc); built by :func:`corral.sim.speed_config.speed_options`.

    ``spread``: class -> ((level, factor), ...) ascending (None: the built-in factors; a given table
    replaces them whole); ``throughputs``: worker type -> (job type, scale factor or None) -> steps per
    second; ``elastic``: class -> ((pods ÷ minMember, speed-up), ...) ascending."""

    __slots__ = ("elastic", "label", "reference", "source", "spread", "throughputs")

    def __init__(
        self,
        spread: Mapping[str, tuple[tuple[int, float], ...]] | None = None,
        throughputs: Table | None = None,
        reference: str = "v100",
        label: str = GPU_LABEL,
        elastic: Mapping[str, Curve] | None = None,
        source: str = "",
    ) -> None:
        self.spread = dict(SPREAD_DEFAULTS if spread is None else spread)
        self.throughputs = throughputs or {}
        self.reference, self.label = reference, label
        self.elastic = dict(elastic or {})
        self.source = source

    def __str__(self) -> str:
        """What meta.json records: the factors in short, the throughput table by its file."""
        spread = "; ".join(
            f"{k}: " + ", ".join(f"level {lv} x{f:g}" for lv, f in v) for k, v in sorted(self.spread.items())
        )
        parts = [f"spread {spread}"]
        if self.throughputs:
            parts.append(
                f"throughputs {self.source or 'table'} (reference {self.reference}, label {self.label})"
            )
        if self.elastic:
            parts.append("elastic " + ", ".join(sorted(self.elastic)))
        return "; ".join(parts)

    __repr__ = __str__

    def spread_factor(self, klass: str, level: int) -> float:
        """The slowdown of ``klass`` at ``level``: from its own row, else the ``default`` row, else none
        (1); 1 at level 0, and a level without an entry takes the nearest lower one's."""
        if level <= 0:
            return 1.0
        factor = 1.0
        for at, value in self.spread.get(klass) or self.spread.get(DEFAULT_CLASS) or ():
            if at > level:
                break
            factor = value
        return factor

    def gpu_factor(self, klass: str, workers: Iterable[str | None], gpus: int) -> float:
        """Throughput of ``klass`` on the slowest of ``workers`` over its throughput on the reference."""
        if not self.throughputs:
            return 1.0
        base = self._throughput(self.reference, klass, gpus)
        if base is None:
            return 1.0
        factors = []
        for worker in set(workers):
            rate = None if worker is None else self._throughput(worker, klass, gpus)
            factors.append(1.0 if rate is None else rate / base)
        return min(factors, default=1.0)

    def _throughput(self, worker: str, klass: str, gpus: int) -> float | None:
        table = self.throughputs.get(worker)
        if table is None:
            return None
        for key in ((klass, gpus), (klass, None), (klass, 1)):
            value = table.get(key)
            if value is not None:
                return value if value > 0 else None  # 0: the job type does not run there; not read
        return None

    def elastic_speedup(self, klass: str, ratio: float) -> float:
        """The speed-up of ``klass`` running ``ratio`` times its minimum of pods (1 without a curve)."""
        curve = self.elastic.get(klass) or self.elastic.get(DEFAULT_CLASS)
        if not curve:
            return 1.0
        if ratio <= curve[0][0]:
            return curve[0][1]
        for (x0, y0), (x1, y1) in itertools.pairwise(curve):
            if ratio <= x1:
                return y0 + (y1 - y0) * (ratio - x0) / (x1 - x0)
        return curve[-1][1]

    def match_worker(self, value: str | None) -> str | None:
        """The worker type of the table a node label value names (see the module doc), or None."""
        if not value or not self.throughputs:
            return None
        text = _squash(value)
        by_name = {_squash(w): w for w in self.throughputs}
        if text in by_name:
            return by_name[text]
        inside = [k for k in by_name if k and k in text]
        return by_name[max(inside, key=lambda k: (len(k), k))] if inside else None


def _squash(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch not in "-_ ")


class SpeedTracker:
    """The engine's side of the model on one cluster: it reads placements and keeps each job's
    :class:`~corral.sim.simjob.SpeedState` (``SimJob.speed``). Times are the engine's clock."""

    def __init__(self, model: SpeedModel, cluster: Cluster) -> None:
        self.model, self.cluster = model, cluster
        tree = cluster.hypernodes
        self.top = max(tree.tiers) if tree else 0
        self._index = tree.index() if tree else None
        values = cluster.nodes.label_values(model.label) if model.throughputs else []
        cache: dict[str | None, str | None] = {}
        self._workers = [cache.setdefault(v, model.match_worker(v)) for v in values]

    def label(self, level: int) -> str:
        return span_label(level, self.top)

    def level(self, rows: Sequence[int]) -> int:
        """The level of a placement on node ``rows`` (see the module doc)."""
        if len(rows) <= 1:
            return 0
        if self._index is not None:
            holding = self._index.containing(np.asarray(rows, dtype=np.int64), len(self.cluster.nodes))
            if holding.any():
                return int(self._index.tier[holding].min())
        return self.top + 1

    def _placement(self, sim: SimJob) -> tuple[float, float, float, int]:
        """(rate, spread factor, GPUs of the running pods, level) of ``sim``'s running pods now."""
        return self.placement_of(sim.job, sim.gpus)

    def placement_of(self, job: Job, total_gpus: float) -> tuple[float, float, float, int]:
        """:meth:`_placement` of ``job`` (``total_gpus``: the job's GPUs) on any cluster of the same nodes
        (the forecast's plan asks it of the jobs it starts on its copy)."""
        running = [t for t in job.tasks if t.status is TaskStatus.RUNNING]
        rows = sorted({t.node for t in running})
        level = self.level(rows)
        klass = job.annotations.get(MODEL_CLASS) or DEFAULT_CLASS
        model = self.model
        spread = model.spread_factor(klass, level)
        workers = [self._workers[r] for r in rows] if self._workers else []
        rate = model.gpu_factor(klass, workers, round(total_gpus))
        rate *= model.elastic_speedup(klass, len(running) / max(job.min_member, 1))
        gpu = self.cluster.resources.get(GPU)
        gpus = 0.0 if gpu is None else sum(float(t.request[gpu]) for t in running) / MILLI
        return rate / spread, spread, gpus, level

    def _apply(self, state: SpeedState, placement: tuple[float, float, float, int]) -> None:
        state.rate, state.spread, state.gpus, state.level = placement
        state.widest = max(state.widest if state.widest is not None else 0, state.level)

    def begin(self, sim: SimJob, now: float) -> float:
        """A run starts (progress from ``sim.since``, after any restore): its rate from the placement;
        returns when it completes if nothing changes."""
        state = sim.speed
        if state is None:
            state = sim.speed = SpeedState()
        assert sim.since is not None
        state.mark, state.done = sim.since, 0.0
        self._apply(state, self._placement(sim))
        return self._finish(sim, state)

    def rerate(self, sim: SimJob, now: float) -> float | None:
        """The running job's pods changed: close the stretch at the old placement and read the new one;
        the new completion time when the rate changed (None: the old completion stands)."""
        state = sim.speed
        assert state is not None
        placement = self._placement(sim)
        if placement == (state.rate, state.spread, state.gpus, state.level):
            return None
        old = state.rate
        self._advance(state, now)
        self._apply(state, placement)
        return None if state.rate == old else self._finish(sim, state)

    def end(self, sim: SimJob, now: float) -> float:
        """The run stops (restart or completion): the work it did."""
        state = sim.speed
        assert state is not None
        self._advance(state, now)
        return state.done

    @staticmethod
    def progress(sim: SimJob, now: float) -> tuple[float, float]:
        """A running job's work done by ``now`` (every run) and when its progress goes on (``now``, or
        the end of the restore it is in)."""
        state = sim.speed
        assert state is not None
        ran = (now - state.mark) * state.rate if now > state.mark else 0.0
        return sim.progress + state.done + ran, max(now, state.mark)

    @staticmethod
    def lost(sim: SimJob, now: float) -> float:
        """GPU-seconds ``sim`` has lost to spread up to ``now`` (a run still going counted to now)."""
        state = sim.speed
        if state is None:
            return 0.0
        ongoing = sim.since is not None and now > state.mark
        return state.lost + ((now - state.mark) * state.gpus * (1.0 - 1.0 / state.spread) if ongoing else 0.0)

    @staticmethod
    def _advance(state: SpeedState, now: float) -> None:
        if now > state.mark:
            wall = now - state.mark
            state.done += wall * state.rate
            state.lost += wall * state.gpus * (1.0 - 1.0 / state.spread)
            state.mark = now

    @staticmethod
    def _finish(sim: SimJob, state: SpeedState) -> float:
        left = max(sim.spec.duration - sim.progress - state.done, 0.0)
        return state.mark + left / state.rate if state.rate > 0 else math.inf


def span_label(level: int, top: int) -> str:
    """``node`` (level 0), ``tier<N>`` (held by one tier-N HyperNode) or ``cluster`` (more than any one
    HyperNode holds, or several nodes on a cluster without HyperNodes)."""
    if level <= 0:
        return "node"
    return "cluster" if level > top else f"tier{level}"


def placement_metrics(jobs: Sequence[JobRecord]) -> dict[str, float | int]:
    """What placement cost a run with the speed model (empty without): ``spread_gpu_hours`` and, per
    span, the number of gangs (jobs of more than one pod) whose widest run had it (``gangs_span_<span>``:
    node, tier1, tier2, ..., cluster)."""
    measured = [j for j in jobs if j.span]
    if not measured:
        return {}
    out: dict[str, float | int] = {"spread_gpu_hours": sum(j.spread_gpu_hours for j in measured)}
    counts: dict[str, int] = {}
    for job in measured:
        if job.pods > 1:
            counts[job.span] = counts.get(job.span, 0) + 1
    order = {"node": (0, 0), "cluster": (2, 0)}
    for span in sorted(counts, key=lambda s: order.get(s, (1, int(s[4:]) if s[4:].isdigit() else 0))):
        out[f"gangs_span_{span}"] = counts[span]
    return out


def placement_label(key: str) -> str | None:
    """A person's label for a key of :func:`placement_metrics` (None for any other key)."""
    if key == "spread_gpu_hours":
        return "GPU-hours lost to spread"
    if not key.startswith("gangs_span_"):
        return None
    span = key[len("gangs_span_") :]
    if span == "node":
        return "gangs on one node"
    if span == "cluster":
        return "gangs across top-tier domains"
    return f"gangs within one {span.replace('tier', 'tier-')} domain"
