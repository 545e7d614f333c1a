"""``corral run`` tells what its configuration does not act on once per object: a ``FieldsNotEnforced``
Warning Event on the object and a log line in the cycle an object is first seen (not only the first
cycle), again only when its warning changes (kube/runner.py ``Runner.warn``, framework/notices.py
``Warned``)."""

from __future__ import annotations

import time
from collections import Counter

from corral.framework.config import parse_config
from corral.model.clock import parse_time
from corral.registry import REGISTRY
from tests.kube.fakeapi import FakeAPI
from tests.kube.test_live import wait_for
from tests.scenarios.expand import T0, expand

NOW = parse_time(T0)

#: Volcano's shipped configuration: no plugin gives the HyperNode search space
NO_TOPOLOGY = parse_config(
    {
        "actions": "enqueue, allocate",
        "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}, {"name": "proportion"}]}],
    },
    REGISTRY,
    "test",
)


def _objects(*jobs: dict) -> list[dict]:
    return expand({"nodes": [{"name": "n1"}, {"name": "n2"}], "jobs": list(jobs)})


def _gang(name: str, tier: int = 1) -> dict:
    return {
        "name": name,
        "networkTopology": {"mode": "hard", "highestTierAllowed": tier},
        "pods": [{"count": 1}],
    }


def _warning_events(server: FakeAPI) -> Counter:
    return Counter(
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"])
        for e in server.objects("Event")
        if e["reason"] == "FieldsNotEnforced"
    )


def _told(runner) -> list[str]:
    return [rec["object"] for rec in runner.log.records if rec["msg"] == "not acted on"]


def _new_podgroup(server: FakeAPI, runner, job: dict) -> None:
    objs = [o for o in _objects(job) if o["kind"] in ("PodGroup", "Pod")]
    server.add_all(objs)
    assert wait_for(lambda: runner.cache.find("PodGroup", f"default/{job['name']}") is not None)


