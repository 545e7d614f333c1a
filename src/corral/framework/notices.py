"""What one configuration will not act on for a cluster, said per object (SPEC.md §5: no field dropped
silently), in the one warning channel (:class:`corral.model.notes.Note`).

``corral validate`` prints these (:func:`configuration_notes`, one line each on stderr), ``corral
schedule`` prints the podgroups' ones once and lists them in its decisions (``warnings``, one record per
podgroup and field, :func:`cluster_notices`), the simulator keeps them in each job's record (``notes``,
:func:`job_notices`), ``corral run`` writes each once per object as an Event and a log line
(:class:`Warned`). Today they are:

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
- **KAI's fields the configuration leaves undone** (:func:`kai_notices`): GPU-sharing annotations
  without the ``gpushare`` plugin (only the node's GPU total is then held), KAI topology constraints
  (the podgroup's or a sub-group's) without ``network-topology-aware``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.framework.extension import GangSearchSpace, SubGroupSearchSpace
from corral.model.notes import Note, Notes, record_text

if TYPE_CHECKING:
    from corral.framework.config import Config
    from corral.model import Cluster, Job

__all__ = [
    "Warned",
    "cluster_notices",
    "config_notices",
    "configuration_notes",
    "job_notices",
    "kai_notices",
    "queue_notices",
    "topology_provider",
]

GRADIENT_PLUGIN = "network-topology-aware"


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


def job_notices(job: Job, provider: tuple[str, bool], has_tree: bool) -> list[Note]:
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
        out.append(Note(obj, "spec.networkTopology", f"({what}) {why(False)}"))
    unnamed = "names no HyperNode's tierName: in soft mode no tier is preferred by it; fix the name"
    if job.topology_mode == "soft" and job.topology_tier_name and job.topology_tier is None:
        out.append(Note(obj, "spec.networkTopology.highestTierName", f"{job.topology_tier_name!r} {unnamed}"))
    for p in job.subgroup_policies:
        if p.topology_mode == "soft" and p.tier_name and p.topology_tier is None:
            field = f"spec.subGroupPolicy[{p.name}].networkTopology.highestTierName"
            out.append(Note(obj, field, f"{p.tier_name!r} {unnamed}"))
        if p.topology_mode and not (enforced and sub_ok):
            what = _constraint(p.topology_mode, p.topology_tier, p.tier_name)
            out.append(Note(obj, f"spec.subGroupPolicy[{p.name}].networkTopology", f"({what}) {why(True)}"))
    return out


def cluster_notices(cluster: Cluster, config: Config, registry: Any) -> list[Note]:
    """Every podgroup's notices, in the cluster's job order."""
    provider = topology_provider(config, registry)
    has_tree = bool(cluster.hypernodes)
    out = [n for job in cluster.jobs.values() for n in job_notices(job, provider, has_tree)]
    dra = cluster.dra
    if dra is not None and dra.pod_claims and not any(pc.name == "dra" for t in config.tiers for pc in t):
        for job in cluster.jobs.values():  # claims and no dra plugin: devices are not allocated
            if any(dra.pod_claims.get(t.uid) for t in job.tasks):
                out.append(
                    Note(
                        f"PodGroup {job.uid}",
                        "pods' spec.resourceClaims",
                        "not allocated: the configuration has no dra plugin (nor predicates' "
                        "predicate.DynamicResourceAllocationEnable), so pods are placed without devices, "
                        "as Volcano places them without DRA; add the dra plugin",
                    )
                )
    return out


def config_notices(config: Config) -> list[Note]:
    """Arguments of the configuration that are read but change nothing."""
    from corral.plugins.hypernode_binpack import unread_weights

    out = []
    for ti, tier in enumerate(config.tiers):
        for pi, pc in enumerate(tier):
            where = f"tiers[{ti}].plugins[{pi}].arguments"
            if pc.name == "deviceshare":
                out += _deviceshare_notices(pc.args, where)
            if pc.name == "capacity" and pc.args.dra_consumable:
                out.append(Note("config", where, _DRA))
            if pc.name != GRADIENT_PLUGIN:
                continue
            for name in unread_weights(pc.args):
                out.append(
                    Note(
                        "config",
                        f"{where}.hypernode.binpack.resources.{name}",
                        f"{name} is not in hypernode.binpack.resources, so this weight is not read "
                        f"(as in Volcano); list the resource there",
                    )
                )
            if not pc.args.normal_pod_enable and pc.args.normal_pod_fading != 0.8:
                out.append(
                    Note(
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


def _deviceshare_notices(args: Any, where: str) -> list[Note]:
    out = []
    if args.node_lock:
        out.append(
            Note("config", f"{where}.deviceshare.NodeLockEnable", "no effect: a bind-time lock, no placement")
        )
    if args.policy or args.weight:
        out.append(
            Note(
                "config",
                f"{where}.deviceshare.SchedulePolicy",
                "no effect: GPU-sharing devices give every node the score 0 (only vGPU scores, as in Volcano)",
            )
        )
    return out


def queue_notices(cluster: Cluster, config: Config) -> list[Note]:
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
                out.append(Note(f"Queue {name}", f"spec.{what}", f"{', '.join(keys)} not enforced: {why}"))
    return out


def kai_notices(cluster: Cluster, config: Config) -> list[Note]:
    """KAI's fields this configuration leaves undone (see the module docstring): a pod's GPU-sharing
    annotations without ``gpushare``, a KAI topology constraint without ``network-topology-aware``."""
    out: list[Note] = []
    if config.plugin("gpushare") is None:
        for t in cluster.tasks.values():
            if t.gpu_share is not None and t.managed:
                out.append(
                    Note(
                        f"Pod {t.key}",
                        "",
                        "its GPU-sharing annotations are held only to the node's GPU total: "
                        "add the gpushare plugin to the configuration to hold them to each device",
                    )
                )
    if config.plugin(GRADIENT_PLUGIN) is None:
        for job in cluster.jobs.values():
            sub = job.subgroup_tree is not None and any(
                g.constraint for g in job.subgroup_tree.groups.values()
            )
            if job.topology_family or sub:
                out.append(
                    Note(
                        f"PodGroup {job.uid}",
                        "",
                        f"its topology constraint is not enforced: add the {GRADIENT_PLUGIN} plugin to the "
                        "configuration",
                    )
                )
    return out


def configuration_notes(
    cluster: Cluster, config: Config, registry: Any, podgroups: list[Note] | None = None
) -> Notes:
    """Every warning of this configuration for ``cluster``: the configuration's own arguments, the
    queues', the podgroups' (``podgroups``: :func:`cluster_notices` when already computed), KAI's — in
    that order (``corral validate`` prints them one line each)."""
    notes = Notes()
    notes.extend(config_notices(config))
    notes.extend(queue_notices(cluster, config))
    notes.extend(cluster_notices(cluster, config, registry) if podgroups is None else podgroups)
    notes.extend(kai_notices(cluster, config))
    return notes


class Warned:
    """What a front end that runs for long (``corral run``) has warned about: per object, the text of
    its warnings when last told. :meth:`fresh` gives the objects to tell about now — those not told
    before and those whose warnings changed — so each object is told once, not every cycle, and again
    only when what it is told changes. An object that no longer has warnings is forgotten (its next
    warning is told), so the memory holds only the objects warned about in the last call."""

    def __init__(self) -> None:
        self.told: dict[str, str] = {}

    def fresh(self, notes: Iterable[Note]) -> list[tuple[str, list[Note]]]:
        """``(object, its warnings)`` for each object whose warnings were not told yet, in order."""
        grouped: dict[str, list[Note]] = {}
        for n in notes:
            grouped.setdefault(n.obj, []).append(n)
        told = {obj: record_text(ns) for obj, ns in grouped.items()}
        out = [(obj, grouped[obj]) for obj, text in told.items() if self.told.get(obj) != text]
        self.told = told
        return out
