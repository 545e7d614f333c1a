"""The checks a workload passes against a cluster before a simulation starts (SPEC.md §1.3), and the
request vectors of its pods.

Contract: :func:`check_workload` is where bad input becomes one :class:`~corral.errors.InputError` naming
the trace file and row (a job larger than the whole cluster, a queue the cluster does not have, a bad
duration), and where jobs that fit the cluster but can never run (their queue's capability is too small,
the queue is closed, no topology domain allowed to them is large enough) are returned as *never fits*.
:func:`pod_vector` turns a pod's plain requests into the model's milli-unit vector; :func:`min_counts`
is how many pods of each role make up a job's minimum (Volcano's minResources).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from corral.errors import InputError
from corral.model import Cluster
from corral.model.quantity import MILLI
from corral.model.resources import EPS, PODS, ResourceIndex
from corral.sim.jobspec import JobSpec

__all__ = ["check_workload", "min_counts", "pod_vector"]


def pod_vector(resources: ResourceIndex, requests: Mapping[str, float], where: str) -> np.ndarray:
    """A pod's request in milli-units (plain units in ``requests``), with its one ``pods`` unit. A
    resource the cluster does not have, or a negative or non-finite amount, is an InputError."""
    vec = resources.zeros()
    for name, amount in requests.items():
        amount = float(amount)
        if not (math.isfinite(amount) and amount >= 0):
            raise InputError(f"request {name} must be a finite number >= 0, got {amount!r}", obj=where)
        if not amount:
            continue
        pos = resources.get(name)
        if pos is None:
            raise InputError(f"larger than the cluster: it asks for {name}, which no node offers", obj=where)
        vec[pos] = math.ceil(amount * MILLI - 1e-6)
    vec[resources.pos(PODS)] = MILLI
    return vec


def _slots(alloc: np.ndarray, pod: np.ndarray) -> np.ndarray:
    """How many copies of ``pod`` each node could hold if empty."""
    cols = np.flatnonzero(pod)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.floor((alloc[:, cols] + EPS) / pod[cols])
    return per.min(axis=1)


class _Checker:
    """Caches the per-shape checks: traces repeat a handful of job shapes thousands of times."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.alloc = cluster.nodes.allocatable[~cluster.nodes.down]
        self.total = self.alloc.sum(axis=0)
        self.cache: dict[tuple, tuple[str, str]] = {}

    def shape(self, spec: JobSpec) -> tuple[str, str]:
        """(error, never-fits reason) for ``spec``; empty strings when there is none."""
        key = (
            tuple((r.name, r.count, r.min_count, tuple(sorted(r.requests.items()))) for r in spec.roles),
            spec.min_pods,
            spec.queue,
            spec.topology,
        )
        got = self.cache.get(key)
        if got is None:
            got = self.cache[key] = self._shape(spec)
        return got

    def _shape(self, spec: JobSpec) -> tuple[str, str]:
        res = self.cluster.resources
        pods, need = _minimum(spec, res)
        for role, (pod, count) in pods.items():
            slots = _slots(self.alloc, pod)
            if not slots.any():
                return (
                    f"larger than the cluster: a pod of role {role!r} needs {res.describe(pod)}, more "
                    f"than any node has",
                    "",
                )
            if slots.sum() < count:
                return (
                    f"larger than the cluster: {count} pods of {res.describe(pod)} do not fit on all "
                    f"nodes together",
                    "",
                )
        if np.any(need > self.total + EPS):
            return (
                f"larger than the cluster: it needs {res.describe(need)}, the cluster has "
                f"{res.describe(self.total)}",
                "",
            )
        return "", self._never(spec, pods, need)

    def _never(self, spec: JobSpec, pods: dict, need: np.ndarray) -> str:
        cluster, res = self.cluster, self.cluster.resources
        leaf = cluster.queues.get(spec.queue)
        if leaf is not None and leaf.not_leaf_reason():
            return leaf.not_leaf_reason()
        for name in cluster.queue_chain(spec.queue):
            queue = cluster.queues[name]
            if not queue.open:
                return f"queue {name!r} is {queue.state}"
            cap = queue.capability
            if cap is not None and np.any(need > cap + EPS):
                return (
                    f"queue {name!r} capability ({res.describe(np.where(np.isfinite(cap), cap, 0))}) "
                    f"is smaller than the job's minimum ({res.describe(need)})"
                )
        if spec.topology and spec.topology[0] == "hard" and cluster.hypernodes:
            tree = cluster.hypernodes
            tier = min(spec.topology[1], max(tree.tiers))
            masks = [hn.mask for t in tree.tiers if t <= tier for hn in tree.domains(t)]
            if masks and not any(self._fits_in(mask, pods) for mask in masks):
                return f"no topology domain of tier <= {tier} can hold the gang (hard constraint)"
        return ""

    def _fits_in(self, mask: np.ndarray, pods: dict) -> bool:
        alloc = self.cluster.nodes.allocatable[mask & ~self.cluster.nodes.down]
        left = alloc.copy()
        for pod, count in pods.values():  # greedy, largest pods first: a sufficient test
            for _ in range(count):
                fit = np.flatnonzero((left + EPS >= pod).all(axis=1))
                if not len(fit):
                    return False
                left[fit[0]] -= pod
        return True


