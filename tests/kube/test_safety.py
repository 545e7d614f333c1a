"""``corral run`` under the faults a cluster inflicts, on the wire (the in-process API server injects
them): a leader frozen past its lease, a leader that cannot renew mid-apply, writes that land but answer
an error, a gang whose binds partly fail, rate limiting on evictions, long podgroup names, and the
podgroup write that must not conflict with itself."""

from __future__ import annotations

import threading
import time
from collections import Counter

from corral.framework.reservation import lock_label_value
from corral.kube.apply import LOCK_LABEL
from corral.kube.conventions import PRUNE_EVERY
from tests.kube.fakeapi import FakeAPI
from tests.kube.test_live import NOW, PREEMPT, gang_objects, node_of, preempt_objects, wait_for
from tests.scenarios.expand import expand


def _leader(runner_factory, **opts):
    r = runner_factory(leader_elect=True, identity="a", lease_namespace="default", **opts)
    r.start()
    assert r.cache.wait_synced(5) and wait_for(r.is_leader)
    return r


def _writes(server: FakeAPI, since: int = 0) -> list[tuple[str, str]]:
    return [(m, p) for m, p in server.requests[since:] if m != "GET" and "/leases" not in p]


def test_a_frozen_leader_starts_no_cycle(server: FakeAPI, runner_factory) -> None:
    """Paused past its lease (its clock jumps 20 s with no renewal): no cycle starts, nothing is written,
    whatever the flag says; the replica stops as a leader that lost its lease."""
    server.add_all(gang_objects(count=1, gpu=1, nodes=1))
    r = _leader(runner_factory, period=0.05)
    el = r.elector
    el.stopping.set()  # the renewal thread is frozen with the rest of the process
    el.join(2)
    el.clock = lambda: time.monotonic() + 20.0
    assert el.leading.is_set() and not r.is_leader()
    t = threading.Thread(target=r.run, daemon=True)
    t.start()
    time.sleep(0.3)
    r.stopping.set()
    t.join(5)
    assert r.cycle_no == 0 and not server.bindings and not _writes(server)


def test_leadership_lost_mid_apply_stops_the_writes(server: FakeAPI, runner_factory) -> None:
    """The lease runs out between the evictions and the binds (the renewals fail meanwhile): no bind,
    no status write, no Event goes out after that point, and the runner stops."""
    server.add_all(preempt_objects())
    r = _leader(runner_factory, config=PREEMPT)

    def lease_expires() -> None:
        server.fail("PUT", r"/leases/", 500, count=1000)
        server.fail("GET", r"/leases/", 500, count=1000)
        r.elector.clock = lambda: time.monotonic() + 5.0

    r.applier.after_evictions = lease_expires
    mark = len(server.requests)
    assert r.cycle(NOW) is None
    writes = _writes(server, mark)
    assert writes and all(p.endswith("/eviction") for _m, p in writes), writes
    assert not server.bindings and r.lost and r.stopping.is_set()
    assert r.log.matching("leadership lost: apply phase stopped")


def test_a_bind_that_landed_but_answered_500_is_read_back(server: FakeAPI, runner_factory) -> None:
    """The bind is carried out, the answer is a 500, and the watch lags: the pod is read back at once and
    its node stays taken, so the next cycle does not give the node to another pod."""
    server.add_all(
        expand(
            {
                "nodes": [{"name": "n1"}],
                "jobs": [{"name": "a", "pods": [{"count": 1, "gpu": 8}]}],
            }
        )
    )
    server.fail("POST", r"/pods/a-0/binding$", 500, after=True)
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    deliver = r.cache.event
    r.cache.event = lambda *a: None  # the watch lags: nothing it shows from here on
    res = r.cycle(NOW)
    assert res.report.get("binds", "done") == ["default/a-0"]
    assert ("GET", "/api/v1/namespaces/default/pods/a-0") in server.requests
    server.add_all(expand({"jobs": [{"name": "b", "pods": [{"count": 1, "gpu": 8}]}]}))
    deliver(r.cache.resources[1], "ADDED", server.get("Pod", "b-0", "default"))  # only the new pod arrives
    r.cycle(NOW + 1)
    assert Counter(n for _p, n in server.bindings) == {"n1": 1}


