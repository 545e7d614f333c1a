"""The extension points of the scheduling core (SPEC.md §2), one typed Protocol each.

A plugin extends a point by implementing its method; the Session builds one list per point, tier by tier,
when it opens (DESIGN.md convention 1). The docstring of each point states its contract and how the
answers of several plugins combine ("tier semantics"), following Volcano's ``framework/session_plugins.go``
unless noted. Points added by the seeds name their seed.

Switches: a point listed with a Volcano switch (``enableJobOrder`` ...) is skipped for a plugin whose
configuration sets that switch to false.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from corral.framework.hints import CacheHints
from corral.model.resources import EPS

if TYPE_CHECKING:
    from corral.model import Job, Queue, Task

__all__ = [
    "POINTS",
    "Allocatable",
    "AllocatableReason",
    "CacheHints",
    "DisruptionBudget",
    "Domain",
    "EnqueueReason",
    "EventHandler",
    "GangPredicate",
    "GangSearchSpace",
    "GangVictimSelector",
    "HyperNodeOrder",
    "JobEnqueueable",
    "JobEnqueued",
    "JobOrder",
    "JobOrderKey",
    "JobPipelined",
    "JobReady",
    "JobStarving",
    "JobValid",
    "KeyClock",
    "KeyHorizon",
    "KeyedJobOrder",
    "LineRefusal",
    "NodeOrder",
    "Overused",
    "OverusedReason",
    "Point",
    "Predicate",
    "PredicateReason",
    "Preemptable",
    "Preemptive",
    "Purpose",
    "QueueAmounts",
    "QueueLimit",
    "QueueOrder",
    "QueueReport",
    "QueueRule",
    "QueueShare",
    "ReasonNote",
    "Reclaimable",
    "ReservedNodes",
    "Resolvable",
    "ScenarioValidator",
    "SimulateAddTask",
    "SimulateAllocatable",
    "SimulatePredicate",
    "SimulateRemoveTask",
    "SubGroupSearchSpace",
    "TargetJob",
    "TaskOrder",
    "UnifiedEvictable",
    "VictimFilter",
    "VictimQueueOrder",
    "VictimTasks",
    "Vote",
]


class Vote(enum.IntEnum):
    """A JobEnqueueable answer."""

    REJECT = -1
    ABSTAIN = 0
    PERMIT = 1


class Purpose(enum.Enum):
    """Why a gang search space is asked for (seed 000): all feasible domains, or the top K for eviction."""

    ALLOCATE = "allocate"
    EVICT = "evict"


@dataclass(frozen=True)
class Domain:
    """A set of nodes a gang may be placed in (a hypernode, or the whole cluster with ``tier`` None)."""

    name: str
    mask: np.ndarray
    tier: int | None = None
    score: float = 0.0


# --- ordering: the first plugin (in tier order) with a non-zero answer decides -------------------------
@runtime_checkable
class JobOrder(Protocol):
    def job_order(self, a: Job, b: Job) -> int:
        """Negative if job ``a`` goes before ``b``, positive if after, 0 if this plugin cannot tell."""


@runtime_checkable
class QueueOrder(Protocol):
    def queue_order(self, a: Queue, b: Queue) -> int:
        """Negative if queue ``a`` is served before ``b`` (allocate), 0 if this plugin cannot tell."""


@runtime_checkable
class TaskOrder(Protocol):
    def task_order(self, a: Task, b: Task) -> int:
        """Negative if task ``a`` of a job is placed before ``b``."""


@runtime_checkable
class VictimQueueOrder(Protocol):
    def victim_queue_order(self, a: Queue, b: Queue) -> int:
        """Negative if queue ``a`` gives up resources before ``b`` (reclaim)."""


# --- gates --------------------------------------------------------------------------------------------
@runtime_checkable
class JobValid(Protocol):
    def job_valid(self, job: Job) -> str | None:
        """None if the job may be scheduled, else the reason it may not. The first reason wins."""


@runtime_checkable
class JobEnqueueable(Protocol):
    #: True when this plugin's REJECT of a podgroup holds for every later podgroup of its queue in
    #: JobOrder (``fifo``'s line): ``enqueue`` may then pass the later ones over without asking again
    strict_line: ClassVar[bool] = False

    def job_enqueueable(self, job: Job) -> Vote:
        """Vote on admitting a Pending job. Any REJECT rejects; a tier with a PERMIT admits; all ABSTAIN
        admits."""


@runtime_checkable
class JobReady(Protocol):
    def job_ready(self, job: Job) -> bool:
        """True when the job may start (gang: minMember and every minTaskMember met). AND over plugins."""


@runtime_checkable
class JobPipelined(Protocol):
    def job_pipelined(self, job: Job) -> bool:
        """True when the job is ready counting pipelined tasks. AND over plugins."""


@runtime_checkable
class JobStarving(Protocol):
    #: False when the answer is a function of the job's pods and annotations alone, so the clock by
    #: itself never changes it (``priority``, ``gang``); True (the safe default) when it may
    starving_moves_with_clock: ClassVar[bool] = True

    def job_starving(self, job: Job) -> bool:
        """True when the job wants more than it holds (a preemptor candidate). The first tier with a
        plugin that answers decides, AND inside it (Volcano's ``JobStarving``); no plugin means not
        starving."""


@runtime_checkable
class Allocatable(Protocol):
    def allocatable(self, queue: Queue, task: Task) -> bool:
        """May ``queue`` take ``task``'s request now (capability/deserved)? AND over plugins (why not, in
        the plugin's words: AllocatableReason)."""


@runtime_checkable
class Overused(Protocol):
    def overused(self, queue: Queue) -> bool:
        """True if the queue holds all it deserves; allocate skips it. OR over plugins (why, in the
        plugin's words: OverusedReason)."""


@runtime_checkable
class Preemptive(Protocol):
    def preemptive(self, queue: Queue, task: Task) -> bool:
        """May ``queue`` reclaim from other queues for ``task``? AND over plugins."""


# --- placement ----------------------------------------------------------------------------------------
@runtime_checkable
class Predicate(Protocol):
    def predicate(self, task: Task) -> np.ndarray:
        """A boolean mask over all nodes: where ``task`` may go, resources aside. AND over plugins (the
        reasons for messages: PredicateReason)."""


@runtime_checkable
class NodeOrder(Protocol):
    def node_order(self, task: Task, nodes: np.ndarray) -> np.ndarray:
        """Scores (higher is better) for node rows ``nodes``. Summed over plugins (BatchNodeOrder is the
        same call: every node order here is batched)."""


@runtime_checkable
class HyperNodeOrder(Protocol):
    def hypernode_order(self, job: Job, domains: Sequence[Domain]) -> np.ndarray:
        """Scores for candidate domains of a gang. Summed over plugins."""


# --- victims ------------------------------------------------------------------------------------------
@runtime_checkable
class Preemptable(Protocol):
    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task] | None:
        """Which candidates ``preemptor`` may evict in its own queue; None abstains. Within a tier the
        answers intersect; the first tier with an answer decides."""


