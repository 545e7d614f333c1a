"""What the conventions' writes cost a steady cycle (issue 31, the 20 % overhead target of ``corral run``):
Events and pod conditions paced by token buckets (kube-scheduler's client: 50 a second, bursts of 100), a
condition written is not sent again while the watch lags behind it, a podgroup whose Events and
conditions are all out is passed over without a look at its pods, and the long-lived cache and model are
kept out of the garbage collector's passes."""

from __future__ import annotations

import gc
from collections import Counter

import pytest

from corral.kube.api import EVENT, APIError
from corral.kube.conventions import EVENT_REPEAT
from corral.kube.longlived import LongLived
from corral.kube.ratelimit import KUBE_SCHEDULER_BURST, KUBE_SCHEDULER_QPS, TokenBucket
from tests.kube.fakeapi import FakeAPI
from tests.kube.test_live import NOW, gang_objects, wait_for


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _writes(server: FakeAPI) -> Counter:
    out: Counter = Counter()
    for method, path in server.requests:
        if method == "POST" and path.endswith("/events"):
            out["events"] += 1
        elif method == "PATCH" and "/pods/" in path and path.endswith("/status"):
            out["conditions"] += 1
    return out


def test_token_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    clock = Clock()
    b = TokenBucket(2.0, 3, clock=clock)
    assert [b.take() for _ in range(4)] == [True, True, True, False]
    clock.t += 1.0
    assert b.available() == 2
    clock.t += 100.0
    assert b.available() == 3  # never past the burst
    assert (KUBE_SCHEDULER_QPS, KUBE_SCHEDULER_BURST) == (50.0, 100)


def test_a_backlog_is_written_at_the_buckets_pace_not_per_cycle(server: FakeAPI, runner_factory) -> None:
    """Back-to-back cycles do not each get a fresh budget: what the buckets hold is what goes out."""
    server.add_all(gang_objects(count=5))
    r = runner_factory(now=NOW)
    rec = r.applier.recorder
    assert rec.event_repeat == EVENT_REPEAT == 1800.0  # client-go's series refresh (refreshTime)
    clock = Clock()
    rec.events_limit = TokenBucket(1.0, 3, clock=clock)
    rec.conditions_limit = TokenBucket(1.0, 2, clock=clock)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    assert _writes(server) == {"events": 3, "conditions": 2}
    r.cycle(NOW + 1)  # no time passed on the buckets' clock: nothing more
    assert _writes(server) == {"events": 3, "conditions": 2}
    clock.t += 2.0
    r.cycle(NOW + 2)
    assert _writes(server) == {"events": 5, "conditions": 4}
    clock.t += 10.0
    r.cycle(NOW + 3)
    assert _writes(server) == {"events": 6, "conditions": 5}  # the PodGroup's Event and 5 pods'


def test_a_condition_is_not_sent_again_while_the_watch_lags(server: FakeAPI, runner_factory) -> None:
    server.add_all(gang_objects(count=5))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    shown = r.cache.event
    r.cache.event = lambda rtype, etype, raw: None if rtype.kind == "Pod" else shown(rtype, etype, raw)
    r.cycle(NOW)
    assert _writes(server)["conditions"] == 5
    r.cycle(NOW + 1)  # the cache still shows the pods without their condition
    assert _writes(server)["conditions"] == 5


def test_a_podgroup_told_all_is_passed_over_without_looking_at_its_pods(
    server: FakeAPI, runner_factory
) -> None:
    server.add_all(gang_objects(count=5))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)

    def shown() -> bool:
        found = [r.cache.find("Pod", f"default/train-{i}") for i in range(5)]
        return all(f is not None and (f[1].get("status") or {}).get("conditions") for f in found)

    assert wait_for(shown)
    r.cycle(NOW + 1)  # everything is out: the podgroup is found told
    looked: list[str] = []
    find = r.cache.find

    def counting(kind: str, key: str):
        looked.append(f"{kind} {key}")
        return find(kind, key)

    r.cache.find = counting  # type: ignore[method-assign]
    writes = len([m for m, _ in server.requests if m != "GET"])
    r.cycle(NOW + 2)
    assert len([m for m, _ in server.requests if m != "GET"]) == writes
    assert not [k for k in looked if k.startswith("Pod ")]  # no pod of the backlog looked at
    assert "PodGroup default/train" not in looked  # nor its PodGroup (the same gang condition)


