"""The in-process API server checks what is written against the kinds' schemas, as a real kube-apiserver
does (a 422 Invalid naming the field): Pods (status and metadata patches, the binding subresource's body)
and ``scheduling.k8s.io`` PodGroups against Kubernetes 1.37's OpenAPI schemas (``kubernetes-validate``),
Volcano's and KAI's PodGroups and Queues against their CRDs (``../shared/peers``). Each test writes one
malformed body and sees it refused, and a well-formed one of the same shape pass."""

from __future__ import annotations

import pytest

from corral.kube.api import APIError, KubeAPI, load_client
from tests.kube.conftest import make_runner
from tests.kube.fakeapi import FakeAPI
from tests.kube.fakeschema import checks
from tests.scenarios.expand import expand

NOW = 1_750_000_000.0
builtin = pytest.mark.skipif(
    not checks("Pod", "v1"), reason="kubernetes-validate (a test dependency) is not installed"
)
peers = pytest.mark.skipif(
    not checks("Queue", "scheduling.volcano.sh/v1beta1"),
    reason="the peers' CRDs (../shared/peers) or jsonschema (a test dependency) are not here",
)

POD = "/api/v1/namespaces/default/pods/big-0"
VC_PG = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/big"
VC_QUEUE = "/apis/scheduling.volcano.sh/v1beta1/queues/q"
KAI_PG = "/apis/scheduling.run.ai/v2alpha2/namespaces/default/podgroups/big"
KAI_QUEUE = "/apis/scheduling.run.ai/v2/queues/q"
NATIVE_PG = "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups/big"


def _api(srv: FakeAPI) -> KubeAPI:
    return KubeAPI(load_client(host=srv.url), timeout=5.0)


def _load(srv: FakeAPI, **job: object) -> KubeAPI:
    queue: dict = {"name": "q", "kai": True} if job.get("kai") else {"name": "q"}
    srv.add_all(
        expand(
            {
                "nodes": [{"name": "n1"}],
                "queues": [queue],
                "jobs": [{"name": "big", "queue": "q", "pods": [{"count": 2, "gpu": 1}], **job}],
            }
        )
    )
    return _api(srv)


def _refused(call, *args: object) -> str:
    with pytest.raises(APIError) as err:
        call(*args)
    assert err.value.status == 422, err.value.message
    return err.value.message


@builtin
def test_a_pod_status_patch_is_checked(server: FakeAPI) -> None:
    api = _load(server)
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "no node"}
    message = _refused(api.patch, f"{POD}/status", {"status": {"conditions": [{**cond, "status": False}]}})
    assert "status.conditions.0.status" in message
    _refused(api.patch, f"{POD}/status", {"status": {"nominatedNode": "n1"}})  # no such field
    assert "conditions" not in server.get("Pod", "big-0", "default").get("status", {})
    api.patch(f"{POD}/status", {"status": {"conditions": [cond]}})
    assert server.get("Pod", "big-0", "default")["status"]["conditions"][0]["reason"] == "Unschedulable"


@builtin
def test_a_pod_metadata_patch_is_checked(server: FakeAPI) -> None:
    api = _load(server)
    message = _refused(api.patch, POD, {"metadata": {"annotations": {"corral.io/locked-for": 7}}})
    assert "metadata.annotations.corral.io/locked-for" in message
    _refused(api.patch, POD, {"metadata": {"lockedFor": "x"}})
    _refused(api.patch, POD, {"metadata": {"labels": {"corral.io/locked-for": "x" * 64}}})
    api.patch(POD, {"metadata": {"annotations": {"corral.io/locked-for": "default/big"}}})


@builtin
def test_a_binding_body_is_checked(server: FakeAPI) -> None:
    api = _load(server)
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "big-0", "namespace": "default"}}
    _refused(api.post, f"{POD}/binding", {**body, "target": {"name": "n1", "node": "n1"}})
    _refused(api.post, f"{POD}/binding", {**body, "target": "n1"})
    assert not server.bindings and not server.get("Pod", "big-0", "default")["spec"].get("nodeName")
    api.post(f"{POD}/binding", {**body, "target": {"kind": "Node", "name": "n1"}})
    assert server.bindings == [("default/big-0", "n1")]


@builtin
def test_a_native_podgroup_status_is_checked(server: FakeAPI) -> None:
    api = _load(server, native="v1beta1")
    cond = {"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable", "message": "no node"}
    message = _refused(api.patch, f"{NATIVE_PG}/status", {"status": {"conditions": [cond]}})
    assert "lastTransitionTime" in message  # metav1.Condition requires it
    _refused(api.patch, NATIVE_PG, {"spec": {"minMember": 2}})  # Volcano's field, not this API's
    cond["lastTransitionTime"] = "2025-06-15T00:00:00Z"
    api.patch(f"{NATIVE_PG}/status", {"status": {"conditions": [cond]}})


@peers
def test_a_volcano_podgroup_is_checked(server: FakeAPI) -> None:
    api = _load(server)
    message = _refused(api.patch, VC_PG, {"status": {"phase": "Running", "running": "2"}})
    assert "status.running" in message
    _refused(api.patch, VC_PG, {"spec": {"minMembers": 2}})
    _refused(api.patch, VC_PG, {"status": {"conditions": [{"type": "Scheduled", "status": True}]}})
    assert server.get("PodGroup", "big", "default")["status"]["phase"] == "Inqueue"
    api.patch(
        VC_PG, {"status": {"phase": "Running", "conditions": [{"type": "Scheduled", "status": "True"}]}}
    )