@runtime_checkable
class Reclaimable(Protocol):
    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        """As Preemptable, across queues."""


@runtime_checkable
class UnifiedEvictable(Protocol):
    def unified_evictable(self, preemptor: Task, candidates: list[Task], action: str) -> list[Task] | None:
        """As Preemptable, for both actions (``action`` says which)."""


@runtime_checkable
class VictimTasks(Protocol):
    def victim_tasks(self) -> list[Task]:
        """Tasks a plugin wants evicted on its own account (e.g. tdm). Union over plugins."""


@runtime_checkable
class VictimFilter(Protocol):
    #: False when the answer never changes with the clock alone; True (the safe default) when it may
    #: (``minruntime``: a run's protection ends with time)
    victims_move_with_clock: ClassVar[bool] = True

    def victim_filter(self, preemptor: Job, victim: Job, action: str) -> bool:
        """Seed 002: may ``victim`` be touched at all for ``preemptor``? Job level, AND over plugins,
        asked only after the basic preemptable/reclaimable filters."""


@runtime_checkable
class ScenarioValidator(Protocol):
    def scenario_valid(
        self, preemptor: Job, victims: Sequence[Job], tasks: Sequence[Task], action: str
    ) -> bool:
        """Seed 002: sees the preemptor, every victim job and every task a scenario would evict; any
        False rejects the scenario."""


