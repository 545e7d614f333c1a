"""The records the kept model (:class:`~corral.kube.model.LiveModel`) is built from: each object's
parsed record by cache key, the pods and podgroups by key, each pod's *bucket* (what one piece of
assembly builds: a job, by its uid, or a pod of another scheduler alone) and the buckets' members, the
count of pods and podgroups naming each resource (a change of the set of resource names assembles
everything), and the loader's orders of pods and podgroups (namespace, name), kept sorted as records come
and go.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any

from corral.kube.namespaces import uses_namespace_selector
from corral.manifests.records import PodGroupRec, PodRec
from corral.model.resources import CPU, MEMORY, PODS

__all__ = ["Bucket", "ModelRecords", "key_of_record"]

Bucket = tuple[str, str]  # ("job", job uid) or ("pod", pod key): what one piece of assembly builds


def key_of_record(rec: Any) -> str:
    return f"{rec.namespace}/{rec.name}"


class ModelRecords:
    """Mixed into the model: the records and the buckets (see the module docstring)."""

    served: set[str]

    def _adopt_records(self, rows: Sequence[tuple[Any, str, dict, tuple[str, Any]]]) -> None:
        """The records of a full assembly, by kind, and what they name (pods' buckets, resource names)."""
        self.records: dict[tuple[str, str], Any] = {}  # (resource type name, cache key) -> record
        self.pods: dict[str, PodRec] = {}  # pod key -> record
        self.groups: dict[str, PodGroupRec] = {}  # podgroup key -> record
        self.members: dict[Bucket, set[str]] = {}  # bucket -> pod keys
        self.bucket_of: dict[str, Bucket] = {}  # pod key -> bucket
        self.names: dict[str, int] = {}  # resource name -> pods and podgroups naming it
        self.node_recs: dict[str, Any] = {}  # cache key -> Node record
        self.hyper_recs: list[Any] = []  # HyperNode records, in the loader's order
        self.topo_recs: list[Any] = []  # KAI Topology records
        self.workloads: list[Any] = []  # scheduling.k8s.io Workload records (1.35's groups)
        self.composites = False  # a CompositePodGroup is watched: its tree is assembled whole
        queued: set[str] = {CPU, MEMORY, PODS}  # columns every cluster has, and the queues'
        self.selector_pods = 0  # pods whose inter-pod terms have a namespaceSelector (kube/namespaces.py)
        for r, key, _raw, (kind, rec) in rows:
            self.records[(r.name, key)] = rec
            if kind == "Pod":
                self._add_pod(rec)
            elif kind == "PodGroup":
                self._add_group(rec)
            elif kind == "Node":
                self.node_recs[key] = rec
            elif kind == "HyperNode":
                self.hyper_recs.append(rec)
            elif kind == "Topology":
                self.topo_recs.append(rec)
            elif kind == "Workload":
                self.workloads.append(rec)
            elif kind == "CompositePodGroup":
                self.composites = True
            elif kind == "Queue":
                for d in (rec.capability, rec.deserved, rec.guarantee):
                    queued.update(d or ())
        self.queued = queued

    def _bucket(self, rec: PodRec) -> Bucket:
        if rec.scheduler not in self.served:
            return ("pod", key_of_record(rec))
        group = rec.group
        return ("job", f"{rec.namespace}/{group or rec.name}")

    def _add_pod(self, rec: PodRec) -> bool:
        key = key_of_record(rec)
        if key in self.pods:
            return False
        self.pods[key] = rec
        b = self.bucket_of[key] = self._bucket(rec)
        self.members.setdefault(b, set()).add(key)
        _count(self.names, rec.requests, 1)
        self.selector_pods += uses_namespace_selector(rec)
        return True

    def _drop_pod(self, rec: PodRec) -> Bucket:
        key = key_of_record(rec)
        del self.pods[key]
        b = self.bucket_of.pop(key)
        m = self.members[b]
        m.discard(key)
        if not m:
            del self.members[b]
        _count(self.names, rec.requests, -1)
        self.selector_pods -= uses_namespace_selector(rec)
        return b

    def _add_group(self, rec: PodGroupRec) -> bool:
        key = key_of_record(rec)
        if key in self.groups:
            return False
        self.groups[key] = rec
        _count(self.names, rec.min_resources or (), 1)
        return True

    def _drop_group(self, rec: PodGroupRec) -> None:
        del self.groups[key_of_record(rec)]
        _count(self.names, rec.min_resources or (), -1)

    @staticmethod
    def _order(order: list[tuple[str, str]], rec: Any, add: bool) -> None:
        k = (rec.namespace, rec.name)
        i = bisect.bisect_left(order, k)
        if add:
            order.insert(i, k)
        elif i < len(order) and order[i] == k:
            del order[i]


def _count(counts: dict[str, int], names: Iterable[str], step: int) -> None:
    for n in names:
        counts[n] = counts.get(n, 0) + step
