"""``gpushare``: pods share GPU devices by memory (Volcano's GPU-share predicate, ``volcano.sh/gpu-memory``),
and dry runs keep each pod on its device — the topology story of seed 003 (SPEC.md §2, §3.2).

Devices. A node has ``nvidia.com/gpu`` devices (else ``volcano.sh/gpu-number``). Each device has the
memory given by the node label or annotation ``volcano.sh/gpu-memory-per-device`` (a quantity, ``8Gi``;
the annotation wins), else the node's ``volcano.sh/gpu-memory`` allocatable divided evenly over its
devices (Volcano's convention; a node with that total and no device count is one device). The loader
fills a missing ``volcano.sh/gpu-memory`` allocatable from the per-device value (manifests/build.py). A
pod asks for GPU memory with the request ``volcano.sh/gpu-memory`` and must fit on ONE device; pods
without that request pass everywhere. (The actions still check the node total, SPEC.md §2.)

State, per node and device: the free memory (``free[row, device]``) and, per node, the largest free
device (``max_free``) so the Predicate is one vectorised comparison over all nodes. Devices are
accounted in the *future* view the events use: running, bound, allocated and pipelined (nominated)
pods hold their share; releasing pods (evicted, or being deleted) no longer do.

At session open the placed pods are assigned to devices: a pod annotated ``volcano.sh/gpu-index``
(what Volcano writes at bind) keeps that device; the others go first fit in device order, ordered by
creation then name (running/bound before nominated). A pod that fits no device is put on the freest
one (it is a fact, not a choice), so the books always add up.

Events (Statement operations). ``on_allocate``/``on_deallocate`` reconcile the pod with where it now
is: a pod that starts holding a node is put on the device it last held on that node if that device has
room (so a reverted eviction, or a reverted move, restores exactly the same device), else by binpack —
the fullest device that fits, as Volcano's gpushare does; a pod that stops holding frees its share and
the plugin remembers its device. Clearing a nomination made by an earlier cycle fires no event; the
plugin notices through the session's version stamp.

Simulation points (seed 003). ``simulate_remove_task`` frees the pod's share but remembers the device;
``simulate_add_task`` puts it back on that same device (topology preserved: scenario 2 of the seed —
re-adding pod A to its GPU makes pod C fail again, so evicting A is necessary), or, with the argument
``keepDeviceOnReAdd: false``, binpacks it like a new pod (scenario 1: A moves to the other GPU, C still
fits, and the preemption is judged unnecessary — the accident the seed warns about; kept for
comparison). ``simulate_predicate`` asks whether one device on the node has the memory free.

At session close, pods bound or nominated by this cycle get ``volcano.sh/gpu-index`` in the model's
annotations (as Volcano writes at bind), so the next cycle keeps their device.

Arguments: ``keepDeviceOnReAdd`` (true).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corral.framework.config import arg
from corral.framework.extension import (
    EventHandler,
    Predicate,
    PredicateReason,
    Resolvable,
    SimulateAddTask,
    SimulatePredicate,
    SimulateRemoveTask,
)
from corral.framework.hints import BaseSigned
from corral.framework.plugin import Plugin
from corral.manifests.build import GPU_MEMORY, GPU_MEMORY_PER_DEVICE, GPU_NUMBER
from corral.model import GPU, Task, TaskStatus, format_quantity, parse_quantity
from corral.model.quantity import MILLI
from corral.model.resources import EPS
from corral.plugins.gpu_fractions import FractionBooks

__all__ = ["GPU_INDEX", "GPU_MEMORY", "GPU_MEMORY_PER_DEVICE", "GpuShareArgs", "GpuSharePlugin"]

#: The pod annotation naming the device a pod runs on (Volcano's ``volcano.sh/gpu-index``).
GPU_INDEX = "volcano.sh/gpu-index"


@dataclass(frozen=True)
class GpuShareArgs:
    keep_device: bool = arg(
        "keepDeviceOnReAdd",
        True,
        "a simulated re-add puts a pod back on the device it "
        "had (seed 003, scenario 2); false binpacks it like a new pod (scenario 1)",
    )


class GpuSharePlugin(
    Plugin,
    Predicate,
    PredicateReason,
    Resolvable,
    SimulateAddTask,
    SimulateRemoveTask,
    SimulatePredicate,
    EventHandler,
    BaseSigned,
):
    """GPU sharing by device memory, with topology-preserving simulation (seed 003)."""

    name = "gpushare"
    signs = ("gpu_share",)
    Args = GpuShareArgs

    # -- open ----------------------------------------------------------------------------------
    def on_session_open(self) -> None:
        cluster = self.session.cluster
        nodes = cluster.nodes
        self.n = n = len(nodes)
        self.col = cluster.resources.get(GPU_MEMORY)
        self.assign: dict[str, tuple[int, int]] = {}  # uid -> (row, device), held now
        self.memory: dict[str, dict[int, int]] = {}  # uid -> {row: last device there}
        self.tasks: dict[str, Task] = {}
        self._removed: set[str] = set()  # simulate-removed, not yet re-added
        self._watch: list[Task] = []  # earlier nominations: may change silently
        self._everywhere = np.ones(n, dtype=bool)
        # KAI's annotations (plugins/gpu_fractions.py): books in device portions, when some pod uses them
        self.kai = FractionBooks(cluster) if cluster.kai_gpu_shared else None
        if self.kai is not None:
            self._watch += [t for t in cluster.tasks.values() if t.status is TaskStatus.PIPELINED]
        self.devices = np.zeros(n, dtype=np.int64)
        self.per_device = np.zeros(n)
        if self.col is None:  # no pod asks for GPU memory
            self.free = np.full((n, 1), -np.inf)
            self.max_free = np.full(n, -np.inf)
            self.capacity = np.full(n, -np.inf)
            self._seen = self.session.capacity.version
            return
        count, size = self._device_shapes()
        self.devices, self.per_device = count.astype(np.int64), size
        width = max(int(self.devices.max(initial=0)), 1)
        self.free = np.where(np.arange(width)[None, :] < self.devices[:, None], size[:, None], -np.inf)
        self.capacity = np.where(self.devices > 0, self.per_device, -np.inf)
        self._book_placed()
        self.max_free = self.free.max(axis=1)
        self._seen = self.session.capacity.version

    def _device_shapes(self) -> tuple[np.ndarray, np.ndarray]:
        """(devices, memory per device) per node: Volcano's convention — the node's GPU memory total
        over its GPU count (``nvidia.com/gpu``, else ``volcano.sh/gpu-number``; one device when it gives
        no count) — unless the node's ``GPU_MEMORY_PER_DEVICE`` annotation or label gives the size, then
        the count is the GPU count, else the total over that size."""
        assert self.col is not None
        cluster = self.session.cluster
        nodes, res = cluster.nodes, cluster.resources
        n, alloc = self.n, nodes.allocatable
        count = np.zeros(n, dtype=np.int64)
        gpu, number = res.get(GPU), res.get(GPU_NUMBER)
        if gpu is not None:
            count = (alloc[:, gpu] // MILLI).astype(np.int64)
        if number is not None:
            count = np.where(count > 0, count, (alloc[:, number] // MILLI).astype(np.int64))
        total = alloc[:, self.col]
        # Volcano's convention: the node total over its devices (one device if it gives no count)
        has_total = total > 0
        count = np.where(has_total, np.maximum(count, 1), 0)
        size = np.where(has_total, total / np.maximum(count, 1), 0.0)
        key, labels, annotations = GPU_MEMORY_PER_DEVICE, nodes.labels, nodes.annotations
        given = [(r, per) for r in range(n) if (per := annotations[r].get(key) or labels[r].get(key))]
        if given:  # the per-device label/annotation wins
            rr = np.array([r for r, _ in given])
            size[rr] = [parse_quantity(per, where=f"Node {nodes.names[r]}", field=key) for r, per in given]
            given_count = np.zeros(len(rr), dtype=np.int64)
            if gpu is not None:
                given_count = (alloc[rr, gpu] // MILLI).astype(np.int64)
            if number is not None:
                given_count = np.where(
                    given_count > 0, given_count, (alloc[rr, number] // MILLI).astype(np.int64)
                )
            by_total = np.where(size[rr] > 0, total[rr] // np.where(size[rr] > 0, size[rr], 1), 0).astype(
                np.int64
            )
            count[rr] = np.where(given_count > 0, given_count, by_total)
        return count, size

    def _book_placed(self) -> None:
        """Put the pods that hold or are nominated to GPU memory on devices: annotated first, then
        running/bound before nominated, by creation then name; one that fits nowhere is a fact, put on
        the freest device. Plain lists while assigning (thousands of pods), one array write at the end."""
        col = self.col
        assert col is not None
        placed = [
            (t, r, self._annotated(t))
            for t in self.session.cluster.tasks.values()
            if t.request[col] > 0 and (r := t.future_row) >= 0
        ]
        placed.sort(
            key=lambda x: (x[2] is None, x[0].status is TaskStatus.PIPELINED, x[0].creation, x[0].name)
        )
        rows: dict[int, list[float]] = {}
        counts, sizes = self.devices.tolist(), self.per_device.tolist()
        for t, r, dev in placed:
            k = counts[r]
            if k <= 0:
                continue
            free = rows.get(r)
            if free is None:
                free = rows[r] = [sizes[r]] * k
            req = float(t.request[col])
            if dev is None or dev >= k:
                need = req - EPS
                for dev in range(k):
                    if free[dev] >= need:
                        break
                else:  # fits nowhere: a fact, put on the freest
                    dev = free.index(max(free))
            free[dev] -= req
            self.assign[t.uid] = (r, dev)
            self.memory[t.uid] = {r: dev}
            self.tasks[t.uid] = t
            if t.status is TaskStatus.PIPELINED:
                self._watch.append(t)
        for r, free in rows.items():
            self.free[r, : len(free)] = free

    def on_session_close(self) -> None:
        """Write the device of pods bound or nominated this cycle into their annotations (the model's)."""
        if self.col is None:
            return
        decided = {b.pod for b in self.session.decisions.binds}
        decided |= {m.pod for m in self.session.decisions.nominations if m.node}
        for uid, (_row, dev) in self.assign.items():
            t = self.tasks[uid]
            if t.key in decided:  # a new dict: pods may share one (simulator)
                t.annotations = {**t.annotations, GPU_INDEX: str(dev)}

    # -- helpers -------------------------------------------------------------------------------
    def _req(self, task: Task) -> float:
        return float(task.request[self.col]) if self.col is not None else 0.0

    @staticmethod
    def _annotated(task: Task) -> int | None:
        raw = task.annotations.get(GPU_INDEX)
        if raw is None:
            return None
        try:
            dev = int(str(raw).split(",")[0].strip())
        except ValueError:
            return None
        return dev if dev >= 0 else None

    def _binpack(self, row: int, req: float) -> int:
        """The fullest device of ``row`` that fits ``req`` (lowest index on ties); the freest if none does."""
        free = self.free[row, : self.devices[row]]
        ok = free >= req - EPS
        if ok.any():
            return int(np.argmin(np.where(ok, free, np.inf)))
        return int(np.argmax(free)) if free.size else 0

    def _place(self, task: Task, row: int, dev: int) -> None:
        if self.devices[row] <= 0:
            return  # a node without GPU devices: nothing to hold
        req = self._req(task)
        self.free[row, dev] -= req
        self.max_free[row] = self.free[row].max()
        self.assign[task.uid] = (row, dev)
        self.memory.setdefault(task.uid, {})[row] = dev
        self.tasks[task.uid] = task

    def _release(self, task: Task) -> None:
        held = self.assign.pop(task.uid, None)
        if held is None:
            return
        row, dev = held
        self.free[row, dev] += self._req(task)
        self.max_free[row] = self.free[row].max()

    def _reconcile(self, task: Task) -> None:
        """Make the books follow where ``task`` now is; prefer the device it last held on that node."""
        if self._req(task) <= 0:
            return
        row = task.future_row
        held = self.assign.get(task.uid)
        if held is not None and held[0] == row:
            return
        self._release(task)
        if row < 0:
            return
        dev = self.memory.get(task.uid, {}).get(row)
        if dev is None or self.free[row, dev] < self._req(task) - EPS:
            dev = self._binpack(row, self._req(task))
        self._place(task, row, dev)

    def _sync(self) -> None:
        """Catch changes that fire no event (an earlier cycle's nomination cleared, or that reverted)."""
        if self._seen == self.session.capacity.version:
            return
        self._seen = self.session.capacity.version
        for t in self._watch:
            if t.uid not in self._removed:
                self._reconcile(t)
                if self.kai is not None:
                    self.kai.reconcile(t)

    def _room(self, task: Task, row: int) -> float:
        """The largest free device on ``row`` for ``task`` (its own share counts as free)."""
        held = self.assign.get(task.uid)
        if held is not None and held[0] == row:
            free = self.free[row].copy()
            free[held[1]] += self._req(task)
            return float(free.max())
        return float(self.max_free[row])

    # -- events --------------------------------------------------------------------------------
    def on_allocate(self, task: Task) -> None:
        self._reconcile(task)
        if self.kai is not None:
            self.kai.reconcile(task)

    def on_deallocate(self, task: Task) -> None:
        self._reconcile(task)
        if self.kai is not None:
            self.kai.reconcile(task)

    # -- placement -----------------------------------------------------------------------------
    def predicate(self, task: Task) -> np.ndarray:
        if self.kai is not None and self.kai.wants(task):
            self._sync()
            return self._memory_predicate(task) & self.kai.fits(task)
        return self._memory_predicate(task)

    def _memory_predicate(self, task: Task) -> np.ndarray:
        req = self._req(task)
        if req <= 0:
            return self._everywhere
        self._sync()
        mask = self.max_free >= req - EPS
        held = self.assign.get(task.uid)
        if held is not None:
            mask = mask.copy()
            mask[held[0]] = self._room(task, held[0]) >= req - EPS
        return mask

    def resolvable(self, task: Task) -> np.ndarray:
        """Nodes with a device big enough for ``task`` once pods are evicted (the preempt pre-filter)."""
        req = self._req(task)
        out = self._everywhere if req <= 0 else self.capacity >= req - EPS
        if self.kai is not None and self.kai.wants(task):
            out = out & self.kai.capacity_fits(task)
        return out

    def explain(self, task: Task) -> list[tuple[np.ndarray, str]]:
        req = self._req(task)
        out = []
        if self.kai is not None and self.kai.wants(task):
            count, _ = self.kai.demand(task)
            share = task.gpu_share
            what = (
                "a whole GPU device"
                if share is None
                else (
                    f"{share[1]:g} of a GPU device"
                    if share[1] > 0
                    else f"{int(share[2] / 1048576000)}MiB of GPU memory"
                )
            )
            out.append((~self.kai.fits(task), f"node(s) had no {count} GPU device(s) with {what} free"))
        if req <= 0:
            return out
        return out + [
            (
                ~self._memory_predicate(task),
                f"node(s) had no single GPU device with {format_quantity(req, 'memory')} of GPU memory free",
            )
        ]

    # -- simulation (seed 003) -----------------------------------------------------------------
    def simulate_remove_task(self, task: Task, node: int) -> None:
        """Free ``task``'s share, remembering its device."""
        if self.kai is not None and self.kai.wants(task):
            self._sync()
            if task.uid in self.kai.assign:
                self.kai.release(task)
                self._removed.add(task.uid)
        if self._req(task) <= 0:
            return
        self._sync()
        if task.uid in self.assign:
            self._release(task)
            self._removed.add(task.uid)

    def simulate_add_task(self, task: Task, node: int) -> None:
        """Put ``task`` on ``node``: back on its device when it had one there (``keepDeviceOnReAdd``),
        else the fullest device that fits."""
        if self.kai is not None and self.kai.wants(task) and node >= 0:
            self._sync()
            kai_held = self.kai.assign.get(task.uid)
            if kai_held is None or kai_held[0] != node:
                self.kai.release(task)
                self._removed.discard(task.uid)
                if not self.args.keep_device:
                    self.kai.last.get(task.uid, {}).pop(node, None)
                self.kai.place(task, node)
        req = self._req(task)
        if req <= 0 or node < 0:
            return
        self._sync()
        held = self.assign.get(task.uid)
        if held is not None:
            if held[0] == node:
                return
            self._release(task)
        self._removed.discard(task.uid)
        dev = self.memory.get(task.uid, {}).get(node) if self.args.keep_device else None
        if dev is None:
            dev = self._binpack(node, req)
        self._place(task, node, dev)

    def simulate_predicate(self, task: Task, node: int) -> bool:
        if self.kai is not None and self.kai.wants(task):
            self._sync()
            if not self.kai.fits_on(task, node):
                return False
        req = self._req(task)
        if req <= 0:
            return True
        self._sync()
        return self._room(task, node) >= req - EPS

    # -- inspection ----------------------------------------------------------------------------
    def _device_of(self, task: Task) -> tuple[int, int] | None:
        """``(node row, device)`` that ``task`` holds GPU memory on, or None."""
        return self.assign.get(task.uid)

    def _device_free(self, node: int) -> np.ndarray:
        """Free memory (milli-bytes) of each device of node row ``node``."""
        return self.free[node, : self.devices[node]].copy()
