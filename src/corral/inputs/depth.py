"""Nesting depth: cheap upper bounds on a text's depth (so the C composer, which recurses on the C stack,
only sees shallow text) and a walk of loaded values for the real depth (see :mod:`corral.inputs`)."""

from __future__ import annotations

import re
from typing import Any

from corral.inputs.text import ErrorType

__all__ = ["depth_bound", "depth_within", "json_depth_bound", "nests_deeper", "too_deep"]

_EMPTY = re.compile(r"\{\s*\}|\[\s*\]")
_BLOCK_INDENT = re.compile(r"^[ ?\-]*", re.MULTILINE)
_LEAD = re.compile(r"[ ?\-]*")


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


def depth_within(text: str, limit: int) -> bool:
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


def too_deep(bound: int, file: str, error: ErrorType) -> Exception:
    return error(
        f"nesting deeper than the limit of {bound} levels (raise it with CORRAL_MAX_DEPTH)", file=file
    )


def nests_deeper(value: Any, bound: int) -> bool:
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


def json_depth_bound(text: str) -> int:
    """An upper bound on the nesting depth of a JSON text: its number of ``[`` and ``{`` (in strings
    too). JSON has no block structure, so :func:`depth_bound`'s indentation scan (and its regular
    expressions, a quarter of a second on a 25 MiB snapshot) would only add to a bound that a large
    file passes anyway; past the limit, the loaded value is walked for its real depth."""
    return text.count("[") + text.count("{")
