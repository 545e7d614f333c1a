"""Tasks, jobs and queues: the per-object part of the model (nodes are columnar, see :mod:`nodes`).

Task states follow SPEC.md §1.1 and Volcano's ``TaskStatus``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "ALLOCATED_STATES",
    "OCCUPYING_STATES",
    "Job",
    "PodClass",
    "PodGroupPhase",
    "Queue",
    "Taint",
    "Task",
    "TaskStatus",
    "Toleration",
]


class PodClass(NamedTuple):
    """A pod's scheduling spec, built with the pod: two pods of one class are interchangeable for every
    rule corral has, so actions try them as one (a gang's identical pods, a failed preemptor's class).

    It is **not** a cache key by itself. The framework's pod signature
    (:meth:`corral.framework.session.Session.signature`, kube-scheduler's ``SignPlugin``) starts from
    ``request`` alone; each plugin signs the fields it reads (:mod:`corral.framework.hints`): the
    ``predicates`` plugin the selector, affinity, tolerations and namespace, ``gpushare`` the GPU share,
    ``network-topology-aware`` the sub-group, ``dra`` the claims. A field no enabled plugin signs does not
    split the cache.
    """

    #: the request vector's bytes (milli-units, one ``pods`` unit included)
    request: bytes
    #: ``spec.nodeSelector`` as sorted pairs
    node_selector: tuple[tuple[str, str], ...] = ()
    #: ``spec.affinity`` (:class:`corral.manifests.affinity.Affinity`) or None
    affinity: Any = None
    #: ``spec.tolerations``
    tolerations: tuple[Any, ...] = ()
    #: the pod's namespace when it has inter-pod terms, required or preferred (they select pods in
    #: it), else ""
    namespace: str = ""
    #: the KAI ``kai.scheduler/subgroup-name`` label, or None
    subgroup: str | None = None
    #: the KAI GPU share (:attr:`Task.gpu_share`), or None
    gpu_share: tuple[int, float, float] | None = None
    #: the shape of its resource claims (:mod:`corral.dra`), or None
    claims: Any = None


class TaskStatus(enum.Enum):
    PENDING = "Pending"
    ALLOCATED = "Allocated"  # placed by this cycle, not yet bound
    PIPELINED = "Pipelined"  # nominated onto capacity that is still being freed
    BOUND = "Bound"  # has a node, pod phase Pending
    RUNNING = "Running"
    RELEASING = "Releasing"  # deletionTimestamp set or evicted: still holds its node
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    # members are singletons: identity hashing keeps the hot ``status in STATES`` checks cheap
    __hash__ = object.__hash__


#: States in which a pod holds resources on its node.
_ON_NODE = frozenset({TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING})


#: States that count towards a job being ready (with SUCCEEDED), Volcano's "allocated" set.
ALLOCATED_STATES = frozenset({TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING})
#: States that hold resources on a node.
OCCUPYING_STATES = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.RELEASING}
)


class PodGroupPhase(str, enum.Enum):
    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    COMPLETED = "Completed"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str  # Equal | Exists
    value: str
    effect: str  # "" matches every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(slots=True, eq=False)
class Task:
    """One pod. ``node`` is a node row (or -1); ``nominated`` likewise for nominatedNodeName.

    ``request`` is the resource vector (milli-units, including one ``pods`` unit). ``managed`` is False for
    pods of other schedulers: fixed load, never moved, never victims. ``klass`` is the pod's
    :class:`PodClass` (None: a pod built without one is never grouped with another nor cached).
    """

    uid: str
    name: str
    namespace: str
    request: np.ndarray
    # Every task of a Cluster has its job: the builder links them before the cluster is handed out.
    job: Job = None  # type: ignore[assignment]  # unset only while a snapshot is being assembled
    role: str = ""
    priority: int = 0
    status: TaskStatus = TaskStatus.PENDING
    node: int = -1
    nominated: int = -1
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: Any = None  # manifests.affinity.Affinity or None
    tolerations: tuple[Toleration, ...] = ()
    creation: float = 0.0  # seconds since the epoch
    start_time: float | None = None
    preemptable: bool = True
    preempt_never: bool = False  # spec.preemptionPolicy: Never
    managed: bool = True
    priority_class: str = ""
    best_effort: bool = False
    klass: PodClass | None = None
    subjob: Any = None  # model.subjobs.SubJob: its Volcano sub-group, if any
    #: KAI GPU sharing (pod annotations ``gpu-fraction`` / ``gpu-memory`` / ``gpu-fraction-num-devices``):
    #: ``(devices, portion of each device, GPU memory per device in milli-bytes)``, one of the last two 0
    gpu_share: tuple[int, float, float] | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def future_row(self) -> int:
        """The node row this pod holds resources on in the future view (placed there, or nominated to
        it), or -1."""
        if self.status in _ON_NODE:
            return self.node
        if self.status is TaskStatus.PIPELINED:
            return self.nominated
        return -1


@dataclass(slots=True, eq=False)
class Job:
    """One PodGroup (or a pod without one, as a job of minMember 1)."""

    uid: str  # "namespace/name"
    name: str
    namespace: str
    queue: str = "default"
    min_member: int = 1
    min_task_member: dict[str, int] = field(default_factory=dict)
    min_resources: np.ndarray | None = None
    priority: int = 0
    priority_class: str = ""
    phase: PodGroupPhase = PodGroupPhase.PENDING
    tasks: list[Task] = field(default_factory=list)
    creation: float = 0.0
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    topology_mode: str = ""  # "", "hard", "soft"
    topology_tier: int | None = None
    topology_tier_name: str = ""  # Volcano highestTierName as written (topology_tier holds its tier)
    #: Volcano spec.subGroupPolicy (model.subjobs.SubGroupPolicy) and the sub-groups of its pods
    subgroup_policies: tuple[Any, ...] = ()
    subjobs: list[Any] = field(default_factory=list)
    #: the KAI Topology the constraint is over ("": Volcano HyperNodes) and, for a KAI preferred level,
    #: the lowest tier a domain may have
    topology_family: str = ""
    topology_low_tier: int = 0
    preemptable: bool = True
    invalid_reason: str = ""  # valid input that cannot be honoured (missing queue, missing group)
    synthetic: bool = False  # a pod without podgroup
    #: KAI sub-groups (model.subgroups.SubGroupTree): ``subgroups`` is set when some ``minSubGroup``
    #: leaves members optional (the gang plugin then counts by the tree; else each leaf is a role with
    #: its minMember in ``min_task_member``); ``subgroup_tree`` always, for the sub-groups' topology
    subgroups: Any = None  # model.subgroups.SubGroupTree | None
    subgroup_tree: Any = None  # the whole tree, for the sub-groups' topology constraints
    #: a KAI PodGroup without ``preemptibility``: non-preemptible when its priority is 100 or more
    kai_priority_preemptible: bool = False

    def count(self, *states: TaskStatus) -> int:
        return sum(1 for t in self.tasks if t.status in states)

    def ready_count(self) -> int:
        return sum(1 for t in self.tasks if t.status in ALLOCATED_STATES or t.status is TaskStatus.SUCCEEDED)

    def role_counts(self, states: frozenset[TaskStatus] | set[TaskStatus]) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tasks:
            if t.status in states:
                out[t.role] = out.get(t.role, 0) + 1
        return out

    def awaiting_admission(self) -> bool:
        """A podgroup ``enqueue`` may admit: Pending, with pods, and valid."""
        return self.phase is PodGroupPhase.PENDING and bool(self.tasks) and not self.invalid_reason

    def admitted_unstarted(self) -> bool:
        """Admitted (Inqueue) with minResources and below its minimum of ready pods: what ``enqueue``'s
        overcommit budget keeps room for (Volcano ``actions/enqueue``)."""
        return (
            self.phase is PodGroupPhase.INQUEUE
            and self.min_resources is not None
            and self.ready_count() < self.min_member
        )

    def pending_tasks(self) -> list[Task]:
        return [t for t in self.tasks if t.status is TaskStatus.PENDING and t.managed]

    @property
    def elastic(self) -> bool:
        """Seed 000: minMember below the sum of the role minimums means role limits do not bind."""
        return bool(self.min_task_member) and self.min_member < sum(self.min_task_member.values())


@dataclass(slots=True, eq=False)
class Queue:
    """A Volcano or KAI queue; vectors are milli-units, ``inf`` where unlimited/unset."""

    name: str
    weight: float = 1.0
    capability: np.ndarray | None = None
    deserved: np.ndarray | None = None
    guarantee: np.ndarray | None = None
    reclaimable: bool = True
    #: the resources ``deserved`` states (KAI: a quota that is not -1); None: every resource
    deserved_set: np.ndarray | None = None
    parent: str | None = None
    priority: int = 0
    state: str = "Open"
    preempt_min_runtime: float | None = None  # seconds; None inherits
    reclaim_min_runtime: float | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    creation: float = 0.0
    source: str = ""  # "volcano" | "kai" | "implicit"

    @property
    def open(self) -> bool:
        return self.state in ("", "Open")

    def not_leaf_reason(self) -> str:
        """Why a job may not name this queue, or "" when it may: only leaf queues hold work (SPEC.md
        §3.2; Volcano's hierarchical capacity rejects enqueue and allocate in a queue with children,
        KAI takes jobs in leaf queues only)."""
        if not self.children:
            return ""
        kids = sorted(self.children)
        shown = ", ".join(kids[:3]) + (f", +{len(kids) - 3} more" if len(kids) > 3 else "")
        return (
            f"queue {self.name!r} has child queues ({shown}): only leaf queues hold work; "
            f"submit the job to a leaf queue"
        )
