"""``corral run`` on Kubernetes' own gang API (scheduling.k8s.io/v1beta1 PodGroups, 1.37): the groups
are watched, scheduled as gangs, and get kube-scheduler's conditions on their status subresource —
never a phase (the API has none)."""

from __future__ import annotations

import time

from tests.kube.fakeapi import FakeAPI
from tests.scenarios.expand import expand

NOW = 1767225600.0  # 2026-01-01T00:00:00Z


def _case(count: int) -> list[dict]:
    return expand(
        {
            "nodes": [{"name": "n1"}, {"name": "n2"}],
            "jobs": [{"name": "train", "native": "v1beta1", "pods": [{"count": count, "gpu": 8}]}],
        }
    )


def _condition(server: FakeAPI) -> dict:
    status = server.get("PodGroup", "train", "default")["status"]
    assert "phase" not in status
    [cond] = status["conditions"]
    return cond


def test_a_placed_native_gang_gets_initially_scheduled_true(server: FakeAPI, runner_factory) -> None:
    server.add_all(_case(2))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert sorted(b.pod for b in res.decisions.binds) == ["default/train-0", "default/train-1"]
    cond = _condition(server)
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodGroupInitiallyScheduled",
        "True",
        "Scheduled",
    )
    assert cond["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert any(
        m == "PATCH" and p.endswith("/scheduling.k8s.io/v1beta1/namespaces/default/podgroups/train/status")
        for m, p in server.requests
    )


def test_an_unplaceable_native_gang_gets_unschedulable_once(server: FakeAPI, runner_factory) -> None:
    server.add_all(_case(3))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert not res.decisions.binds and res.decisions.unschedulable
    cond = _condition(server)
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodGroupInitiallyScheduled",
        "False",
        "Unschedulable",
    )
    assert cond["message"] == res.decisions.unschedulable[0].reason
    writes = sum(1 for m, p in server.requests if m == "PATCH" and p.endswith("/podgroups/train/status"))
    deadline = time.monotonic() + 5
    while not (r.cache.find("PodGroup", "default/train")[1].get("status") or {}).get("conditions"):
        assert time.monotonic() < deadline, "the watch never showed the condition"
        time.sleep(0.02)
    res2 = r.cycle(NOW + 1)  # the same reason: the group says so already, nothing is written again
    after = sum(1 for m, p in server.requests if m == "PATCH" and p.endswith("/podgroups/train/status"))
    assert after == writes, (
        res2.decisions.conditions,
        res2.decisions.unschedulable,
        res.decisions.unschedulable,
    )


def test_a_composite_tree_s_podgroups_get_the_conditions(server: FakeAPI, runner_factory) -> None:
    """The root composite is one job; kube-scheduler's conditions go to the tree's PodGroups (the
    composite's own status stays empty, as in 1.37)."""
    objects = expand(
        {
            "nodes": [{"name": "n1"}, {"name": "n2"}],
            "jobs": [
                {
                    "name": name,
                    "native": "v1beta1",
                    "podgroup_spec": {"parentCompositePodGroupName": "pair"},
                    "pods": [{"count": 1, "gpu": 8}],
                }
                for name in ("a", "b")
            ],
        }
    )
    objects.append(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha3",
            "kind": "CompositePodGroup",
            "metadata": {"name": "pair", "namespace": "default"},
            "spec": {
                "workloadRef": {"workloadName": "w", "templateName": "pair"},
                "schedulingPolicy": {"gang": {"minGroupCount": 2}},
            },
        }
    )
    server.add_all(objects)
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert sorted(b.pod for b in res.decisions.binds) == ["default/a-0", "default/b-0"]
    for name in ("a", "b"):
        [cond] = server.get("PodGroup", name, "default")["status"]["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == (
            "PodGroupInitiallyScheduled",
            "True",
            "Scheduled",
        )
    assert not server.get("CompositePodGroup", "pair", "default").get("status")
