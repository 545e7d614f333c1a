"""The tests' API server refuses what a kube-apiserver refuses beyond the types of a schema
(:mod:`tests.kube.fakeupdate`): immutable fields, the peers' CRDs' CEL rules (``x-kubernetes-validations``,
transition rules with ``oldSelf`` included) and string and integer formats — so a write of corral's that
a cluster would refuse fails the tests."""

from __future__ import annotations

import pytest

from corral.kube.api import NODE, POD, APIError, KubeAPI, ResourceType, load_client
from tests.kube.fakeapi import FakeAPI
from tests.kube.fakeupdate import rule_problems
from tests.scenarios.expand import expand

PG = ResourceType("PodGroup", "scheduling.volcano.sh/v1beta1", "podgroups", True)
TOPOLOGY = ResourceType("Topology", "kai.scheduler/v1alpha1", "topologies", False)
HYPERNODE = ResourceType("HyperNode", "topology.volcano.sh/v1alpha1", "hypernodes", False)
CLAIM = ResourceType("ResourceClaim", "resource.k8s.io/v1", "resourceclaims", True)

needs_peers = pytest.mark.skipif(
    not rule_problems(
        "Topology", "kai.scheduler/v1alpha1", {"spec": {"levels": [{"nodeLabel": "a"}] * 2}}, None
    ),
    reason="the peers' CRDs (../shared/peers) or the CEL library are not here",
)


@pytest.fixture
def srv():
    s = FakeAPI().start()
    s.add_all(
        expand({"nodes": [{"name": "n1"}], "jobs": [{"name": "train", "pods": [{"count": 1, "gpu": 1}]}]})
    )
    yield s
    s.stop()


def _api(s: FakeAPI) -> KubeAPI:
    return KubeAPI(load_client(host=s.url), timeout=5.0)


def _refused(call, *words: str) -> str:
    with pytest.raises(APIError) as exc:
        call()
    assert exc.value.status == 422, exc.value
    for w in words:
        assert w in exc.value.message, exc.value.message
    return exc.value.message


def test_a_pods_spec_changes_only_where_kubernetes_allows(srv: FakeAPI) -> None:
    api = _api(srv)
    path = POD.item("train-0", "default")
    _refused(lambda: api.patch(path, {"spec": {"nodeName": "n1"}}), "spec", "pod updates may not change")
    _refused(lambda: api.patch(path, {"spec": {"schedulerName": "other"}}), "pod updates may not change")
    containers = srv.get("Pod", "train-0", "default")["spec"]["containers"]
    api.patch(path, {"spec": {"containers": [{**c, "image": "new:1"} for c in containers]}})
    assert srv.get("Pod", "train-0", "default")["spec"]["containers"][0]["image"] == "new:1"
    api.patch(path, {"spec": {"activeDeadlineSeconds": 60}})
    assert srv.get("Pod", "train-0", "default")["spec"]["activeDeadlineSeconds"] == 60
    # the status subresource leaves the spec alone: a spec in its patch is not a change
    api.patch(
        POD.item("train-0", "default", "status"), {"spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}}
    )
    assert not srv.get("Pod", "train-0", "default")["spec"].get("nodeName")


def test_metadata_that_only_the_server_changes(srv: FakeAPI) -> None:
    api = _api(srv)
    path = POD.item("train-0", "default")
    _refused(lambda: api.patch(path, {"metadata": {"uid": "another"}}), "metadata.uid", "immutable")
    _refused(
        lambda: api.patch(path, {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        "metadata.deletionTimestamp",
    )
    created = srv.get("Pod", "train-0", "default")["metadata"]["creationTimestamp"]
    api.patch(path, {"metadata": {"creationTimestamp": "2000-01-01T00:00:00Z", "labels": {"a": "b"}}})
    assert srv.get("Pod", "train-0", "default")["metadata"]["creationTimestamp"] == created  # kept


def test_a_nodes_pod_cidr_is_immutable_once_set(srv: FakeAPI) -> None:
    api = _api(srv)
    api.patch(NODE.item("n1"), {"spec": {"podCIDR": "10.0.0.0/24"}})
    _refused(lambda: api.patch(NODE.item("n1"), {"spec": {"podCIDR": "10.0.1.0/24"}}), "spec.podCIDR")


def test_a_resource_claims_spec_and_allocation_do_not_change(srv: FakeAPI) -> None:
    api = _api(srv)
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}},
    }
    srv.add(claim)
    path = CLAIM.item("gpu", "default")
    _refused(
        lambda: api.patch(path, {"spec": {"devices": {"requests": [{"name": "h"}]}}}), "spec", "immutable"
    )
    result = {"request": "g", "driver": "d.example.com", "pool": "n1", "device": "gpu-0"}
    alloc = {"devices": {"results": [result]}}
    api.patch(CLAIM.item("gpu", "default", "status"), {"status": {"allocation": alloc}})
    moved = {"devices": {"results": [{**result, "device": "gpu-1"}]}}
    _refused(
        lambda: api.patch(CLAIM.item("gpu", "default", "status"), {"status": {"allocation": moved}}),
        "status.allocation",
    )


