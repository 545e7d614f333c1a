"""CEL device selectors (``resource.k8s.io`` ``DeviceSelector.cel.expression``), evaluated by a maintained
CEL library (``common-expression-language``, the extra ``dra``), never by hand.

The environment is the one Kubernetes gives a selector (``k8s.io/dynamic-resource-allocation/cel``):
``device.driver`` (string), ``device.attributes["<domain>"].<id>`` (int, bool, string or version) and
``device.capacity["<domain>"].<id>`` (a quantity), ``device.allowMultipleAllocations`` (bool). An
attribute written without a domain belongs to the device's driver. As in Kubernetes, looking up a
domain the device has no attribute of gives an empty map (every domain any device of the snapshot
uses is present on every device), and reading a missing attribute is a runtime error (guard it with
``has(...)``).

Quantities are integers in thousandths of the unit (corral's quantity scale), with Kubernetes' quantity
library as receiver functions: ``quantity("40Gi")``, ``isQuantity``, ``compareTo``, ``isGreaterThan``,
``isLessThan``, ``asInteger``, ``asApproximateFloat``, ``sign``, ``isInteger``. Versions are strings,
with ``semver("1.2.3")``, ``isSemver`` and ``compareTo``/``isGreaterThan``/``isLessThan`` comparing
them by semantic version. (Kubernetes' quantity ``add``/``sub`` are not offered: an expression using
them fails to compile, and the object is refused.)

Results are cached per expression and per device *signature*: the parts of the device the expression
reads (``device.driver``, ``device.attributes``, ``device.capacity`` — all of them when it uses
``device`` any other way). A cluster of identical GPUs costs one evaluation per expression whatever its
size, and so does a class that selects by driver alone even when every device has its own uuid
(kube-scheduler caches the compiled expression and each device/request match,
``structured/allocator.go``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from corral.errors import InputError
from corral.model.quantity import parse_quantity

__all__ = ["CelEnv", "CelError"]


class CelError(Exception):
    """A selector failed at run time on a device (a missing attribute, a type mismatch)."""


_SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


def _semver_key(text: str) -> tuple[Any, ...]:
    m = _SEMVER.match(text.strip())
    if m is None:
        raise CelError(f"{text!r} is not a semantic version")
    pre = m.group(4)
    # a release sorts after its pre-releases; pre-release parts compare numerically when numeric
    parts: tuple[Any, ...] = ()
    if pre:
        parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)), pre is None, parts)


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, str) and isinstance(b, str):
        ka, kb = _semver_key(a), _semver_key(b)
        return (ka > kb) - (ka < kb)
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int | float):
        raise CelError(f"cannot compare {a!r} with {b!r}")
    return (a > b) - (a < b)


def _quantity(text: Any) -> int:
    try:
        return int(round(parse_quantity(str(text), where="CEL", field="quantity()")))
    except InputError as exc:
        raise CelError(str(exc)) from None


def _is_quantity(text: Any) -> bool:
    try:
        parse_quantity(str(text), where="CEL", field="isQuantity()")
    except InputError:
        return False
    return True


def _semver(text: Any) -> str:
    _semver_key(str(text))
    return str(text)


def _is_semver(text: Any) -> bool:
    try:
        _semver_key(str(text))
    except CelError:
        return False
    return True


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "asInteger": lambda q: int(q) // 1000,
    "asApproximateFloat": lambda q: q / 1000.0,
    "sign": lambda q: (q > 0) - (q < 0),
    "isInteger": lambda q: int(q) % 1000 == 0,
}


def _library() -> Any:
    """The CEL library; a snapshot with claims on an install without it is refused in one line (exit 2)
    naming the install that adds it (:mod:`corral.extras`)."""
    from corral.extras import missing

    gone = missing("dra")
    if gone:
        raise InputError(
            f"the snapshot's resource claims need {', '.join(gone)} to evaluate CEL device selectors, "
            "which this install of corral leaves out: pip install 'corral[dra]'"
        )
    import cel

    return cel


_FIELDS = ("driver", "attributes", "capacity", "allowMultipleAllocations")
_USE = re.compile(r"\bdevice\b(\s*\.\s*(\w+))?")


def fields_read(expression: str) -> tuple[str, ...]:
    """The parts of ``device`` an expression reads (all of them unless each use names one)."""
    used = set()
    for m in _USE.finditer(expression):
        name = m.group(2)
        if name not in _FIELDS:
            return _FIELDS
        used.add(name)
    return tuple(f for f in _FIELDS if f in used)


class CelEnv:
    """Compiles selectors once and answers ``matches(expression, device)`` with a cache per device
    signature. ``device`` is the plain dict of the CEL environment (``driver``, ``attributes``,
    ``capacity``, ``allowMultipleAllocations``) with a hashable ``signature``."""

    def __init__(self) -> None:
        self._cel = _library()
        self._programs: dict[str, Any] = {}
        self._fields: dict[str, tuple[str, ...]] = {}
        self._results: dict[tuple[str, Any], bool | str] = {}

    def compile(self, expression: str, *, obj: str, field: str, file: str | None = None) -> None:
        """Check that ``expression`` compiles and uses only known functions; a bad one is bad input (the
        API server would have refused the object)."""
        if expression in self._programs:
            return
        try:
            program = self._cel.compile(expression)
        except (ValueError, RuntimeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(
                f"CEL expression does not compile: {first}", file=file, obj=obj, field=field
            ) from None
        refs = program.references() if callable(getattr(program, "references", None)) else {}
        unknown = [
            f
            for f in (refs.get("functions") or [])
            if not f.startswith(("_", "@")) and f not in FUNCTIONS and f not in _BUILTINS
        ]
        if unknown:
            raise InputError(
                f"CEL function(s) {', '.join(sorted(unknown))} are not offered by corral's selector "
                f"environment (offered: {', '.join(sorted(FUNCTIONS))} and CEL's standard functions)",
                file=file,
                obj=obj,
                field=field,
            )
        self._programs[expression] = program
        self._fields[expression] = fields_read(expression)

    def fields(self, expression: str) -> tuple[str, ...]:
        """The parts of the device ``expression`` reads (:func:`fields_read`), for its signature."""
        return self._fields[expression]

    def matches(
        self, expression: str, signature: Sequence[Any] | Any, view: Callable[[int], dict[str, Any]], i: int
    ) -> bool | str:
        """True/False, or the text of a runtime error (the device then does not match). ``signature``
        must tell apart the devices that differ in what the expression reads; ``view(i)`` builds the
        device's CEL value when the signature is new."""
        key = (expression, signature)
        got = self._results.get(key)
        if got is None:
            got = self._evaluate(expression, view(i))
            self._results[key] = got
        return got

    def _evaluate(self, expression: str, device: dict[str, Any]) -> bool | str:
        program = self._programs[expression]
        ctx = self._cel.Context()
        ctx.add_variable("device", device)
        for name, fn in FUNCTIONS.items():
            ctx.add_function(name, fn)
        try:
            out = program.execute(ctx)
        except CelError as exc:
            return f"CEL runtime error: {exc}"
        except (KeyError, ValueError, TypeError, RuntimeError) as exc:
            return f"CEL runtime error: {type(exc).__name__} {exc}"
        if not isinstance(out, bool):
            return f"CEL runtime error: the expression gave {type(out).__name__}, not bool"
        return out


#: CEL's standard functions and macros (the names ``references()`` reports for them)
_BUILTINS = frozenset(
    {
        "size",
        "has",
        "all",
        "exists",
        "exists_one",
        "map",
        "filter",
        "matches",
        "startsWith",
        "endsWith",
        "contains",
        "int",
        "uint",
        "double",
        "string",
        "bool",
        "bytes",
        "type",
        "dyn",
        "duration",
        "timestamp",
        "lowerAscii",
        "upperAscii",
        "split",
        "join",
        "replace",
        "trim",
        "indexOf",
        "lastIndexOf",
        "substring",
        "in",
        "max",
        "min",
        "abs",
    }
)
