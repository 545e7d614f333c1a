"""``nodeorder`` (Volcano ``plugins/nodeorder``, the kube-scheduler scores): each score is 0–100 times
its weight, summed.

- ``leastrequested.weight`` (1): mean over cpu and memory of the free fraction after placing the pod;
- ``mostrequested.weight`` (0): mean over cpu and memory of the used fraction after placing the pod;
- ``balancedresource.weight`` (1): 100 × (1 − the spread of the cpu, memory and GPU fractions);
- ``nodeaffinity.weight`` (2): the preferred node-affinity weights a node matches over the sum of all
  preferred weights, times 100 (kube-scheduler normalises over the candidate set instead; dividing by
  the total keeps a node's score its own, so scores can be cached per node);
- ``podaffinity.weight`` (2): preferred inter-pod affinity (+weight) and anti-affinity (−weight) terms per
  matching placed pod in the node's topology domain, scaled to 0–100 over the set (this score depends
  on other nodes, so ``scores_row_local`` says so and the session does not cache it);
- ``tainttoleration.weight`` (1): kube-scheduler's TaintToleration score — fewer PreferNoSchedule taints
  the pod does not tolerate is better (100 for none, 0 for the most of any node);
- ``imagelocality.weight``, ``podtopologyspread.weight``: accepted with Volcano's spelling and no effect
  (a snapshot lists no images on nodes, and corral does not read topologySpreadConstraints).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.framework.config import arg
from corral.framework.extension import NodeOrder
from corral.framework.hints import ALL, ROW, CacheHints, ScoreScope
from corral.framework.plugin import Plugin
from corral.model import Task
from corral.model.resources import CPU, GPU, MEMORY

__all__ = ["NodeOrderPlugin"]


@dataclass(frozen=True)
class NodeOrderArgs:
    least: float = arg("leastrequested.weight", 1.0, "weight of the least-requested score", kind="float")
    most: float = arg("mostrequested.weight", 0.0, "weight of the most-requested score", kind="float")
    balanced: float = arg(
        "balancedresource.weight", 1.0, "weight of the balanced-allocation score", kind="float"
    )
    node_affinity: float = arg("nodeaffinity.weight", 2.0, "weight of preferred node affinity", kind="float")
    pod_affinity: float = arg(
        "podaffinity.weight", 2.0, "weight of preferred inter-pod affinity", kind="float"
    )
    taint: float = arg(
        "tainttoleration.weight", 1.0, "weight of the PreferNoSchedule taints score", kind="float"
    )
    image: float = arg("imagelocality.weight", 1.0, "accepted; a snapshot has no image lists", kind="float")
    spread: float = arg(
        "podtopologyspread.weight",
        2.0,
        "accepted; a snapshot's pods carry no spread constraints corral reads",
        kind="float",
    )


def _scaled(raw: np.ndarray) -> np.ndarray:
    lo, hi = float(raw.min(initial=0.0)), float(raw.max(initial=0.0))
    if hi - lo <= 0:
        return np.zeros_like(raw)
    return (raw - lo) * (100.0 / (hi - lo))


class NodeOrderPlugin(Plugin, NodeOrder, CacheHints):
    name = "nodeorder"
    Args = NodeOrderArgs

    def on_session_open(self) -> None:
        res = self.session.cluster.resources
        self.cols = [res.pos(CPU), res.pos(MEMORY)]
        self.bal_cols = np.array(self.cols + ([res.pos(GPU)] if GPU in res else []), dtype=np.intp)
        # allocatable does not change within a session: its scored columns are sliced once
        self._alloc = self.session.cluster.nodes.allocatable[:, self.bal_cols]
        self._has = self._alloc > 0
        # nodes grouped by their PreferNoSchedule taints (the hard ones are the predicates' business)
        self._soft_ids, self._soft_groups = self.session.cluster.nodes.soft_taint_groups()
        self._soft_taints = any(self._soft_groups)

    def sign_pod(self, task: Task) -> tuple[Any, ...] | None:
        """Scores depend on the pod's request, affinity, tolerations and (with inter-pod terms, required
        or preferred: they select pods of its own namespace by default) namespace, which its class holds."""
        k = task.klass
        return None if k is None else (k.affinity, k.tolerations, k.namespace)

    def score_scope(self, task: Task) -> ScoreScope:
        """A node's score is a function of its own row, except the preferred inter-pod (anti-)affinity
        terms, which count matching pods in the node's topology domain."""
        aff = task.affinity
        spread = (
            aff is not None
            and self.args.pod_affinity
            and (aff.pod_affinity_preferred or aff.pod_anti_affinity_preferred)
        )
        return ALL if spread else ROW

    def _fractions(self, task: Task, rows: np.ndarray) -> np.ndarray:
        """Used fraction of the cpu, memory[, gpu] columns after placing ``task``, capped at 1 (0 where
        the node has none of the resource). Requests and usage are never negative, so only the cap is
        needed."""
        cols = self.bal_cols
        used = self.session.cluster.nodes.used[rows[:, None], cols] + task.request[cols]
        frac = np.divide(used, self._alloc[rows], out=np.zeros(used.shape, order="F"), where=self._has[rows])
        return np.minimum(frac, 1.0, out=frac)

    def _resource_score(self, task: Task, row: int) -> float:
        """The least/most-requested and balanced scores of one node in plain floats (the one row a
        placement changed): the same IEEE operations in the same order as the array code below."""
        a, cols = self.args, self.bal_cols
        used = self.session.cluster.nodes.used[row, cols].tolist()
        req = task.request[cols].tolist()
        frac = []
        for u, r, al in zip(used, req, self._alloc[row].tolist()):
            f = (u + r) / al if al > 0 else 0.0
            frac.append(1.0 if f > 1.0 else f)
        mean = (frac[0] + frac[1]) * 0.5
        score = a.least * (1.0 - mean) * 100.0 + a.most * mean * 100.0
        if a.balanced:
            k = len(frac)
            total = frac[0]
            for f in frac[1:]:  # left to right, as numpy sums a short row (not sum():
                total += f  # Python 3.12's sum() compensates rounding)
            avg = total / k
            sq = (frac[0] - avg) * (frac[0] - avg)
            for f in frac[1:]:
                sq += (f - avg) * (f - avg)
            score += a.balanced * 100.0 * (1.0 - math.sqrt(sq / k))
        return score

    def node_order(self, task: Task, rows: np.ndarray) -> np.ndarray:
        a = self.args
        if (a.least or a.most or a.balanced) and len(rows) == 1:
            score = np.array([self._resource_score(task, int(rows[0]))])
        elif a.least or a.most or a.balanced:
            frac = self._fractions(task, rows)  # cpu, memory[, gpu]
            mean = (frac[:, 0] + frac[:, 1]) * 0.5
            score = a.least * (1.0 - mean) * 100.0 + a.most * mean * 100.0
            if a.balanced:  # population std over the columns, by hand
                k = frac.shape[1]  # (np.std costs more than all the rest)
                dev = frac - (frac.sum(axis=1) / k)[:, None]
                score += a.balanced * 100.0 * (1.0 - np.sqrt((dev * dev).sum(axis=1) / k))
        else:
            score = np.zeros(len(rows))
        aff = task.affinity
        if aff is not None and a.node_affinity and aff.node_preferred:
            raw = np.zeros(len(rows))
            pred = self.session.plugin("predicates")
            for weight, reqs in aff.node_preferred:
                m = np.ones(len(self.session.cluster.nodes), dtype=bool)
                for r in reqs:
                    m &= (
                        pred._requirement(r)
                        if pred is not None
                        else self.session.cluster.nodes.label_mask(r.key, r.op, r.values)
                    )
                raw += weight * m[rows]
            total = sum(w for w, _ in aff.node_preferred) or 1
            score += a.node_affinity * raw * (100.0 / total)
        if (
            aff is not None
            and a.pod_affinity
            and (aff.pod_affinity_preferred or aff.pod_anti_affinity_preferred)
        ):
            score += a.pod_affinity * _scaled(self._pod_preferred(task, rows))
        if a.taint and self._soft_taints:
            score += a.taint * self._taint_score(task, rows)
        return score

    def _taint_score(self, task: Task, rows: np.ndarray) -> np.ndarray:
        """kube-scheduler's TaintToleration score: fewer PreferNoSchedule taints the pod does not tolerate
        is better: 100 for none, 0 for the most over all nodes (not over the candidates, so a node's
        score is its own and can be cached); zero everywhere when no node has one the pod minds."""
        per_group = np.array(
            [
                sum(1 for t in g if not any(tol.tolerates(t) for tol in task.tolerations))
                for g in self._soft_groups
            ],
            dtype=float,
        )
        top = per_group.max(initial=0.0)
        return np.zeros(len(rows)) if top <= 0 else (1.0 - per_group[self._soft_ids][rows] / top) * 100.0

    def _pod_preferred(self, task: Task, rows: np.ndarray) -> np.ndarray:
        nodes = self.session.cluster.nodes
        placed = [
            t
            for t in self.session.cluster.tasks.values()
            if t.node >= 0 and t.status.value in ("Allocated", "Bound", "Running") and t is not task
        ]
        ns_labels = self.session.cluster.namespace_labels
        raw = np.zeros(len(rows))
        terms = [(t, +1) for t in task.affinity.pod_affinity_preferred] + [
            (t, -1) for t in task.affinity.pod_anti_affinity_preferred
        ]
        for term, sign in terms:
            values = nodes.label_values(term.topology_key)
            counts: dict[str, int] = {}
            for other in placed:
                if term.covers(other.namespace, task.namespace, ns_labels) and term.selector.matches(
                    other.labels
                ):
                    v = values[other.node]
                    if v is not None:
                        counts[v] = counts.get(v, 0) + 1
            raw += (
                sign
                * term.weight
                * np.array(
                    [counts.get(values[r], 0) if values[r] is not None else 0 for r in rows], dtype=float
                )
            )
        return raw
