"""``nodeorder`` (Volcano ``plugins/nodeorder``, the kube-scheduler scores): each score is 0–100 times
its weight, summed.

- ``leastrequested.weight`` (1): mean over cpu and memory of the free fraction after placing the pod;
- ``mostrequested.weight`` (0): mean over cpu and memory of the used fraction after placing the pod;
- ``balancedresource.weight`` (1): 100 × (1 − the spread of the cpu, memory and GPU fractions);
- ``nodeaffinity.weight`` (2): the preferred node-affinity weights a node matches over the sum of all
  preferred weights, times 100 (kube-scheduler normalises over the candidate set instead; dividing by
  the total keeps a node's score its own, so scores can be cached per node);
- ``podaffinity.weight`` (2): kube-scheduler's InterPodAffinity score, both ways
  (``interpodaffinity/scoring.go``, which Volcano's nodeorder calls): for each placed pod, the incoming
  pod's preferred affinity terms selecting it add their weight, its preferred anti-affinity terms
  subtract theirs, and the placed pod's own preferred affinity (+weight) and anti-affinity (−weight)
  terms selecting the *incoming* pod, and its required affinity terms selecting it (+
  ``podaffinity.hardPodAffinityWeight``), count likewise — each on every node sharing the placed pod's
  value of the term's topology key. The sums are normalised over the candidate nodes as
  kube-scheduler's ``NormalizeScore`` does (``100 × (s − min) / (max − min)``, truncated; 0 everywhere
  when all are equal). This score depends on other nodes and pods, so ``score_scope`` says ``"all"``
  for a pod with preferred terms of its own or one that some pod's terms of the cluster may select,
  and the session keeps no score of it;
- ``podaffinity.hardPodAffinityWeight`` (0; corral's key): kube-scheduler's
  ``InterPodAffinityArgs.hardPodAffinityWeight`` (0–100; kube-scheduler's default is 1). Volcano builds
  the plugin with empty arguments, so a placed pod's required affinity terms weigh 0 there, and here by
  default;
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

from corral.errors import ConfigError
from corral.framework.config import arg
from corral.framework.extension import NodeOrder
from corral.framework.hints import ALL, ROW, CacheHints, ScoreScope
from corral.framework.plugin import Plugin
from corral.manifests.selectors import PodAffinityTerm
from corral.model import ALLOCATED_STATES, Task
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
    hard_pod_affinity: int = arg(
        "podaffinity.hardPodAffinityWeight",
        0,
        "weight of a placed pod's required affinity term that selects the pod (0-100)",
        minimum=0,
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

    def __post_init__(self) -> None:
        if self.hard_pod_affinity > 100:  # kube-scheduler's ValidateInterPodAffinityArgs
            raise ConfigError(
                f"must be in the range 0-100, got {self.hard_pod_affinity}",
                field="podaffinity.hardPodAffinityWeight",
            )


def _normalised(raw: np.ndarray) -> np.ndarray:
    """kube-scheduler's InterPodAffinity ``NormalizeScore`` over the candidates: ``100 × (s − min) /
    (max − min)`` truncated to an integer, 0 everywhere when the sums are all equal."""
    if not len(raw):
        return raw
    lo, hi = float(raw.min()), float(raw.max())
    if hi - lo <= 0:
        return np.zeros_like(raw)
    return np.trunc(100.0 * ((raw - lo) / (hi - lo)))


def _placed(task: Task) -> bool:
    return task.node >= 0 and task.status in ALLOCATED_STATES


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
        self._ns = self.session.cluster.namespace_labels
        # (owner, term, signed weight) of every pod whose terms score other pods, once asked for
        self._others: list[tuple[Task, PodAffinityTerm, int]] | None = None
        self._selectable: dict[Any, bool] = {}

    def sign_pod(self, task: Task) -> tuple[Any, ...] | None:
        """Scores depend on the pod's request, affinity, tolerations and (with inter-pod terms, required
        or preferred: they select pods of its own namespace by default) namespace, which its class holds.
        Its labels and namespace also decide which placed pods' terms select it, but such a pod's score
        scope is ``"all"`` (:meth:`score_scope`), so no score of it is kept under the signature."""
        k = task.klass
        return None if k is None else (k.affinity, k.tolerations, k.namespace)

    def score_scope(self, task: Task) -> ScoreScope:
        """A node's score is a function of its own row, except the inter-pod score, which counts placed
        pods in the node's topology domain: ``"all"`` for a pod with preferred inter-pod terms of its
        own, or one that a term of some pod of the cluster, placed or not (it may be placed during the
        session), may select (by the term's namespaces and label selector)."""
        if not self.args.pod_affinity:
            return ROW
        aff = task.affinity
        if aff is not None and (aff.pod_affinity_preferred or aff.pod_anti_affinity_preferred):
            return ALL
        return ALL if self._selectable_by_others(task) else ROW

    def _scoring_terms(self) -> list[tuple[Task, PodAffinityTerm, int]]:
        """(owner, term, signed weight) for every term of the cluster's pods that scores other pods:
        preferred affinity (+weight), preferred anti-affinity (−weight), required affinity
        (+``hardPodAffinityWeight``, when it is above 0)."""
        if self._others is None:
            hard = self.args.hard_pod_affinity
            out: list[tuple[Task, PodAffinityTerm, int]] = []
            for owner in self.session.pods_scoring_others():
                aff = owner.affinity
                assert aff is not None
                out += [(owner, term, term.weight) for term in aff.pod_affinity_preferred]
                out += [(owner, term, -term.weight) for term in aff.pod_anti_affinity_preferred]
                if hard > 0:
                    out += [(owner, term, hard) for term in aff.pod_affinity]
            self._others = out
        return self._others

    def _selectable_by_others(self, task: Task) -> bool:
        """May a term of some pod (``_scoring_terms``) select ``task``, wherever the owner is?"""
        terms = self._scoring_terms()
        if not terms:
            return False
        key = (task.namespace, tuple(sorted(task.labels.items())))
        got = self._selectable.get(key)
        if got is None:
            got = self._selectable[key] = any(
                term.covers(task.namespace, owner.namespace, self._ns) and term.selector.matches(task.labels)
                for owner, term, _ in terms
            )
        return got

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
        if a.pod_affinity:
            sums = self._inter_pod(task, rows)
            if sums is not None:
                score += a.pod_affinity * _normalised(sums)
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

    def _inter_pod(self, task: Task, rows: np.ndarray) -> np.ndarray | None:
        """kube-scheduler's InterPodAffinity ``PreScore`` and ``Score`` for ``rows``: the weight sums per
        topology domain (key, value) of the placed pods' matching terms, both ways (module
        docstring), summed over the keys a node carries; None when no term concerns ``task``."""
        totals: dict[str, dict[str, float]] = {}
        aff = task.affinity
        if aff is not None and (aff.pod_affinity_preferred or aff.pod_anti_affinity_preferred):
            self._own_terms(task, aff.pod_affinity_preferred, aff.pod_anti_affinity_preferred, totals)
        nodes = self.session.cluster.nodes
        if self._selectable_by_others(task):
            for owner, term, weight in self._scoring_terms():
                if (
                    owner is not task
                    and _placed(owner)
                    and term.covers(task.namespace, owner.namespace, self._ns)
                    and term.selector.matches(task.labels)
                ):
                    value = nodes.label_values(term.topology_key)[owner.node]
                    if value is not None:
                        per = totals.setdefault(term.topology_key, {})
                        per[value] = per.get(value, 0) + weight
        if not totals:
            return None
        raw = np.zeros(len(rows))
        for key, per in totals.items():
            values = nodes.label_values(key)
            raw += np.array([per.get(v, 0) if (v := values[r]) is not None else 0 for r in rows], dtype=float)
        return raw

    def _own_terms(
        self,
        task: Task,
        affinity: tuple[PodAffinityTerm, ...],
        anti: tuple[PodAffinityTerm, ...],
        totals: dict[str, dict[str, float]],
    ) -> None:
        """Add the incoming pod's preferred terms: +weight (affinity) or −weight (anti-affinity) on the
        domain of every placed pod a term selects (in the pod's namespaces)."""
        nodes = self.session.cluster.nodes
        placed = [t for t in self.session.cluster.tasks.values() if _placed(t) and t is not task]
        terms = [(t, t.weight) for t in affinity] + [(t, -t.weight) for t in anti]
        for term, weight in terms:
            values = nodes.label_values(term.topology_key)
            per = totals.setdefault(term.topology_key, {})
            for other in placed:
                if term.covers(other.namespace, task.namespace, self._ns) and term.selector.matches(
                    other.labels
                ):
                    v = values[other.node]
                    if v is not None:
                        per[v] = per.get(v, 0) + weight