# --- gang level (seed 000) ----------------------------------------------------------------------------
@runtime_checkable
class GangPredicate(Protocol):
    def gang_predicate(self, job: Job) -> str | None:
        """Fast fail: None if the gang could ever fit, else why not (first reason wins)."""


@runtime_checkable
class GangSearchSpace(Protocol):
    def gang_search_space(self, job: Job, purpose: Purpose) -> list[Domain]:
        """Ordered feasible domains; ALLOCATE returns all, EVICT the top K. The first plugin in config
        order with a non-empty answer defines the space."""


@runtime_checkable
class GangVictimSelector(Protocol):
    def gang_victims(
        self, preemptor: Job, domain: Domain, candidates: list[Task], need: np.ndarray, action: str
    ) -> list[Task] | None:
        """Replace the default bundle selection; None defers to the next plugin or the default."""


# --- simulation (seed 003) ----------------------------------------------------------------------------
@runtime_checkable
class SimulateAddTask(Protocol):
    def simulate_add_task(self, task: Task, node: int) -> None:
        """Update derived state as if ``task`` were placed on ``node`` (dry run)."""


@runtime_checkable
class SimulateRemoveTask(Protocol):
    def simulate_remove_task(self, task: Task, node: int) -> None:
        """Update derived state as if ``task`` left ``node`` (dry run)."""


@runtime_checkable
class SimulatePredicate(Protocol):
    def simulate_predicate(self, task: Task, node: int) -> bool:
        """Would ``task`` pass this plugin's predicate on ``node`` in the simulated state? AND."""


@runtime_checkable
class SimulateAllocatable(Protocol):
    def simulate_allocatable(self, queue: Queue, task: Task) -> bool:
        """Would ``queue`` admit ``task`` in the simulated state? AND."""


# --- events (Volcano's AllocateFunc / DeallocateFunc) -------------------------------------------------
@runtime_checkable
class EventHandler(Protocol):
    def on_allocate(self, task: Task) -> None:
        """``task`` now holds resources (allocated or pipelined), or an eviction of it was reverted."""

    def on_deallocate(self, task: Task) -> None:
        """``task`` gave them up (evicted), or its allocation was reverted."""


# --- reservation (seed 001) ---------------------------------------------------------------------------
@runtime_checkable
class TargetJob(Protocol):
    def target_job(self, jobs: Sequence[Job]) -> Job | None:
        """Seed 001 "Target Job Recognition": the job to reserve nodes for among ``jobs`` (Pending or
        Inqueue podgroups with waiting pods), or None. The first plugin with an answer decides."""


@runtime_checkable
class ReservedNodes(Protocol):
    def reserved_nodes(self, target: Job, locked: np.ndarray) -> np.ndarray | None:
        """Seed 001 "Locked Nodes": the mask of nodes that should be locked for ``target`` from now on
        (``locked``: the nodes locked for it already; those left out of the answer are released). None
        abstains; the first plugin with an answer decides."""


# --- reasons, in the plugin's own words (each answers only for the point it explains) -----------------
@runtime_checkable
class PredicateReason(Protocol):
    def explain(self, task: Task) -> list[tuple[np.ndarray, str]]:
        """``[(rejected_mask, reason)]``: the nodes this plugin's Predicate rules out for ``task`` and
        why, for the no-fit reason. Concatenated in tier order; each node counts once, for the first
        reason that rules it out (kube-scheduler records the first failing filter per node)."""


@runtime_checkable
class AllocatableReason(Protocol):
    def allocatable_refusal(self, queue: Queue, task: Task) -> str | None:
        """Why this plugin's Allocatable refuses ``task`` to ``queue`` (None: no words of its own; the
        plugin is then named). Asked only of the first Allocatable plugin that refuses."""


