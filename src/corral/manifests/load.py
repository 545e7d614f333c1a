"""Read snapshot files into Kubernetes object dicts: YAML or JSON, multi-document streams, ``kind: List``
wrappers, files and directories (recursively, ``*.yaml``, ``*.yml``, ``*.json`` in name order).

The C YAML loader (libyaml) is used when PyYAML was built with it; it is several times faster on the
tens of thousands of objects of a production snapshot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

import yaml

from corral.errors import InputError

__all__ = ["read_objects", "SourcedObject"]

try:  # pragma: no cover - depends on how PyYAML was built
    _Loader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader  # type: ignore[misc]

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
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", file=str(path)) from None
    stripped = text.lstrip()
    if path.suffix == ".json" or stripped.startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError as exc:
            if path.suffix == ".json":
                raise InputError(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}",
                                 file=str(path)) from None
    try:
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"malformed YAML{at}: {problem}", file=str(path)) from None


def _flatten(doc: object, source: str, where: str) -> Iterator[SourcedObject]:
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from _flatten(item, source, f"{where}[{i}]")
        return
    if not isinstance(doc, dict):
        raise InputError(f"expected a Kubernetes object (a mapping), got {type(doc).__name__}",
                         file=source, obj=where or None)
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
