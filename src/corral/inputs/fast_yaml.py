"""A fast path for large YAML streams: rapidyaml's C++ parser and JSON emitter, then Python's C JSON decoder,
taken only when the result is provably what the PyYAML loader of :mod:`corral.inputs` builds.

Why: on the 10,000-node snapshot of ``benchmarks/bench_allocate.py`` libyaml's event parsing and
composing alone cost more than ``corral schedule``'s 5 s target, however the values were built; rapidyaml
(PyPI ``rapidyaml``, module ``ryml``) parses and emits the same text as JSON in a fraction of that, and
``json.loads`` builds the values in C (the figures: docs/kubernetes.md, "Performance at scale"). Walking
rapidyaml's tree from Python costs a call per node (no faster than libyaml), so the values come through
its JSON.

The two do not read YAML alike. rapidyaml follows YAML 1.2: its JSON leaves a plain scalar unquoted when
it looks like a number or is ``true``/``false``/``null``, and it respells inf/nan forms (``nan`` becomes
``".nan"``, also in quoted keys). PyYAML follows YAML 1.1: ``yes``/``Off`` are booleans, ``~`` is null,
``012``, ``0x1F``, ``1_000`` and ``1:20`` are integers, ``1e3`` is a string, ``2017-01-01`` a date, ``.inf``
a float, a plain ``1:`` key an integer. And rapidyaml accepts some text libyaml refuses (``k: @x``,
``- [a]  - [b]``). So :func:`load_all` returns the documents only when every step below holds; otherwise
it returns ``None`` and the caller runs its PyYAML loader unchanged, which also gives the error message
(with line and column) for broken input. Refusing too much only costs speed; the screens look at the
raw text, so a match inside a quoted string or a comment sends the file to PyYAML, never a wrong value.

1. **Applicable**: rapidyaml and google-re2 import (a platform without a wheel loads through libyaml as
   before), ``CORRAL_FAST_YAML`` is not ``0``, and the text has at least :data:`MIN_CHARS` characters
   (64 KiB: below that PyYAML takes milliseconds, and small hand-written files keep the loader they always
   had). The caller has already checked that it holds no ``&`` (no anchor, no alias) and that its depth
   bound is within the nesting limit (which rapidyaml's result then respects too).
2. **Nothing either side reads its own way** (:data:`_REFUSE`, one RE2 pass, about 50 ms over 23 MiB):
   at a token boundary (line start, whitespace, ``[{,``), a tag ``!``, an anchor ``&``, an alias ``*``, a
   directive ``%``, a reserved `````/``@``, an explicit key ``?``, an empty key ``:``, a merge key ``<<``
   or the value key ``=``; a flow collection used as a key; ``[a:]``; a block scalar that is a whole
   document; a plain scalar that starts with ``]``/``}``; a second block entry on a line after a flow
   collection or a quoted scalar; a ``...`` document end; a tab (PyYAML reads ``a:<TAB>b`` as a mapping);
   a lone CR or a YAML 1.1 line break (U+0085, U+2028/9); a character PyYAML's reader refuses (control
   characters, surrogates, U+FEFF); the YAML 1.1 boolean and null words (``yes``/``No``/``on``/``OFF``,
   ``True``/``FALSE``, ``Null``/``NULL``, ``~``) as plain scalars; inf/nan spellings, quoted too; and
   ``true``/``false``/``null`` as keys (as values both read them alike). A text that does not end with a
   line break and holds a block scalar indicator is refused too: rapidyaml adds the final line break
   that PyYAML's clipping leaves out.
3. **Every number-like plain scalar is checked** (:data:`_CANDIDATE`): the tokens that start with a
   digit, a sign followed by a digit, ``_``, ``.``, ``i`` or ``n``, or a ``.`` followed by a letter or digit,
   from a token boundary or a ``:`` up to the end of the line, a comment, a ``:`` value indicator or a flow
   indicator. Kubernetes quantities (``10Gi``, ``500m``, ``8080``) are candidates: many occurrences, few
   distinct texts. Plain decimal integers (``-?[1-9][0-9]*``, up to 18 digits) read alike as values; the
   other distinct tokens are parsed at once, as one block sequence, by the PyYAML loader and by this
   path, and any difference in type or value (compared by ``repr``: ``1`` is not ``1.0`` nor ``True``, a
   date not a string) refuses the text. A candidate used as a key — followed by ``:``, or (in a text with
   a non-empty flow mapping) a lone entry of a flow collection, ``{a: 1, 2}`` — must be a string for
   PyYAML and the same string for rapidyaml, whose JSON keys are always strings. A candidate that starts
   like a date (``2024-1-2``) refuses the text: a plain scalar folded over lines can be a timestamp for
   PyYAML (``2024-1-2`` then ``10:00:00``) while each line alone is a string. Every other plain scalar is
   a string for both: PyYAML's resolvers fire only on a first character among ``-+.0-9~<=`` and on the
   boolean/null words (refused above) or an empty scalar (null for both); rapidyaml's only on numbers and
   the words; a token cut short at ``,[]{}?#`` stands for a scalar that holds one of those characters,
   which neither reads as anything but a string. Quoted and block scalars are strings for both.
   At most :data:`MAX_DISTINCT` distinct candidates.
4. **libyaml accepts the text**: ``CParser.raw_parse()`` runs libyaml's parser over it in C without
   building a Python object per event (0.37 s over 23 MiB), so the fast path never accepts text the
   PyYAML loader refuses.
5. **rapidyaml and the JSON decoder agree**: a rapidyaml parse or emit error (which its C++ handler
   prints on file descriptor 2: kept off the terminal), a JSON error (a control character, a NUL, a
   number of more digits than Python converts), or a text that is not UTF-8 encodable refuses the text.

Documents: rapidyaml's stream (``---`` separated, as ``yaml.dump_all`` writes) becomes one JSON array with
``null`` for an empty document; ``None`` documents are dropped, as the PyYAML path drops them; a text
without ``---`` is one document (none when empty). Duplicate keys: the last wins on both paths.

The equivalence is tested on every YAML file of the project and its examples, on generated documents full
of YAML 1.1/1.2 traps and on broken text (``tests/inputs/test_fast_yaml.py``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yaml._yaml import CParser

__all__ = ["MAX_DISTINCT", "MIN_CHARS", "accepts", "available", "enabled", "load_all"]

#: texts shorter than this go to the PyYAML loader (it takes milliseconds there)
MIN_CHARS = 1 << 16
#: more distinct candidate scalars than this (pod IPs are distinct: 50,000 at 10,000 nodes) and the check
#: would cost about a second (PyYAML reads some 250,000 short scalars a second)
MAX_DISTINCT = 250_000

# The screens, in RE2 syntax (google-re2: one linear pass without backtracking, about 40 ms over 23 MiB
# where Python's re needs over a second for the same boundary conditions).
_BOUND = r"(?:^|[\s\[{,])"  # a token boundary: start of a line, whitespace, [ { ,
_END = r"[ \r]*(?:$|[,\[\]{}?#:])"  # the end of a plain token
#: what rapidyaml's JSON cannot carry as PyYAML reads it, or what the two always read differently
_REFUSE = "|".join(
    [
        _BOUND + r"(?:[!&*%`@:?]|<<|=(?:[\s,\]}]|$))",  # tag anchor alias directive ` @ : ? merge =
        r":[,\]}]|(?:^|--- +)[|>]",  # ``[a:]``; a block scalar as a whole document
        r"[\]}] *:(?:[\s,\[\]{}]|$)",  # a flow collection as a key
        # rapidyaml accepts what PyYAML refuses: a plain scalar that starts with a closing bracket, a second
        # block entry on the line of a flow collection or a quoted scalar (``- [a]  - [b]``)
        r"(?:^ *|[:-] +)[\]}]|[\]}\"'] +-(?: |$)",
        r"^\.\.\.(?:\s|$)|\t|\r[^\n]|\r$",  # document end, tab, a lone CR
        r"[^\n\r\x20-\x7e\x{a0}-\x{d7ff}\x{e000}-\x{fefe}\x{ff00}-\x{fffd}\x{10000}-\x{10ffff}]",  # PyYAML's reader
        # words PyYAML and rapidyaml read differently (YAML 1.1 booleans and nulls, inf/nan spellings)
        r"(?:^|[\s\[{,:])(?:yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|True|TRUE|False|FALSE|Null|NULL|~)"
        + _END,
        # and inf/nan spellings, quoted too: rapidyaml rewrites them in keys (``"-.Inf": x`` -> ``-.inf``)
        r"(?:^|[\s\[{,:'\"])(?i:[-+]?\.?(?:inf|nan|infinity))(?:" + _END + r"|['\"])",
        # true/false/null read alike as values, but as keys PyYAML's are a bool or None
        r"(?:^|[\s\[{,:])(?:true|false|null)[ \r]*:(?:\s|$)|(?:^|[{,]) *(?:true|false|null) *[,}]",
    ]
)
#: a plain token that starts like a number (a sign then a digit, ``_``, ``.``, i or n; or a ``.`` then a
#: letter or digit), from a token boundary or a ``:``, to the end of its line, a comment, a ``:`` value
#: indicator or a flow indicator: (token, ``:`` if it is a key, else nothing). Python's re
#: (RE2 has no look-behind); the first character is one character class, which re looks for at C speed
#: before it tries the rest (0.2 s over 23 MiB; an alternation first costs three times that).
_CANDIDATE = re.compile(
    r"([-+.0-9](?<![^\s\[{,:].)(?:(?<=[0-9])|(?<=[-+])(?=[0-9_.iInN])|(?<=\.)(?=[0-9A-Za-z_]))"
    r"[^\n,\[\]{}?:#]*(?::[^\s,\[\]{}][^\n,\[\]{}?:#]*)*)(:?)"
)
#: a candidate that is a lone entry of a flow collection (``{1}``, ``{a: 1, 2}``): a key if the collection
#: is a mapping (after ``[`` it is a sequence's item). Looked for only in a text with a flow mapping.
_LONE = re.compile(
    r"(?:^|[{,]) *([-+.0-9][^\n,\[\]{}?:#]*(?::[^\s,\[\]{}][^\n,\[\]{}?:#]*)*)(?= *[,}])", re.MULTILINE
)
_FLOW_MAP = r"(?:^|[\s\[{,])\{[ \r\n]*[^ \r\n}]"  # a flow mapping that is not empty
_BLOCK_SCALAR = _BOUND + r"[|>]"
_DATE = re.compile(r"[0-9]{4}-[0-9][0-9]?-[0-9][0-9]?")
#: tokens both read as the same int: decimal, no leading zero, no sign but ``-``, within 18 digits
_PLAIN_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")


Loader = Callable[[str], list]


def available() -> bool:
    """Whether rapidyaml can be imported here (a platform without its wheel cannot)."""
    return _ryml() is not None


def _ryml() -> Any:
    try:
        import ryml
    except Exception:  # no wheel for this platform, or a broken install: libyaml it is
        return None
    return ryml


@functools.cache
def _screens() -> tuple[Any, Any, Any] | None:
    """The refusal screen, the flow-mapping finder and the block-scalar finder, compiled with RE2."""
    try:
        import re2

        return tuple(re2.compile("(?m)" + p) for p in (_REFUSE, _FLOW_MAP, _BLOCK_SCALAR))
    except Exception:  # pragma: no cover - google-re2 is a dependency; without it, no fast path
        return None


def _libyaml_parser() -> type[CParser] | None:
    try:
        from yaml._yaml import CParser
    except Exception:  # pragma: no cover - PyYAML built without libyaml
        return None
    return CParser


def enabled() -> bool:
    return os.environ.get("CORRAL_FAST_YAML", "1").strip() not in ("0", "no", "off", "false")


def load_all(text: str, reference: Loader, min_chars: int | None = None) -> list[Any] | None:
    """The non-``None`` documents of ``text`` through rapidyaml, or ``None`` when the fast path does not
    apply or cannot be shown to give what ``reference`` (the PyYAML loader: text -> every document, ``None``
    ones included) gives; see the module docstring."""
    encoded = _accepted(text, reference, min_chars)
    if encoded is None:
        return None
    docs = _documents(_ryml(), encoded)
    return None if docs is None else [d for d in docs if d is not None]


def accepts(text: str, reference: Loader, min_chars: int | None = None) -> bool:
    """Steps 1-4 of the module docstring: whether ``text`` may go through rapidyaml (which may still
    refuse it, step 5)."""
    return _accepted(text, reference, min_chars) is not None


def _accepted(text: str, reference: Loader, min_chars: int | None) -> bytes | None:
    """``text`` as UTF-8 if it passes steps 1-4, else ``None``."""
    if len(text) < (MIN_CHARS if min_chars is None else min_chars) or not enabled():
        return None
    screens, parser = _screens(), _libyaml_parser()
    if _ryml() is None or screens is None or parser is None:
        return None
    refuse, flow_map, block_scalar = screens
    if refuse.search(text) or (not text.endswith("\n") and block_scalar.search(text)):
        return None
    if not _candidates_agree(_ryml(), text, flow_map.search(text) is not None, reference):
        return None
    try:
        encoded = text.encode("utf-8")
        parser(encoded).raw_parse()  # libyaml's grammar, in C, without a Python object per event
    except Exception:  # broken YAML: the PyYAML loader says where
        return None
    return encoded


def _candidates_agree(ryml: Any, text: str, flow_map: bool, reference: Loader) -> bool:
    """Whether every distinct candidate token of ``text`` reads alike on both paths as a value, and
    every one used as a key (followed by ``:``, or a lone entry of a flow collection in a text with a
    flow mapping) is a string for PyYAML and the same string for rapidyaml. Plain decimal integers are
    known to agree as values."""
    values: set[str] = set()
    keys: set[str] = {raw.rstrip(" \r") for raw in _LONE.findall(text)} if flow_map else set()
    for raw, end in set(_CANDIDATE.findall(text)):
        token = raw.rstrip(" \r")
        if end:
            keys.add(token)
        elif not _PLAIN_INT.fullmatch(token):
            values.add(token)
    if len(values) + len(keys) > MAX_DISTINCT:
        return False
    if any(_DATE.match(token) for token in values | keys):
        return False
    if not values and not keys:
        return True
    text = "".join(f"- {token}\n" for token in sorted(values)) or "[]\n"
    text += "---\n" + ("".join(f"{token}: 0\n" for token in sorted(keys)) or "{}\n")
    try:
        expected = reference(text)
    except Exception:  # a candidate PyYAML cannot read alone: leave the whole text to it
        return False
    got = _documents(ryml, text.encode("utf-8"))
    if got is None or len(expected) != 2 or len(got) != 2 or repr(expected[0]) != repr(got[0]):
        return False
    mapping = expected[1]
    return (
        isinstance(mapping, dict)
        and len(mapping) == len(keys)
        and all(type(k) is str for k in mapping)
        and repr(list(mapping.items())) == repr(list(got[1].items()))
    )


def _documents(ryml: Any, encoded: bytes) -> list[Any] | None:
    """Every document of ``encoded`` (``None`` for an empty one) through rapidyaml's JSON, or ``None``
    if rapidyaml or the JSON decoder refuses it, or there is no JSON at all (a text of comments).

    The tree's node array is sized beforehand (a node per line, per ``- `` and per ``,`` bounds it for
    block YAML; more only grows it) and the JSON is written into a buffer of its computed length: at
    66,000 objects this halves the page faults of growing both (0.2 s)."""
    try:
        with _quiet_stderr():
            tree = ryml.Tree()
            nodes = encoded.count(b"\n") + encoded.count(b"- ") + encoded.count(b",")
            tree.reserve(min(nodes, len(encoded) // 4) + 16)  # blank lines hold no node
            ryml.parse_in_arena(encoded, tree)
            stream = tree.is_stream(tree.root_id())
            out = bytearray(ryml.compute_json_length(tree))
            if out:
                ryml.emit_json_in_place(tree, out)
        del tree  # its arena and nodes (about 100 MB for 66,000 objects) go now
        if not out:
            return None
        value = json.loads(out)
    except Exception:  # rapidyaml's own exceptions, JSON errors, int digit limit, memory
        return None
    if stream:
        return value if isinstance(value, list) else None
    return [value]


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 pointed at /dev/null while rapidyaml runs: its C++ error handler prints the
    parse error there before raising, and the text then goes to PyYAML, whose message is the one shown."""
    with contextlib.suppress(Exception):  # a closed or replaced stderr
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # pragma: no cover - no descriptor 2: nothing to keep quiet
        yield
        return
    try:
        sink = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(sink, 2)
        finally:
            os.close(sink)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
