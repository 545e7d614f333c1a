"""Claims of a scheduling.k8s.io PodGroup (KEP-5729): which claim a pod's entry resolves to
(corral.dra.pods), and a claim reserved for a PodGroup in the snapshot staying allocated."""

from __future__ import annotations

from typing import Any

from corral.framework.cycle import run_cycle
from corral.manifests.build import build_cluster
from corral.model.clock import parse_time
from corral.registry import REGISTRY, default_config
from tests.scenarios.expand import T0, expand

GPU = "gpu.example.com"


def _case(
    pod_claims: list[dict], group_claims: list[dict], status: dict | None = None, extra: Any = ()
) -> Any:
    job: dict[str, Any] = {
        "name": "team",
        "native": "v1beta1",
        "podgroup_spec": {"resourceClaims": group_claims},
        "pods": [{"count": 2, "cpu": 1, "resourceClaims": pod_claims}],
    }
    if status:
        job["podgroup_status"] = status
    objects = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": GPU},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{GPU}'"}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "default"},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]}}
            },
        },
        *[
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{n}-gpus"},
                "spec": {
                    "driver": GPU,
                    "nodeName": n,
                    "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}],
                },
            }
            for n in ("n1", "n2")
        ],
        *extra,
    ]
    case = {"nodes": [{"name": "n1"}, {"name": "n2"}], "jobs": [job], "objects": objects}
    return build_cluster([("s.yaml", o) for o in expand(case)])


def _keys(cluster: Any) -> dict[str, tuple[str, ...]]:
    inv = cluster.dra
    return {t.name: tuple(r.claim for r in inv.pod_claims[t.uid]) for t in cluster.tasks.values()}


TEMPLATE = {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}


def test_a_matching_entry_shares_the_group_claim_made_from_the_template() -> None:
    cluster = _case([TEMPLATE], [TEMPLATE])
    assert _keys(cluster) == {"team-0": ("default/team-gpu",), "team-1": ("default/team-gpu",)}
    assert cluster.dra.groups["default/team-gpu"][0] == "team"


def test_an_entry_that_differs_from_the_group_s_is_the_pod_s_own_claim() -> None:
    other = {"name": "mine", "resourceClaimTemplateName": "one-gpu"}
    cluster = _case([other], [TEMPLATE])
    assert _keys(cluster) == {"team-0": ("default/team-0-mine",), "team-1": ("default/team-1-mine",)}


def test_the_claim_the_group_s_status_names_is_used() -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "team-gpu-x7k2p", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]}},
    }
    status = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "team-gpu-x7k2p"}]}
    cluster = _case([TEMPLATE], [TEMPLATE], status, [claim])
    assert _keys(cluster) == {"team-0": ("default/team-gpu-x7k2p",), "team-1": ("default/team-gpu-x7k2p",)}


def test_a_claim_reserved_for_the_group_stays_allocated_and_holds_the_group_to_its_node() -> None:
    """Reserved for the PodGroup, allocated on n2's gpu-0: its pods go to n2 (both GPUs of n1 are
    free), and the device is never given to another claim, though no pod of the group holds a node."""
    named = {"name": "gpu", "resourceClaimName": "shared"}
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]}},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": GPU, "pool": "n2", "device": "gpu-0"}]},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
                    ]
                },
            },
            "reservedFor": [
                {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "team", "uid": "u"}
            ],
        },
    }
    cluster = _case([named], [named], extra=[claim])
    assert "default/shared" in cluster.dra.pinned
    decisions = run_cycle(cluster, default_config(), REGISTRY, parse_time(T0), 1)
    assert sorted((b.pod, b.node) for b in decisions.binds) == [
        ("default/team-0", "n2"),
        ("default/team-1", "n2"),
    ]
