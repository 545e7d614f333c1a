"""``predicates``: where a pod may go, resources aside (Volcano ``plugins/predicates``, which runs the
kube-scheduler filters).

Static checks — nodeSelector, required node affinity (every operator, ``matchFields`` on
``metadata.name``), taints with NoSchedule/NoExecute against tolerations, ``spec.unschedulable`` — are one
mask per equivalence class of pods, computed once per session (DESIGN.md convention 5). Required
inter-pod affinity and anti-affinity by topologyKey are checked against the pods placed so far in the
session, both ways as kube-scheduler does: the incoming pod's terms, and the anti-affinity terms of pods
already placed that select the incoming pod. As in kube-scheduler, a pod whose required affinity matches
no placed pod may still go anywhere with the topology key if it matches its own term (the first pod of
a group). Resource fit and the pod count are checked by the actions (SPEC.md §2).

Simulation points (seed 003): the placed-pod index is kept by the allocate/deallocate events, so a dry
run that adds or removes pods through a Statement sees affinity change; SimulateAddTask /
SimulateRemoveTask update the same index for hypothetical moves outside a Statement.
"""

from __future__ import annotations

import numpy as np

from corral.framework.plugin import Plugin
from corral.manifests.selectors import PodAffinityTerm, Requirement
from corral.model import OCCUPYING_STATES, Task, TaskStatus
from corral.model.objects import Taint

__all__ = ["PredicatesPlugin"]

_UNSCHEDULABLE = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
#: Pods that count for inter-pod terms; Releasing pods (evicted victims) no longer do.
_PLACED = (OCCUPYING_STATES | {TaskStatus.PIPELINED}) - {TaskStatus.RELEASING}


def _row(task: Task) -> int:
    return task.node if task.node >= 0 else task.nominated


