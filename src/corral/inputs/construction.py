"""The C loader's own construction of values (see :class:`FastConstruction`): libyaml's parser and
composer, values built in one loop instead of PyYAML's generic constructor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

__all__ = ["FastCLoader", "FastConstruction", "c_documents"]

try:  # pragma: no cover - depends on how PyYAML was built
    from yaml import CSafeLoader as _FastLoader
except ImportError:  # pragma: no cover - pure-Python PyYAML: the same API, in Python
    from yaml import SafeLoader as _FastLoader  # type: ignore[assignment]

_TAG = "tag:yaml.org,2002:"
_STR, _MAP, _SEQ = _TAG + "str", _TAG + "map", _TAG + "seq"
#: scalar tags built by PyYAML's own (plain, non-generator) SafeConstructor functions
_SCALAR_TAGS = tuple(_TAG + t for t in ("null", "bool", "int", "float", "timestamp"))
_FALLBACK = object()
#: plain scalar text -> its resolved tag (snapshots repeat keys and values over tens of thousands of objects)
_RESOLVED_MAX = 1 << 16


if TYPE_CHECKING:  # a mixin of the C loader (see FastCLoader): type-checked as one
    _MixedIntoLoader = _FastLoader
else:
    _MixedIntoLoader = object


class FastConstruction(_MixedIntoLoader):
    """What the C loader lacks: PyYAML builds Python values from libyaml's nodes in Python, through a
    generic constructor that costs more than parsing (docs/kubernetes.md, "Performance at scale"). Documents
    made only of mappings, sequences and the plain scalar types (str, null, bool, int, float,
    timestamp) — every Kubernetes object — are built here in one loop with an explicit stack (no
    recursion, as PyYAML's own); scalars go through the same SafeConstructor functions, so values and
    errors are PyYAML's. Anything else (merge keys ``<<``, ``!!set``, ``!!binary``, custom tags,
    collections as keys) makes the whole document go through PyYAML's constructor instead. Plain scalars'
    tags are resolved once per distinct text."""

    _resolved: dict[str, str]
    # No path resolvers are registered on this loader: libyaml's composer still calls these two hooks for
    # every node, so they are C built-ins that accept the arguments and do nothing (slice() builds a
    # throw-away object; int() returns 0) rather than Python functions that return at once.
    if TYPE_CHECKING:  # BaseResolver's signatures, which the built-ins below accept

        def descend_resolver(self, current_node: Node | None, current_index: object) -> None: ...

        def ascend_resolver(self) -> None: ...

    else:
        descend_resolver = staticmethod(slice)
        ascend_resolver = staticmethod(int)

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        """PyYAML's ``Resolver.resolve`` without path resolvers: a plain scalar's tag is looked up once
        per distinct text; a quoted scalar is a string, a collection a map or a sequence."""
        if kind is ScalarNode:
            if not implicit[0]:
                return _STR
            tag = self._resolved.get(value)
            if tag is None:
                tag = Resolver.resolve(self, kind, value, implicit)
                if len(self._resolved) < _RESOLVED_MAX:
                    self._resolved[value] = tag
            return tag
        return _MAP if kind is MappingNode else _SEQ

    def construct_document(self, node: Node) -> Any:
        data = self._build(node)
        if data is _FALLBACK:
            return SafeConstructor.construct_document(self, node)
        return data

    def _scalar(self, node: Node, scalars: dict) -> Any:
        tag = node.tag
        if tag == _STR:
            return node.value
        fn = scalars.get(tag)
        return _FALLBACK if fn is None else fn(self, node)

    def _build(self, root: Node) -> Any:
        scalars = {t: self.yaml_constructors[t] for t in _SCALAR_TAGS}
        if type(root) is ScalarNode:
            return self._scalar(root, scalars)
        top = _empty(root)
        if top is _FALLBACK:
            return _FALLBACK
        stack = [(root, top)]
        while stack:
            node, out = stack.pop()
            if type(node) is MappingNode:
                for key_node, value_node in node.value:
                    if type(key_node) is not ScalarNode:
                        return _FALLBACK
                    key = self._scalar(key_node, scalars)
                    if key is _FALLBACK:
                        return _FALLBACK
                    value = self._child(value_node, scalars, stack)
                    if value is _FALLBACK:
                        return _FALLBACK
                    out[key] = value
            else:
                for item in node.value:
                    value = self._child(item, scalars, stack)
                    if value is _FALLBACK:
                        return _FALLBACK
                    out.append(value)
        return top

    def _child(self, node: Node, scalars: dict, stack: list) -> Any:
        """A child's value: a scalar built now, a container left empty and queued to be filled."""
        if type(node) is ScalarNode:
            return self._scalar(node, scalars)
        value = _empty(node)
        stack.append((node, value))
        return value


def _empty(node: Node) -> Any:
    """The empty container a plain mapping or sequence node becomes, or ``_FALLBACK`` for a tagged one."""
    if type(node) is MappingNode and node.tag == _MAP:
        return {}
    if type(node) is SequenceNode and node.tag == _SEQ:
        return []
    return _FALLBACK


class FastCLoader(FastConstruction, _FastLoader):
    """libyaml's parser and composer with :class:`FastConstruction`."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._resolved = {}


def c_documents(text: str) -> list[Any]:
    """Every document of ``text`` (``None`` ones too) through the C loader: the reference the fast path
    checks its candidate scalars against."""
    return list(yaml.load_all(text, Loader=FastCLoader))