def test_date_time_and_integer_formats_of_a_crd(srv: FakeAPI) -> None:
    if rule_problems("PodGroup", PG.api_version, {"spec": {"minMember": 2**40}}, None) == set():
        pytest.skip("the peers' CRDs (../shared/peers) are not here")
    api = _api(srv)
    path = PG.item("train", "default")
    cond = {"type": "Unschedulable", "status": "True", "lastTransitionTime": "yesterday"}
    _refused(lambda: api.patch(path, {"status": {"conditions": [cond]}}), "lastTransitionTime", "date-time")
    _refused(lambda: api.patch(path, {"spec": {"minMember": 2**40}}), "spec.minMember", "int32")
    cond["lastTransitionTime"] = "2026-01-01T00:00:00Z"
    api.patch(path, {"status": {"conditions": [cond]}})


@needs_peers
def test_cel_rules_of_a_crd_with_transition_rules(srv: FakeAPI) -> None:
    api = _api(srv)
    topo = {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "t"},
        "spec": {"levels": [{"nodeLabel": "zone"}, {"nodeLabel": "zone"}]},
    }
    _refused(lambda: api.post(TOPOLOGY.collection(), topo), "nodeLabel must be unique")
    topo["spec"]["levels"] = [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]
    _refused(lambda: api.post(TOPOLOGY.collection(), topo), "lowest level of topology")
    topo["spec"]["levels"] = [{"nodeLabel": "zone"}, {"nodeLabel": "rack"}]
    api.post(TOPOLOGY.collection(), topo)  # a create: the transition rule is not evaluated
    levels = [{"nodeLabel": "zone"}, {"nodeLabel": "row"}]
    _refused(
        lambda: api.patch(TOPOLOGY.item("t"), {"spec": {"levels": levels}}),
        "nodeLabel structure is immutable",
    )
    api.patch(
        TOPOLOGY.item("t"), {"spec": {"levels": [{"nodeLabel": "zone", "alias": "z"}, {"nodeLabel": "rack"}]}}
    )


@needs_peers
def test_cel_rules_of_a_hypernodes_members(srv: FakeAPI) -> None:
    api = _api(srv)
    hn = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "rack-1"},
        "spec": {
            "tier": 1,
            "members": [
                {"type": "Node", "selector": {"exactMatch": {"name": "n1"}, "regexMatch": {"pattern": "n.*"}}}
            ],
        },
    }
    _refused(
        lambda: api.post(HYPERNODE.collection(), hn), "Only one of ExactMatch, RegexMatch, or LabelMatch"
    )
    hn["spec"]["members"][0]["selector"] = {"exactMatch": {"name": "n1"}}
    api.post(HYPERNODE.collection(), hn)


def test_a_built_in_kinds_timestamps_are_rfc_3339(srv: FakeAPI) -> None:
    from tests.kube.fakeschema import checks

    if not checks("Event", "v1"):
        pytest.skip("jsonschema and kubernetes-validate are not installed")
    api = _api(srv)
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "train-0.", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "train-0", "namespace": "default"},
        "reason": "FailedScheduling",
        "message": "m",
        "type": "Warning",
        "firstTimestamp": "2026-01-01 00:00:00",
    }
    _refused(lambda: api.post("/api/v1/namespaces/default/events", event), "firstTimestamp")
    event["firstTimestamp"] = "2026-01-01T00:00:00Z"
    api.post("/api/v1/namespaces/default/events", event)
