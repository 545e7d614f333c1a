"""``binpack`` (Volcano ``plugins/binpack``): prefer nodes that are already full, to keep whole nodes
free for the big gangs.

For each resource the pod requests that has a weight (``binpack.cpu``, ``binpack.memory``,
``binpack.resources: nvidia.com/gpu`` with ``binpack.resources.nvidia.com/gpu``), the node's used fraction
after placing the pod, weighted and averaged, times 100 and ``binpack.weight``. A node where the pod does
not fit scores 0 for that resource (it is filtered out anyway).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.errors import ConfigError
from corral.framework.config import arg
from corral.framework.extension import NodeOrder
from corral.framework.hints import BaseSigned
from corral.framework.plugin import Plugin
from corral.model import Task
from corral.model.resources import CPU, MEMORY

__all__ = ["BinpackPlugin"]


@dataclass(frozen=True)
class BinpackArgs:
    weight: float = arg("binpack.weight", 1.0, "weight of the binpack score among node orders", kind="float")
    cpu: float = arg("binpack.cpu", 1.0, "weight of cpu", kind="float")
    memory: float = arg("binpack.memory", 1.0, "weight of memory", kind="float")
    resources: str = arg("binpack.resources", "", "comma-separated extra resources, e.g. nvidia.com/gpu")
    resource_weights: dict[Any, Any] = arg(
        "binpack.resources.", {}, "weight of each extra resource (default 1)", prefix=True, kind="float"
    )


class BinpackPlugin(Plugin, NodeOrder, BaseSigned):
    name = "binpack"
    Args = BinpackArgs

    def on_session_open(self) -> None:
        res = self.session.cluster.resources
        weights = np.zeros(len(res))
        weights[res.pos(CPU)] = self.args.cpu
        weights[res.pos(MEMORY)] = self.args.memory
        extra = [r.strip() for r in self.args.resources.split(",") if r.strip()]
        for name in extra:
            pos = res.get(name)
            if pos is not None:
                weights[pos] = float(self.args.resource_weights.get(name, 1.0))
        for name in self.args.resource_weights:
            if name not in extra:
                raise ConfigError(
                    f"binpack.resources.{name} given but {name} is not in binpack.resources",
                    field=f"binpack.resources.{name}",
                )
        self.weights = weights
        self._per_class: dict[tuple[Any, ...], tuple[np.ndarray, ...] | None] = {}

    def _terms(self, task: Task) -> tuple[np.ndarray, ...] | None:
        """``(cols, request, scaled weights, allocatable of cols, where it is > 0)`` for ``task``
        (allocatable does not change within a session), or None when it scores 0 everywhere (cached
        per equivalence class; the score of every placed pod is recomputed on the rows it changed)."""
        key = task.klass
        if key and key in self._per_class:
            return self._per_class[key]
        w = self.weights * (task.request > 0)
        cols = np.flatnonzero(w)
        total_w = w[cols].sum()
        terms = None
        if len(cols) and total_w > 0 and self.args.weight:
            alloc = self.session.cluster.nodes.allocatable[:, cols]
            terms = (
                cols,
                task.request[cols],
                w[cols] * (100.0 * self.args.weight / total_w),
                alloc,
                alloc > 0,
            )
        if key:
            self._per_class[key] = terms
        return terms

    def node_order(self, task: Task, rows: np.ndarray) -> np.ndarray:
        terms = self._terms(task)
        if terms is None:
            return np.zeros(len(rows))
        cols, req, w, alloc_cols, has = terms
        alloc = alloc_cols[rows]
        used = self.session.cluster.nodes.used[rows[:, None], cols] + req
        ok = has[rows] & (used <= alloc)
        # column-major, as row-then-column indexing lays it out: ``frac @ w`` rounds the same as it did
        frac = np.divide(used, alloc, out=np.zeros(used.shape, order="F"), where=ok)
        return frac @ w
