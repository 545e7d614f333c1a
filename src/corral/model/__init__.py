"""The cluster model: quantities, resource vectors, nodes, tasks, jobs, queues, hypernodes."""

from corral.model.cluster import Cluster, PodDisruptionBudget, PriorityClass
from corral.model.hypernodes import HyperNode, HyperNodeTree
from corral.model.nodes import Nodes
from corral.model.objects import (
    ALLOCATED_STATES,
    OCCUPYING_STATES,
    Job,
    PodClass,
    PodGroupPhase,
    Queue,
    Taint,
    Task,
    TaskStatus,
    Toleration,
)
from corral.model.quantity import format_quantity, parse_quantity
from corral.model.resources import CPU, GPU, MEMORY, PODS, ResourceIndex

__all__ = [
    "ALLOCATED_STATES",
    "CPU",
    "GPU",
    "MEMORY",
    "OCCUPYING_STATES",
    "PODS",
    "Cluster",
    "HyperNode",
    "HyperNodeTree",
    "Job",
    "Nodes",
    "PodClass",
    "PodDisruptionBudget",
    "PodGroupPhase",
    "PriorityClass",
    "Queue",
    "ResourceIndex",
    "Taint",
    "Task",
    "TaskStatus",
    "Toleration",
    "format_quantity",
    "parse_quantity",
]