@runtime_checkable
class LineRefusal(Protocol):
    def line_refusal(self, queue: Queue, job: Job) -> str | None:
        """Is ``job`` behind a closed line of ``queue`` (a strict order's blocked head)? Then this
        plugin's Allocatable refuses every pod of ``job`` now, for this one reason (its
        AllocatableReason for each of them); None: no such promise (the pods are asked one by one).
        Asked only of the first Allocatable plugin, so that its refusal is the first: ``allocate``
        then gives ``job`` that reason without a turn (no Statement, no placement, no pod asked)."""


@runtime_checkable
class OverusedReason(Protocol):
    def overused_reason(self, queue: Queue, task: Task) -> str | None:
        """Why an Overused ``queue`` holds ``task`` back; None when its share is not the cause (it
        deserves all the cluster has of what the pod asks for: the nodes are full). Asked only of the
        first plugin whose Overused answer is true."""


@runtime_checkable
class EnqueueReason(Protocol):
    def enqueue_refusal(self, job: Job) -> str | None:
        """Why this plugin's JobEnqueueable rejects ``job`` (None: it does not). The first plugin with
        a reason gives the job's; with none, enqueue names the queue's capability."""


@runtime_checkable
class ReasonNote(Protocol):
    def reason_note(self, job: Job, reason: str) -> str | None:
        """A note added to the reason of ``job``, which did not start this cycle (``reason``: what the
        actions said). Every plugin's note is appended in tier order, each after ``"; "`` (the
        reservation's lock and plan, seed 001)."""


# --- what eviction needs to know (SPEC.md §3.3) -------------------------------------------------------
@runtime_checkable
class Resolvable(Protocol):
    def resolvable(self, task: Task) -> np.ndarray:
        """The nodes where ``task`` could go once pods are evicted, as far as this plugin's Predicate is
        concerned. A Predicate plugin without it: its predicate mask applies as is, unless it simulates
        (SimulatePredicate: left to the dry run). AND over plugins."""


@runtime_checkable
class DisruptionBudget(Protocol):
    def violating(self, tasks: Sequence[Task]) -> list[bool]:
        """For each of ``tasks`` (evicted together, in order): would its eviction break a disruption
        budget? OR over plugins (the ``pdb`` plugin: Kubernetes PodDisruptionBudgets)."""


@dataclass(frozen=True)
class QueueLimit:
    """The queue rule of proportion/capacity for one victim queue (Volcano ``ReclaimableFn``, see
    :mod:`corral.plugins.queues`), per resource: a victim may go while the queue, counting the victims
    before it, still holds more than its line in some resource (the pod that crosses the line goes
    too), and — capacity — keeps its guarantee. A set of victims therefore passes, taken in its best
    order (its largest pod last), when in some resource what it frees less its largest pod stays below
    ``above`` (held − line, −inf where the rule does not count) and in every resource what it frees
    stays within ``keep`` (held − guarantee, inf where none)."""

    above: list[float]
    keep: list[float]

    def allows(self, total: list[float], largest: list[float]) -> bool:
        return any(s - m < a - EPS for s, m, a in zip(total, largest, self.above)) and all(
            s <= k + EPS for s, k in zip(total, self.keep)
        )


@runtime_checkable
class QueueRule(Protocol):
    def queue_rule_enabled(self) -> bool:
        """Is this plugin's Reclaimable answer a queue rule in this session — cumulative over the
        victims it is shown (proportion and capacity always; drf with ``enableHierarchy``; SPEC.md
        §3.3)? The gang eviction actions then ask it over each concrete plan's victims, in plan order;
        the legacy ``reclaim`` asks it whatever tier it sits in."""


@runtime_checkable
class QueueAmounts(Protocol):
    """A queue rule with amounts: what a plan may take from each victim queue (proportion, capacity)."""

    def queue_limits(self) -> dict[str, QueueLimit]:
        """Per victim queue, the amounts the rule lets a plan take. Two rules combine by the tighter
        amount in each resource."""

    def victim_side(self, victim_queue: str, reclaimer_queue: str | None) -> list[str]:
        """The queues a victim's eviction draws on: ``victim_queue``'s side of the queue tree below the
        lowest common ancestor with ``reclaimer_queue`` (the first plugin decides)."""


