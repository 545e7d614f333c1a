"""Kubernetes quantity parsing, owned here because it sits on the hot path of loading.

All resource amounts inside corral are **milli-units** stored as float64, as Volcano's
``Resource.MilliValue`` does: ``"500m"`` cpu is 500, ``"2"`` GPUs are 2000, ``"1Gi"`` memory is
1073741824000. Integers up to 2**53 are exact in float64, so a node of 1 TiB (about 1.1e15 milli-bytes)
still adds and subtracts exactly.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from corral.errors import InputError

__all__ = ["MAX_UNITS", "MILLI", "format_quantity", "parse_quantity"]

MILLI = 1000.0
# Kubernetes keeps a quantity's value in an int64: nothing larger is a real amount, and the bound keeps
# every sum of float64 milli-units finite.
MAX_UNITS = float(2**63)

_SUFFIX: dict[str, Decimal | int] = {
    "": 1,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_QTY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")
_CACHE: dict[str, float] = {}


def parse_quantity(value: object, *, where: str = "", field: str | None = None) -> float:
    """Parse a Kubernetes quantity (``500m``, ``2``, ``1.5Gi``, ``4G``, ``1e3``) into milli-units.

    Numbers (int/float) are taken as plain units. A negative or malformed quantity is an
    :class:`InputError` naming ``where`` and ``field``. Results are cached by string: snapshots
    repeat the same few quantities thousands of times.
    """
    if isinstance(value, bool):
        raise InputError(f"expected a quantity, got {value!r}", obj=where or None, field=field)
    if isinstance(value, (int, float)):
        if value < 0 or value != value:
            raise InputError(
                f"expected a non-negative quantity, got {_short(value)}", obj=where or None, field=field
            )
        if not value <= MAX_UNITS:
            raise _too_large(value, where, field)
        return float(value) * MILLI
    if not isinstance(value, str):
        raise InputError(
            f"expected a quantity, got {type(value).__name__} {_short(value)}", obj=where or None, field=field
        )
    cached = _CACHE.get(value)
    if cached is not None:
        return cached
    m = _QTY.match(value.strip()) if len(value) <= 64 else None
    if not m:
        raise InputError(
            f"bad quantity {_short(value)} (expected e.g. 500m, 2, 1.5Gi, 4G, 1e3)",
            obj=where or None,
            field=field,
        )
    try:
        number = Decimal(m.group(1))
    except InvalidOperation:  # pragma: no cover - the regex admits only valid decimals
        raise InputError(f"bad quantity {value!r}", obj=where or None, field=field) from None
    if number < 0:
        raise InputError(f"expected a non-negative quantity, got {value!r}", obj=where or None, field=field)
    if number.adjusted() > 30:  # before any arithmetic: 1e999999999 must not be expanded
        raise _too_large(value, where, field)
    milli = number * Decimal(_SUFFIX[m.group(2) or ""]) * 1000
    if milli > MAX_UNITS * 1000:
        raise _too_large(value, where, field)
    # Kubernetes rounds fractional milli-values up (a request of 0.1m cpu is 1m).
    result = float(milli.to_integral_value(rounding="ROUND_CEILING"))
    if len(_CACHE) < 100_000:
        _CACHE[value] = result
    return result


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text)} characters)"


def _too_large(value: object, where: str, field: str | None) -> InputError:
    return InputError(
        f"quantity {_short(value)} is larger than the limit of 2^63 units (Kubernetes "
        "stores a quantity in 64 bits)",
        obj=where or None,
        field=field,
    )


def format_quantity(milli: float, resource: str = "") -> str:
    """Render milli-units for a person: cpu as cores, memory in Gi, counts as integers."""
    value = milli / MILLI
    if resource == "memory" or resource.endswith("storage"):
        gib = value / 2**30
        return f"{gib:.4g}Gi" if gib >= 1 else f"{value / 2**20:.4g}Mi"
    if value == int(value):
        return str(int(value))
    return f"{value:.3g}"
