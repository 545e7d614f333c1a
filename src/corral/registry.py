"""The one explicit registry of actions and plugins (DESIGN.md convention 1), and the built-in default
configuration. Names are matched case-insensitively; ``gang-preempt``/``gang-reclaim`` are aliases of
``gangpreempt``/``gangreclaim`` once those actions exist."""

from __future__ import annotations

from corral.actions.allocate import AllocateAction
from corral.actions.backfill import BackfillAction
from corral.actions.elect import ElectAction
from corral.actions.enqueue import EnqueueAction
from corral.actions.flow import FlowAction
from corral.actions.gang_actions import GangPreemptAction, GangReclaimAction
from corral.actions.inert import INERT_ACTION_CLASSES
from corral.actions.preempt import PreemptAction
from corral.actions.reclaim import ReclaimAction
from corral.actions.reserve import ReserveAction
from corral.actions.timeslice import TimesliceAction
from corral.framework.config import Config, parse_config
from corral.framework.plugin import Action, Plugin
from corral.plugins.baselines import FifoPlugin, LasPlugin, SjfPlugin, SrtfPlugin
from corral.plugins.binpack import BinpackPlugin
from corral.plugins.capacity import CapacityPlugin
from corral.plugins.conformance import ConformancePlugin
from corral.plugins.deviceshare import DeviceSharePlugin
from corral.plugins.drf import DrfPlugin
from corral.plugins.gang import GangPlugin
from corral.plugins.gpushare import GpuSharePlugin
from corral.plugins.inert import INERT_PLUGIN_CLASSES
from corral.plugins.minruntime import MinRuntimePlugin
from corral.plugins.network_topology import NetworkTopologyPlugin
from corral.plugins.nodeorder import NodeOrderPlugin
from corral.plugins.overcommit import OvercommitPlugin
from corral.plugins.pdb import PdbPlugin
from corral.plugins.predicates import PredicatesPlugin
from corral.plugins.priority import PriorityPlugin
from corral.plugins.proportion import ProportionPlugin
from corral.plugins.reservation import ReservationPlugin

__all__ = ["DEFAULT_CONFIG", "REGISTRY", "Registry", "default_config"]


class Registry:
    def __init__(
        self, actions: dict[str, type[Action]], plugins: dict[str, type[Plugin]], aliases: dict[str, str]
    ) -> None:
        self.actions = actions
        self.plugins = plugins
        self.aliases = aliases

    def canonical_action(self, name: str) -> str:
        key = name.strip().lower()
        return self.aliases.get(key, key)

    def action_class(self, name: str) -> type[Action] | None:
        return self.actions.get(self.canonical_action(name))

    def plugin_class(self, name: str) -> type[Plugin] | None:
        key = name.strip().lower()
        return self.plugins.get(self.aliases.get(key, key))

    def action_names(self) -> list[str]:
        return sorted(self.actions)

    def plugin_names(self) -> list[str]:
        return sorted(self.plugins)


_ACTION_CLASSES: tuple[type[Action], ...] = (
    EnqueueAction,
    AllocateAction,
    BackfillAction,
    PreemptAction,
    ReclaimAction,
    GangPreemptAction,
    GangReclaimAction,
    ElectAction,
    ReserveAction,
    FlowAction,
    TimesliceAction,
    *INERT_ACTION_CLASSES,
)
_PLUGIN_CLASSES: tuple[type[Plugin], ...] = (
    GangPlugin,
    PriorityPlugin,
    ConformancePlugin,
    DrfPlugin,
    ProportionPlugin,
    CapacityPlugin,
    PredicatesPlugin,
    NodeOrderPlugin,
    BinpackPlugin,
    PdbPlugin,
    NetworkTopologyPlugin,
    MinRuntimePlugin,
    GpuSharePlugin,
    DeviceSharePlugin,
    FifoPlugin,
    SjfPlugin,
    SrtfPlugin,
    LasPlugin,
    OvercommitPlugin,
    ReservationPlugin,
    *INERT_PLUGIN_CLASSES,
)
REGISTRY = Registry(
    actions={cls.name: cls for cls in _ACTION_CLASSES},
    plugins={cls.name: cls for cls in _PLUGIN_CLASSES},
    aliases={
        "gang-preempt": "gangpreempt",
        "gang-reclaim": "gangreclaim",
        "network-topology": "network-topology-aware",
    },
)

#: The built-in configuration (Volcano's default shape, with binpack for GPU clusters; network-topology-aware,
#: so that a PodGroup's networkTopology and subGroupPolicy (and KAI's topologyConstraint) hold without
#: asking; and gpushare, so that pods sharing GPUs — Volcano's gpu-memory request, KAI's gpu-fraction /
#: gpu-memory annotations — are held to each device; it passes every node for pods that share nothing).
DEFAULT_CONFIG = {
    "actions": "enqueue, allocate, backfill",
    "tiers": [
        {
            "plugins": [
                {"name": "priority"},
                {"name": "gang", "enablePreemptable": False},
                {"name": "conformance"},
            ]
        },
        {
            "plugins": [
                {"name": "drf", "enablePreemptable": False},
                {"name": "predicates"},
                {"name": "proportion"},
                {"name": "nodeorder"},
                {
                    "name": "binpack",
                    "arguments": {
                        "binpack.resources": "nvidia.com/gpu",
                        "binpack.resources.nvidia.com/gpu": 4,
                    },
                },
                # hard and soft networkTopology honoured by default (Volcano needs the plugin added);
                # HyperNode bin packing of pods without a topology left to node order, as before
                {
                    "name": "network-topology-aware",
                    "arguments": {"hypernode.binpack.normal-pod.enable": False},
                },
                {"name": "gpushare"},
            ]
        },
    ],
}


def default_config() -> Config:
    return parse_config(DEFAULT_CONFIG, REGISTRY, "built-in default")
