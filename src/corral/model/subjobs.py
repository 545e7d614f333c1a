"""Volcano sub-groups of a PodGroup (``spec.subGroupPolicy``, Volcano ``api/sub_job_info.go``).

A policy picks the PodGroup's pods that match its ``labelSelector`` (all pods when it has none) and splits
them by the values of its ``matchLabelKeys`` (a pod lacking one of those labels, or with an empty value,
is in no sub-group of that policy); a pod belongs to the first policy, in spec order, that takes it, and
pods no policy takes stay outside every sub-group. Each sub-group (Volcano's SubJob) is a gang of its
own: at least ``subGroupSize`` (default 1) of its pods start together or none does, and its own
``networkTopology`` holds for its pods; a policy's ``minSubGroups`` (default 0) is how many of its
sub-groups must exist (JobValid) and be ready (JobReady) before the PodGroup is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["SubGroupPolicy", "SubJob", "assign_subjobs", "resolve_subgroups"]


@dataclass(frozen=True)
class SubGroupPolicy:
    name: str
    size: int = 1  # subGroupSize: the sub-group's own minimum
    min_groups: int = 0  # minSubGroups
    selector: Any = None  # manifests.selectors.LabelSelector or None (every pod)
    keys: tuple[str, ...] = ()  # matchLabelKeys
    topology_mode: str = ""  # "", "hard", "soft"
    topology_tier: int | None = None
    tier_name: str = ""  # highestTierName, resolved into topology_tier when the snapshot is built

    def values(self, labels: Mapping[str, str]) -> tuple[str, ...] | None:
        """The match values of a pod with ``labels`` (Volcano ``getSubJobMatchValues``): None when the
        pod is not this policy's."""
        if self.selector is not None and not self.selector.matches(labels):
            return None
        out = []
        for k in self.keys:
            v = labels.get(k)
            if not v:
                return None
            out.append(v)
        return tuple(out)


@dataclass(eq=False)
class SubJob:
    """One sub-group: the pods of ``policy`` that share the label values ``values``."""

    policy: int  # index into Job.subgroup_policies
    name: str  # "<policy>" or "<policy>-<value>-<value>"
    size: int
    topology_mode: str = ""
    topology_tier: int | None = None
    tasks: list[Any] = field(default_factory=list)  # model.Task


def assign_subjobs(policies: tuple[SubGroupPolicy, ...], tasks: list[Any]) -> list[SubJob]:
    """Split ``tasks`` into sub-groups and set each task's ``subjob``; sub-groups in order of policy,
    then of first pod (the pods' order)."""
    out: dict[tuple[int, tuple[str, ...]], SubJob] = {}
    for t in tasks:
        t.subjob = None
        for i, p in enumerate(policies):
            vals = p.values(t.labels)
            if vals is None:
                continue
            key = (i, vals)
            sj = out.get(key)
            if sj is None:
                name = p.name + ("-" + "-".join(vals) if vals else "")
                sj = out[key] = SubJob(i, name, p.size, p.topology_mode, p.topology_tier)
            sj.tasks.append(t)
            t.subjob = sj
            break
    return sorted(out.values(), key=lambda s: s.policy)


def resolve_subgroups(cluster: Any, job: Any) -> None:
    """Volcano's sub-groups of ``job``'s pods (:func:`~corral.model.subjobs.assign_subjobs`) and its
    ``highestTierName`` constraints turned into tiers by the HyperNodes' ``spec.tierName`` (Volcano
    ``updateJobTier``). A tier name no HyperNode carries leaves a hard constraint that cannot hold: the
    job's reason says so (Volcano finds no HyperNode gradient for it); in soft mode the name limits
    nothing (Volcano's soft mode takes no tier)."""
    names = cluster.hypernodes.tier_names()

    def tier(mode: str, value: int | None, name: str, where: str) -> int | None:
        if not name:
            return value
        if name in names:
            return names[name]
        if mode == "hard" and not job.invalid_reason:
            job.invalid_reason = (
                f"{where}.highestTierName {name!r} names no HyperNode tier (tierName of the "
                f"HyperNodes: {', '.join(sorted(names)) or 'none'}); the hard constraint cannot hold"
            )
        return None

    job.topology_tier = tier(
        job.topology_mode, job.topology_tier, job.topology_tier_name, "spec.networkTopology"
    )
    if job.subgroup_policies:
        job.subgroup_policies = tuple(
            replace(
                p,
                topology_tier=tier(
                    p.topology_mode,
                    p.topology_tier,
                    p.tier_name,
                    f"spec.subGroupPolicy[{p.name}].networkTopology",
                ),
            )
            for p in job.subgroup_policies
        )
        job.subjobs = assign_subjobs(job.subgroup_policies, job.tasks)
