"""The status conditions kube-scheduler writes on Kubernetes' own PodGroups (``scheduling.k8s.io``), for
the decisions of a cycle: listed in the JSON decisions (``conditions``, SPEC.md §4) and written by
``corral run``'s applier (:mod:`corral.kube.podgroups`).

As kube-scheduler's pod group scheduling cycle writes them (``scheduleOnePodGroup`` and
``updatePodGroupCondition``, pkg/scheduler, 1.36–1.37; the condition is ``PodGroupScheduled`` in
``v1alpha2``, ``PodGroupInitiallyScheduled`` from ``v1alpha3``):

- a group placed to its gang minimum: ``<condition>=True``, reason ``Scheduled``;
- a group that cannot be placed: ``<condition>=False``, reason ``Unschedulable``, the reason as message —
  never once the condition is True (kube-scheduler does not regress it: "Once this condition
  transitions to True, it serves as a terminal state");
- a group whose pods corral evicts for another: ``DisruptionTarget=True``, reason
  ``PreemptionByScheduler``, the action and the preemptor as message.

A condition is listed only when it changes what the group says (as read from its status, then as
written by earlier cycles), so a waiting backlog costs no records cycle after cycle. 1.35's groups
(``v1alpha1`` Workloads) have no status: kube-scheduler writes none, corral neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral.model import ALLOCATED_STATES, TaskStatus

if TYPE_CHECKING:
    from corral.framework.decisions import Decisions
    from corral.model import Cluster

__all__ = ["DISRUPTION", "PodGroupCondition", "native_conditions"]

DISRUPTION = "DisruptionTarget"
_READY = frozenset(ALLOCATED_STATES) | {TaskStatus.SUCCEEDED}


@dataclass(frozen=True)
class PodGroupCondition:
    podgroup: str
    type: str
    status: str
    reason: str
    message: str
    cycle: int


def native_conditions(cluster: Cluster, decisions: Decisions, cycle: int) -> list[PodGroupCondition]:
    """The conditions ``decisions`` set on the cluster's native PodGroups; remembered in each group's
    :class:`~corral.manifests.native.NativeGroup` so that later cycles list only changes."""
    if not cluster.native_groups:
        return []
    out: list[PodGroupCondition] = []
    owner = {}
    for uid, native in cluster.native_groups.items():
        job = cluster.jobs.get(uid)
        if native.condition and job is not None:
            owner.update({t.key: uid for t in job.tasks})
    if not owner:
        return []
    evicted: dict[str, tuple[str, str]] = {}
    for e in decisions.evictions:
        victim = owner.get(e.pod)
        if victim is not None and victim not in evicted:
            evicted[victim] = (e.action, e.preemptor)
    placed: dict[str, int] = {}
    decided: set[str] = set()
    for b in decisions.binds:
        decided.add(b.pod)
        group = owner.get(b.pod)
        if group is not None:
            placed[group] = placed.get(group, 0) + 1
    waiting = {u.podgroup: u.reason for u in decisions.unschedulable}
    for uid in sorted(set(evicted) | set(placed) | (set(waiting) & set(owner.values()))):
        native, job = cluster.native_groups[uid], cluster.jobs[uid]
        new: list[tuple[str, str, str, str]] = []
        if uid in evicted:
            action, preemptor = evicted[uid]
            new.append((DISRUPTION, "True", "PreemptionByScheduler", f"evicted by {action} for {preemptor}"))
        before = sum(1 for t in job.tasks if t.key not in decided and t.status in _READY)
        if placed.get(uid) and before + placed[uid] >= job.min_member:
            new.append((native.condition, "True", "Scheduled", ""))
        elif uid in waiting and native.conditions.get(native.condition) != "True":
            new.append((native.condition, "False", "Unschedulable", waiting[uid]))
        for ctype, status, reason, message in new:
            if native.conditions.get(ctype) == status and (
                status == "True" or native.messages.get(ctype) == message
            ):
                continue  # the group says so already
            native.conditions[ctype], native.messages[ctype] = status, message
            out.append(PodGroupCondition(uid, ctype, status, reason, message, cycle))
    return out