def test_the_long_lived_objects_are_frozen_and_collected_on_schedule() -> None:
    clock = Clock()
    before = gc.get_threshold()
    keep = LongLived(full_every=300.0, clock=clock)
    try:
        keep.after_build(assembled=True)
        assert gc.get_freeze_count() > 0 and keep.full_collections == 1
        assert gc.get_threshold()[2] > before[2]  # the collector's own full passes held back
        clock.t += 299.0
        keep.after_build()  # an incremental build: collected and frozen, nothing unfrozen
        assert keep.full_collections == 1
        keep.after_build(assembled=True)  # the old model is garbage: everything walked once
        assert keep.full_collections == 2
        clock.t += 301.0
        keep.after_build()  # the period is up: unfrozen, collected once, frozen again
        assert keep.full_collections == 3 and gc.get_freeze_count() > 0
    finally:
        keep.release()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


def test_garbage_made_after_the_freeze_is_collected_as_usual() -> None:
    """What the cycles make is not frozen: a reference cycle made after the freeze is collected by the
    collector's own passes, so the process's memory does not grow with every cycle."""
    import weakref

    class Node:
        pass

    keep = LongLived(full_every=300.0)
    try:
        keep.after_build(assembled=True)
        a, b = Node(), Node()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        gone = weakref.ref(a)
        del a, b
        keep.after_build()  # the next cycle's build collects it before freezing what lives
        assert gone() is None
    finally:
        keep.release()


def test_a_runner_freezes_after_its_model_is_built_and_releases_on_stop(
    server: FakeAPI, runner_factory
) -> None:
    server.add_all(gang_objects(count=1))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    assert gc.get_freeze_count() > 0
    r.stop()
    assert gc.get_freeze_count() == 0


def test_a_write_whose_answer_is_not_read_still_reports_a_refusal(server: FakeAPI, runner_factory) -> None:
    """``KubeAPI.send`` (Events, pod conditions): the answer is drained, not decoded, but a refusal is
    still an APIError with its status and message, and a success lands."""
    server.add_all(gang_objects(count=1))
    r = runner_factory(now=NOW)
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "train-0.", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "train-0", "namespace": "other"},
        "reason": "FailedScheduling",
        "message": "m",
        "type": "Warning",
    }
    with pytest.raises(APIError) as refused:
        r.api.send("POST", EVENT.collection("default"), event, "application/json")
    assert refused.value.status == 422 and "involvedObject.namespace" in refused.value.message
    event["involvedObject"]["namespace"] = "default"
    assert r.api.send("POST", EVENT.collection("default"), event, "application/json") is None
    assert [e["reason"] for e in server.objects("Event")] == ["FailedScheduling"]


def test_a_cycle_leaves_no_session_in_reference_cycles() -> None:
    """``run_cycle`` drops its session's references when it ends, so the session, its plugins and every
    per-pod record they hold are freed at once rather than walked by the next collection (at 50,000 pods
    some 37,000 objects a cycle, most of the collection ``corral run`` runs at each cycle's start)."""
    from corral.framework.cycle import run_cycle
    from corral.registry import REGISTRY, default_config
    from tests.kube.test_model import _cache

    cluster = _cache(gang_objects(count=5)).build()[0]
    gc.collect()
    gc.disable()
    try:
        decisions = run_cycle(cluster, default_config(), REGISTRY, NOW)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("corral.")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert decisions.unschedulable  # a cycle that did something: the gang does not fit
    assert left == []
