"""The bounded YAML composer: depth and alias budgets checked while a document is composed, on its own
stack (see :mod:`corral.inputs`), and the two loaders built on it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, Event, MappingStartEvent, ScalarEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser as _PyParser
from yaml.reader import Reader as _Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner as _Scanner

from corral.inputs.text import limits

__all__ = ["BoundedLoader", "CountingComposer", "PyBoundedLoader"]

try:  # pragma: no cover - depends on how PyYAML was built
    from yaml._yaml import CParser as _Parser
except ImportError:  # pragma: no cover - pure-Python PyYAML: its parser, equally iterative

    class _Parser(_Reader, _Scanner, _PyParser):  # type: ignore[no-redef]  # CParser's stand-in
        def __init__(self, stream: str) -> None:
            _Reader.__init__(self, stream)
            _Scanner.__init__(self)
            _PyParser.__init__(self)


class CountingComposer(Composer):
    """PyYAML's composer with bounds, iterative on its own stack: the depth limit applies while the
    document is composed, and every alias adds the size of the node it names to a budget, so a
    "billion laughs" document fails after reading its text once."""

    # The ``arg-type`` ignores below: PyYAML's stubs type the marks of a node and of an error as
    # ``yaml.error.Mark`` but an event's as that or libyaml's ``yaml._yaml.Mark``; PyYAML's own composer
    # hands an event's marks on to nodes and errors just as this one does (both kinds have the same
    # name, line and column).

    if TYPE_CHECKING:  # from the parser and the resolver a loader mixes this with

        def get_event(self) -> Event | None: ...

        def resolve(self, kind: type[Node], value: str | None, implicit: Any) -> str: ...

    def compose_document(self) -> Node:
        self.get_event()  # DocumentStart
        bound = limits()
        self._max_depth, self._budget = bound.max_depth, bound.max_alias_nodes
        self._sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, height), once complete
        node = self._compose_iterative()
        self.get_event()  # DocumentEnd
        self.anchors = {}
        return node

    def _fail(self, message: str, event: Event) -> NoReturn:
        raise ComposerError(None, None, message, event.start_mark)  # type: ignore[arg-type]  # a mark

    def _alias(self, event: AliasEvent, depth: int) -> tuple[Node, int, int]:
        if event.anchor not in self.anchors:
            self._fail(f"found undefined alias {event.anchor!r}", event)
        node = self.anchors[event.anchor]
        size = self._sizes.get(id(node))
        if size is None:
            self._fail(f"alias *{event.anchor} refers to a node that contains it (recursive)", event)
        self._budget -= size[0]
        if self._budget < 0:
            self._fail(
                "YAML aliases expand to more than the limit of "
                f"{limits().max_alias_nodes} nodes (raise it with CORRAL_MAX_ALIAS_NODES)",
                event,
            )
        if depth + size[1] > self._max_depth:
            self.too_deep(event)
        return node, size[0], size[1]

    def too_deep(self, event: Event) -> NoReturn:
        self._fail(
            f"nesting deeper than the limit of {self._max_depth} levels (raise it with CORRAL_MAX_DEPTH)",
            event,
        )

    def _start(self, event: SequenceStartEvent | MappingStartEvent, anchor: str | None) -> Node:
        if isinstance(event, SequenceStartEvent):
            tag = event.tag
            if tag is None or tag == "!":
                tag = self.resolve(SequenceNode, None, event.implicit)
            node: Node = SequenceNode(
                tag,
                [],
                event.start_mark,  # type: ignore[arg-type]  # a mark (see above)
                None,
                flow_style=event.flow_style,
            )
        else:
            tag = event.tag
            if tag is None or tag == "!":
                tag = self.resolve(MappingNode, None, event.implicit)
            node = MappingNode(
                tag,
                [],
                event.start_mark,  # type: ignore[arg-type]  # a mark (see above)
                None,
                flow_style=event.flow_style,
            )
        if anchor is not None:
            self.anchors[anchor] = node
        return node

    def _compose_iterative(self) -> Node:
        # stack entries: [node, nodes so far, height so far, pending mapping key or None]
        stack: list[list[Any]] = []
        while True:
            event = self.get_event()
            depth = len(stack) + 1
            if isinstance(event, AliasEvent):
                child, size, height = self._alias(event, depth)
            elif isinstance(event, ScalarEvent):
                tag = event.tag
                if tag is None or tag == "!":
                    tag = self.resolve(ScalarNode, event.value, event.implicit)
                child = ScalarNode(
                    tag,
                    event.value,
                    event.start_mark,  # type: ignore[arg-type]  # a mark (see above)
                    event.end_mark,  # type: ignore[arg-type]  # a mark (see above)
                    style=event.style,
                )
                if event.anchor is not None:
                    self.anchors[event.anchor] = child
                    self._sizes[id(child)] = (1, 1)
                size, height = 1, 1
            elif isinstance(event, (SequenceStartEvent, MappingStartEvent)):
                if depth > self._max_depth:
                    self.too_deep(event)
                stack.append([self._start(event, event.anchor), 1, 1, None, event.anchor])
                continue
            else:  # SequenceEnd / MappingEnd closes the top
                assert event is not None  # the parser ends every collection it started
                top = stack.pop()
                child, size, height = top[0], top[1], top[2]
                child.end_mark = event.end_mark
                if top[4] is not None:
                    self._sizes[id(child)] = (size, height)
            if not stack:
                return child
            parent = stack[-1]
            parent[1] += size
            parent[2] = max(parent[2], height + 1)
            if isinstance(parent[0], SequenceNode):
                parent[0].value.append(child)
            elif parent[3] is None:
                parent[3] = child
            else:
                parent[0].value.append((parent[3], child))
                parent[3] = None


class BoundedLoader(_Parser, CountingComposer, SafeConstructor, Resolver):
    """libyaml's parser, the counting composer, the safe constructor."""

    def __init__(self, stream: str) -> None:
        _Parser.__init__(self, stream)
        CountingComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    # CParser defines its own (unbounded, C-recursive) composer entry points: use ours.
    check_node = Composer.check_node
    get_node = Composer.get_node
    get_single_node = Composer.get_single_node
    compose_document = CountingComposer.compose_document


class PyBoundedLoader(CountingComposer, yaml.SafeLoader):
    """PyYAML's pure-Python ``SafeLoader`` — reader, scanner and parser (iterative, with no nesting
    ceiling of their own), the safe constructor — with the counting composer first in line: the loader
    of last resort for texts that nest deeper than libyaml's own ceiling, so that corral's depth limit —
    not the C library's — decides. ``SafeLoader.__init__`` sets up each part."""
