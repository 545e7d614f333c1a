"""Which plugin extends which point: a plugin class lists the points it implements as its bases (the
Protocols of :mod:`corral.framework.extension` and :mod:`corral.framework.hints`; the registry checks
that it keeps to them, :mod:`corral.framework.contract`), and a session asks :func:`layout` which of
its plugins extend each point, tier by tier."""

from __future__ import annotations

from typing import Any

from corral.framework.extension import POINTS, Point

__all__ = ["declared_points", "declares", "layout"]


def declares(plugin: Any, protocol: type) -> bool:
    """Does ``plugin`` declare ``protocol`` among its bases? (Nominal, and far cheaper than an
    ``isinstance`` check against a runtime-checkable Protocol, which compares every method.)"""
    return protocol in type(plugin).__mro__


def declared_points(cls: type) -> list[Point]:
    """The points ``cls`` declares (a Protocol among its bases, directly or through a base class)."""
    mro = cls.__mro__
    return [p for p in POINTS if p.protocol in mro]


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