def test_an_ambiguous_bind_whose_read_back_fails_is_resolved_before_the_next_cycle(
    server: FakeAPI, runner_factory
) -> None:
    server.add_all(gang_objects(count=1, gpu=8, nodes=1))
    server.fail("POST", r"/pods/train-0/binding$", 504)  # not carried out
    server.fail("GET", r"/pods/train-0$", 503, count=2)  # and the read back fails, twice
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert res.report.get("binds", "uncertain") == ["default/train-0"]
    assert r.applier.uncertain == {"default/train-0": ("bind", "n1")}
    r.cycle(NOW + 1)  # read back first: not bound, so forgotten and decided again in that cycle
    assert not r.applier.uncertain
    assert node_of(server, "train-0") == "n1" and len(server.bindings) == 1


def test_a_partly_bound_gang_is_released_in_the_next_cycle(server: FakeAPI, runner_factory) -> None:
    """One bind of a 4-pod gang fails; another job takes the freed node; the gang cannot complete: the
    next cycle evicts its bound pods, never leaves them holding three nodes idle."""
    server.add_all(gang_objects())
    server.fail("POST", r"/pods/train-2/binding$", 409)  # a definite refusal
    server.fail("POST", r"/pods/train-2/binding$", 409)
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert set(res.report.partial_gangs) == {"default/train"} and len(server.bindings) == 3
    free = next(n for n in ("n1", "n2", "n3", "n4") if n not in {x for _p, x in server.bindings})
    server.add_all(expand({"jobs": [{"name": "other", "pods": [{"count": 1, "gpu": 8, "nodes": [free]}]}]}))
    assert wait_for(lambda: r.cache.find("Pod", "default/other-0") is not None)
    assert r.cycle(NOW + 1).report.released == ["default/train"]
    evicted = sorted(server.evictions)
    assert evicted == sorted(p for p, _n in server.bindings if p.startswith("default/train"))
    assert any(e["reason"] == "GangReleased" for e in server.objects("Event"))


def test_a_429_without_a_budget_cause_is_retried_not_a_refusal(server: FakeAPI, runner_factory) -> None:
    server.add_all(preempt_objects())
    server.fail("POST", r"/pods/low-a-0/eviction$", 429, count=2)  # rate limiting, no DisruptionBudget
    r = runner_factory(PREEMPT, now=NOW)
    r.applier.retry_backoff = (0.01, 0.02)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert not res.report.get("evictions", "refused")
    assert sorted(res.report.get("evictions", "done")) == ["default/low-a-0", "default/low-a-1"]
    assert not r.applier.refused and not r.log.matching("eviction refused by a disruption budget")


