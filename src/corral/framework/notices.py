"""What corral accepts but will not act on, said per object (SPEC.md §5: no field dropped silently).

``corral validate`` prints these notices, ``corral schedule`` prints them once and lists them in its
decisions (``warnings``, one record per podgroup and field), the simulator keeps them in each job's
record (``notes``). Today they are:

- **A topology constraint that is not enforced.** Volcano's allocate takes a gang's domains from the
  HyperNode gradient a plugin gives (``network-topology-aware``); without one, the whole cluster is the
  one domain, and so it is in corral (the session's default search space). A podgroup whose
  ``spec.networkTopology`` (or a ``spec.subGroupPolicy`` entry's) would be placed so is named, with the
  plugin that is missing — or, with the plugin, when the snapshot has no HyperNode at all; and a
  soft-mode ``highestTierName`` that names no HyperNode's ``tierName`` (it prefers nothing).
- **Arguments read but without effect** (:func:`config_notices`): ``hypernode.binpack.resources.<name>``
  for a resource not listed in ``hypernode.binpack.resources`` (Volcano does not read it);
  ``hypernode.binpack.normal-pod.fading`` while ``.enable`` is false; deviceshare's
  ``NodeLockEnable``, ``SchedulePolicy``/``ScheduleWeight``; capacity's DRA switches.
- **Queue quota not enforced** (:func:`queue_notices`): ``deviceclass/`` keys of a queue while capacity's
  DRA switch is on (corral does not read ResourceClaims yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.framework.extension import GangSearchSpace, SubGroupSearchSpace

if TYPE_CHECKING:
    from corral.framework.config import Config
    from corral.model import Cluster, Job

__all__ = [
    "Notice",
    "cluster_notices",
    "config_notices",
    "job_notices",
    "queue_notices",
    "topology_provider",
]

GRADIENT_PLUGIN = "network-topology-aware"


@dataclass(frozen=True)
class Notice:
    """``obj`` ("PodGroup ns/name", "config"), the field, what is not acted on and what to do."""

    obj: str
    field: str
    message: str

    def line(self) -> str:
        return f"warning: {self.obj}: {self.field}: {self.message}"


def topology_provider(config: Config, registry: Any) -> tuple[str, bool]:
    """``(plugin, sub-groups too)``: the first configured plugin that answers GangSearchSpace (its
    ``enableGangSearchSpace`` switch on), and whether it answers for sub-groups as well; ``("", False)``
    when none does."""
    for tier in config.tiers:
        for pc in tier:
            cls = registry.plugin_class(pc.name)
            if cls is not None and GangSearchSpace in cls.__mro__ and pc.enabled("enableGangSearchSpace"):
                return pc.name, SubGroupSearchSpace in cls.__mro__
    return "", False


def _constraint(mode: str, tier: int | None, name: str) -> str:
    limit = f"highestTierName {name}" if name else ("every tier" if tier is None else f"tier <= {tier}")
    return f"{mode}, {limit}"


def job_notices(job: Job, provider: tuple[str, bool], has_tree: bool) -> list[Notice]:
    """The notices of one podgroup (see the module docstring)."""
    if job.synthetic:
        return []
    plugin, sub_ok = provider
    out = []
    obj = f"PodGroup {job.uid}"

    def why(for_subgroup: bool) -> str:
        if not plugin or (for_subgroup and not sub_ok):
            return (
                f"not enforced: no plugin of the configuration gives the HyperNode search space, so the "
                f"whole cluster is one domain (as in Volcano); add {GRADIENT_PLUGIN} to the configuration"
            )
        return "not enforced: the snapshot has no HyperNode, so the whole cluster is one domain"

    enforced = bool(plugin) and has_tree
    if job.topology_mode and not enforced:
        what = _constraint(job.topology_mode, job.topology_tier, job.topology_tier_name)
        out.append(Notice(obj, "spec.networkTopology", f"({what}) {why(False)}"))
    unnamed = "names no HyperNode's tierName: in soft mode no tier is preferred by it; fix the name"
    if job.topology_mode == "soft" and job.topology_tier_name and job.topology_tier is None:
        out.append(
            Notice(obj, "spec.networkTopology.highestTierName", f"{job.topology_tier_name!r} {unnamed}")
        )
    for p in job.subgroup_policies:
        if p.topology_mode == "soft" and p.tier_name and p.topology_tier is None:
            field = f"spec.subGroupPolicy[{p.name}].networkTopology.highestTierName"
            out.append(Notice(obj, field, f"{p.tier_name!r} {unnamed}"))
        if p.topology_mode and not (enforced and sub_ok):
            what = _constraint(p.topology_mode, p.topology_tier, p.tier_name)
            out.append(Notice(obj, f"spec.subGroupPolicy[{p.name}].networkTopology", f"({what}) {why(True)}"))
    return out


def cluster_notices(cluster: Cluster, config: Config, registry: Any) -> list[Notice]:
    """Every podgroup's notices, in the cluster's job order."""
    provider = topology_provider(config, registry)
    has_tree = bool(cluster.hypernodes)
    out = [n for job in cluster.jobs.values() for n in job_notices(job, provider, has_tree)]
    dra = cluster.dra
    if dra is not None and dra.pod_claims and not any(pc.name == "dra" for t in config.tiers for pc in t):
        for job in cluster.jobs.values():  # claims and no dra plugin: devices are not allocated
            if any(dra.pod_claims.get(t.uid) for t in job.tasks):
                out.append(
                    Notice(
                        f"PodGroup {job.uid}",
                        "pods' spec.resourceClaims",
                        "not allocated: the configuration has no dra plugin (nor predicates' "
                        "predicate.DynamicResourceAllocationEnable), so pods are placed without devices, "
                        "as Volcano places them without DRA; add the dra plugin",
                    )
                )
    return out


def config_notices(config: Config) -> list[Notice]:
    """Arguments of the configuration that are read but change nothing."""
    from corral.plugins.hypernode_binpack import unread_weights

    out = []
    for ti, tier in enumerate(config.tiers):
        for pi, pc in enumerate(tier):
            where = f"tiers[{ti}].plugins[{pi}].arguments"
            if pc.name == "deviceshare":
                out += _deviceshare_notices(pc.args, where)
            if pc.name == "capacity" and pc.args.dra_consumable:
                out.append(Notice("config", where, _DRA))
            if pc.name != GRADIENT_PLUGIN:
                continue
            for name in unread_weights(pc.args):
                out.append(
                    Notice(
                        "config",
                        f"{where}.hypernode.binpack.resources.{name}",
                        f"{name} is not in hypernode.binpack.resources, so this weight is not read "
                        f"(as in Volcano); list the resource there",
                    )
                )
            if not pc.args.normal_pod_enable and pc.args.normal_pod_fading != 0.8:
                out.append(
                    Notice(
                        "config",
                        f"{where}.hypernode.binpack.normal-pod.fading",
                        "has no effect while hypernode.binpack.normal-pod.enable is false",
                    )
                )
    return out


_DRA = (
    "capacity.DRAConsumableCapacityEnable has no effect: corral refuses consumable-capacity claims, so no "
    "pod is charged <dim>.deviceclass/ quota (capacity.DynamicResourceAllocationEnable charges devices "
    "to deviceclass/<class>)"
)


def _deviceshare_notices(args: Any, where: str) -> list[Notice]:
    out = []
    if args.node_lock:
        out.append(
            Notice(
                "config", f"{where}.deviceshare.NodeLockEnable", "no effect: a bind-time lock, no placement"
            )
        )
    if args.policy or args.weight:
        out.append(
            Notice(
                "config",
                f"{where}.deviceshare.SchedulePolicy",
                "no effect: GPU-sharing devices give every node the score 0 (only vGPU scores, as in Volcano)",
            )
        )
    return out


def queue_notices(cluster: Cluster, config: Config) -> list[Notice]:
    """Queue quota keys of DRA that nothing charges under this configuration: ``<dim>.deviceclass/``
    keys always (corral refuses consumable-capacity claims), ``deviceclass/<class>`` keys while
    capacity's ``capacity.DynamicResourceAllocationEnable`` is off (as in Volcano, claims then count in
    no queue)."""
    caps = [pc for t in config.tiers for pc in t if pc.name == "capacity"]
    if not caps:
        return []
    charged = any(pc.args.dra for pc in caps)
    names = cluster.resources.names
    cols = [
        (i, n)
        for i, n in enumerate(names)
        if ".deviceclass/" in n or (n.startswith("deviceclass/") and not charged)
    ]
    out = []
    for name, q in cluster.queues.items():
        for what, vec in (("capability", q.capability), ("deserved", q.deserved), ("guarantee", q.guarantee)):
            if vec is None:
                continue
            keys = [n for c, n in cols if np.isfinite(vec[c]) and vec[c] > 0]
            if keys:
                why = (
                    "corral refuses consumable-capacity claims"
                    if all(".deviceclass/" in k for k in keys)
                    else "capacity.DynamicResourceAllocationEnable is off, so claims count in no queue"
                    if not any(".deviceclass/" in k for k in keys)
                    else "claims are charged to deviceclass/<class> keys only, with "
                    "capacity.DynamicResourceAllocationEnable"
                )
                out.append(Notice(f"Queue {name}", f"spec.{what}", f"{', '.join(keys)} not enforced: {why}"))
    return out
