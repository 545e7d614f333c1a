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

Arguments, in Volcano's spelling and meaning (``plugins/predicates``): ``predicate.NodeAffinityEnable``
(nodeSelector and required node affinity), ``predicate.TaintTolerationEnable`` (taints),
``predicate.PodAffinityEnable`` (inter-pod terms) — each true by default; false turns that check off.
``predicate.ProportionalEnable`` with ``predicate.resources`` (``nvidia.com/gpu``) and
``predicate.resources.<name>.cpu`` / ``.memory`` (cores and GB per device, default 1): a pod that asks
for none of those resources may go to a node only if the node keeps, after it, that much CPU and memory
per idle device (so CPU-only pods do not strand a GPU node's GPUs). ``predicate.GPUSharingEnable``:
GPU sharing by memory, which in corral is the ``gpushare`` plugin (added to the configuration when this
is true and it is not there); ``predicate.DynamicResourceAllocationEnable``: Volcano's DRA filter, which
in corral is the ``dra`` plugin (added likewise). The other documented switches (``NodePortsEnable``,
``NodeVolumeLimitsEnable``, ``VolumeZoneEnable``, ``VolumeBindingEnable``, ``PodTopologySpreadEnable``,
``GPUNumberEnable``, ``CacheEnable``) are accepted and change nothing: a snapshot carries no host
ports, volumes or spread constraints, a GPU count is fit like every resource, and the cache never
changes an answer.

Simulation points (seed 003): the placed-pod index is kept by the allocate/deallocate events, so a dry
run that adds or removes pods through a Statement sees affinity change; SimulateAddTask /
SimulateRemoveTask update the same index for hypothetical moves outside a Statement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
from corral.manifests.selectors import PodAffinityTerm, Requirement
from corral.model import OCCUPYING_STATES, Task, TaskStatus
from corral.model.objects import Taint
from corral.model.resources import CPU, MEMORY

__all__ = ["PredicatesArgs", "PredicatesPlugin"]

_NO_EFFECT = "accepted; nothing in a snapshot for it to check"


@dataclass(frozen=True)
class PredicatesArgs:
    node_affinity: bool = arg("predicate.NodeAffinityEnable", True, "nodeSelector and required node affinity")
    taints: bool = arg("predicate.TaintTolerationEnable", True, "taints against tolerations")
    pod_affinity: bool = arg("predicate.PodAffinityEnable", True, "required inter-pod (anti-)affinity")
    gpu_sharing: bool = arg(
        "predicate.GPUSharingEnable", False, "GPU sharing by memory (the gpushare plugin)"
    )
    proportional: bool = arg("predicate.ProportionalEnable", False, "keep CPU and memory per idle device")
    prop_resources: str = arg("predicate.resources", "", "devices the proportional check keeps for")
    prop_rates: dict[Any, Any] = arg(
        "predicate.resources.", {}, "<name>.cpu / <name>.memory per device", prefix=True, kind="float"
    )
    node_ports: bool = arg("predicate.NodePortsEnable", True, _NO_EFFECT)
    volume_limits: bool = arg("predicate.NodeVolumeLimitsEnable", True, _NO_EFFECT)
    volume_zone: bool = arg("predicate.VolumeZoneEnable", True, _NO_EFFECT)
    volume_binding: bool = arg("predicate.VolumeBindingEnable", True, _NO_EFFECT)
    spread: bool = arg("predicate.PodTopologySpreadEnable", True, _NO_EFFECT)
    dra: bool = arg(
        "predicate.DynamicResourceAllocationEnable", False, "Dynamic Resource Allocation (the dra plugin)"
    )
    gpu_number: bool = arg("predicate.GPUNumberEnable", False, "accepted; every resource is fit already")
    cache: bool = arg("predicate.CacheEnable", False, "accepted; never changes an answer")

    def implied_plugins(self) -> tuple[str, ...]:
        """Plugins these arguments call for: Volcano's GPU-sharing predicate is corral's gpushare, its DRA
        filter corral's dra."""
        return (("gpushare",) if self.gpu_sharing else ()) + (("dra",) if self.dra else ())


_UNSCHEDULABLE = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
#: Pods that count for inter-pod terms; Releasing pods (evicted victims) no longer do.
_PLACED = (OCCUPYING_STATES | {TaskStatus.PIPELINED}) - {TaskStatus.RELEASING}


def _row(task: Task) -> int:
    return task.node if task.node >= 0 else task.nominated


class PredicatesPlugin(
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
    name = "predicates"
    signs = ("node_selector", "affinity", "tolerations", "namespace")
    Args = PredicatesArgs

    def on_session_open(self) -> None:
        self.nodes = self.session.cluster.nodes
        self._ns = self.session.cluster.namespace_labels  # what namespaceSelectors match
        self._devices = self._proportional_devices()
        # keyed by the pod's class (its uid when it has none)
        self._static: dict[Any, np.ndarray] = {}
        self._explain: dict[Any, list[tuple[np.ndarray, str]]] = {}
        # placed pods by row, only those that matter for inter-pod terms, then kept by the events; when
        # the session says no pod in the cluster has required anti-affinity, built only if a
        # pod with inter-pod terms of its own asks (its hits are a set: the walk's order does not matter)
        self._placed: dict[int, tuple[Task, int]] | None = None
        self._anti: dict[int, tuple[Task, int]] = {}
        self._anti_possible = self.session.anti_affinity_possible()
        if self._anti_possible:
            self._build_placed()  # at once: the order of ``anti`` is the order reasons are listed in

    def sign_pod(self, task: Task) -> tuple[Any, ...] | None:
        """The signed class fields, and the pod's own namespace when some pod's required anti-affinity may
        select it: those terms select by namespace as well as by labels (kube-scheduler's
        ``AffinityTerm.Matches``), and a pod without inter-pod terms of its own has no namespace in
        its class, so two such pods alike but for their namespace must not share answers."""
        sig = super().sign_pod(task)
        if sig is None or task.klass is None or task.klass.namespace or not self._anti_possible:
            return sig
        return (*sig, task.namespace)

    # -- placed-pod index ------------------------------------------------------------------------
    @property
    def placed(self) -> dict[int, tuple[Task, int]]:
        """The placed pods (Allocated, Bound, Running or nominated) by id, with their row."""
        return self._build_placed()

    def _build_placed(self) -> dict[int, tuple[Task, int]]:
        if self._placed is None:
            placed: dict[int, tuple[Task, int]] = {}
            self._placed = placed
            for t in self.session.cluster.tasks.values():
                if t.status in _PLACED and _row(t) >= 0:
                    self._add(placed, t, _row(t))
            return placed
        return self._placed

    @property
    def anti(self) -> dict[int, tuple[Task, int]]:
        """The placed pods with required pod anti-affinity (none without walking when the session's job
        index says no pod in the cluster has such a term)."""
        if self._anti_possible:
            self._build_placed()
        return self._anti

    def _add(self, placed: dict[int, tuple[Task, int]], task: Task, row: int) -> None:
        placed[id(task)] = (task, row)
        if task.affinity is not None and task.affinity.pod_anti_affinity:
            self._anti[id(task)] = (task, row)

    def _remove(self, placed: dict[int, tuple[Task, int]], task: Task) -> None:
        placed.pop(id(task), None)
        self._anti.pop(id(task), None)

    def on_allocate(self, task: Task) -> None:
        if self._placed is not None and _row(task) >= 0:  # not built yet: the walk will see it
            self._add(self._placed, task, _row(task))

    def on_deallocate(self, task: Task) -> None:
        if self._placed is None:
            return
        if task.status in _PLACED and _row(task) >= 0:
            self._add(self._placed, task, _row(task))  # a reverted allocation of a nominated pod
        else:
            self._remove(self._placed, task)

    def simulate_add_task(self, task: Task, node: int) -> None:
        self._add(self._build_placed(), task, node)

    def simulate_remove_task(self, task: Task, node: int) -> None:
        self._remove(self._build_placed(), task)

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
        nodes = self.nodes
        parts: list[tuple[np.ndarray, str]] = []
        if self.args.node_affinity:
            self._node_affinity_parts(task, parts)
        if self.args.taints:
            ids, groups = nodes.taint_groups()
            ok_group = np.array(
                [all(any(tol.tolerates(t) for tol in task.tolerations) for t in g) for g in groups],
                dtype=bool,
            )
            parts.append((ok_group[ids], "node(s) had taints the pod doesn't tolerate"))
        if nodes.unschedulable.any():
            tolerated = any(tol.tolerates(_UNSCHEDULABLE) for tol in task.tolerations)
            parts.append((~nodes.unschedulable | tolerated, "node(s) were unschedulable"))
        return parts

    def _node_affinity_parts(self, task: Task, parts: list[tuple[np.ndarray, str]]) -> None:
        nodes, n = self.nodes, len(self.nodes)
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

    def _static_mask(self, task: Task) -> np.ndarray:
        key = task.uid if task.klass is None else task.klass
        mask = self._static.get(key)
        if mask is None:
            parts = self._static_parts(task)
            mask = np.ones(len(self.nodes), dtype=bool)
            for m, _ in parts:
                mask = mask & m
            self._static[key] = mask
            self._explain[key] = [(~m, why) for m, why in parts]
        return mask

    # -- inter-pod terms -------------------------------------------------------------------------
    def _domain_of(self, key: str) -> list[str | None]:
        return self.nodes.label_values(key)

    def _term_hits(self, term: PodAffinityTerm, owner: Task) -> set[str]:
        """Topology values (of ``term.topology_key``) holding a placed pod that ``term`` selects."""
        values = self._domain_of(term.topology_key)
        out: set[str] = set()
        for other, row in self.placed.values():
            if other is owner or not term.covers(other.namespace, owner.namespace, self._ns):
                continue
            value = values[row]
            if value is not None and term.selector.matches(other.labels):
                out.add(value)
        return out

    def _values_mask(self, key: str, hits: set[str], inside: bool) -> np.ndarray:
        values = self._domain_of(key)
        if inside:
            return np.fromiter((v is not None and v in hits for v in values), bool, len(values))
        return np.fromiter((v is None or v not in hits for v in values), bool, len(values))

    def _pod_parts(self, task: Task) -> list[tuple[np.ndarray, str]]:
        parts: list[tuple[np.ndarray, str]] = []
        if not self.args.pod_affinity:
            return parts
        aff = task.affinity
        if aff is not None:
            for term in aff.pod_affinity:
                hits = self._term_hits(term, task)
                if (
                    not hits
                    and term.selector.matches(task.labels)
                    and term.covers(task.namespace, task.namespace, self._ns)
                ):
                    mask = self.nodes.label_mask(term.topology_key, "Exists")
                else:
                    mask = self._values_mask(term.topology_key, hits, True)
                parts.append((mask, "node(s) didn't match pod affinity rules"))
            for term in aff.pod_anti_affinity:
                hits = self._term_hits(term, task)
                parts.append(
                    (
                        self._values_mask(term.topology_key, hits, False),
                        "node(s) didn't match pod anti-affinity rules",
                    )
                )
        for other, row in self.anti.values():  # existing pods' anti-affinity
            if other is task:
                continue
            for term in other.affinity.pod_anti_affinity:
                if term.covers(task.namespace, other.namespace, self._ns) and term.selector.matches(
                    task.labels
                ):
                    value = self._domain_of(term.topology_key)[row]
                    if value is not None:
                        parts.append(
                            (
                                self._values_mask(term.topology_key, {value}, False),
                                "node(s) didn't satisfy existing pods' anti-affinity rules",
                            )
                        )
        return parts

    # -- the extension points --------------------------------------------------------------------
    def predicate(self, task: Task) -> np.ndarray:
        mask = self._static_mask(task)
        if (task.affinity is not None and task.affinity.has_pod_terms) or self.anti:
            for m, _ in self._pod_parts(task):
                mask = mask & m
        if self._devices:
            prop = self._proportional(task)
            if prop is not None:
                mask = mask & prop
        return mask

    # -- proportional (Volcano predicates/proportional.go) ---------------------------------------
    def _proportional_devices(self) -> list[tuple[int, float, float]]:
        """(column, CPU milli per device milli, memory milli-bytes per device milli) of each device the
        proportional check keeps CPU and memory for."""
        a, res = self.args, self.session.cluster.resources
        if not a.proportional:
            return []
        out = []
        for name in (r.strip() for r in a.prop_resources.split(",")):
            col = res.get(name) if name else None
            if col is not None:
                cpu = a.prop_rates.get(f"{name}.cpu", 1.0)
                mem = a.prop_rates.get(f"{name}.memory", 1.0)
                out.append((col, cpu if cpu >= 0 else 1.0, (mem if mem >= 0 else 1.0) * 1e9))
        return out

    def _proportional(self, task: Task) -> np.ndarray | None:
        """Where ``task`` leaves CPU and memory for the idle devices (None: a device pod, unchecked)."""
        if any(task.request[col] > 0 for col, _, _ in self._devices):
            return None
        res, nodes = self.session.cluster.resources, self.nodes
        cpu, mem = res.pos(CPU), res.pos(MEMORY)
        after = nodes.allocatable - nodes.used - task.request
        ok = np.ones(len(nodes), dtype=bool)
        for col, per_cpu, per_mem in self._devices:
            idle = np.maximum(nodes.allocatable[:, col] - nodes.used[:, col], 0.0)
            ok &= (after[:, cpu] >= idle * per_cpu) & (after[:, mem] >= idle * per_mem)
        return ok

    def resolvable(self, task: Task) -> np.ndarray:
        """Inter-pod terms can change when pods are evicted; the static checks cannot."""
        return self._static_mask(task)

    def explain(self, task: Task) -> list[tuple[np.ndarray, str]]:
        self._static_mask(task)
        # one entry per reason, as kube-scheduler counts nodes per reason: several placed pods (or
        # terms) rejecting different nodes for the same reason add up to one "N node(s) ..." line
        merged: dict[str, np.ndarray] = {}
        for m, why in self._pod_parts(task):
            merged[why] = merged[why] | ~m if why in merged else ~m
        out = list(self._explain[task.uid if task.klass is None else task.klass]) + [
            (m, why) for why, m in merged.items()
        ]
        prop = self._proportional(task) if self._devices else None
        if prop is not None:
            out.append((~prop, "node(s) must keep CPU and memory for their idle devices (proportional)"))
        return out
