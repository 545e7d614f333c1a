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
