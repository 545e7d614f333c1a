"""Bounded text: the size limit and the accepted encodings of every file corral reads, and the limits
(size, nesting depth, YAML aliases) read from the environment each time (see :mod:`corral.inputs`)."""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from corral.errors import InputError

__all__ = ["ErrorType", "Limits", "decode", "limits", "read_text"]

#: what a reader raises on bad input: called as ``error(message, file=...)``
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
    """The limits as the environment sets them now (a malformed setting is an :class:`InputError`)."""
    return Limits()


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
