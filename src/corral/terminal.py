"""What reaches the terminal from input is shown, never obeyed (SPEC.md §4).

Object names, reasons and values come from files and from the API server. Printed as they are, a name
holding rich markup (``[bold]…[/``) breaks or restyles a table, and control characters (ANSI escapes,
carriage returns, bidirectional overrides) can hide or rewrite what an operator reads. :func:`plain`
turns every such character into a visible escape (``\\x1b``, ``\\n``, ``\\u202e``); :func:`cell` also
makes the text literal for rich (a :class:`rich.text.Text`, never parsed as markup). JSON output is
not touched: it is escaped by JSON itself.
"""

from __future__ import annotations

import re

from rich.text import Text

__all__ = ["cell", "plain"]

# C0 and C1 controls, DEL, and the invisible direction marks and overrides (the "Trojan source" set).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def plain(value: object) -> str:
    """``str(value)`` with every control or direction character shown as an escape."""
    text = str(value)
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def cell(value: object, style: str = "") -> Text:
    """``value`` as literal rich text: markup characters are shown, control characters escaped."""
    return Text(plain(value), style=style)
