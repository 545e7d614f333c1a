"""Resource vectors: one float64 column per resource name, in milli-units (see :mod:`quantity`).

A :class:`ResourceIndex` fixes the columns for one cluster. Every node, task, job and queue vector of
that cluster has the same length, so fits and shares are array operations.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from corral.model.quantity import format_quantity

__all__ = ["ResourceIndex", "CPU", "MEMORY", "PODS", "GPU", "EPS"]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"
#: Tolerance for fits: amounts are integral milli-units, so anything below one milli is rounding.
EPS = 1e-3


class ResourceIndex:
    """The resource names of one cluster and their column numbers. cpu, memory and pods always exist."""

    __slots__ = ("names", "_pos")

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names: list[str] = []
        self._pos: dict[str, int] = {}
        for name in (CPU, MEMORY, PODS, *names):
            self.add(name)

    def add(self, name: str) -> int:
        pos = self._pos.get(name)
        if pos is None:
            pos = self._pos[name] = len(self.names)
            self.names.append(name)
        return pos

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self._pos

    def pos(self, name: str) -> int:
        return self._pos[name]

    def get(self, name: str) -> int | None:
        return self._pos.get(name)

    def zeros(self) -> np.ndarray:
        return np.zeros(len(self.names))

    def vector(self, amounts: Mapping[str, float]) -> np.ndarray:
        """A vector from ``{name: milli}``; names not in the index are added first (call before freezing)."""
        vec = np.zeros(len(self.names))
        for name, amount in amounts.items():
            vec[self._pos[name]] = amount
        return vec

    def as_dict(self, vec: np.ndarray, *, nonzero: bool = True) -> dict[str, float]:
        return {n: float(vec[i]) for i, n in enumerate(self.names) if not nonzero or vec[i]}

    def describe(self, vec: np.ndarray) -> str:
        """``cpu 2, memory 4Gi, nvidia.com/gpu 8`` for a person (pods omitted)."""
        parts = [f"{n} {format_quantity(vec[i], n)}" for i, n in enumerate(self.names)
                 if vec[i] and n != PODS]
        return ", ".join(parts) or "nothing"
