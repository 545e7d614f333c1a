"""The one explicit registry of actions and plugins (DESIGN.md convention 1), and the built-in default
configuration. Names are matched case-insensitively; ``gang-preempt``/``gang-reclaim`` are aliases of
``gangpreempt``/``gangreclaim`` once those actions exist."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from corral.actions.allocate import AllocateAction
from corral.actions.backfill import BackfillAction
from corral.actions.consolidate import ConsolidateAction
from corral.actions.elect import ElectAction
from corral.actions.enqueue import EnqueueAction
from corral.actions.flow import FlowAction
from corral.actions.gang_actions import GangPreemptAction, GangReclaimAction
from corral.actions.inert import INERT_ACTION_CLASSES
from corral.actions.preempt import PreemptAction
from corral.actions.reclaim import ReclaimAction
from corral.actions.reserve import ReserveAction
from corral.actions.timeslice import TimesliceAction
from corral.errors import ConfigError, PluginError
from corral.framework.config import Config, parse_config
from corral.framework.contract import check_plugin_class
from corral.framework.plugin import Action, Plugin
from corral.plugins.baselines import FifoPlugin, LasPlugin, SjfPlugin, SrtfPlugin
from corral.plugins.binpack import BinpackPlugin
from corral.plugins.capacity import CapacityPlugin
from corral.plugins.conformance import ConformancePlugin
from corral.plugins.deviceshare import DeviceSharePlugin
from corral.plugins.dra import DraPlugin
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

__all__ = [
    "ACTION_GROUP",
    "DEFAULT_CONFIG",
    "PLUGIN_GROUP",
    "REGISTRY",
    "Registry",
    "default_config",
    "installed",
]


#: The entry-point groups through which installed packages add plugins and actions (docs/plugins.md).
PLUGIN_GROUP = "corral.plugins"
ACTION_GROUP = "corral.actions"


class Registry:
    """Actions and plugins by name. Every plugin class is checked when it is registered
    (:func:`corral.framework.contract.check_plugin_class`): a public method of no declared point, or a
    point method with the wrong signature, is refused at start-up.

    With ``entry_points`` (the built-in :data:`REGISTRY`), the plugins and actions of installed
    packages are added from the ``corral.plugins`` and ``corral.actions`` entry-point groups the first
    time the registry is asked for a name, with the same checks; a package that breaks them, or
    reuses a name, is refused with one line naming the entry point (exit code 2)."""

    def __init__(
        self,
        actions: dict[str, type[Action]],
        plugins: dict[str, type[Plugin]],
        aliases: dict[str, str],
        *,
        entry_points: bool = False,
    ) -> None:
        for cls in plugins.values():
            check_plugin_class(cls)
        self._actions = dict(actions)
        self._plugins = dict(plugins)
        self.aliases = aliases
        self._pending = entry_points

    @property
    def actions(self) -> dict[str, type[Action]]:
        self._load()
        return self._actions

    @property
    def plugins(self) -> dict[str, type[Plugin]]:
        self._load()
        return self._plugins

    def _load(self) -> None:
        if self._pending:
            self._pending = False
            for name, cls in installed(PLUGIN_GROUP, self._plugins):
                self._plugins[name] = cls
            for name, cls in installed(ACTION_GROUP, self._actions):
                self._actions[name] = cls

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


def installed(group: str, taken: dict[str, Any]) -> list[tuple[str, Any]]:
    """The classes installed packages register in entry-point ``group``, checked: each loads, is a
    Plugin (or an Action) that keeps the contract, is named as its entry point (lower case), and takes
    no name already registered."""
    out: list[tuple[str, Any]] = []
    for ep in sorted(metadata.entry_points(group=group), key=lambda e: e.name):
        dist = getattr(ep, "dist", None)
        where = f"entry point {ep.name!r} = {ep.value!r} in group {group!r}" + (
            f" (package {dist.name} {dist.version})" if dist is not None else ""
        )
        try:
            cls = ep.load()
        except Exception as exc:  # whatever the package raises on import: one line, not a traceback
            raise ConfigError(f"{where} cannot be loaded: {type(exc).__name__}: {exc}") from None
        try:
            if group == PLUGIN_GROUP:
                check_plugin_class(cls, where)
            else:
                check_action_class(cls, where)
        except PluginError as exc:
            raise ConfigError(str(exc)) from None
        name = cls.name
        if name != ep.name.strip().lower():
            raise ConfigError(f"{where}: the class is named {name!r}; name the entry point {name!r}")
        if name in taken or any(name == n for n, _ in out):
            raise ConfigError(f"{where}: the name {name!r} is taken already; choose another name")
        out.append((name, cls))
    return out


def check_action_class(cls: Any, origin: str = "") -> None:
    """Refuse an action class that is not an :class:`Action` with a name and its own ``execute``."""
    where = f" ({origin})" if origin else ""
    if not (isinstance(cls, type) and issubclass(cls, Action)):
        raise PluginError(f"action {cls!r}{where} is not a subclass of corral.framework.plugin.Action")
    if not cls.name or cls.name != cls.name.lower():
        raise PluginError(f"action {cls.__qualname__}{where} needs a lower-case class attribute 'name'")
    if cls.execute is Action.execute:
        raise PluginError(f"action {cls.name!r}{where} does not implement execute(session)")


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
    ConsolidateAction,
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
    DraPlugin,
    *INERT_PLUGIN_CLASSES,
)


def make_registry(entry_points: bool = True) -> Registry:
    """The built-in actions and plugins, and (``entry_points``) those of installed packages."""
    return Registry(
        entry_points=entry_points,
        actions={cls.name: cls for cls in _ACTION_CLASSES},
        plugins={cls.name: cls for cls in _PLUGIN_CLASSES},
        aliases={
            "gang-preempt": "gangpreempt",
            "gang-reclaim": "gangreclaim",
            "consolidation": "consolidate",
            "network-topology": "network-topology-aware",
        },
    )


REGISTRY = make_registry()

#: The built-in configuration (Volcano's default shape, with binpack for GPU clusters; network-topology-aware,
#: so that a PodGroup's networkTopology and subGroupPolicy (and KAI's topologyConstraint) hold without
#: asking; and gpushare, so that pods sharing GPUs — Volcano's gpu-memory request, KAI's gpu-fraction /
#: gpu-memory annotations — are held to each device; it passes every node for pods that share nothing; and
#: dra, so that pods with resource claims get devices from the nodes' ResourceSlices).
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
                # Dynamic Resource Allocation: devices for pods' resource claims (passes pods without)
                {"name": "dra"},
            ]
        },
    ],
}


def default_config() -> Config:
    return parse_config(DEFAULT_CONFIG, REGISTRY, "built-in default")
