"""Volcano plugins that corral accepts with no effect, because in corral they could change nothing
(the reason for each is in :data:`corral.framework.volcano.INERT_PLUGINS` and docs/configuration.md).

They exist so that a Volcano configuration naming them loads and runs unchanged; they extend no point
and read no argument (any ``arguments`` mapping is accepted)."""

from __future__ import annotations

from dataclasses import dataclass

from corral.framework.plugin import Plugin
from corral.framework.volcano import INERT_PLUGINS

__all__ = ["INERT_PLUGIN_CLASSES", "AnyArgs"]


@dataclass(frozen=True)
class AnyArgs:
    """Arguments of a plugin without effect: any mapping is accepted and none is read."""

    ANY_ARGUMENTS = True


def _inert(plugin_name: str) -> type[Plugin]:
    return type(
        f"Inert_{plugin_name}",
        (Plugin,),
        {
            "name": plugin_name,
            "Args": AnyArgs,
            "__doc__": f"``{plugin_name}``: accepted with no effect: {INERT_PLUGINS[plugin_name]}.",
        },
    )


INERT_PLUGIN_CLASSES: tuple[type[Plugin], ...] = tuple(_inert(n) for n in sorted(INERT_PLUGINS))
