"""The resource.k8s.io fields corral refuses by name (corral.dra.objects), and the v1beta1 shapes it reads."""

from __future__ import annotations

import pytest

from corral.dra.objects import parse_slice
from corral.errors import InputError
from tests.dra.helpers import API, claim, device, obj, slice_


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"allNodes": True}, "spec.allNodes"),
        ({"partitionTypeAttribute": "d.example.com/profile"}, "spec.partitionTypeAttribute"),
        (
            {
                "devices": [
                    {"name": "mig", "consumesCounters": [{"counterSet": "c", "compatibilityGroups": ["a"]}]}
                ]
            },
            "spec.devices[0].consumesCounters[0].compatibilityGroups",
        ),
        (
            {"devices": [{"name": "d", "taints": [{"key": "k", "effect": "NoSchedule"}]}]},
            "spec.devices[0].taints",
        ),
        (
            {"devices": [{"name": "d", "allowMultipleAllocations": True}]},
            "spec.devices[0].allowMultipleAllocations",
        ),
    ],
)
def test_slices_corral_cannot_allocate_from_are_refused(spec: dict, field: str) -> None:
    raw = {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {"driver": "d.example.com", "nodeName": "n1", "pool": {"name": "p"}, **spec},
    }
    with pytest.raises(InputError) as err:
        parse_slice(obj("ResourceSlice", raw))
    assert err.value.field == field and "corral does not allocate" in str(err.value)


@pytest.mark.parametrize(
    ("requests", "constraints", "field"),
    [
        (
            [
                {
                    "name": "g",
                    "exactly": {"deviceClassName": "gpu", "capacity": {"requests": {"memory": "1Gi"}}},
                }
            ],
            None,
            "spec.devices.requests[0].exactly.capacity",
        ),
        (
            [{"name": "g", "exactly": {"deviceClassName": "gpu"}}],
            [{"distinctAttribute": "a/b"}],
            "spec.devices.constraints[0].distinctAttribute",
        ),
        (
            [{"name": "g", "exactly": {"deviceClassName": "gpu", "count": 33}}],
            None,
            "spec.devices.requests[0].exactly.count",
        ),
        (
            [{"name": "g", "exactly": {"deviceClassName": "gpu", "allocationMode": "Some"}}],
            None,
            "spec.devices.requests[0].exactly.allocationMode",
        ),
    ],
)
def test_claims_corral_cannot_honour_are_refused(requests, constraints, field) -> None:
    with pytest.raises(InputError) as err:
        claim("c", requests, constraints)
    assert err.value.field == field and err.value.obj == "ResourceClaim default/c"


def test_v1beta1_shapes_are_read() -> None:
    c = claim("c", [{"name": "g", "deviceClassName": "gpu", "count": 2}])  # the request's own fields
    [sub] = c.spec.requests[0].alternatives
    assert (sub.device_class, sub.count, sub.mode) == ("gpu", 2, "ExactCount")
    s = slice_("n1", [{"name": "g0", "basic": device("x", model="A100", cap_memory="80Gi")}])
    [d] = s.devices
    assert dict(d.attributes) == {"gpu.example.com/model": "A100"}
    assert dict(d.capacity)["gpu.example.com/memory"] == 80 * 2**30 * 1000


def test_list_attributes_are_cel_lists() -> None:
    s = slice_("n1", [{"name": "g0", "attributes": {"links": {"ints": [0, 1]}}}])
    assert dict(s.devices[0].attributes) == {"gpu.example.com/links": (0, 1)}
