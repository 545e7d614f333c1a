"""What a session asks at run time about the points its plugins declare (:mod:`corral.framework.points`
checks the declarations at start-up): :func:`declares` (one plugin, one point) and :func:`layout` (per
point, the plugins that extend it, tier by tier). Kept apart from :mod:`corral.framework.points`, which
imports the plugin base class, so that the Session and its parts ask without importing that class (the
base class refers to the Session: importing it here would close a circle)."""

from __future__ import annotations

from typing import Any

from corral.framework.extension import POINTS

__all__ = ["declares", "layout"]


def declares(plugin: Any, protocol: type) -> bool:
    """Does ``plugin`` declare ``protocol`` among its bases? (Nominal, and far cheaper than an
    ``isinstance`` check against a runtime-checkable Protocol, which compares every method.)"""
    return protocol in type(plugin).__mro__


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