def test_a_budget_refusal_names_its_cause(server: FakeAPI, runner_factory) -> None:
    server.add_all(preempt_objects(pdb=True))
    r = runner_factory(PREEMPT, now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert sorted(res.report.get("evictions", "refused")) == ["default/low-a-0", "default/low-a-1"]
    assert len(server.evictions) == 2  # refused at once, not retried


def test_podgroup_phase_conditions_and_annotations_are_one_patch(server: FakeAPI, runner_factory) -> None:
    """No second write with a stale resourceVersion: one PATCH per PodGroup, no 409 with no other
    writer (Volcano's PodGroup has no status subresource, as its CRD declares)."""
    objs = gang_objects(count=1, nodes=1)
    for o in objs:
        if o["kind"] == "PodGroup":
            o["metadata"].setdefault("annotations", {})["corral.io/target-job"] = "true"
    server.add_all(objs)
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    patches = [p for m, p in server.requests if m == "PATCH" and "/podgroups/" in p]
    assert patches == ["/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups/train"]
    assert res.report.get("podgroups", "done") == ["default/train"]
    assert server.get("PodGroup", "train", "default")["status"]["phase"] == "Running"


def test_a_long_podgroup_name_gets_a_valid_lock_label(server: FakeAPI, runner_factory) -> None:
    """Volcano's job controller names PodGroups ``<job>-<uid>``: the lock label stays a valid label value
    (the test server refuses invalid ones with 422, as a real one does) and the annotation holds the
    full name; the label reads back to the job."""
    from corral.framework.decisions import Decisions, NodeLock
    from corral.framework.reservation import lock_owners

    job = "team-research-vision/" + "resnet-distributed-training-" + "1f0e8d6c-2b4a-4c8e-9d7f-0123456789ab"
    assert len(job) > 63
    server.add_all(gang_objects(count=1, nodes=1))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    cluster, _ = r.cache.build()
    rep = r.applier.apply(Decisions(node_locks=[NodeLock("n1", job, 1)]), cluster, NOW)
    assert rep.get("node_locks", "done") == ["n1"]
    meta = server.get("Node", "n1")["metadata"]
    value = meta["labels"][LOCK_LABEL]
    assert len(value) <= 63 and value == lock_label_value(job) and meta["annotations"][LOCK_LABEL] == job
    assert wait_for(lambda: r.cache.find("Node", "n1")[1]["metadata"]["labels"].get(LOCK_LABEL))
    cluster, _ = r.cache.build()
    cluster.nodes.locked_for[:] = [None] * len(cluster.nodes.locked_for)
    assert list(lock_owners(cluster.nodes, [job, "default/train"])) == [job]


def test_the_record_of_emitted_events_is_pruned(server: FakeAPI, runner_factory) -> None:
    server.add_all(gang_objects(count=5))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    rec = r.applier.recorder
    assert len(rec.emitted) == 6
    rec.event_repeat = 0.0  # everything emitted is older than the window
    rec.prune()  # the cycle pruned a moment ago: the records are looked at every PRUNE_EVERY seconds
    assert len(rec.emitted) == 6
    rec.pruned_at -= PRUNE_EVERY
    rec.prune()
    assert not rec.emitted


def test_a_gang_partly_bound_before_a_restart_is_released(server: FakeAPI, runner_factory) -> None:
    """A replica died after binding one pod of a 2-pod gang; the capacity for the other is taken. The
    replica that takes over never saw the bind fail, yet its first cycle releases the gang."""
    server.add_all(
        expand(
            {
                "nodes": [{"name": "n1"}, {"name": "n2"}],
                "jobs": [
                    {"name": "gang", "pods": [{"count": 2, "gpu": 8}]},
                    {"name": "other", "phase": "Running", "pods": [{"count": 1, "gpu": 8, "nodes": ["n2"]}]},
                ],
            }
        )
    )
    server.update("Pod", "gang-0", "default", {"spec": {"nodeName": "n1"}})  # bound, not started
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    assert r.cycle(NOW).report.released == ["default/gang"] and server.evictions == ["default/gang-0"]


def test_an_ambiguous_write_read_back_unapplied_is_sent_once_more(server: FakeAPI, runner_factory) -> None:
    """A 503 before the bind (and the eviction) was carried out: the read back shows it did not land, so
    the same cycle sends it again, and the gang is not left partly bound for a cycle."""
    server.add_all(gang_objects(count=2, nodes=2))
    server.fail("POST", r"/pods/train-1/binding$", 503)
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert not res.report.partial_gangs and sorted(res.report.get("binds", "done")) == [
        "default/train-0",
        "default/train-1",
    ]
    posts = [p for m, p in server.requests if m == "POST" and p.endswith("train-1/binding")]
    assert len(posts) == 2 and len(server.bindings) == 2


def test_a_standby_runs_its_first_cycle_as_soon_as_it_leads(server: FakeAPI, runner_factory) -> None:
    """The leader steps down (its lease released); the standby's first cycle starts when it takes the
    lease over, not a period later (here 60 s)."""
    server.add_all(gang_objects(count=1, gpu=1, nodes=1))
    a = _leader(runner_factory)
    b = runner_factory(leader_elect=True, identity="b", lease_namespace="default", period=60.0)
    b.start()
    assert b.cache.wait_synced(5)
    t = threading.Thread(target=b.run, daemon=True)
    t.start()
    time.sleep(0.3)  # b waits as a standby
    assert b.cycle_no == 0
    a.stop()  # releases the lease
    assert wait_for(lambda: b.cycle_no >= 1, timeout=20)
    b.stopping.set()
    t.join(5)


def test_no_bind_starts_when_the_lease_is_about_to_run_out(server: FakeAPI, runner_factory) -> None:
    """Still leader, but for less than the renewal interval: the gang's binds are put off (to this or the
    next leader's next cycle) rather than risk the lease running out between two of them."""
    server.add_all(gang_objects(count=2, nodes=2))
    r = _leader(runner_factory)
    el = r.elector
    el.stopping.set()
    el.join(2)
    renewed = el.last_renew
    el.clock = lambda: renewed + 0.55  # renew deadline 0.6 s, renewal interval 0.1 s
    assert r.is_leader() and el.valid_for() < 0.1
    res = r.cycle(NOW)
    assert res is not None and not server.bindings
    assert sorted(res.report.get("binds", "skipped")) == ["default/train-0", "default/train-1"]
    assert r.log.matching("binds put off: the lease runs out before they could all go out")