@dataclass(frozen=True)
class QueueShare:
    """A queue as a fair-share plugin sees it: what it holds, what it deserves, and its share."""

    allocated: np.ndarray
    deserved: np.ndarray | None  # None: the plugin computes no share for it
    share: float | None


@runtime_checkable
class QueueReport(Protocol):
    def queue_report(self) -> dict[str, QueueShare]:
        """Per queue, its holding, deserved share and share as this plugin computes them (``corral
        queues`` and ``corral run``'s queue metrics show the first plugin's; no effect on decisions)."""


# --- admission state ----------------------------------------------------------------------------------
@runtime_checkable
class JobEnqueued(Protocol):
    def on_job_enqueued(self, job: Job) -> None:
        """Enqueue admitted ``job`` (Volcano's ``JobEnqueued``): update admission state. Every plugin."""


# --- keyed job order (one key per plugin; the comparison derived from it) ----------------------------
@runtime_checkable
class JobOrderKey(Protocol):
    #: True when this plugin's key of a job with a running pod moves with the clock (a remaining time,
    #: an attained service) and is otherwise a function of the job and the context: the key of a job
    #: with a running pod is then never kept across sessions (``srtf``, ``las``)
    running_keys_move: ClassVar[bool] = False

    def job_order_key(self, job: Job) -> Any:
        """A sort key of ``job`` for this plugin's order: smaller goes first; equal keys cannot tell."""

    def job_order_key_context(self) -> Hashable:
        """What the keys depend on besides each job (e.g. the shares they are computed from): keys are
        kept across cycles while it is equal and the job did not change."""


@runtime_checkable
class KeyClock(Protocol):
    def key_clock(self, job: Job) -> float | None:
        """For a job with a running pod, whose key moves with the clock (``running_keys_move``): the
        instant its figure reaches zero at the current rate (``srtf``: the completion time, start of
        the run plus the expected run time less the work kept before it), so that at ``now`` its key
        carries the figure ``max(clock - now, 0)`` up to rounding; constant while the job's pods and
        annotations are. None: the job's key has no figure."""

    def key_figure(self, key: Any) -> float | None:
        """The figure one of this plugin's keys carries (None: none). Keys order by their figure,
        smallest first, and every key without one comes after every key with one. ``timeslice`` keeps
        the running jobs sorted by their clock and takes the exact key only of those that can rank
        after a given waiting job."""


@runtime_checkable
class KeyHorizon(Protocol):
    def key_until(self, job: Job) -> float:
        """For a job with a running pod (its key moves with the clock, ``running_keys_move``): an instant
        before which this plugin's key of it stays what it is at the session's ``now``, while the job's
        pods and annotations stay as they are (``las``: just before its attained service reaches the
        next threshold; infinity past the last). The key is then kept until that instant instead of
        being taken again at every use."""


class KeyedJobOrder(JobOrder, JobOrderKey):
    """Base of a plugin whose job order is a key: ``job_order`` compares the keys, so the order is
    written once and :meth:`corral.framework.session.Session.job_sort_key` can sort by plain tuples."""

    def job_order(self, a: Job, b: Job) -> int:
        ka, kb = self.job_order_key(a), self.job_order_key(b)
        return (ka > kb) - (ka < kb)


# --- topology below the job (Volcano sub-groups) -----------------------------------------------------
@runtime_checkable
class SubGroupSearchSpace(Protocol):
    def subgroup_search_space(
        self, job: Job, subjob: Any, within: np.ndarray | None, purpose: Purpose = Purpose.ALLOCATE
    ) -> list[Domain]:
        """The domains a Volcano sub-group (:class:`~corral.model.subjobs.SubJob`) of ``job`` may use
        inside ``within`` (the job's own domain; None: the cluster), ordered for ``purpose`` as the
        gang search space is; Volcano's ``HyperNodeGradientForSubJobFn``. The first plugin with a
        non-empty answer decides; asked of GangSearchSpace plugins."""


