"""Which of a session's plugins extend each point (:data:`corral.framework.extension.POINTS`): a plugin
extends a point when its class declares the point's Protocol (:mod:`corral.framework.points`) and its
configuration does not switch the point off. Apart from :mod:`corral.framework.points`, which imports
the plugin base class, so that the Session can ask without importing it."""

from __future__ import annotations

from typing import Any

from corral.framework.extension import POINTS

__all__ = ["layout"]


_LAYOUTS: dict[tuple[Any, ...], dict[str, list[tuple[int, list[int]]]]] = {}


def layout(tiers: list[list[Any]]) -> dict[str, list[tuple[int, list[int]]]]:
    """Per point, the plugins that extend it as ``[(tier, [index in tier])]``, for ``tiers`` of
    ``(plugin, PluginConf)`` pairs: a plugin extends a point when it declares it and its configuration
    does not switch it off. Worked out once per configuration shape (plugin classes and switches)."""
    key = tuple(tuple((type(p), tuple(sorted(pc.switches.items()))) for p, pc in row) for row in tiers)
    got = _LAYOUTS.get(key)
    if got is None:
        got = {}
        for point in POINTS:
            rows = []
            for ti, row in enumerate(tiers):
                idx = [
                    pi
                    for pi, (p, pc) in enumerate(row)
                    if point.protocol in type(p).__mro__ and pc.enabled(point.switch)
                ]
                if idx:
                    rows.append((ti, idx))
            got[point.name] = rows
        _LAYOUTS[key] = got
    return got
