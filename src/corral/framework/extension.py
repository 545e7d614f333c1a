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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from corral.model import Job, Queue, Task

__all__ = [
    "POINTS",
    "Allocatable",
    "Domain",
    "EventHandler",
    "GangPredicate",
    "GangSearchSpace",
    "GangVictimSelector",
    "HyperNodeOrder",
    "JobEnqueueable",
    "JobOrder",
    "JobPipelined",
    "JobReady",
    "JobStarving",
    "JobValid",
    "NodeOrder",
    "Overused",
    "Point",
    "Predicate",
    "Preemptable",
    "Preemptive",
    "Purpose",
    "QueueOrder",
    "Reclaimable",
    "ReservedNodes",
    "ScenarioValidator",
    "SimulateAddTask",
    "SimulateAllocatable",
    "SimulatePredicate",
    "SimulateRemoveTask",
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
    def job_starving(self, job: Job) -> bool:
        """True when the job wants more than it holds (a preemptor candidate). The first tier with a
        plugin that answers decides, AND inside it (Volcano's ``JobStarving``); no plugin means not
        starving."""


@runtime_checkable
class Allocatable(Protocol):
    def allocatable(self, queue: Queue, task: Task) -> bool:
        """May ``queue`` take ``task``'s request now (capability/deserved)? AND over plugins. A plugin
        that refuses may say why in its own words with ``allocatable_refusal(queue, task) -> str | None``
        (``Session.allocatable_refusal`` puts it in the job's reason)."""


@runtime_checkable
class Overused(Protocol):
    def overused(self, queue: Queue) -> bool:
        """True if the queue holds all it deserves; allocate skips it. OR over plugins. A plugin may say
        why with ``overused_reason(queue, task) -> str | None`` (None: its share is not what holds the
        pod back; ``Session.overused_reason``)."""


@runtime_checkable
class Preemptive(Protocol):
    def preemptive(self, queue: Queue, task: Task) -> bool:
        """May ``queue`` reclaim from other queues for ``task``? AND over plugins."""


# --- placement ----------------------------------------------------------------------------------------
@runtime_checkable
class Predicate(Protocol):
    def predicate(self, task: Task) -> np.ndarray:
        """A boolean mask over all nodes: where ``task`` may go, resources aside. AND over plugins.
        ``explain(task)`` (optional) returns ``[(rejected_mask, reason)]`` for messages."""


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


@dataclass(frozen=True)
class Point:
    name: str
    protocol: type
    switch: str | None


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
)

#: Volcano switches that configure a plugin's behaviour rather than one point; accepted on every plugin.
FEATURE_SWITCHES = ("enableHierarchy", "enableNamespaceOrder", "enableClusterOrder", "enableBestNode")
