"""Resource vectors: one float64 column per resource name, in milli-units (see :mod:`quantity`).

A :class:`ResourceIndex` fixes the columns for one cluster. Every node, task, job and queue vector of
that cluster has the same length, so fits and shares are array operations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from corral.model.quantity import format_quantity

__all__ = ["CPU", "EPS", "GPU", "MEMORY", "PODS", "ResourceIndex", "admission_refusal"]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = "nvidia.com/gpu"
#: Tolerance for fits: amounts are integral milli-units, so anything below one milli is rounding.
EPS = 1e-3


class ResourceIndex:
    """The resource names of one cluster and their column numbers. cpu, memory and pods always exist."""

    __slots__ = ("_pos", "names")

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
        parts = [
            f"{n} {format_quantity(vec[i], n)}" for i, n in enumerate(self.names) if vec[i] and n != PODS
        ]
        return ", ".join(parts) or "nothing"


def admission_refusal(res: ResourceIndex, need: np.ndarray, left: np.ndarray, factor: float) -> str:
    """Why a podgroup is not admitted, naming each resource that is short (``pods``: pod slots):
    ``not admitted: minResources need nvidia.com/gpu 8; the cluster can admit only nvidia.com/gpu 3.2
    more (short of nvidia.com/gpu; overcommit-factor 1.2)``."""
    short = need > left + EPS
    names, lefts = [], []
    for i, n in enumerate(res.names):
        if short[i]:
            label = "pod slots" if n == PODS else n
            amount = max(float(left[i]), 0.0)
            names.append(label)
            lefts.append(f"{label} {amount / 1000:g}" if n == PODS else f"{n} {format_quantity(amount, n)}")
    need_s = res.describe(need)
    if PODS in res and need[res.pos(PODS)]:
        need_s = (need_s + ", " if need_s != "nothing" else "") + f"pod slots {need[res.pos(PODS)] / 1000:g}"
    return (
        f"not admitted: minResources need {need_s}; the cluster can admit only {', '.join(lefts)} more "
        f"(short of {', '.join(names)}; overcommit-factor {factor:g})"
    )
