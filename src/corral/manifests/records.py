"""The plain records the snapshot parsers make (SPEC.md §1.1), one per kind, before the assembly.

Records keep resource amounts as ``{name: milli}`` dicts and KAI's and Kubernetes' own fields as written;
:mod:`corral.manifests.build` turns them into the model once the set of resource names of the whole
snapshot is known. The parsers that fill them: :mod:`~corral.manifests.kinds` (Volcano and core kinds),
:mod:`~corral.manifests.kai_kinds` (KAI's fields), :mod:`~corral.manifests.native` (Kubernetes' gang API).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from corral.manifests.selectors import Affinity, LabelSelector
from corral.model.objects import Taint, Toleration

__all__ = [
    "GROUP_ANNOTATION",
    "KAI_GROUP_KEY",
    "HyperNodeRec",
    "NodeRec",
    "PodGroupRec",
    "PodRec",
    "QueueRec",
    "SubGroupRec",
    "TopologyRec",
    "workload_group_name",
]

#: the podgroup a pod names: Volcano's annotation, KAI's label or annotation
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
KAI_GROUP_KEY = "pod-group-name"


def workload_group_name(ref: tuple[str, str, str]) -> str:
    """The name of the job of a ``v1alpha1`` workload's pod group (one per replica key)."""
    workload, podgroup, key = ref
    return f"{workload}:{podgroup}:{key}" if key else f"{workload}:{podgroup}"


@dataclass
class SubGroupRec:
    """One entry of a KAI PodGroup's ``spec.subGroups`` as written."""

    name: str
    parent: str
    min_member: int | None
    min_subgroup: int | None
    topology_name: str
    required_level: str
    preferred_level: str


@dataclass
class TopologyRec:
    """A KAI ``Topology`` (kai.scheduler/v1alpha1): levels from the highest (widest) to the lowest,
    each a node label and an optional alias."""

    name: str
    levels: list[tuple[str, str]]
    file: str = ""


@dataclass
class NodeRec:
    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: dict[str, float]
    annotations: dict[str, str]
    file: str = ""


@dataclass
class PodRec:
    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    creation: float
    deleting: bool
    scheduler: str
    node_name: str
    priority: int | None
    priority_class: str
    preempt_never: bool
    requests: dict[str, float]
    node_selector: dict[str, str]
    affinity: Affinity | None
    tolerations: tuple[Toleration, ...]
    phase: str
    nominated: str
    start_time: float | None
    file: str = ""
    gpu_share: tuple[int, float, float] | None = None
    #: Kubernetes' own gang API: ``spec.schedulingGroup.podGroupName`` (1.36 on) and ``spec.workloadRef``
    #: (1.35: workload, pod group, replica key), see :mod:`corral.manifests.native`
    native_group: str = ""
    workload_ref: tuple[str, str, str] | None = None
    #: the names of ``spec.resourceClaims`` (dynamic resource claims, :mod:`corral.manifests.dra`)
    claims: tuple[str, ...] = ()
    #: ``(entry, resourceClaimName, resourceClaimTemplateName)`` per claim, and the generated claims of
    #: ``status.resourceClaimStatuses`` (entry -> claim name): :mod:`corral.dra.pods`
    claim_refs: tuple[tuple[str, str, str], ...] = ()
    claim_statuses: dict[str, str] = field(default_factory=dict)

    @property
    def native(self) -> bool:
        return bool(self.native_group) or self.workload_ref is not None

    @property
    def group(self) -> str:
        """The podgroup the pod names: Kubernetes' own field first, then Volcano's and KAI's keys."""
        if self.workload_ref is not None:
            return workload_group_name(self.workload_ref)
        return (
            self.native_group
            or self.annotations.get(GROUP_ANNOTATION)
            or self.labels.get(KAI_GROUP_KEY)
            or self.annotations.get(KAI_GROUP_KEY)
            or ""
        )


@dataclass
class PodGroupRec:
    name: str
    namespace: str
    min_member: int
    min_task_member: dict[str, int]
    min_resources: dict[str, float] | None
    queue: str
    priority_class: str
    topology_mode: str
    topology_tier: int | None
    phase: str
    creation: float
    annotations: dict[str, str]
    labels: dict[str, str]
    file: str = ""
    #: KAI only: the podgroup's topologyConstraint (topology name, required, preferred level), its
    #: sub-groups and minSubGroup; ``queue_given``: spec.queue or the queue label was set
    kai: bool = False
    topology_name: str = ""
    required_level: str = ""
    preferred_level: str = ""
    subgroups: list[SubGroupRec] = field(default_factory=list)
    min_subgroup: int | None = None
    min_member_given: bool = False
    preemptibility: str = ""  # KAI spec.preemptibility as given
    #: KAI's ``spec.preemptibility`` read as a victim flag (None: unset, the labels and annotations decide)
    preemptible: bool | None = None
    topology_tier_name: str = ""
    subgroup_policies: tuple = ()
    #: a ``scheduling.k8s.io`` group (manifests.native.NativeGroup), None for Volcano's and KAI's
    native: Any = None
    #: valid input that cannot be honoured (a 1.35 pod group whose Workload is missing): the job's reason
    invalid: str = ""


@dataclass
class QueueRec:
    name: str
    source: str
    weight: float = 1.0
    capability: dict[str, float] | None = None
    deserved: dict[str, float] | None = None
    guarantee: dict[str, float] | None = None
    reclaimable: bool = True
    parent: str | None = None
    priority: int = 0
    state: str = "Open"
    preempt_min_runtime: float | None = None
    reclaim_min_runtime: float | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    creation: float = 0.0
    file: str = ""


@dataclass
class HyperNodeRec:
    name: str
    tier: int
    #: (member type ``Node``/``HyperNode``, ``exact``/``regex``/``label``, name, pattern or selector)
    members: list[tuple[str, str, str | LabelSelector]]
    file: str = ""
    tier_name: str = ""
