"""HyperNode-level bin packing of ``network-topology-aware`` (Volcano's ``hypernode.binpack.*``
arguments, ``plugins/network-topology-aware``).

- **Weights** (``hypernode.binpack.cpu``, ``.memory``, ``.resources``, ``.resources.<name>``): cpu and
  memory weigh 1 unless given, each listed resource 1 unless its own key says otherwise; a negative
  weight counts as 1, as Volcano's ``getPriorityWeight`` reads it; a ``.resources.<name>`` weight whose
  resource is not listed in ``.resources`` is not read (corral validate says so).
- **A domain's score** for a gang (Volcano ``getSubJobHyperNodeBinPackingScore``): over the weighted
  resources the gang requests, the weighted mean of (used + the gang's request) / allocatable in the
  HyperNode; 0 when one of them would exceed what the HyperNode has.
- **Normal pods** (``hypernode.binpack.normal-pod.enable``, default true; ``.fading``, default 0.8, a
  negative value counts as 0.8): a pod whose job (and sub-group) has no ``networkTopology`` gets a node
  score — the mean over the tiers of the tree of the score of the node's HyperNode of that tier for
  that pod (1 where the node is in no HyperNode of the tier), tier ``t`` weighing ``fading**(t-1)`` —
  times 100 and the plugin's ``weight`` (Volcano ``batchNodeOrderFnForNormalPods``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.model import Task
from corral.model.resources import EPS

__all__ = [
    "NormalPodBinpack",
    "binpack_weights",
    "binpack_weights_default",
    "domain_binpack_score",
    "unread_weights",
]


def binpack_weights(args: Any, names: tuple[str, ...] | list[str]) -> list[tuple[int, float]] | None:
    """``[(resource column, weight)]`` of Volcano's hypernode binpack weights among the snapshot's
    resources ``names``, or None when no ``hypernode.binpack.*`` weight argument is given (then corral
    scores a domain by its GPU, else CPU, fraction in use)."""
    cpu, memory = args.given(args.bp_cpu), args.given(args.bp_memory)
    if cpu is None and memory is None and not args.bp_resources and not args.bp_weights:
        return None

    def w(value: float | None) -> float:
        return 1.0 if value is None or value < 0 else float(value)

    out = {"cpu": w(cpu), "memory": w(memory)}
    for name in listed(args):
        out[name] = w(args.bp_weights.get(name))
    pos = {n: i for i, n in enumerate(names)}
    return [(pos[n], wt) for n, wt in out.items() if n in pos and wt > 0]


def listed(args: Any) -> list[str]:
    return [r.strip() for r in args.bp_resources.split(",") if r.strip()]


def unread_weights(args: Any) -> list[str]:
    """The ``hypernode.binpack.resources.<name>`` keys Volcano does not read (the resource is not in
    ``hypernode.binpack.resources``)."""
    names = set(listed(args))
    return sorted(k for k in args.bp_weights if k not in names)


def domain_binpack_score(
    loaded: np.ndarray, cap: np.ndarray, asked: np.ndarray, weights: list[tuple[int, float]]
) -> float:
    """0..1: Volcano's HyperNode binpack score of one domain whose allocatable is ``cap`` and whose use,
    the gang's pods included, would be ``loaded`` (vectors); only the weighted resources the gang asks
    for (``asked`` true) count."""
    total = got = 0.0
    for c, wt in weights:
        if not asked[c]:
            continue
        if cap[c] <= 0 or loaded[c] > cap[c] + EPS:
            return 0.0
        got += wt * float(loaded[c] / cap[c])
        total += wt
    return got / total if total > 0 else 0.0


def binpack_weights_default(names: tuple[str, ...] | list[str]) -> list[tuple[int, float]]:
    """Volcano's weights when no ``hypernode.binpack.*`` weight is given: cpu 1, memory 1."""
    pos = {n: i for i, n in enumerate(names)}
    return [(pos[n], 1.0) for n in ("cpu", "memory") if n in pos]


class NormalPodBinpack:
    """The normal-pod node score over one session's HyperNode tree (see the module docstring)."""

    def __init__(self, session: Any, weights: list[tuple[int, float]], fading: float, scale: float) -> None:
        self.session = session
        self.weights = weights
        self.scale = scale
        tree = session.cluster.hypernodes
        hx = tree.index()
        n = len(session.cluster.nodes)
        self.hx = hx
        tiers = list(range(min(tree.tiers), max(tree.tiers) + 1)) if tree else []
        self.tier_w = []
        self.node_hn = []
        for t in tiers:
            if fading == 0 and t < 1:
                continue  # fading**(t-1) is not finite: Volcano's score would be undefined
            owner = np.full(n, -1, dtype=np.int64)
            for h in np.flatnonzero(hx.tier == t)[::-1]:  # the first by name wins
                owner[hx.nodes[h].mask] = h
            self.tier_w.append(fading ** (t - 1))
            self.node_hn.append(owner)
        self._sums: tuple[int, np.ndarray, np.ndarray] | None = None

    def _used(self) -> tuple[np.ndarray, np.ndarray]:
        nodes = self.session.cluster.nodes
        version = self.session.capacity.version
        if self._sums is None or self._sums[0] != version:
            live = (~nodes.down)[:, None]
            cap = self.hx.sums(nodes.allocatable * live) if self._sums is None else self._sums[2]
            self._sums = (version, self.hx.sums(nodes.used * live), cap)
        return self._sums[1], self._sums[2]

    def scores(self, task: Task, rows: np.ndarray) -> np.ndarray:
        total = float(sum(self.tier_w))
        if not self.tier_w or total <= 0:
            return np.zeros(len(rows))
        used, cap = self._used()
        req = task.request
        out = np.zeros(len(rows))
        per_hn: dict[int, float] = {}
        for wt, owner in zip(self.tier_w, self.node_hn):
            hs = owner[rows]
            s = np.ones(len(rows))
            for h in np.unique(hs[hs >= 0]).tolist():
                if h not in per_hn:
                    per_hn[h] = domain_binpack_score(used[h] + req, cap[h], req > 0, self.weights)
                s[hs == h] = per_hn[h]
            out += wt * s
        return self.scale * 100.0 * out / total
