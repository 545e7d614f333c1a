"""What corral does with each piece of a Volcano scheduler configuration (SPEC.md §1.2): the switch
spellings of Volcano's ``PluginOption``, the action arguments whose behaviour is always so in corral,
and the Volcano plugins and actions corral does not implement.

Volcano's ``PluginOption`` (``pkg/scheduler/conf/scheduler_conf.go``) spells most switches
``enableXxx`` but some ``enabledXxx`` (``enabledOverused``, ``enabledAllocatable``, ``enabledVictim``,
``enabledHyperNodeOrder``, ``enabledClusterOrder``, ``enabledSubJob*``, ``enabledHyperNodeGradient``).
Both spellings are read; :data:`SWITCH_ALIASES` maps Volcano's to the uniform one corral has always
accepted, so a plugin only ever sees one name.
"""

from __future__ import annotations

__all__ = [
    "FIXED_ACTION_ARGS",
    "INERT_ACTIONS",
    "INERT_PLUGINS",
    "INERT_SWITCHES",
    "REFUSED_ACTIONS",
    "REFUSED_PLUGINS",
    "SWITCH_ALIASES",
    "canonical_switch",
    "refused_action_message",
    "refused_plugin_message",
]

#: Volcano's own spelling -> corral's uniform spelling (the same switch).
SWITCH_ALIASES: dict[str, str] = {
    "enabledOverused": "enableOverused",
    "enabledAllocatable": "enableAllocatable",
    "enabledVictim": "enableVictim",
    "enabledHyperNodeOrder": "enableHyperNodeOrder",
    "enabledClusterOrder": "enableClusterOrder",
    # hyperNodeGradientFn gives the candidate hypernodes of a job by tier: corral's GangSearchSpace
    "enabledHyperNodeGradient": "enableGangSearchSpace",
    "enabledSubJobReady": "enableSubJobReady",
    "enabledSubJobPipelined": "enableSubJobPipelined",
    "enabledSubJobOrder": "enableSubJobOrder",
}

#: Switches accepted on every plugin that change nothing in corral, with the reason (docs/configuration.md).
INERT_SWITCHES: dict[str, str] = {
    "enableSubJobReady": "corral judges a sub-group (spec.subGroupPolicy) ready inside the gang plugin's "
    "JobReady; the switch does not turn that off",
    "enableSubJobPipelined": "corral judges a sub-group pipelined inside the gang plugin's JobPipelined; "
    "the switch does not turn that off",
    "enableSubJobOrder": "corral places a job's sub-groups in the order of their first pod (TaskOrder); "
    "the switch changes nothing",
}


def canonical_switch(key: str) -> str:
    """The switch ``key`` names, in corral's uniform spelling."""
    return SWITCH_ALIASES.get(key, key)


#: Action arguments Volcano documents whose behaviour is always so in corral: accepted (type-checked)
#: and without effect. action -> {argument: (type, why)}.
FIXED_ACTION_ARGS: dict[str, dict[str, tuple[type, str]]] = {
    "preempt": {
        "enableTopologyAwarePreemption": (
            bool,
            "corral's preempt is always topology-aware: it dry-runs "
            "candidate nodes and ranks them (SPEC §3.2)",
        ),
        "topologyAwarePreemptWorkerNum": (
            int,
            "the number of parallel workers of the dry run; corral's outcome does not depend on it",
        ),
        "predicateErrorCacheEnable": (
            bool,
            "corral caches predicate masks per pod class always; the outcome is the same",
        ),
    },
    "reclaim": {"predicateErrorCacheEnable": (bool, "corral caches predicate masks per pod class always")},
    "allocate": {"predicateErrorCacheEnable": (bool, "corral caches predicate masks per pod class always")},
    "backfill": {"predicateErrorCacheEnable": (bool, "corral caches predicate masks per pod class always")},
}

#: Volcano plugins corral accepts with no effect, and why that is safe.
INERT_PLUGINS: dict[str, str] = {
    "resourcequota": "a snapshot holds no ResourceQuota objects, and the API server already refused "
    "every pod over its namespace quota when it was created",
    "usage": "corral reads no node metrics; Volcano's usage plugin, too, lets every node pass when "
    "metrics are missing",
}

#: Volcano actions corral accepts with no effect, and why that is safe.
INERT_ACTIONS: dict[str, str] = {
    "shuffle": "shuffle evicts the victims plugins name on their own account (VictimTasks); no corral "
    "plugin names any (tdm and rescheduling are not implemented), so it has nothing to do",
}

_NOT = "is a Volcano plugin corral does not implement"

#: Volcano plugins corral refuses: what to do instead.
REFUSED_PLUGINS: dict[str, str] = {
    "tdm": "time-division sharing of revocable nodes; remove it (revocable zones are not modelled)",
    "sla": "job waiting-time SLAs; remove it, and use priority classes or the reservation of "
    "starving jobs (elect/reserve) for jobs that must not wait",
    "task-topology": "task affinity inside a job; remove it, and use pod (anti-)affinity on the pods",
    "numa-aware": "NUMA placement from Numatopology objects; remove it (NUMA is not modelled)",
    "numaaware": "NUMA placement from Numatopology objects; remove it (NUMA is not modelled)",
    "cdp": "cool-down protection of preemptible pods; use the minruntime plugin "
    "(defaultPreemptMinRuntime / defaultReclaimMinRuntime) instead",
    "extender": "calls to HTTP scheduler extenders; remove it (corral calls no external service)",
    "nodegroup": "queue affinity to node groups; remove it, and give the pods a nodeSelector or "
    "required node affinity on the node-group label",
    "rescheduling": "periodic eviction of running pods to rebalance nodes; remove it (corral never "
    "evicts a pod without a pending pod to place)",
    "resource-strategy-fit": "per-resource scoring strategies; use nodeorder "
    "(leastrequested.weight / mostrequested.weight) or binpack instead",
    "capacity-card": "card-level queue capacity; use capacity with nvidia.com/gpu in deserved/capability",
}

#: Volcano actions corral refuses: what to do instead.
REFUSED_ACTIONS: dict[str, str] = {
    "dequeue": "returns admitted jobs to Pending; remove it (corral's enqueue admits once per cycle)",
}


def refused_plugin_message(name: str) -> str | None:
    why = REFUSED_PLUGINS.get(name.strip().lower())
    return None if why is None else f"{name!r} {_NOT} ({why})"


def refused_action_message(name: str) -> str | None:
    why = REFUSED_ACTIONS.get(name.strip().lower())
    return None if why is None else f"{name!r} is a Volcano action corral does not implement ({why})"