def test_a_podgroup_seen_later_is_warned_in_its_cycle_once(server: FakeAPI, runner_factory) -> None:
    server.add_all(_objects(_gang("g"), {"name": "plain", "pods": [{"count": 1}]}))
    r = runner_factory(NO_TOPOLOGY, now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    first = r.cycle(NOW)
    assert first is not None
    assert [(w.podgroup, w.field, w.cycle) for w in first.decisions.warnings] == [
        ("default/g", "spec.networkTopology", 1)
    ]
    assert _warning_events(server) == {("PodGroup", "g", "Warning"): 1}
    [event] = [e for e in server.objects("Event") if e["reason"] == "FieldsNotEnforced"]
    assert event["message"].startswith("spec.networkTopology: (hard, tier <= 1) not enforced")
    assert "network-topology-aware" in event["message"]
    assert _told(r) == ["PodGroup default/g"]

    second = r.cycle(NOW + 1)
    assert second is not None and not second.decisions.warnings  # told once, not every cycle
    _new_podgroup(server, r, _gang("late"))
    third = r.cycle(NOW + 2)
    assert third is not None
    assert [(w.podgroup, w.cycle) for w in third.decisions.warnings] == [("default/late", 3)]
    assert _warning_events(server) == {("PodGroup", "g", "Warning"): 1, ("PodGroup", "late", "Warning"): 1}
    assert _told(r) == ["PodGroup default/g", "PodGroup default/late"]
    r.cycle(NOW + 3)
    assert len(_told(r)) == 2


def test_a_changed_warning_is_told_again(server: FakeAPI, runner_factory) -> None:
    server.add_all(_objects(_gang("g")))
    r = runner_factory(NO_TOPOLOGY, now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    server.update("PodGroup", "g", "default", {"spec": {"networkTopology": {"highestTierAllowed": 2}}})
    assert wait_for(
        lambda: r.cache.find("PodGroup", "default/g")[1]["spec"]["networkTopology"]["highestTierAllowed"] == 2
    )
    res = r.cycle(NOW + 1)
    assert res is not None and [w.warning[:22] for w in res.decisions.warnings] == ["(hard, tier <= 2) not "]
    assert _warning_events(server) == {("PodGroup", "g", "Warning"): 2}


def test_a_dry_run_logs_and_writes_no_event(server: FakeAPI, runner_factory) -> None:
    server.add_all(_objects(_gang("g")))
    r = runner_factory(NO_TOPOLOGY, now=NOW, dry_run=True)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    _new_podgroup(server, r, _gang("late"))
    r.cycle(NOW + 1)
    assert _told(r) == ["PodGroup default/g", "PodGroup default/late"]
    assert not _warning_events(server)


# -- the objects' own warnings: the snapshot reader's (kept by the watch cache) and the loader's
# assembly's (kept by the incremental model) reach corral run as they reach corral validate


def _gated(name: str) -> list[dict]:
    """A pending pod of corral with a scheduling gate (accepted, not evaluated: a reader warning), too
    large for any node (it stays pending)."""
    job = {"name": name, "bare": True, "pods": [{"count": 1, "cpu": 1000}]}
    [pod] = [o for o in _objects(job) if o["kind"] == "Pod"]
    pod["metadata"]["name"] = name
    pod["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    return [pod]


def _kai(name: str, **job: object) -> list[dict]:
    """A KAI podgroup of one pod; ``job`` as tests/scenarios/expand.py reads it."""
    job = {"name": name, "kai": True, "pods": [{"count": 1}], **job}
    return [o for o in _objects(job) if o["kind"] in ("PodGroup", "Pod")]


def _events(server: FakeAPI) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for e in server.objects("Event"):
        if e["reason"] == "FieldsNotEnforced":
            out.setdefault((e["involvedObject"]["kind"], e["involvedObject"]["name"]), []).append(
                e["message"]
            )
    return out


def test_the_readers_warnings_are_told_once_and_when_they_change(
    server: FakeAPI, runner_factory, monkeypatch
) -> None:
    objs = expand({"nodes": [{"name": "n1"}], "queues": [{"name": "q", "extendClusters": [{"name": "c2"}]}]})
    objs.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.example.com"},
            "spec": {"extendedResourceName": "example.com/gpu"},
        }
    )
    server.add_all(objs + _gated("gated") + _kai("k", podgroup_spec={"stalenessGracePeriod": "5m"}))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    told = _events(server)
    assert told[("Queue", "q")] == [
        "spec.extendClusters: dispatch to other clusters is not modelled: the queue's jobs are scheduled in "
        "this cluster"
    ]
    assert told[("Pod", "gated")][0].startswith("spec.schedulingGates: scheduling gates are not evaluated")
    assert told[("PodGroup", "k")][0].startswith("spec.stalenessGracePeriod: corral does not evict")
    assert told[("DeviceClass", "gpu.example.com")][0].startswith(
        "spec.extendedResourceName: Kubernetes serves requests for example.com/gpu"
    )
    assert set(_told(r)) >= {
        "Queue q",
        "Pod default/gated",
        "PodGroup default/k",
        "DeviceClass gpu.example.com",
    }

    # once the cycle's own writes are read back, an unchanged object is neither parsed again nor told
    assert wait_for(lambda: r.cache.find("Pod", "default/k-0")[1]["spec"].get("nodeName") == "n1")
    time.sleep(0.3)
    r.cycle(NOW + 1)
    import corral.kube.cache as cache_module

    parsed: list[str] = []
    real = cache_module.parse_object
    monkeypatch.setattr(cache_module, "parse_object", lambda *a: parsed.append(a[0]) or real(*a))
    r.cycle(NOW + 2)
    assert parsed == [] and r.cache.model.last == "unchanged"
    assert sum(map(len, _events(server).values())) == 4

    # an object arriving later is told in its cycle (an incremental build), a changed warning again
    server.add_all(_gated("late"))
    assert wait_for(lambda: r.cache.find("Pod", "default/late") is not None)
    server.update(
        "PodGroup",
        "k",
        "default",
        {"spec": {"stalenessGracePeriod": None, "preemptibility": "non-preemptible"}},
    )
    assert wait_for(lambda: "preemptibility" in r.cache.find("PodGroup", "default/k")[1]["spec"])
    r.cycle(NOW + 3)
    assert r.cache.model.last == "incremental"
    told = _events(server)
    assert len(told[("Pod", "late")]) == 1
    assert [m[:40] for m in told[("PodGroup", "k")]] == [
        "spec.stalenessGracePeriod: corral does n",
        "spec.preemptibility: never a victim in c",
    ]
    assert len(told[("Queue", "q")]) == len(told[("Pod", "gated")]) == 1


def test_the_kai_loaders_warnings_are_told_after_an_incremental_build(
    server: FakeAPI, runner_factory
) -> None:
    inert = {"podgroup_spec": {"topologyConstraint": {"requiredTopologyLevel": "rack"}}}
    server.add_all(_objects({"name": "plain", "pods": [{"count": 1}]}) + _kai("k1", **inert))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    assert r.cache.model.last == "full"
    assert _events(server)[("PodGroup", "k1")] == [
        "spec.topologyConstraint names no topology, so it is not acted on (KAI applies a constraint only "
        "with its topology); set spec.topologyConstraint.topology to a Topology's name"
    ]

    # a new KAI podgroup is built alone (incremental): the assembly's warnings about it are told, the
    # full assembly's ones are kept (not told again: still held, so not forgotten)
    stray = _kai("k2", subGroups=[{"name": "a", "minMember": 1}], minMember=None)
    stray[1]["metadata"]["labels"]["kai.scheduler/subgroup-name"] = "b"
    server.add_all(stray)
    assert wait_for(lambda: r.cache.find("Pod", "default/k2-0") is not None)
    r.cycle(NOW + 1)
    assert r.cache.model.last == "incremental"
    told = _events(server)
    assert len(told[("PodGroup", "k1")]) == 1
    assert told[("Pod", "k2-0")] == [
        "metadata.labels.kai.scheduler/subgroup-name 'b' names no leaf sub-group of PodGroup default/k2, so "
        "the pod is not scheduled (as KAI); label it with one of: a"
    ]
    assert "PodGroup default/k1" in r.warned.told

    # the warned pod fixed: its job rebuilt without the warning, which is forgotten
    server.update("Pod", "k2-0", "default", {"metadata": {"labels": {"kai.scheduler/subgroup-name": "a"}}})
    assert wait_for(
        lambda: (
            r.cache.find("Pod", "default/k2-0")[1]["metadata"]["labels"]["kai.scheduler/subgroup-name"] == "a"
        )
    )
    r.cycle(NOW + 2)
    assert r.cache.model.last == "incremental"
    assert "Pod default/k2-0" not in r.warned.told and "PodGroup default/k1" in r.warned.told
