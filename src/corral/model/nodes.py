"""Nodes as columns (DESIGN.md convention 5).

``allocatable``, ``used``, ``releasing`` and ``pipelined`` are ``[nodes × resources]`` float64 arrays in
milli-units. ``idle = allocatable - used``; ``future_idle = idle + releasing - pipelined`` (Volcano's
``FutureIdle``). Labels are indexed lazily: a label selector over all nodes is a cached boolean mask.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from corral.model.objects import Taint
from corral.model.patterns import compile_name_pattern
from corral.model.resources import ResourceIndex

__all__ = ["Nodes"]


class Nodes:
    """All nodes of a cluster, sorted by name so row order is a stable tie-break."""

    def __init__(
        self,
        resources: ResourceIndex,
        names: Sequence[str],
        allocatable: np.ndarray,
        labels: Sequence[dict[str, str]],
        taints: Sequence[tuple[Taint, ...]],
        unschedulable: Sequence[bool] | np.ndarray,
    ) -> None:
        self.resources = resources
        self.names = list(names)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.allocatable = np.asarray(allocatable, dtype=float).reshape(len(self.names), len(resources))
        n, r = self.allocatable.shape
        self.used = np.zeros((n, r))
        self.releasing = np.zeros((n, r))
        self.pipelined = np.zeros((n, r))
        self.labels = list(labels)
        self.taints = list(taints)
        self.unschedulable = np.asarray(unschedulable, dtype=bool).reshape(n)
        self.down = np.zeros(n, dtype=bool)  # simulator: node failed
        self.annotations: list[dict[str, str]] = [{} for _ in range(n)]  # per row, for plugins that read them
        self.locked_for: list[str | None] = [None] * n  # reservation (seed 001)
        self._mask_cache: dict[tuple[Any, ...], np.ndarray] = {}  # (label test) -> row mask
        self._label_values: dict[str, list[str | None]] = {}  # key -> each row's value
        self._label_rows: dict[str, dict[str, np.ndarray]] = {}  # key -> value -> rows
        self._taint_ids: np.ndarray | None = None
        self._soft_taints: tuple[np.ndarray, list[tuple[Taint, ...]]] | None = None

    def __len__(self) -> int:
        return len(self.names)

    # -- derived capacity -------------------------------------------------------------------------
    @property
    def idle(self) -> np.ndarray:
        return self.allocatable - self.used

    @property
    def future_idle(self) -> np.ndarray:
        return self.allocatable - self.used + self.releasing - self.pipelined

    def state_bytes(self) -> bytes:
        """A byte image of the mutable columns, for the discard-restores-exactly property."""
        return b"".join(a.tobytes() for a in (self.used, self.releasing, self.pipelined))

    # -- label index ------------------------------------------------------------------------------
    def label_values(self, key: str) -> list[str | None]:
        cached = self._label_values.get(key)
        if cached is None:
            cached = self._label_values[key] = [lab.get(key) for lab in self.labels]
        return cached

    def label_rows(self, key: str) -> dict[str, np.ndarray]:
        """Inverted index of one label key: value -> the rows carrying it (built once per key)."""
        cached = self._label_rows.get(key)
        if cached is None:
            grouped: dict[str, list[int]] = {}
            for i, v in enumerate(self.label_values(key)):
                if v is not None:
                    grouped.setdefault(v, []).append(i)
            cached = self._label_rows[key] = {
                v: np.array(rows, dtype=np.int64) for v, rows in grouped.items()
            }
        return cached

    def _rows_mask(self, key: str, values: Iterable[str] | None) -> np.ndarray:
        """Rows whose label ``key`` is one of ``values`` (any value when None)."""
        index = self.label_rows(key)
        mask = np.zeros(len(self.names), dtype=bool)
        for v in index if values is None else values:
            rows = index.get(v)
            if rows is not None:
                mask[rows] = True
        return mask

    def label_mask(self, key: str, op: str, values: Iterable[str] = ()) -> np.ndarray:
        """Nodes whose labels satisfy one node-selector requirement (Kubernetes operators:
        In, NotIn, Exists, DoesNotExist, Gt, Lt). Cached per requirement; In/NotIn/Exists/DoesNotExist
        read the key's inverted index, so many selectors over one key cost one pass over the nodes."""
        vals = tuple(sorted(values))
        ck = (op, key, vals)
        mask = self._mask_cache.get(ck)
        if mask is not None:
            return mask
        if op == "In":
            mask = self._rows_mask(key, vals)
        elif op == "NotIn":
            mask = ~self._rows_mask(key, vals)
        elif op == "Exists":
            mask = self._rows_mask(key, None)
        elif op == "DoesNotExist":
            mask = ~self._rows_mask(key, None)
        elif op in ("Gt", "Lt"):
            column = self.label_values(key)
            bound = int(vals[0])
            mask = np.fromiter((_int_cmp(v, op, bound) for v in column), bool, len(column))
        else:
            raise ValueError(f"unknown operator {op}")
        self._mask_cache[ck] = mask
        return mask

    def selector_mask(self, requirements: Iterable[Any]) -> np.ndarray:
        """Nodes matching every requirement (objects with ``key``, ``op``, ``values``); all nodes for
        none."""
        mask = np.ones(len(self.names), dtype=bool)
        for r in requirements:
            mask = mask & self.label_mask(r.key, r.op, r.values)
        return mask

    def regex_mask(self, pattern: str) -> np.ndarray:
        matches = compile_name_pattern(pattern)  # RE2: linear time (corral.model.patterns)
        return np.fromiter((matches(n) for n in self.names), bool, len(self.names))

    def taint_groups(self) -> tuple[np.ndarray, list[tuple[Taint, ...]]]:
        """Nodes grouped by identical NoSchedule/NoExecute taint sets: (group id per node, groups)."""
        if self._taint_ids is None:
            groups: dict[tuple[Taint, ...], int] = {}
            ids = np.empty(len(self.names), dtype=np.int32)
            for i, taints in enumerate(self.taints):
                key = tuple(t for t in taints if t.effect in ("NoSchedule", "NoExecute"))
                ids[i] = groups.setdefault(key, len(groups))
            self._taint_ids = ids
            self._taint_list = list(groups)
        return self._taint_ids, self._taint_list

    def soft_taint_groups(self) -> tuple[np.ndarray, list[tuple[Taint, ...]]]:
        """Nodes grouped by identical PreferNoSchedule taint sets: (group id per node, groups); worked
        out once, like :meth:`taint_groups` (a node's taints are set when the rows are built)."""
        if self._soft_taints is None:
            self._soft_taints = _soft_groups(self.taints)
        return self._soft_taints


def _soft_groups(taints: Sequence[tuple[Taint, ...]]) -> tuple[np.ndarray, list[tuple[Taint, ...]]]:
    groups: dict[tuple[Taint, ...], int] = {}
    ids = [
        groups.setdefault(tuple(t for t in row if t.effect == "PreferNoSchedule"), len(groups))
        for row in taints
    ]
    return np.array(ids, dtype=np.intp), list(groups)


def _int_cmp(value: str | None, op: str, bound: int) -> bool:
    if value is None:
        return False
    try:
        v = int(value)
    except ValueError:
        return False
    return v > bound if op == "Gt" else v < bound
