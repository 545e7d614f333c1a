"""Documents of YAML and JSON text and files within the limits (see :mod:`corral.inputs`): the loader
chosen for a text, the rapidyaml fast path for large plain YAML, and one error line for bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from corral.errors import CorralError, InputError
from corral.inputs import fast_yaml
from corral.inputs.composer import BoundedLoader, PyBoundedLoader
from corral.inputs.construction import FastCLoader, c_documents
from corral.inputs.depth import depth_within, json_depth_bound, nests_deeper, too_deep
from corral.inputs.text import ErrorType, limits, read_text

__all__ = ["load_json", "load_text_documents", "load_yaml", "load_yaml_all"]


# The C composer recurses on the C stack: it is only trusted with shallow documents (measured: it
# survives 10,000 levels and crashes by 30,000 on an 8 MiB stack).
_C_SAFE_DEPTH = 2000
# libyaml 0.2.6 stops at 1,000 nested levels in its scanner (its own message); a text that may nest
# deeper goes to the pure-Python parser when libyaml fails (see load_yaml_all). Kept below the real
# ceiling, so a libyaml that counts a level differently still ends on this path.
_LIBYAML_CEILING = 900


def _loader_for(text: str, max_depth: int) -> tuple[type, bool]:
    """The loader for ``text`` and whether its result must still be walked for the depth limit."""
    if "&" in text:
        return BoundedLoader, False
    if depth_within(text, min(max_depth, _C_SAFE_DEPTH)):
        return FastCLoader, False
    return (FastCLoader, True) if depth_within(text, _C_SAFE_DEPTH) else (BoundedLoader, False)


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
    if loader is FastCLoader and not walk:
        fast = fast_yaml.load_all(text, c_documents)
        if fast is not None:
            return fast
    try:
        try:
            docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
        except yaml.YAMLError:
            if depth_within(text, _LIBYAML_CEILING):
                raise
            # libyaml (0.2.6 and later) refuses nesting past its own ceiling in its scanner, which
            # reads ahead of the composer: read such a text again with the pure-Python parser, so the
            # error is corral's depth limit (which CORRAL_MAX_DEPTH raises) or the text's real fault.
            walk = False
            docs = [d for d in yaml.load_all(text, Loader=PyBoundedLoader) if d is not None]
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, file, error) from None
    except ValueError as exc:  # int("9" * 5000) in the constructor
        raise _number_error(exc, file, "YAML", error) from None
    except RecursionError:  # pragma: no cover - the composer bounds depth first
        raise too_deep(max_depth, file, error) from None
    if walk and nests_deeper(docs, max_depth + 1):  # +1: the list of documents
        raise too_deep(max_depth, file, error)
    return docs


def load_yaml(text: str, file: str, error: ErrorType = InputError) -> Any:
    """A single YAML document (None when empty); more than one document is ``error``."""
    docs = load_yaml_all(text, file, error)
    if len(docs) > 1:
        raise error(f"expected one YAML document, found {len(docs)}", file=file)
    return docs[0] if docs else None


def load_json(text: str, file: str, error: ErrorType = InputError) -> Any:
    """A JSON document within the depth limit (the text without a BOM); malformed is ``error``."""
    bound = limits().max_depth
    deep = too_deep(bound, file, error)
    try:
        value = json.loads(text)
    except RecursionError:
        raise deep from None
    except json.JSONDecodeError as exc:
        raise error(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", file=file) from None
    except ValueError as exc:
        raise _number_error(exc, file, "JSON", error) from None
    if json_depth_bound(text) > bound and nests_deeper(value, bound):
        raise deep
    return value


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
