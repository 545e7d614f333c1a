"""The in-process API server refuses and behaves where a real kube-apiserver does, so tests catch what a
cluster would: routine 410s from a trimmed watch history, the Binding's uid precondition, label value
validation, and the eviction API's disruption budgets (maxUnavailable, percentages, pending pods)."""

from __future__ import annotations

import pytest

from corral.kube.api import POD, APIError, KubeAPI, load_client
from tests.kube.fakeapi import FakeAPI
from tests.scenarios.expand import expand


@pytest.fixture
def small():
    srv = FakeAPI(history_limit=10).start()
    yield srv
    srv.stop()


def _api(srv: FakeAPI) -> KubeAPI:
    return KubeAPI(load_client(host=srv.url), timeout=5.0)


def _pods(count: int, pdb: dict | None = None, phase: str = "Running") -> list[dict]:
    case: dict = {
        "nodes": [{"name": "n1", "gpu": 0}],
        "jobs": [
            {
                "name": "app",
                "bare": True,
                "pods": [{"count": count, "cpu": 1, "nodes": ["n1"] * count, "labels": {"app": "x"}}],
            }
        ],
    }
    if pdb is not None:
        case["pdbs"] = [{"name": "budget", "selector": {"app": "x"}, **pdb}]
    objs = expand(case)
    for o in objs:
        if o["kind"] == "Pod":
            o.setdefault("status", {})["phase"] = phase
    return objs


def test_watch_history_is_trimmed_so_410_is_routine(small: FakeAPI) -> None:
    api = _api(small)
    small.add_all(_pods(1))
    old = api.get(POD.collection())["metadata"]["resourceVersion"]
    for k in range(30):
        small.update("Pod", "app-0", "default", {"metadata": {"labels": {"k": str(k)}}})
    stream = api.watch(POD.collection(), old, 5, 10)
    first = next(iter(stream.events()))
    stream.close()
    assert first["type"] == "ERROR" and first["object"]["code"] == 410


def test_a_watch_that_falls_behind_the_history_gets_410_not_a_gap(small: FakeAPI) -> None:
    """An open watch whose position leaves the history window (its consumer or its server thread fell
    behind) ends with 410, as kube-apiserver closes an unresponsive watcher and answers its re-watch from
    a version older than its window: events are never skipped silently (a skipped podgroup write left
    the watch cache stale and the bench deciding the same podgroup updates every cycle)."""
    api = _api(small)
    small.add_all(_pods(1))
    rv = api.get(POD.collection())["metadata"]["resourceVersion"]
    stream = api.watch(POD.collection(), rv, 5, 10)
    events = iter(stream.events())
    small.update("Pod", "app-0", "default", {"metadata": {"labels": {"k": "first"}}})
    assert next(events)["object"]["metadata"]["labels"]["k"] == "first"  # the stream is open and serving
    small.hold_watches("Pod")
    for k in range(30):  # beyond the window of 10: the history is trimmed past the watch's position
        small.update("Pod", "app-0", "default", {"metadata": {"labels": {"k": str(k)}}})
    small.release_watches()
    after = next(events)
    stream.close()
    assert after["type"] == "ERROR" and after["object"]["code"] == 410, after
    assert small.gone_mid_watch == 1


def test_binding_checks_the_uid_precondition(small: FakeAPI) -> None:
    api = _api(small)
    small.add_all(_pods(1, phase="Pending"))
    small.update("Pod", "app-0", "default", {"spec": {"nodeName": None}})
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "app-0", "namespace": "default", "uid": "an-older-pod"},
        "target": {"name": "n1"},
    }
    with pytest.raises(APIError) as err:
        api.post(POD.item("app-0", "default", "binding"), body)
    assert err.value.status == 409 and "Precondition failed" in err.value.message


def test_label_values_are_validated(small: FakeAPI) -> None:
    api = _api(small)
    small.add_all(_pods(1))
    with pytest.raises(APIError) as err:
        api.patch("/api/v1/nodes/n1", {"metadata": {"labels": {"corral.io/locked-for": "x" * 64}}})
    assert err.value.status == 422
    with pytest.raises(APIError):
        api.patch("/api/v1/nodes/n1", {"metadata": {"labels": {"a": "-starts-with-dash"}}})
    api.patch("/api/v1/nodes/n1", {"metadata": {"labels": {"a": "x" * 63}}})


def _evict(api: KubeAPI, name: str) -> int:
    try:
        api.post(POD.item(name, "default", "eviction"), {"metadata": {"name": name, "namespace": "default"}})
    except APIError as exc:
        return exc.status
    return 201


@pytest.mark.parametrize(
    ("pdb", "allowed"),
    [
        ({"maxUnavailable": 1}, 1),
        ({"maxUnavailable": "50%"}, 2),
        ({"minAvailable": "50%"}, 2),
        ({"minAvailable": 4}, 0),
    ],
)
def test_budgets_count_as_the_disruption_controller(small: FakeAPI, pdb: dict, allowed: int) -> None:
    api = _api(small)
    small.add_all(_pods(4, pdb))
    codes = [_evict(api, f"app-{i}") for i in range(4)]
    assert codes == [201] * allowed + [429] * (4 - allowed)


def test_a_refusal_names_the_budget_cause_and_pending_pods_skip_budgets(small: FakeAPI) -> None:
    api = _api(small)
    small.add_all(_pods(2, {"minAvailable": 2}))
    with pytest.raises(APIError) as err:
        api.post(POD.item("app-0", "default", "eviction"), {"metadata": {"name": "app-0"}})
    assert err.value.status == 429 and err.value.causes == ("DisruptionBudget",)
    small.update("Pod", "app-1", "default", {"status": {"phase": "Pending"}})
    assert _evict(api, "app-1") == 201


def test_event_namespaces_and_lease_fields_are_validated(small: FakeAPI) -> None:
    api = _api(small)
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "x.", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "x", "namespace": "team-a"},
        "reason": "FailedScheduling",
        "message": "no",
        "type": "Warning",
    }
    with pytest.raises(APIError) as exc:
        api.post("/api/v1/namespaces/default/events", event)
    assert exc.value.status == 422 and "does not match event.namespace" in exc.value.message
    event["involvedObject"]["namespace"] = "default"
    api.post("/api/v1/namespaces/default/events", event)
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "corral", "namespace": "default"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 0},
    }
    with pytest.raises(APIError) as exc:
        api.post("/apis/coordination.k8s.io/v1/namespaces/default/leases", lease)
    assert exc.value.status == 422 and "leaseDurationSeconds" in exc.value.message
