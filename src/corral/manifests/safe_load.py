"""Bounded reading of untrusted text files: encodings, size, nesting depth, YAML aliases, huge numbers.

Every file corral reads (snapshots, configurations, cluster and workload specs) comes through here, so
that hostile or broken input ends in one :class:`~corral.errors.InputError` line (exit code 2) within a
bounded time and memory — never a crash, a hang or a traceback:

- **size**: a file larger than ``CORRAL_MAX_INPUT_BYTES`` (default 1 GiB) is refused before it is read;
- **encoding**: UTF-8 with or without a byte-order mark and UTF-16 with a byte-order mark (what Windows
  PowerShell writes for ``kubectl get -o yaml > file``) are read; anything else (UTF-32, UTF-16 without
  a BOM, binary data) is refused with a message saying what was found and what is expected;
- **nesting**: a document nested deeper than ``CORRAL_MAX_DEPTH`` (default 200; Kubernetes objects sit
  under 30) is refused *while it is composed*, before any recursive step: libyaml's C composer recurses
  on the C stack and crashes the process at some ten thousand levels, so deep input must never reach it;
- **YAML aliases**: a document whose aliases would expand to more than ``CORRAL_MAX_ALIAS_NODES``
  (default 100,000) nodes — a "billion laughs" bomb — or that holds an alias to a node still being built
  (a recursive structure) is refused while it is composed, in time proportional to the text;
- **numbers**: an integer of more digits than Python converts (4,300) is refused with its line.

Loading speed: the C loader (libyaml) is used when the text holds no ``&`` (no anchor, hence no alias)
and a cheap upper bound on its nesting depth (:func:`depth_bound`) is within what the C composer
survives with a wide margin; if that bound passes the depth limit, the loaded documents are walked once
(no recursion) to check the real depth. Otherwise the same C parser feeds a Python composer that counts
as it goes (roughly 1.5-2x slower, only for files with anchors or thousands of ``[``/``{``). On the C
path, values are built from libyaml's nodes by :class:`_FastConstruction` (half the cost of PyYAML's
generic constructor, the same values and errors). JSON's depth bound counts brackets only.

Large YAML (64 KiB and more) on that C path first tries :mod:`corral.manifests.fast_yaml`: rapidyaml
parses the text and emits it as JSON, which ``json.loads`` builds in C (a 23 MiB ``yaml.dump_all``
snapshot of 66,149 objects in about 1.4 s of CPU against 3.2 s here). It is taken only when a screen
shows the values are the ones this loader builds — no tag, anchor, alias, merge key, complex key or
YAML 1.1 boolean/null word; every distinct number-like plain scalar read alike by both; libyaml's own
parser accepting the text — and otherwise steps aside, so this loader runs unchanged and its error
messages stay the ones users see. ``CORRAL_FAST_YAML=0`` switches it off; without rapidyaml (no wheel
for the platform) this loader is all there is.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, Event, MappingStartEvent, ScalarEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from corral.errors import CorralError, InputError
from corral.manifests import fast_yaml

__all__ = ["Limits", "limits", "load_json", "load_text_documents", "load_yaml", "load_yaml_all", "read_text"]

from yaml.parser import Parser as _PyParser
from yaml.reader import Reader as _Reader
from yaml.scanner import Scanner as _Scanner

try:  # pragma: no cover - depends on how PyYAML was built
    from yaml import CSafeLoader as _FastLoader
    from yaml._yaml import CParser as _Parser
except ImportError:  # pragma: no cover - pure-Python PyYAML: its parser, equally iterative
    from yaml import SafeLoader as _FastLoader  # type: ignore[assignment]  # the same API, in Python

    class _Parser(_Reader, _Scanner, _PyParser):  # type: ignore[no-redef]  # CParser's stand-in
        def __init__(self, stream: str) -> None:
            _Reader.__init__(self, stream)
            _Scanner.__init__(self)
            _PyParser.__init__(self)


ErrorType = Callable[..., Exception]


class Limits:
    """The bounds on input, read from the environment each time (so a test or a user can raise one):
    ``CORRAL_MAX_INPUT_BYTES``, ``CORRAL_MAX_DEPTH``, ``CORRAL_MAX_ALIAS_NODES``."""

    __slots__ = ("max_alias_nodes", "max_bytes", "max_depth")

    DEFAULTS: ClassVar[dict[str, int]] = {
        "CORRAL_MAX_INPUT_BYTES": 1 << 30,
        "CORRAL_MAX_DEPTH": 200,
        "CORRAL_MAX_ALIAS_NODES": 100_000,
    }

    def __init__(self) -> None:
        self.max_bytes = self._get("CORRAL_MAX_INPUT_BYTES")
        self.max_depth = self._get("CORRAL_MAX_DEPTH")
        self.max_alias_nodes = self._get("CORRAL_MAX_ALIAS_NODES")

    @classmethod
    def _get(cls, name: str) -> int:
        raw = os.environ.get(name)
        if raw is None or not raw.strip():
            return cls.DEFAULTS[name]
        if not raw.strip().isdigit() or len(raw.strip()) > 18 or int(raw) < 1:
            raise InputError(f"expected a positive integer, got {raw!r}", obj="environment", field=name)
        return int(raw)


def limits() -> Limits:
    return Limits()


# The C composer recurses on the C stack: it is only trusted with shallow documents (measured: it
# survives 10,000 levels and crashes by 30,000 on an 8 MiB stack).
_C_SAFE_DEPTH = 2000
# libyaml 0.2.6 stops at 1,000 nested levels in its scanner (its own message); a text that may nest
# deeper goes to the pure-Python parser when libyaml fails (see load_yaml_all). Kept below the real
# ceiling, so a libyaml that counts a level differently still ends on this path.
_LIBYAML_CEILING = 900
_EMPTY = re.compile(r"\{\s*\}|\[\s*\]")
_BLOCK_INDENT = re.compile(r"^[ ?\-]*", re.MULTILINE)
_LEAD = re.compile(r"[ ?\-]*")


# ------------------------------------------------------------------------------------------- text
_BOMS = (
    (codecs.BOM_UTF32_LE, None, "UTF-32"),
    (codecs.BOM_UTF32_BE, None, "UTF-32"),
    (codecs.BOM_UTF8, "utf-8-sig", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16"),
)


def decode(data: bytes, file: str, error: ErrorType = InputError) -> str:
    """``data`` as text: UTF-8 (a BOM is dropped) or UTF-16 with a BOM; anything else is ``error``."""
    for bom, codec, name in _BOMS:
        if data.startswith(bom):
            if codec is None:
                raise error(
                    f"the file is {name}; save it as UTF-8 (or UTF-16 with a byte-order mark)", file=file
                )
            try:
                return data.decode(codec)
            except UnicodeDecodeError as exc:
                raise error(f"not valid {name} text (bad bytes at offset {exc.start})", file=file) from None
    nul = data.find(0)  # never in YAML or JSON text; all over UTF-16 without its byte-order mark
    if nul >= 0:
        head = data[:4096]
        if head.count(0) * 4 >= len(head):
            raise error(
                "the file looks like UTF-16 or UTF-32 without a byte-order mark; save it as UTF-8", file=file
            )
        raise error(f"a NUL byte at offset {nul}: not a text file", file=file)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); the file must "
            "be UTF-8, or UTF-16 with a byte-order mark",
            file=file,
        ) from None


def read_text(path: str | Path, error: ErrorType = InputError) -> str:
    """The text of ``path`` within the size limit and the accepted encodings (see the module doc)."""
    p, bound = Path(path), limits().max_bytes
    try:
        size = p.stat().st_size
        if size > bound:
            raise error(
                f"the file is {size} bytes, more than the limit of {bound} "
                "(raise it with CORRAL_MAX_INPUT_BYTES)",
                file=str(path),
            )
        with p.open("rb") as handle:
            data = handle.read(bound + 1)
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    if len(data) > bound:  # a pipe or a file that grew: no stat size to trust
        raise error(
            f"the file is more than the limit of {bound} bytes (raise it with CORRAL_MAX_INPUT_BYTES)",
            file=str(path),
        )
    return decode(data, str(path), error)


def depth_bound(text: str) -> int:
    """A cheap upper bound on the nesting depth of a YAML or JSON text: every flow collection that is
    not empty opens with ``[`` or ``{``, and each block level takes an indentation column or a compact
    ``- ``/``? `` on its line (two levels per column at most: a block sequence may sit at its key's
    indentation)."""
    flow = text.count("[") + text.count("{")
    if flow:
        flow -= len(_EMPTY.findall(text))
    block = max(map(len, _BLOCK_INDENT.findall(text)), default=0)
    return flow + 2 * (block + 1)


def _depth_within(text: str, limit: int) -> bool:
    """``depth_bound(text) <= limit``, without measuring every line: the indentation the flow
    collections leave room for is looked for once (a newline followed by that many indentation
    characters), and empty flow collections are counted only when the plain count does not pass."""
    flow = text.count("[") + text.count("{")
    if _indent_within(text, limit - flow):
        return True
    return bool(flow) and _indent_within(text, limit - flow + len(_EMPTY.findall(text)))


def _indent_within(text: str, levels: int) -> bool:
    room = levels // 2  # 2 * (indentation + 1) <= levels
    if room < 1:
        return False
    lead = _LEAD.match(text)
    assert lead is not None  # a pattern of ``*`` matches every text
    if lead.end() >= room:
        return False
    return re.search(rf"\n[ ?\-]{{{room}}}", text) is None


# ------------------------------------------------------------------------------------------- YAML
class _CountingComposer(Composer):
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
            self._too_deep(event)
        return node, size[0], size[1]

    def _too_deep(self, event: Event) -> NoReturn:
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
                    self._too_deep(event)
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


# ------------------------------------------------------------------------------- fast construction
_TAG = "tag:yaml.org,2002:"
_STR, _MAP, _SEQ = _TAG + "str", _TAG + "map", _TAG + "seq"
#: scalar tags built by PyYAML's own (plain, non-generator) SafeConstructor functions
_SCALAR_TAGS = tuple(_TAG + t for t in ("null", "bool", "int", "float", "timestamp"))
_FALLBACK = object()
#: plain scalar text -> its resolved tag (snapshots repeat keys and values over tens of thousands of objects)
_RESOLVED_MAX = 1 << 16


if TYPE_CHECKING:  # a mixin of the C loader (see _FastCLoader): type-checked as one
    _MixedIntoLoader = _FastLoader
else:
    _MixedIntoLoader = object


class _FastConstruction(_MixedIntoLoader):
    """What the C loader lacks: PyYAML builds Python values from libyaml's nodes in Python, through a
    generic constructor that costs more than parsing (measured at 10,000 nodes: 4.1 of 7.5 s). Documents
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


class _FastCLoader(_FastConstruction, _FastLoader):
    """libyaml's parser and composer with :class:`_FastConstruction`."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._resolved = {}


class _BoundedLoader(_Parser, _CountingComposer, SafeConstructor, Resolver):
    """libyaml's parser, the counting composer, the safe constructor."""

    def __init__(self, stream: str) -> None:
        _Parser.__init__(self, stream)
        _CountingComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    # CParser defines its own (unbounded, C-recursive) composer entry points: use ours.
    check_node = Composer.check_node
    get_node = Composer.get_node
    get_single_node = Composer.get_single_node
    compose_document = _CountingComposer.compose_document


class _PyBoundedLoader(_CountingComposer, yaml.SafeLoader):
    """PyYAML's pure-Python ``SafeLoader`` — reader, scanner and parser (iterative, with no nesting
    ceiling of their own), the safe constructor — with the counting composer first in line: the loader
    of last resort for texts that nest deeper than libyaml's own ceiling, so that corral's depth limit —
    not the C library's — decides. ``SafeLoader.__init__`` sets up each part."""


def _loader_for(text: str, max_depth: int) -> tuple[type, bool]:
    """The loader for ``text`` and whether its result must still be walked for the depth limit."""
    if "&" in text:
        return _BoundedLoader, False
    if _depth_within(text, min(max_depth, _C_SAFE_DEPTH)):
        return _FastCLoader, False
    return (_FastCLoader, True) if _depth_within(text, _C_SAFE_DEPTH) else (_BoundedLoader, False)


def _yaml_error(exc: BaseException, file: str, error: ErrorType) -> Exception:
    mark = getattr(exc, "problem_mark", None)
    at = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return error(f"malformed YAML{at}: {problem}", file=file)


def _number_error(exc: ValueError, file: str, what: str, error: ErrorType) -> Exception:
    if "digits" in str(exc) or "integer string conversion" in str(exc):
        return error(
            f"a number in the {what} has more digits than the limit of "
            f"{_int_digits()} (numbers that large are never meaningful here)",
            file=file,
        )
    return error(f"malformed {what}: {exc}", file=file)


def _int_digits() -> int:
    import sys

    return sys.get_int_max_str_digits() or 4300


def load_yaml_all(text: str, file: str, error: ErrorType = InputError) -> list[Any]:
    """Every non-empty document of a YAML stream, within the limits; else one ``error``."""
    max_depth = limits().max_depth
    loader, walk = _loader_for(text, max_depth)
    if loader is _FastCLoader and not walk:
        fast = fast_yaml.load_all(text, _c_documents)
        if fast is not None:
            return fast
    try:
        try:
            docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
        except yaml.YAMLError:
            if _depth_within(text, _LIBYAML_CEILING):
                raise
            # libyaml (0.2.6 and later) refuses nesting past its own ceiling in its scanner, which
            # reads ahead of the composer: read such a text again with the pure-Python parser, so the
            # error is corral's depth limit (which CORRAL_MAX_DEPTH raises) or the text's real fault.
            walk = False
            docs = [d for d in yaml.load_all(text, Loader=_PyBoundedLoader) if d is not None]
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, file, error) from None
    except ValueError as exc:  # int("9" * 5000) in the constructor
        raise _number_error(exc, file, "YAML", error) from None
    except RecursionError:  # pragma: no cover - the composer bounds depth first
        raise _too_deep(max_depth, file, error) from None
    if walk and _nests_deeper(docs, max_depth + 1):  # +1: the list of documents
        raise _too_deep(max_depth, file, error)
    return docs


def _c_documents(text: str) -> list[Any]:
    """Every document of ``text`` (``None`` ones too) through the C loader: the reference the fast path
    checks its candidate scalars against."""
    return list(yaml.load_all(text, Loader=_FastCLoader))


def _too_deep(bound: int, file: str, error: ErrorType) -> Exception:
    return error(
        f"nesting deeper than the limit of {bound} levels (raise it with CORRAL_MAX_DEPTH)", file=file
    )


def load_yaml(text: str, file: str, error: ErrorType = InputError) -> Any:
    """A single YAML document (None when empty); more than one document is ``error``."""
    docs = load_yaml_all(text, file, error)
    if len(docs) > 1:
        raise error(f"expected one YAML document, found {len(docs)}", file=file)
    return docs[0] if docs else None


def _nests_deeper(value: Any, bound: int) -> bool:
    """Whether ``value`` nests deeper than ``bound``: level by level (no recursion), one comprehension per
    level, so a large snapshot costs one pass at C speed rather than a Python step per container."""
    if bound < 1:
        return True
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 1
    while level:
        if depth > bound:
            return True
        level = [
            v
            for item in level
            for v in (item.values() if isinstance(item, dict) else item)
            if isinstance(v, (dict, list))
        ]
        depth += 1
    return False


def load_json(text: str, file: str, error: ErrorType = InputError) -> Any:
    """A JSON document within the depth limit (the text without a BOM); malformed is ``error``."""
    bound = limits().max_depth
    too_deep = _too_deep(bound, file, error)
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep from None
    except json.JSONDecodeError as exc:
        raise error(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", file=file) from None
    except ValueError as exc:
        raise _number_error(exc, file, "JSON", error) from None
    if _json_depth_bound(text) > bound and _nests_deeper(value, bound):
        raise too_deep
    return value


def _json_depth_bound(text: str) -> int:
    """An upper bound on the nesting depth of a JSON text: its number of ``[`` and ``{`` (in strings
    too). JSON has no block structure, so :func:`depth_bound`'s indentation scan (and its regular
    expressions, a quarter of a second on a 25 MiB snapshot) would only add to a bound that a large
    file passes anyway; past the limit, the loaded value is walked for its real depth."""
    return text.count("[") + text.count("{")


def load_text_documents(path: str | Path, error: ErrorType = InputError) -> list[Any]:
    """The documents of a YAML or JSON file (JSON when the name ends in ``.json`` or the text opens
    with ``{`` or ``[`` and parses as JSON), read and parsed within the limits."""
    text = read_text(path, error)
    name = str(path)
    if name.endswith(".json") or text.lstrip().startswith(("{", "[")):
        try:
            return [load_json(text, name, error)]
        except CorralError:
            if name.endswith(".json"):
                raise
    return load_yaml_all(text, name, error)
