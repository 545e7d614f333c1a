"""``corral run`` with Dynamic Resource Allocation (resource.k8s.io/v1): the claims of a pod are written
before its bind as kube-scheduler's DynamicResources PreBind writes them — the finalizer, then
``status.allocation`` (devices, node selector) and the pod in ``status.reservedFor``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from corral.kube.dra_status import FINALIZER
from tests.kube.fakeapi import FakeAPI
from tests.scenarios.expand import expand

NOW = 1767225600.0  # 2026-01-01T00:00:00Z


def _objects(generated: bool) -> list[dict]:
    case = yaml.safe_load(
        (Path(__file__).parents[1] / "scenarios/cases/dra_claim_on_node_with_device.yaml").read_text()
    )
    docs = expand(case)
    if generated:  # the resourceclaim controller made the claim: the pod's status names it
        [pod] = [d for d in docs if d["kind"] == "Pod"]
        pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "train-0-gpu-x7k2p"}]
        [template] = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
        docs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "train-0-gpu-x7k2p", "namespace": "default", "uid": "claim-uid"},
                "spec": template["spec"]["spec"],
            }
        )
    return docs


def test_the_claim_is_allocated_and_reserved_before_the_bind(server: FakeAPI, runner_factory) -> None:
    server.add_all(_objects(generated=True))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert [(b.pod, b.node) for b in res.decisions.binds] == [("default/train-0", "n2")]
    claim = server.get("ResourceClaim", "train-0-gpu-x7k2p", "default")
    assert FINALIZER in claim["metadata"]["finalizers"]
    alloc = claim["status"]["allocation"]
    assert alloc["devices"]["results"] == [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "n2", "device": "gpu-1"}
    ]
    assert alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n2"]
    [reserved] = claim["status"]["reservedFor"]
    assert (reserved["resource"], reserved["name"]) == ("pods", "train-0")
    kv = pytest.importorskip("kubernetes_validate")
    kv.validate(claim, "1.37.0", strict=True)  # the status is shaped as the API server takes it
    writes = [(m, p) for m, p in server.requests if m in ("PATCH", "POST")]
    status = writes.index(
        ("PATCH", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/train-0-gpu-x7k2p/status")
    )
    bind = writes.index(("POST", "/api/v1/namespaces/default/pods/train-0/binding"))
    assert status < bind


def test_a_claim_still_to_be_created_holds_the_bind_back(server: FakeAPI, runner_factory) -> None:
    server.add_all(_objects(generated=False))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    assert not any(p.endswith("/binding") for _, p in server.requests)
    assert server.get("Pod", "train-0", "default")["spec"].get("nodeName") is None


def test_a_podgroup_claim_is_reserved_for_the_group(server: FakeAPI, runner_factory) -> None:
    """KEP-5729: a claim of a scheduling.k8s.io PodGroup that its pods name is allocated once and
    reserved for the PodGroup (``resource: podgroups``), not for each pod; both pods bind to its node."""
    case = {
        "nodes": [{"name": "n1", "gpu": 0}, {"name": "n2", "gpu": 0}],
        "jobs": [
            {
                "name": "team",
                "native": "v1beta1",
                "podgroup_spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "team-gpu"}]},
                "pods": [
                    {
                        "count": 2,
                        "cpu": 1,
                        "resourceClaims": [{"name": "gpu", "resourceClaimName": "team-gpu"}],
                    }
                ],
            }
        ],
        "objects": [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "gpu.example.com"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
            },
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "team-gpu", "namespace": "default", "uid": "claim-uid"},
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]
                    }
                },
            },
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": "n2-gpus"},
                "spec": {
                    "driver": "gpu.example.com",
                    "nodeName": "n2",
                    "pool": {"name": "n2", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0"}],
                },
            },
        ],
    }
    docs = expand(case)
    [group] = [d for d in docs if d["kind"] == "PodGroup"]
    group["metadata"]["uid"] = "pg-uid"
    server.add_all(docs)
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert sorted((b.pod, b.node) for b in res.decisions.binds) == [
        ("default/team-0", "n2"),
        ("default/team-1", "n2"),
    ]
    claim = server.get("ResourceClaim", "team-gpu", "default")
    assert claim["status"]["reservedFor"] == [
        {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "team", "uid": "pg-uid"}
    ]
    assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    kv = pytest.importorskip("kubernetes_validate")
    kv.validate(claim, "1.37.0", strict=True)


def test_the_live_model_stays_incremental_for_pods_the_device_books_do_not_read() -> None:
    """``corral run``'s model with claims in the cluster: a pod without claims that changes rebuilds its
    job only (the device books as they are), and the cluster is the one a full assembly builds; a pod
    with claims that changes assembles everything."""
    import copy

    from corral.framework.cycle import run_cycle
    from corral.kube.runner import dry_run_assume
    from corral.model.clock import parse_time
    from corral.registry import REGISTRY, default_config
    from tests.kube.test_model import TYPES, _cache, _fresh, fingerprint

    case = yaml.safe_load(
        (Path(__file__).parents[1] / "scenarios/cases/native_dra_gang_claims.yaml").read_text()
    )
    cache = _cache(expand(case))
    cluster = cache.build()[0]
    decisions = run_cycle(cluster, default_config(), REGISTRY, parse_time("2026-01-01T00:00:00Z"), 1)
    dry_run_assume(cache, decisions, NOW)
    cache.build()
    pod_type = TYPES[("Pod", "v1")]
    plain = copy.deepcopy(cache.stores[pod_type]["default/plain-0"].raw)
    plain["metadata"].setdefault("labels", {})["changed"] = "yes"
    cache.event(pod_type, "MODIFIED", plain)
    cluster = cache.build()[0]
    assert cache.model.last == "incremental", cache.model.reason
    assert fingerprint(cluster) == fingerprint(_fresh(cache))
    with_claim = copy.deepcopy(cache.stores[pod_type]["default/solo-0"].raw)
    with_claim["metadata"].setdefault("labels", {})["changed"] = "yes"
    cache.event(pod_type, "MODIFIED", with_claim)
    cache.build()
    assert cache.model.last == "full"
