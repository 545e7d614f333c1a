"""kube-scheduler's structured allocator (corral.dra.allocator): search order, count and All, the
prioritized list, matchAttribute constraints with backtracking, admin access, pools."""

from __future__ import annotations

import numpy as np

from corral.dra.allocator import allocate
from tests.dra.helpers import claim, device, inventory, klass, slice_

GPU = {"deviceClassName": "gpu"}


def _names(inv, devs):
    return [(req, inv.dev_id[d][2]) for req, d in devs]


def _free(inv):
    return np.zeros(len(inv.dev_id), dtype=bool)


def test_devices_are_taken_in_order_and_count_is_honoured() -> None:
    c = claim("c", [{"name": "gpus", "exactly": {**GPU, "count": 2}}])
    inv = inventory(["n1"], [slice_("n1", [device("g0"), device("g1"), device("g2")])], [klass()], [c])
    got = allocate(inv, 0, [c], _free(inv))
    assert _names(inv, got.claims["default/c"]) == [("gpus", "g0"), ("gpus", "g1")]
    used = _free(inv)
    used[0] = used[2] = True
    assert not allocate(inv, 0, [c], used).claims  # one free device for a count of 2


def test_all_takes_every_selected_device_and_fails_if_one_is_in_use() -> None:
    c = claim("c", [{"name": "all", "exactly": {**GPU, "allocationMode": "All"}}])
    inv = inventory(["n1"], [slice_("n1", [device("g0"), device("g1")])], [klass()], [c])
    assert len(allocate(inv, 0, [c], _free(inv)).claims["default/c"]) == 2
    used = _free(inv)
    used[1] = True
    assert not allocate(inv, 0, [c], used).claims


def test_first_available_falls_back_in_order_and_names_the_sub_request() -> None:
    c = claim(
        "c",
        [
            {
                "name": "gpu",
                "firstAvailable": [
                    {
                        "name": "big",
                        **GPU,
                        "selectors": [
                            {"cel": {"expression": "device.attributes['gpu.example.com'].model == 'H100'"}}
                        ],
                    },
                    {"name": "two-small", **GPU, "count": 2},
                ],
            }
        ],
    )
    inv = inventory(
        ["n1"], [slice_("n1", [device("g0", model="A10"), device("g1", model="A10")])], [klass()], [c]
    )
    got = allocate(inv, 0, [c], _free(inv)).claims["default/c"]
    assert _names(inv, got) == [("gpu/two-small", "g0"), ("gpu/two-small", "g1")]


def test_match_attribute_backtracks_to_a_consistent_set() -> None:
    # g0 is alone on its NUMA node: taking it first leaves no partner, the search moves on to g1 + g2
    c = claim(
        "c",
        [{"name": "a", "exactly": GPU}, {"name": "b", "exactly": GPU}],
        constraints=[{"matchAttribute": "gpu.example.com/numa"}],
    )
    devs = [device("g0", numa=0), device("g1", numa=1), device("g2", numa=1)]
    inv = inventory(["n1"], [slice_("n1", devs)], [klass()], [c])
    got = allocate(inv, 0, [c], _free(inv)).claims["default/c"]
    assert _names(inv, got) == [("a", "g1"), ("b", "g2")]


def test_admin_access_is_given_a_device_in_use() -> None:
    c = claim("c", [{"name": "mon", "exactly": {**GPU, "adminAccess": True}}])
    inv = inventory(["n1"], [slice_("n1", [device("g0")])], [klass()], [c])
    used = np.ones(1, dtype=bool)
    assert _names(inv, allocate(inv, 0, [c], used).claims["default/c"]) == [("mon", "g0")]


def test_only_the_newest_complete_generation_of_a_pool_gives_devices() -> None:
    c = claim("c", [{"name": "g", "exactly": GPU}])
    old = slice_("n1", [device("old")], generation=1)
    new = slice_("n1", [device("new")], generation=2)
    inv = inventory(["n1"], [old, new], [klass()], [c])
    assert [d[2] for d in inv.dev_id] == ["new"]
    partial = slice_("n2", [device("x")], count=2)  # one slice of two published: incomplete
    inv = inventory(["n1", "n2"], [partial], [klass()], [c])
    assert not inv.dev_id and "incomplete" in inv.node_bad_pool[1]


def test_two_claims_of_a_pod_never_share_a_device() -> None:
    a = claim("a", [{"name": "g", "exactly": GPU}])
    b = claim("b", [{"name": "g", "exactly": GPU}])
    inv = inventory(["n1"], [slice_("n1", [device("g0"), device("g1")])], [klass()], [a, b])
    got = allocate(inv, 0, [a, b], _free(inv)).claims
    assert _names(inv, got["default/a"]) == [("g", "g0")] and _names(inv, got["default/b"]) == [("g", "g1")]
    inv1 = inventory(["n1"], [slice_("n1", [device("g0")])], [klass()], [a, b])
    assert not allocate(inv1, 0, [a, b], _free(inv1)).claims