@dataclass(frozen=True)
class Point:
    """An extension point: its name, its Protocol (the methods a plugin implements) and the Volcano
    switch that turns it off for one plugin (None: always on)."""

    name: str
    protocol: type
    switch: str | None
    #: the methods of the Protocol, in declaration order (worked out once)
    methods: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        names = tuple(m for m, v in vars(self.protocol).items() if not m.startswith("_") and callable(v))
        object.__setattr__(self, "methods", names)


#: Every extension point, with the Volcano switch that turns it off for one plugin.
POINTS: tuple[Point, ...] = (
    Point("JobOrder", JobOrder, "enableJobOrder"),
    Point("QueueOrder", QueueOrder, "enableQueueOrder"),
    Point("TaskOrder", TaskOrder, "enableTaskOrder"),
    Point("VictimQueueOrder", VictimQueueOrder, "enableVictimQueueOrder"),
    Point("JobValid", JobValid, None),
    Point("JobEnqueueable", JobEnqueueable, "enableJobEnqueued"),
    Point("JobReady", JobReady, "enableJobReady"),
    Point("JobPipelined", JobPipelined, "enableJobPipelined"),
    Point("JobStarving", JobStarving, "enableJobStarving"),
    Point("Allocatable", Allocatable, "enableAllocatable"),
    Point("Overused", Overused, "enableOverused"),
    Point("Preemptive", Preemptive, "enablePreemptive"),
    Point("Predicate", Predicate, "enablePredicate"),
    Point("NodeOrder", NodeOrder, "enableNodeOrder"),
    Point("HyperNodeOrder", HyperNodeOrder, "enableHyperNodeOrder"),
    Point("Preemptable", Preemptable, "enablePreemptable"),
    Point("Reclaimable", Reclaimable, "enableReclaimable"),
    Point("UnifiedEvictable", UnifiedEvictable, "enableUnifiedEvictable"),
    Point("VictimTasks", VictimTasks, "enableVictim"),
    Point("VictimFilter", VictimFilter, "enableVictimFilter"),
    Point("ScenarioValidator", ScenarioValidator, "enableScenarioValidator"),
    Point("GangPredicate", GangPredicate, "enableGangPredicate"),
    Point("GangSearchSpace", GangSearchSpace, "enableGangSearchSpace"),
    Point("GangVictimSelector", GangVictimSelector, "enableGangVictimSelector"),
    Point("SimulateAddTask", SimulateAddTask, "enableSimulate"),
    Point("SimulateRemoveTask", SimulateRemoveTask, "enableSimulate"),
    Point("SimulatePredicate", SimulatePredicate, "enableSimulate"),
    Point("SimulateAllocatable", SimulateAllocatable, "enableSimulate"),
    Point("EventHandler", EventHandler, None),
    Point("TargetJob", TargetJob, "enableTargetJob"),
    Point("ReservedNodes", ReservedNodes, "enableReservedNodes"),
    Point("PredicateReason", PredicateReason, "enablePredicate"),
    Point("AllocatableReason", AllocatableReason, "enableAllocatable"),
    Point("LineRefusal", LineRefusal, "enableAllocatable"),
    Point("OverusedReason", OverusedReason, "enableOverused"),
    Point("EnqueueReason", EnqueueReason, None),
    Point("ReasonNote", ReasonNote, None),
    Point("Resolvable", Resolvable, "enablePredicate"),
    Point("DisruptionBudget", DisruptionBudget, None),
    Point("QueueRule", QueueRule, "enableReclaimable"),
    Point("QueueAmounts", QueueAmounts, "enableReclaimable"),
    Point("QueueReport", QueueReport, None),
    Point("JobEnqueued", JobEnqueued, None),
    Point("JobOrderKey", JobOrderKey, "enableJobOrder"),
    Point("KeyClock", KeyClock, "enableJobOrder"),
    Point("KeyHorizon", KeyHorizon, "enableJobOrder"),
    Point("SubGroupSearchSpace", SubGroupSearchSpace, "enableGangSearchSpace"),
    Point("CacheHints", CacheHints, None),
)

#: Volcano switches that configure a plugin's behaviour rather than one point; accepted on every plugin.
FEATURE_SWITCHES = ("enableHierarchy", "enableNamespaceOrder", "enableClusterOrder", "enableBestNode")