@peers
def test_a_volcano_queue_is_checked(server: FakeAPI) -> None:
    api = _load(server)
    _refused(api.patch, VC_QUEUE, {"spec": {"weight": "heavy"}})
    _refused(api.patch, VC_QUEUE, {"spec": {"deserved": {"nvidia.com/gpu": "eight"}}})  # not a quantity
    api.patch(VC_QUEUE, {"spec": {"weight": 2, "deserved": {"nvidia.com/gpu": "8"}}})


@peers
def test_a_kai_podgroup_is_checked(server: FakeAPI) -> None:
    api = _load(server, kai=True)
    message = _refused(api.patch, f"{KAI_PG}/status", {"status": {"phase": "Running"}})  # KAI has no phase
    assert "'phase' was unexpected" in message
    _refused(api.patch, f"{KAI_PG}/status", {"status": {"schedulingConditions": {"type": "x"}}})
    api.patch(f"{KAI_PG}/status", {"status": {"schedulingConditions": [{"type": "UnschedulableOnNodePool"}]}})


@peers
def test_a_kai_queue_is_checked(server: FakeAPI) -> None:
    gpu = {"quota": 8, "limit": -1, "overQuotaWeight": 1}
    server.add(
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {"resources": {"gpu": gpu}},
        }
    )
    api = _api(server)
    _refused(api.patch, KAI_QUEUE, {"spec": {"priority": "high"}})
    _refused(api.patch, KAI_QUEUE, {"spec": {"weight": 2}})  # Volcano's field, not KAI's
    _refused(api.patch, KAI_QUEUE, {"spec": {"resources": {"gpu": {"quota": "eight"}}}})
    api.patch(KAI_QUEUE, {"spec": {"priority": 100, "resources": {"gpu": {"quota": 16}}}})


@builtin
def test_a_problem_the_stored_object_had_is_not_the_writers(server: FakeAPI) -> None:
    """A hand-written fixture may lack what the schema requires; a write is refused only for what it
    breaks (the merged object is checked, against the object before the write)."""
    [pod] = [o for o in expand({"jobs": [{"name": "big", "pods": [{"count": 1}]}]}) if o["kind"] == "Pod"]
    pod["spec"]["containers"][0].pop("name", None)
    server.add(pod)
    api = _api(server)
    api.patch(POD, {"metadata": {"labels": {"a": "b"}}})
    _refused(api.patch, POD, {"metadata": {"labels": {"a": 1}}})


def test_corral_writes_no_phase_on_a_kai_podgroup(server: FakeAPI) -> None:
    """KAI's PodGroupStatus has no ``phase`` (a real API server refuses or prunes it, and a pruned phase
    would be written again every cycle): corral keeps a KAI gang's phase in its cache alone."""
    server.add_all(
        expand(
            {
                "nodes": [{"name": "n1", "gpu": 8}],
                "queues": [{"name": "q", "kai": True}],
                "jobs": [{"name": "big", "kai": True, "queue": "q", "pods": [{"count": 2, "gpu": 4}]}],
            }
        )
    )
    r = make_runner(server, now=NOW)
    try:
        r.start()
        assert r.cache.wait_synced(5)
        r.cycle(NOW)
        assert len(server.bindings) == 2
        assert "phase" not in (server.get("PodGroup", "big", "default").get("status") or {})
        mark = len(server.writes)
        r.cycle(NOW + 1)
        assert not [w for w in server.writes[mark:] if "/podgroups/" in w[3]]
    finally:
        r.stop()


@builtin
def test_an_event_is_checked(server: FakeAPI) -> None:
    api = _load(server)
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "big-0.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "big-0", "namespace": "default"},
        "reason": "FailedScheduling",
        "message": "0/1 nodes are available",
        "type": "Warning",
    }
    path = "/api/v1/namespaces/default/events"
    message = _refused(api.post, path, {**event, "count": "1"})
    assert "count" in message
    _refused(api.post, path, {**event, "source": {"component": "corral", "node": "n1"}})
    api.post(path, {**event, "count": 1, "source": {"component": "corral"}})


@builtin
def test_a_lease_is_checked(server: FakeAPI) -> None:
    api = _api(server)
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "corral", "namespace": "default"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    _refused(api.post, path, {**lease, "spec": {**lease["spec"], "renewTime": 5}})
    _refused(api.post, path, {**lease, "spec": {**lease["spec"], "holder": "a"}})
    api.post(path, lease)
    _refused(api.patch, f"{path}/corral", {"spec": {"holderIdentity": ["b"]}})


@builtin
def test_a_node_patch_is_checked(server: FakeAPI) -> None:
    api = _load(server)
    _refused(api.patch, "/api/v1/nodes/n1", {"metadata": {"annotations": {"corral.io/locked-for": True}}})
    _refused(api.patch, "/api/v1/nodes/n1", {"spec": {"unschedulable": "yes"}})
    api.patch("/api/v1/nodes/n1", {"metadata": {"annotations": {"corral.io/locked-for": "default/big"}}})


@builtin
def test_a_resource_claim_status_is_checked(server: FakeAPI) -> None:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    server.add(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": [request]}},
        }
    )
    api = _api(server)
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c/status"
    reserved = {"resource": "pods", "name": "big-0", "uid": "u"}
    _refused(api.patch, path, {"status": {"reservedFor": reserved}})  # a list
    _refused(api.patch, path, {"status": {"reservedFor": [{**reserved, "kind": "Pod"}]}})
    api.patch(path, {"status": {"reservedFor": [reserved]}})
