"""Kubernetes quantities → milli-units (corral.model.quantity, used by the manifest loader)."""

from __future__ import annotations

import pytest

from corral.errors import InputError
from corral.model.quantity import format_quantity, parse_quantity

KI, MI, GI = 2**10, 2**20, 2**30


@pytest.mark.parametrize(
    "text, milli",
    [
        ("500m", 500),
        ("2", 2000),
        ("0", 0),
        ("1.5", 1500),
        (".5", 500),
        ("+1", 1000),
        ("1Ki", KI * 1000),
        ("64Mi", 64 * MI * 1000),
        ("1.5Gi", 1.5 * GI * 1000),
        ("1Ti", 2**40 * 1000),
        ("4G", 4e9 * 1000),
        ("1k", 1e6),
        ("2M", 2e9),
        ("1T", 1e15),
        ("1e3", 1e6),
        ("1E3", 1e6),
        ("2.5e2", 250_000),
        ("1e3m", 1000),
        ("1.5e-3", 2),
        ("0.1m", 1),
        ("100n", 1),
        ("250u", 1),  # fractions of a milli round up, as Kubernetes does
        ("1E", 1e21),  # exa, not an exponent
        (" 2 ", 2000),
    ],
)
def test_parse(text: str, milli: float) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize("value, milli", [(2, 2000), (0.5, 500), (0, 0)])
def test_numbers_are_units(value: float, milli: float) -> None:
    assert parse_quantity(value) == milli


@pytest.mark.parametrize("bad", ["2x", "", "Gi", "1.2.3", "1 Gi", "--1", "1ii", "e3", "-1", "-500m"])
def test_malformed_or_negative(bad: str) -> None:
    with pytest.raises(InputError) as err:
        parse_quantity(bad, where="Node n1", field="status.allocatable.cpu")
    assert err.value.obj == "Node n1" and err.value.field == "status.allocatable.cpu"
    assert err.value.exit_code == 2


@pytest.mark.parametrize("bad", [True, None, [1], {"a": 1}, -1, float("nan")])
def test_wrong_types(bad: object) -> None:
    with pytest.raises(InputError):
        parse_quantity(bad)


def test_cache_does_not_leak_between_values() -> None:
    assert parse_quantity("3") == 3000
    assert parse_quantity("3m") == 3
    assert parse_quantity("3") == 3000


def test_exact_for_large_memory() -> None:
    # a node of 1 TiB in milli-bytes is about 1.1e15: still an exact float64 integer
    assert parse_quantity("1Ti") - parse_quantity("1023Gi") == GI * 1000


@pytest.mark.parametrize(
    "milli, resource, text",
    [
        (2000, "cpu", "2"),
        (500, "cpu", "0.5"),
        (8000, "nvidia.com/gpu", "8"),
        (64 * GI * 1000, "memory", "64Gi"),
        (512 * MI * 1000, "memory", "512Mi"),
        (1000, "pods", "1"),
    ],
)
def test_format(milli: float, resource: str, text: str) -> None:
    assert format_quantity(milli, resource) == text