def min_counts(spec: JobSpec) -> dict[str, int]:
    """How many pods of each role make up the job's minimum: every role's ``min_count`` first, then
    further pods in role order up to ``min_member`` (as Volcano computes a podgroup's minResources)."""
    left = spec.min_pods
    counts = {}
    for role in spec.roles:
        take = min(role.min_count or 0, role.count, left)
        counts[role.name] = take
        left -= take
    for role in spec.roles:
        extra = min(role.count - counts[role.name], left)
        counts[role.name] += extra
        left -= extra
    return counts


def _minimum(spec: JobSpec, res: ResourceIndex) -> tuple[dict[str, tuple[np.ndarray, int]], np.ndarray]:
    """Per role (pod vector, pods of it in the job's minimum, see :func:`min_counts`), largest pods
    first, and the minimum's total."""
    counts = min_counts(spec)
    pods, need = {}, res.zeros()
    for role in spec.roles:
        pod = pod_vector(res, role.requests, spec.source or spec.name)
        if counts[role.name]:
            pods[role.name] = (pod, counts[role.name])
            need += pod * counts[role.name]
    order = sorted(pods, key=lambda r: -float(pods[r][0].sum()))
    return {r: pods[r] for r in order}, need


def _spec_error(spec: JobSpec) -> str:
    """What is wrong with one JobSpec on its own, or ''."""
    if not (isinstance(spec.submit, (int, float)) and math.isfinite(spec.submit)):
        return f"malformed submit time {spec.submit!r}"
    if not (isinstance(spec.duration, (int, float)) and math.isfinite(spec.duration) and spec.duration > 0):
        return f"duration must be a positive number of seconds, got {spec.duration!r}"
    if not spec.roles or any(r.count < 1 for r in spec.roles):
        return "a job needs at least one pod in every role"
    if len({r.name for r in spec.roles}) != len(spec.roles):
        return "role names must be unique within a job"
    if not 1 <= spec.min_pods <= spec.num_pods:
        return f"min_member {spec.min_pods} must be between 1 and the job's {spec.num_pods} pods"
    for r in spec.roles:
        if r.min_count is not None and not 0 <= r.min_count <= r.count:
            return f"role {r.name!r}: min_count {r.min_count} must be between 0 and {r.count}"
    if spec.topology is not None and (spec.topology[0] not in ("hard", "soft") or spec.topology[1] < 1):
        return f"bad topology constraint {spec.topology!r} (mode hard|soft, tier >= 1)"
    return ""


def check_workload(cluster: Cluster, jobs: Iterable[JobSpec]) -> dict[str, str]:
    """Check every job against ``cluster`` before a run starts.

    Raises InputError (naming the job's file and row from ``JobSpec.source``) for a malformed job, a
    duplicate name, a queue the cluster does not have, or a job larger than the whole cluster (a pod
    larger than every node, more pods than all nodes hold, or more than the cluster's total). Returns
    ``{job name: reason}`` for the jobs that fit the cluster but can never run: queue capability, a
    closed queue, or a hard topology constraint no domain can meet.
    """
    checker = _Checker(cluster)
    never: dict[str, str] = {}
    seen: set[str] = set()
    for spec in jobs:
        where = spec.source or f"job {spec.name}"
        if spec.name in seen:
            raise InputError(f"duplicate job name {spec.name!r}", obj=where)
        seen.add(spec.name)
        problem = _spec_error(spec)
        if problem:
            raise InputError(problem, obj=where)
        if spec.queue not in cluster.queues:
            known = ", ".join(sorted(cluster.queues))
            raise InputError(
                f"unknown queue {spec.queue!r} (the cluster defines: {known})", obj=where, field="queue"
            )
        error, reason = checker.shape(spec)
        if error:
            raise InputError(
                f"job {spec.name} is {error}" if error.startswith("larger") else error, obj=where
            )
        if reason:
            never[spec.name] = reason
    return never
