"""Read snapshot files into Kubernetes object dicts: YAML or JSON, multi-document streams, ``kind: List``
wrappers, files and directories (recursively, ``*.yaml``, ``*.yml``, ``*.json`` in name order).

Files are read within the limits of :mod:`corral.inputs` (size, encodings, nesting depth,
YAML aliases, huge numbers); the C YAML loader (libyaml) is used whenever that is safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from corral.errors import InputError
from corral.inputs import load_text_documents

__all__ = ["SourcedObject", "read_objects"]

SourcedObject = tuple[str, dict]
_SUFFIXES = (".yaml", ".yml", ".json")


def _files(paths: Iterable[str | Path]) -> Iterator[Path]:
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in _SUFFIXES)
            if not found:
                raise InputError("directory holds no .yaml, .yml or .json file", file=str(p))
            yield from found
        elif p.is_file():
            yield p
        else:
            raise InputError("no such file or directory", file=str(p))


def _documents(path: Path) -> list:
    return load_text_documents(path)


def _flatten(doc: object, source: str, where: str) -> Iterator[SourcedObject]:
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from _flatten(item, source, f"{where}[{i}]")
        return
    if not isinstance(doc, dict):
        raise InputError(
            f"expected a Kubernetes object (a mapping), got {type(doc).__name__}",
            file=source,
            obj=where or None,
        )
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        for i, item in enumerate(doc["items"]):
            yield from _flatten(item, source, f"{where}items[{i}]")
        return
    yield source, doc


def read_objects(paths: Iterable[str | Path]) -> list[SourcedObject]:
    """Every object of every file, paired with the file it came from, in a stable order."""
    out: list[SourcedObject] = []
    for path in _files(paths):
        for doc in _documents(path):
            out.extend(_flatten(doc, str(path), ""))
    return out
