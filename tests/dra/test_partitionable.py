"""Partitionable devices (KEP-4815, e.g. MIG; resource.k8s.io/v1 ``sharedCounters`` and
``consumesCounters``): counters consumed per device, a counter set never over-committed, as
kube-scheduler's allocator checks them (``checkAvailableCounters``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from corral.dra.allocator import allocate
from corral.dra.objects import parse_slice
from corral.errors import InputError
from tests.dra.helpers import API, claim, inventory, klass, obj

MIG = "device.attributes['gpu.example.com'].profile"


def _slice(name: str, spec: dict[str, Any]) -> Any:
    body = {"driver": "gpu.example.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1}}
    body["pool"]["resourceSliceCount"] = spec.pop("count", 2)
    return parse_slice(
        obj(
            "ResourceSlice",
            {
                "apiVersion": API,
                "kind": "ResourceSlice",
                "metadata": {"name": name},
                "spec": {**body, **spec},
            },
        )
    )


def _part(name: str, profile: str, memory: str, counter_set: str = "gpu-0") -> dict:
    return {
        "name": name,
        "attributes": {"profile": {"string": profile}},
        "consumesCounters": [{"counterSet": counter_set, "counters": {"memory": {"value": memory}}}],
    }


def _gpu(**extra: Any) -> list[Any]:
    """One 40Gi GPU as its driver publishes it in resource.k8s.io/v1: the counters in a slice of their
    own, the whole GPU (40Gi) and its partitions (two of 20Gi, four of 10Gi) in another."""
    counters = _slice(
        "n1-counters", {"sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}
    )
    devices = [_part("gpu-0", "whole", "40Gi")]
    devices += [_part(f"gpu-0-half-{i}", "half", "20Gi") for i in range(2)]
    devices += [_part(f"gpu-0-quarter-{i}", "quarter", "10Gi") for i in range(4)]
    devices += extra.get("more", [])
    return [counters, _slice("n1-devices", {"devices": devices})]


def _claim(name: str, profile: str, count: int = 1, mode: str = "") -> Any:
    exactly: dict[str, Any] = {
        "deviceClassName": "gpu",
        "selectors": [{"cel": {"expression": f"{MIG} == '{profile}'"}}],
    }
    if mode:
        exactly["allocationMode"] = mode
    else:
        exactly["count"] = count
    return claim(name, [{"name": "gpu", "exactly": exactly}])


def _names(inv: Any, devs: Any) -> list[str]:
    return [inv.dev_id[d][2] for _, d in devs]


def _in_use(inv: Any, *names: str) -> np.ndarray:
    used = np.zeros(len(inv.dev_id), dtype=bool)
    for i, (_, _, n) in enumerate(inv.dev_id):
        used[i] = n in names
    return used


def test_a_partition_in_use_leaves_no_room_for_the_whole_gpu() -> None:
    whole, half = _claim("whole", "whole"), _claim("half", "half")
    inv = inventory(["n1"], _gpu(), [klass()], [whole, half])
    assert _names(inv, allocate(inv, 0, [whole], _in_use(inv)).claims["default/whole"]) == ["gpu-0"]
    busy = _in_use(inv, "gpu-0-quarter-0")  # 10Gi of the 40Gi taken
    got = allocate(inv, 0, [whole], busy)
    assert not got.claims
    # a half still fits (10 + 20 <= 40), and so does the other half's place only once
    assert _names(inv, allocate(inv, 0, [half], busy).claims["default/half"]) == ["gpu-0-half-0"]


def test_the_counter_set_is_never_over_committed_within_one_search() -> None:
    two_halves = _claim("two", "half", count=2)
    three_halves = _claim("three", "quarter", count=4)
    inv = inventory(["n1"], _gpu(), [klass()], [two_halves, three_halves])
    assert _names(inv, allocate(inv, 0, [two_halves], _in_use(inv)).claims["default/two"]) == [
        "gpu-0-half-0",
        "gpu-0-half-1",
    ]
    # two halves and four quarters are 80Gi of a 40Gi GPU: not together
    assert not allocate(inv, 0, [two_halves, three_halves], _in_use(inv)).claims
    # with one half in use, three quarters are all that fit (20 + 3 x 10 > 40)
    assert not allocate(inv, 0, [three_halves], _in_use(inv, "gpu-0-half-1")).claims


def test_all_mode_over_partitions_fails_when_their_counters_exceed_the_set() -> None:
    every_quarter = _claim("quarters", "quarter", mode="All")
    every_part = claim(
        "parts", [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]
    )
    inv = inventory(["n1"], _gpu(), [klass()], [every_quarter, every_part])
    assert len(allocate(inv, 0, [every_quarter], _in_use(inv)).claims["default/quarters"]) == 4
    assert not allocate(inv, 0, [every_part], _in_use(inv)).claims


def test_counters_kept_by_the_caller_are_used() -> None:
    whole = _claim("whole", "whole")
    inv = inventory(["n1"], _gpu(), [klass()], [whole])
    used = np.asarray([1], dtype=np.int64)  # one milli of the 40Gi in use: the whole GPU no longer fits
    assert not allocate(inv, 0, [whole], _in_use(inv), used).claims


def test_a_pool_whose_device_consumes_an_undefined_counter_set_is_invalid() -> None:
    whole = _claim("whole", "whole")
    inv = inventory(
        ["n1"], _gpu(more=[_part("stray", "whole", "1Gi", counter_set="gpu-9")]), [klass()], [whole]
    )
    assert inv.node_bad_pool[0].startswith(
        "resource pool gpu.example.com/n1 is invalid (device stray consumes"
    )
    assert not allocate(inv, 0, [whole], _in_use(inv)).claims


def test_v1beta1_counters_beside_the_devices_are_read() -> None:
    spec = {
        "count": 1,
        "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}],
        "devices": [
            {
                "name": "gpu-0-half-0",
                "basic": {
                    "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "30Gi"}}}]
                },
            },
            {
                "name": "gpu-0-half-1",
                "basic": {
                    "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "30Gi"}}}]
                },
            },
        ],
    }
    two = claim("two", [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}])
    one = claim("one", [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}])
    inv = inventory(["n1"], [_slice("n1", spec)], [klass()], [two, one])
    assert not allocate(inv, 0, [two], _in_use(inv)).claims
    assert allocate(inv, 0, [one], _in_use(inv)).claims


def test_co_allocation_groups_are_refused_by_name() -> None:
    part = _part("p", "half", "20Gi")
    part["consumesCounters"][0]["compatibilityGroups"] = ["a"]
    with pytest.raises(InputError) as err:
        _slice("n1-devices", {"devices": [part]})
    assert "consumesCounters[0].compatibilityGroups" in str(err.value)
