"""The plugin contract, checked when a plugin class is registered (built-in or from an entry point):
it closes the contract, since a misspelt method would otherwise never be called. Every public method of
a plugin belongs to a point it declares (:func:`corral.framework.points.declared_points`) or to
:class:`~corral.framework.plugin.Plugin` itself, and every method of a declared point is implemented
with a signature that accepts the point's arguments."""

from __future__ import annotations

import inspect
from typing import Any

from corral.errors import PluginError
from corral.framework.extension import Point
from corral.framework.plugin import Plugin
from corral.framework.points import declared_points

__all__ = ["BASE_METHODS", "check_plugin_class"]

#: The public methods every plugin has from :class:`~corral.framework.plugin.Plugin`.
BASE_METHODS = frozenset(n for n, v in vars(Plugin).items() if not n.startswith("_") and callable(v))


def check_plugin_class(cls: Any, origin: str = "") -> None:
    """Refuse a plugin class that is not a :class:`Plugin` with a name, that has a public method of no
    declared point, or that implements a declared point's method with the wrong signature (one line
    naming the plugin, the method and what to do; ``origin`` says where it came from)."""
    where = f" ({origin})" if origin else ""
    if not (isinstance(cls, type) and issubclass(cls, Plugin)):
        raise PluginError(f"plugin {cls!r}{where} is not a subclass of corral.framework.plugin.Plugin")
    label = f"plugin {cls.name or cls.__qualname__!r} ({cls.__module__}.{cls.__qualname__}){where}"
    if not cls.name:
        raise PluginError(f"{label} has no name: set the class attribute 'name'")
    points = declared_points(cls)
    allowed = set(BASE_METHODS)
    for point in points:
        allowed.update(point.methods)
        for method in point.methods:
            _check_method(cls, label, point, method)
    for name in dir(cls):
        if name.startswith("_") or name in allowed:
            continue
        if inspect.isfunction(inspect.getattr_static(cls, name)):
            raise PluginError(
                f"{label}: public method {name!r} belongs to no extension point the plugin declares; "
                "add the point's Protocol (corral.framework.extension) to its bases, fix the name, or "
                f"make it private ('_{name}')"
            )


def _check_method(cls: type, label: str, point: Point, method: str) -> None:
    impl = inspect.getattr_static(cls, method, None)
    stub = vars(point.protocol)[method]
    if impl is None or impl is stub or not callable(impl):
        raise PluginError(f"{label} declares {point.name} but does not implement {method}()")
    want = len(inspect.signature(stub).parameters) - 1  # without self
    params = list(inspect.signature(impl).parameters.values())[1:]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
    kw_required = [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if len(required) > want or (len(positional) < want and not varargs) or kw_required:
        shown = ", ".join(["self", *list(inspect.signature(stub).parameters)[1:]])
        raise PluginError(
            f"{label}: {method}() must accept ({shown}) as {point.name} passes them; "
            f"it has {inspect.signature(impl)}"
        )
