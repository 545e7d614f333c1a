"""KAI-Scheduler's GPU sharing, per device: the books ``gpushare`` keeps for pods annotated ``gpu-fraction``
or ``gpu-memory`` (KAI ``pkg/scheduler/api/resource_info/gpu_resource_requirment.go``, ``pod_info``).

Each GPU device of a node (``nvidia.com/gpu`` allocatable) holds a portion 1.0. A pod takes:

- ``gpu-fraction: f`` — ``f`` of each of ``gpu-fraction-num-devices`` devices (default 1);
- ``gpu-memory: m`` (MiB) — ``m`` over the device's memory (the node label ``nvidia.com/gpu.memory``, MiB
  per device, as GPU feature discovery writes it) of each of so many devices; a node without that label
  cannot take it (its device memory is unknown);
- ``nvidia.com/gpu: n`` (whole GPUs, no annotation) — ``n`` devices that nobody shares.

A pod fits a node when that many of its devices each have the portion free, so a node never promises
more than it has: not in total (a fraction is also charged to ``nvidia.com/gpu``, portion × devices, as
KAI's resource vector does) and not on one device. Shares go by binpack — the fullest devices that fit,
lowest index on ties — so partly used devices fill up before a whole one is broken into (KAI's default
GPU placement). The books are kept only when some pod of the snapshot shares a GPU by annotation
(``Cluster.kai_gpu_shared``); otherwise whole-GPU pods are counted by the node total alone, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from corral.model import GPU, Task, TaskStatus
from corral.model.quantity import MILLI

if TYPE_CHECKING:
    from corral.model import Cluster

__all__ = ["GPU_MEMORY_LABEL", "FractionBooks"]

#: The node label giving each GPU device's memory in MiB (NVIDIA GPU feature discovery; KAI reads it).
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
_EPS = 1e-6
_ON_NODE = frozenset({TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING})


def where(task: Task) -> int:
    """The node row ``task`` holds devices on in the future view, or -1."""
    if task.status in _ON_NODE:
        return task.node
    if task.status is TaskStatus.PIPELINED:
        return task.nominated
    return -1


class FractionBooks:
    """Per node and device, the portion free; per pod, the devices it holds."""

    def __init__(self, cluster: Cluster) -> None:
        nodes = cluster.nodes
        n = len(nodes)
        gpu = cluster.resources.get(GPU)
        self.gpu = gpu
        self.devices = (
            (nodes.allocatable[:, gpu] // MILLI).astype(np.int64)
            if gpu is not None
            else np.zeros(n, np.int64)
        )
        self.devices = np.where(np.isfinite(self.devices), self.devices, 0)
        memory = np.zeros(n)
        for r, labels in enumerate(nodes.labels):
            raw = labels.get(GPU_MEMORY_LABEL, "")
            if raw.isdigit():
                memory[r] = int(raw) * 1048576 * 1000.0  # milli-bytes, as requests are kept
        self.memory = memory
        width = max(int(self.devices.max(initial=0)), 1)
        self.free = np.where(np.arange(width)[None, :] < self.devices[:, None], 1.0, -np.inf)
        self.assign: dict[str, tuple[int, list[int], float]] = {}  # uid -> (row, devices, portion)
        self.last: dict[str, dict[int, list[int]]] = {}  # uid -> {row: devices held there last}
        placed = [t for t in cluster.tasks.values() if self.wants(t) and where(t) >= 0]
        # pods with a node first, then nominated ones; whole GPUs before shares; by creation then name
        placed.sort(
            key=lambda t: (t.status is TaskStatus.PIPELINED, t.gpu_share is not None, t.creation, t.name)
        )
        for t in placed:
            self.place(t, where(t), forced=True)

    # -- what a pod asks -----------------------------------------------------------------------
    def wants(self, task: Task) -> bool:
        return task.gpu_share is not None or (self.gpu is not None and task.request[self.gpu] >= MILLI - _EPS)

    def demand(self, task: Task) -> tuple[int, np.ndarray | float]:
        """``(devices, portion of each)``; the portion is per node (an array) for a ``gpu-memory`` pod."""
        share = task.gpu_share
        if share is None:
            return int(round(task.request[self.gpu or 0] / MILLI)), 1.0
        count, portion, memory = share
        if portion > 0:
            return count, portion
        with np.errstate(divide="ignore", invalid="ignore"):
            return count, np.where(
                self.memory > 0, memory / np.where(self.memory > 0, self.memory, 1.0), np.inf
            )

    def _portion(self, task: Task, row: int) -> tuple[int, float]:
        count, portion = self.demand(task)
        return count, float(portion[row] if isinstance(portion, np.ndarray) else portion)

    # -- questions -----------------------------------------------------------------------------
    def fits(self, task: Task) -> np.ndarray:
        """Per node: do ``count`` of its devices each have the portion free? (The pod's own share counts
        as free on the node it holds.)"""
        count, portion = self.demand(task)
        free = self.free
        held = self.assign.get(task.uid)
        if held is not None:
            free = free.copy()
            free[held[0], held[1]] += held[2]
        need = np.asarray(portion, dtype=float)
        need = need[:, None] if need.ndim else need
        return (free >= need - _EPS).sum(axis=1) >= count

    def fits_on(self, task: Task, row: int) -> bool:
        count, portion = self._portion(task, row)
        free = self.free[row].copy()
        held = self.assign.get(task.uid)
        if held is not None and held[0] == row:
            free[held[1]] += held[2]
        return int((free >= portion - _EPS).sum()) >= count

    def capacity_fits(self, task: Task) -> np.ndarray:
        """Nodes whose devices could hold ``task`` once every pod on them is gone."""
        count, portion = self.demand(task)
        need = np.asarray(portion, dtype=float)
        return (self.devices >= count) & (need <= 1.0 + _EPS)

    # -- books ---------------------------------------------------------------------------------
    def _choose(self, row: int, count: int, portion: float, prefer: list[int] | None) -> list[int]:
        free = self.free[row, : self.devices[row]]
        if prefer and len(prefer) == count and all(free[d] >= portion - _EPS for d in prefer):
            return list(prefer)
        ok = np.flatnonzero(free >= portion - _EPS)
        if len(ok) >= count:  # binpack: the fullest devices that fit, lowest index on ties
            return [int(d) for d in ok[np.argsort(free[ok], kind="stable")][:count]]
        # fits nowhere (a fact being recorded): the freest devices
        return [int(d) for d in np.argsort(-free, kind="stable")[:count]]

    def place(self, task: Task, row: int, forced: bool = False) -> None:
        if self.devices[row] <= 0:
            return
        count, portion = self._portion(task, row)
        if not np.isfinite(portion):
            portion = 1.0 if forced else portion
            if not np.isfinite(portion):
                return
        count = min(count, int(self.devices[row]))
        devs = self._choose(row, count, portion, self.last.get(task.uid, {}).get(row))
        self.free[row, devs] -= portion
        self.assign[task.uid] = (row, devs, portion)
        self.last.setdefault(task.uid, {})[row] = devs

    def release(self, task: Task) -> None:
        held = self.assign.pop(task.uid, None)
        if held is not None:
            self.free[held[0], held[1]] += held[2]

    def reconcile(self, task: Task) -> None:
        """Make the books follow where ``task`` now is (the devices it last held there when they fit)."""
        if not self.wants(task):
            return
        row = where(task)
        held = self.assign.get(task.uid)
        if held is not None and held[0] == row:
            return
        self.release(task)
        if row >= 0:
            self.place(task, row)

    def device_free(self, row: int) -> np.ndarray:
        return self.free[row, : self.devices[row]].copy()
