"""``corral run`` tells what its configuration does not act on once per object: a ``FieldsNotEnforced``
Warning Event on the object and a log line in the cycle an object is first seen (not only the first
cycle), again only when its warning changes (kube/runner.py ``Runner.warn``, framework/notices.py
``Warned``)."""

from __future__ import annotations

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
