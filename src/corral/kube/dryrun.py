"""``corral run --dry-run``: a cycle's decisions assumed in the watch cache instead of written
(a :class:`~corral.framework.cycle.DecisionSink`).

The decisions are overlaid on the cache as :func:`corral.framework.cycle.apply_decisions` carries them
out on the model for ``corral schedule --cycles``: bound pods run from ``now``, evicted pods are gone,
nominations (of pods not bound) and podgroup updates persist, node locks set the lock label, and
Kubernetes' own PodGroups get the conditions kube-scheduler writes. The assumptions are never confirmed:
they last the run. So ``corral run --dry-run --cycles N`` and ``corral schedule --cycles N`` on the same
objects decide the same (tests/kube/test_equivalence.py).
"""

from __future__ import annotations

from corral.framework.decisions import Decisions
from corral.framework.reservation import LOCK_LABEL, lock_label_value
from corral.kube.cache import WatchCache
from corral.kube.conventions import merged_conditions
from corral.kube.dra_status import assume_claims
from corral.kube.podgroups import native_condition
from corral.model import Cluster
from corral.model.clock import format_time

__all__ = ["DryRun", "dry_run_assume"]

#: how long a dry run's assumption lasts (seconds): the run
FOREVER = 1e12


class DryRun:
    """The dry run's sink: :meth:`apply` assumes the decisions in ``cache`` (module docstring); it writes
    nothing and returns no report."""

    def __init__(self, cache: WatchCache) -> None:
        self.cache = cache

    def apply(self, decisions: Decisions, cluster: Cluster, now: float) -> None:
        dry_run_assume(self.cache, decisions, now)


def dry_run_assume(cache: WatchCache, decisions: Decisions, now: float) -> None:
    """Overlay ``decisions`` on ``cache`` (module docstring)."""
    for e in decisions.evictions:
        cache.assume("Pod", e.pod, None, None, FOREVER)
    for b in decisions.binds:
        cache.assume(
            "Pod",
            b.pod,
            {
                "spec": {"nodeName": b.node},
                "status": {"phase": "Running", "startTime": format_time(now), "nominatedNodeName": None},
            },
            None,
            FOREVER,
        )
    assume_claims(cache, decisions.claim_allocations, now, FOREVER)  # DRA: what the claim writes leave
    for n in decisions.nominations:
        found = cache.find("Pod", n.pod)
        if found is None or (found[1].get("spec") or {}).get("nodeName"):
            continue
        cache.assume("Pod", n.pod, {"status": {"nominatedNodeName": n.node or None}}, None, FOREVER)
    for u in decisions.podgroups:
        if cache.find("PodGroup", u.podgroup) is not None:
            cache.assume(
                "PodGroup",
                u.podgroup,
                {"status": {"phase": u.phase}, "metadata": {"annotations": dict(u.annotations)}},
                None,
                FOREVER,
            )
    for c in decisions.conditions:  # Kubernetes' own PodGroups: the conditions kube-scheduler writes
        found = cache.find("PodGroup", c.podgroup)
        if found is not None:
            have = (found[1].get("status") or {}).get("conditions")
            merged = merged_conditions(have, native_condition(c, now))
            if merged is not None:
                cache.assume("PodGroup", c.podgroup, {"status": {"conditions": merged}}, None, FOREVER)
    for lock in decisions.node_locks:
        cache.assume(
            "Node",
            lock.node,
            {"metadata": {"labels": {LOCK_LABEL: lock_label_value(lock.job) if lock.job else None}}},
            None,
            FOREVER,
        )
