"""The cluster as the scheduler sees it: nodes (columnar), tasks, jobs, queues, hypernodes, classes, PDBs.

The :class:`Cluster` is mutable: a Session changes task states and node columns through Statements, and
a front end applies the decisions (binds run, evicted pods leave) between cycles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from corral.model.hypernodes import HyperNodeTree
from corral.model.nodes import Nodes
from corral.model.notes import Notes
from corral.model.objects import OCCUPYING_STATES, Job, Queue, Task, TaskStatus
from corral.model.resources import ResourceIndex

__all__ = ["Cluster", "PodDisruptionBudget", "PriorityClass"]


@dataclass(frozen=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False


class LabelMatcher(Protocol):
    """A parsed label selector (manifests.selectors builds them)."""

    def matches(self, labels: Mapping[str, str]) -> bool: ...


@dataclass
class PodDisruptionBudget:
    """policy/v1 PDB. ``selector`` is a parsed label selector (see manifests.selectors)."""

    key: str
    namespace: str
    selector: LabelMatcher
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


@dataclass
class Cluster:
    resources: ResourceIndex
    nodes: Nodes
    tasks: dict[str, Task] = field(default_factory=dict)  # by uid
    jobs: dict[str, Job] = field(default_factory=dict)  # by "ns/name"
    queues: dict[str, Queue] = field(default_factory=dict)
    hypernodes: HyperNodeTree = field(default_factory=lambda: HyperNodeTree({}))
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    foreign: list[Task] = field(default_factory=list)  # pods of other schedulers
    #: served pods bound to a node the cluster does not have, as (pod key, node name): they count for
    #: their gang but hold nothing corral can see, so no queue usage counts them (plugins/shares.py)
    off_nodes: list[tuple[str, str]] = field(default_factory=list)
    #: KAI Topology objects: name -> levels from the widest to the narrowest, (nodeLabel, alias) each
    topologies: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    #: what reading the input noted for the user: warnings about fields accepted but not acted on,
    #: workloads expanded (:class:`corral.model.notes.Notes`, the one warning channel)
    notes: Notes = field(default_factory=Notes)
    #: some pod shares a GPU by KAI's annotations (gpushare keeps per-device books for KAI pods)
    kai_gpu_shared: bool = False
    #: jobs of Kubernetes' own gang API (``scheduling.k8s.io``), by uid: what their group adds
    #: (corral.manifests.native.NativeGroup: API version, the condition kube-scheduler writes, ...)
    native_groups: dict[str, Any] = field(default_factory=dict)
    #: Dynamic Resource Allocation: devices, claims and allocations in force (corral.dra.Inventory);
    #: None when the snapshot has no ResourceClaims in use
    dra: Any = None
    #: ``v1 Namespace`` objects: name -> labels (what a non-empty namespaceSelector of an inter-pod
    #: affinity term matches; a namespace without an object here matches none)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)

    def account(self) -> None:
        """Recompute the node columns from task states (after loading or applying decisions): what
        :meth:`charge` adds, gathered per column and added at once (``np.add.at`` adds in task order,
        as charging one by one does)."""
        nodes = self.nodes
        held: tuple[list[tuple[int, np.ndarray]], ...] = (
            [],
            [],
            [],
        )  # used, releasing, pipelined: (row, request)
        for task in self.tasks.values():
            status = task.status
            if status in OCCUPYING_STATES and task.node >= 0:
                held[0].append((task.node, task.request))
                if status is TaskStatus.RELEASING:
                    held[1].append((task.node, task.request))
                    if task.nominated >= 0:  # a moved pod holds its new node while it leaves
                        held[2].append((task.nominated, task.request))
            elif status is TaskStatus.PIPELINED and task.nominated >= 0:
                held[2].append((task.nominated, task.request))
        for column, entries in zip((nodes.used, nodes.releasing, nodes.pipelined), held):
            column[:] = 0
            if entries:
                rows, requests = zip(*entries)
                np.add.at(column, np.array(rows, dtype=np.intp), np.array(requests))

    def charge(self, task: Task, sign: int) -> None:
        """Add (sign +1) or remove (-1) what ``task`` holds on its node in its current state."""
        nodes = self.nodes
        if task.status in OCCUPYING_STATES and task.node >= 0:
            nodes.used[task.node] += sign * task.request
            if task.status is TaskStatus.RELEASING:
                nodes.releasing[task.node] += sign * task.request
                if task.nominated >= 0:  # a moved pod holds its new node while it leaves
                    nodes.pipelined[task.nominated] += sign * task.request
        elif task.status is TaskStatus.PIPELINED and task.nominated >= 0:
            nodes.pipelined[task.nominated] += sign * task.request

    def total_allocatable(self) -> np.ndarray:
        live = ~(self.nodes.down)
        return self.nodes.allocatable[live].sum(axis=0)

    def admission_room(self, factor: float) -> np.ndarray:
        """What the cluster can admit before admitted podgroups are counted: its live allocatable times
        ``factor`` (the overcommit-factor; unlimited where a resource is) minus what is used on live
        nodes (``enqueue``'s budget and the ``overcommit`` plugin's room)."""
        total = self.total_allocatable()
        room = np.where(np.isfinite(total), total * factor, np.inf)
        return room - self.nodes.used[~self.nodes.down].sum(axis=0)

    def queue_chain(self, name: str) -> list[str]:
        """The queue and its ancestors, leaf first."""
        chain = []
        seen = set()
        while name and name not in seen and name in self.queues:
            seen.add(name)
            chain.append(name)
            name = self.queues[name].parent or ""
        return chain
