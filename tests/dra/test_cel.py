"""CEL device selectors (corral.dra.cel): Kubernetes' environment — attributes and capacity by domain,
quantities and semantic versions — evaluated by the CEL library, cached per device signature."""

from __future__ import annotations

import pytest

from corral.dra.cel import CelEnv
from corral.errors import InputError


def _device(**attrs):
    return {
        "driver": "gpu.example.com",
        "attributes": {"gpu.example.com": attrs, "other.example.com": {}},
        "capacity": {"gpu.example.com": {"memory": 80 * 2**30 * 1000}, "other.example.com": {}},
        "allowMultipleAllocations": False,
    }


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        ("device.driver == 'gpu.example.com'", True),
        ("device.attributes['gpu.example.com'].model == 'A100'", True),
        ("device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0", True),
        ("device.capacity['gpu.example.com'].memory.isLessThan(quantity('40Gi'))", False),
        ("device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.10.0'))", True),
        ("device.attributes['gpu.example.com'].driverVersion.compareTo(semver('1.2.0')) > 0", True),
        ("has(device.attributes['other.example.com'].model)", False),  # another domain: an empty map
    ],
)
def test_kubernetes_selectors_evaluate(expr: str, want: bool) -> None:
    env = CelEnv()
    env.compile(expr, obj="DeviceClass x", field="spec.selectors[0].cel.expression")
    dev = _device(model="A100", driverVersion="1.12.1")
    assert env.matches(expr, ("sig",), lambda i: dev, 0) is want


def test_a_missing_attribute_is_a_runtime_error_not_a_match() -> None:
    env = CelEnv()
    expr = "device.attributes['gpu.example.com'].memoryType == 'HBM'"
    env.compile(expr, obj="DeviceClass x", field="f")
    got = env.matches(expr, ("sig",), lambda i: _device(model="A100"), 0)
    assert isinstance(got, str) and got.startswith("CEL runtime error")


def test_results_are_cached_per_signature() -> None:
    env = CelEnv()
    expr = "device.attributes['gpu.example.com'].model == 'A100'"
    env.compile(expr, obj="DeviceClass x", field="f")
    assert env.matches(expr, ("same",), lambda i: _device(model="A100"), 0) is True
    # same signature: the cached answer (a real device with this signature has the same attributes)
    assert env.matches(expr, ("same",), lambda i: _device(model="H100"), 0) is True
    assert env.matches(expr, ("other",), lambda i: _device(model="H100"), 0) is False


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("device.driver ==", "does not compile"),
        ("device.capacity['g'].memory.add(quantity('1Gi')) > quantity('2Gi')", "add"),
    ],
)
def test_bad_expressions_are_refused_by_name(expr: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        CelEnv().compile(expr, obj="DeviceClass x", field="spec.selectors[0].cel.expression")
    assert message in str(err.value)
    assert err.value.obj == "DeviceClass x" and err.value.field == "spec.selectors[0].cel.expression"