class PredicatesPlugin(Plugin):
    name = "predicates"

    def on_session_open(self) -> None:
        self.nodes = self.session.cluster.nodes
        self._static: dict[tuple, np.ndarray] = {}
        self._explain: dict[tuple, list[tuple[np.ndarray, str]]] = {}
        # placed pods by row, only those that matter for inter-pod terms
        self.placed: dict[int, Task] = {}
        self.anti: dict[int, Task] = {}                # placed pods with required anti-affinity
        for t in self.session.cluster.tasks.values():
            if t.status in _PLACED and _row(t) >= 0:
                self._add(t, _row(t))

    # -- placed-pod index ------------------------------------------------------------------------
    def _add(self, task: Task, row: int) -> None:
        self.placed[id(task)] = (task, row)
        if task.affinity is not None and task.affinity.pod_anti_affinity:
            self.anti[id(task)] = (task, row)

    def _remove(self, task: Task) -> None:
        self.placed.pop(id(task), None)
        self.anti.pop(id(task), None)

    def on_allocate(self, task: Task) -> None:
        if _row(task) >= 0:
            self._add(task, _row(task))

    def on_deallocate(self, task: Task) -> None:
        if task.status in _PLACED and _row(task) >= 0:
            self._add(task, _row(task))          # a reverted allocation of a previously nominated pod
        else:
            self._remove(task)

    def simulate_add_task(self, task: Task, node: int) -> None:
        self._add(task, node)

    def simulate_remove_task(self, task: Task, node: int) -> None:
        self._remove(task)

    def simulate_predicate(self, task: Task, node: int) -> bool:
        return bool(self.predicate(task)[node])

    # -- static part -----------------------------------------------------------------------------
    def _requirement(self, r: Requirement) -> np.ndarray:
        if r.key == "\x00name":
            names = np.array(self.nodes.names, dtype=object)
            hit = np.isin(names, list(r.values))
            return hit if r.op == "In" else ~hit
        return self.nodes.label_mask(r.key, r.op, r.values)

    def _static_parts(self, task: Task) -> list[tuple[np.ndarray, str]]:
        nodes, n = self.nodes, len(self.nodes)
        parts: list[tuple[np.ndarray, str]] = []
        if task.node_selector:
            mask = np.ones(n, dtype=bool)
            for k, v in sorted(task.node_selector.items()):
                mask &= nodes.label_mask(k, "In", (v,))
            parts.append((mask, "node(s) didn't match the pod's nodeSelector"))
        aff = task.affinity
        if aff is not None and aff.node_terms is not None:
            mask = np.zeros(n, dtype=bool)
            for term in aff.node_terms:
                tm = np.ones(n, dtype=bool)
                for r in term:
                    tm &= self._requirement(r)
                mask |= tm if term else np.zeros(n, dtype=bool)
            parts.append((mask, "node(s) didn't match the pod's required node affinity"))
        ids, groups = nodes.taint_groups()
        ok_group = np.array([all(any(tol.tolerates(t) for tol in task.tolerations) for t in g)
                             for g in groups], dtype=bool)
        parts.append((ok_group[ids], "node(s) had taints the pod doesn't tolerate"))
        if nodes.unschedulable.any():
            tolerated = any(tol.tolerates(_UNSCHEDULABLE) for tol in task.tolerations)
            parts.append((~nodes.unschedulable | tolerated, "node(s) were unschedulable"))
        return parts

    def static_mask(self, task: Task) -> np.ndarray:
        mask = self._static.get(task.klass)
        if mask is None:
            parts = self._static_parts(task)
            mask = np.ones(len(self.nodes), dtype=bool)
            for m, _ in parts:
                mask = mask & m
            self._static[task.klass] = mask
            self._explain[task.klass] = [(~m, why) for m, why in parts]
        return mask

    # -- inter-pod terms -------------------------------------------------------------------------
    def _domain_of(self, key: str) -> list[str | None]:
        return self.nodes.label_values(key)

    def _term_hits(self, term: PodAffinityTerm, owner: Task) -> set[str]:
        """Topology values (of ``term.topology_key``) holding a placed pod that ``term`` selects."""
        namespaces = term.namespaces or (owner.namespace,)
        values = self._domain_of(term.topology_key)
        out = set()
        for other, row in self.placed.values():
            if other is owner or other.namespace not in namespaces:
                continue
            if term.selector.matches(other.labels) and values[row] is not None:
                out.add(values[row])
        return out

    def _values_mask(self, key: str, hits: set[str], inside: bool) -> np.ndarray:
        values = self._domain_of(key)
        if inside:
            return np.fromiter((v is not None and v in hits for v in values), bool, len(values))
        return np.fromiter((v is None or v not in hits for v in values), bool, len(values))

    def _pod_parts(self, task: Task) -> list[tuple[np.ndarray, str]]:
        parts = []
        aff = task.affinity
        if aff is not None:
            for term in aff.pod_affinity:
                hits = self._term_hits(term, task)
                if not hits and term.selector.matches(task.labels) and \
                        task.namespace in (term.namespaces or (task.namespace,)):
                    mask = self.nodes.label_mask(term.topology_key, "Exists")
                else:
                    mask = self._values_mask(term.topology_key, hits, True)
                parts.append((mask, "node(s) didn't match pod affinity rules"))
            for term in aff.pod_anti_affinity:
                hits = self._term_hits(term, task)
                parts.append((self._values_mask(term.topology_key, hits, False),
                              "node(s) didn't match pod anti-affinity rules"))
        for other, row in self.anti.values():                # existing pods' anti-affinity
            if other is task:
                continue
            for term in other.affinity.pod_anti_affinity:
                if task.namespace in (term.namespaces or (other.namespace,)) and term.selector.matches(task.labels):
                    value = self._domain_of(term.topology_key)[row]
                    if value is not None:
                        parts.append((self._values_mask(term.topology_key, {value}, False),
                                      "node(s) didn't satisfy existing pods' anti-affinity rules"))
        return parts

    # -- the extension points --------------------------------------------------------------------
    def predicate(self, task: Task) -> np.ndarray:
        mask = self.static_mask(task)
        if (task.affinity is not None and task.affinity.has_pod_terms) or self.anti:
            for m, _ in self._pod_parts(task):
                mask = mask & m
        return mask

    def resolvable(self, task: Task) -> np.ndarray:
        """Inter-pod terms can change when pods are evicted; the static checks cannot."""
        return self.static_mask(task)

    def explain(self, task: Task) -> list[tuple[np.ndarray, str]]:
        self.static_mask(task)
        # one entry per reason, as kube-scheduler counts nodes per reason: several placed pods (or
        # terms) rejecting different nodes for the same reason add up to one "N node(s) ..." line
        merged: dict[str, np.ndarray] = {}
        for m, why in self._pod_parts(task):
            merged[why] = merged[why] | ~m if why in merged else ~m
        return list(self._explain[task.klass]) + [(m, why) for why, m in merged.items()]
