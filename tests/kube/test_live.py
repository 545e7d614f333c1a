"""``corral run`` writing to an in-process API server through the real client: binds, evictions (and PDB
refusals), status patches, node labels, Events, faults (500 / 429 / 409, dropped watches, 410 Gone), a
scheduler killed between the evictions and the binds of a cycle, leader election, bad objects, dumps,
/metrics and /healthz."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections import Counter

import pytest

from corral.cli import schedule_snapshot
from corral.framework.config import parse_config
from corral.framework.decisions import Decisions, NodeLock
from corral.kube.apply import LOCK_LABEL
from corral.kube.metrics import serve
from corral.model.clock import parse_time
from corral.registry import REGISTRY
from tests.kube.fakeapi import FakeAPI
from tests.scenarios.expand import T0, expand

NOW = parse_time(T0)
PREEMPT = parse_config(
    {
        "actions": "enqueue, allocate, preempt",
        "tiers": [
            {
                "plugins": [
                    {"name": "priority"},
                    {"name": "gang", "enablePreemptable": False, "enableReclaimable": False},
                    {"name": "conformance"},
                ]
            },
            {
                "plugins": [
                    {"name": "predicates"},
                    {"name": "proportion"},
                    {"name": "nodeorder"},
                    {"name": "binpack"},
                ]
            },
        ],
    },
    REGISTRY,
    "test",
)


def preempt_objects(pdb: bool = False) -> list[dict]:
    case = {
        "nodes": [{"name": "n1"}, {"name": "n2"}, {"name": "n3", "gpu": 2}],
        "jobs": [
            {
                "name": "low-a",
                "priority": 10,
                "pods": [{"count": 2, "gpu": 4, "nodes": ["n1", "n1"], "labels": {"app": "low-a"}}],
            },
            {"name": "low-b", "priority": 20, "pods": [{"count": 2, "gpu": 4, "nodes": ["n2", "n2"]}]},
            {"name": "high", "priority": 100, "pods": [{"count": 1, "gpu": 8}]},
            {"name": "small", "priority": 5, "pods": [{"count": 1, "gpu": 1}]},
        ],
    }
    if pdb:
        case["pdbs"] = [{"name": "keep-a", "selector": {"app": "low-a"}, "minAvailable": 2}]
    return expand(case)


def gang_objects(count: int = 4, gpu: int = 8, nodes: int = 4) -> list[dict]:
    return expand(
        {
            "nodes": [{"name": f"n{i}"} for i in range(1, nodes + 1)],
            "jobs": [{"name": "train", "pods": [{"count": count, "gpu": gpu}]}],
        }
    )


def wait_for(cond, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return False


def node_of(server: FakeAPI, pod: str) -> str | None:
    obj = server.get("Pod", pod, "default")
    return None if obj is None else obj["spec"].get("nodeName")


def cycle(runner, now: float = NOW):
    runner.cycle_no += 0
    return runner.cycle(now)


def test_gang_binds_through_the_binding_subresource(server: FakeAPI, runner_factory) -> None:
    server.add_all(gang_objects())
    r = runner_factory(cycles=1, now=NOW, period=0.0)
    r.start()
    r.run()
    assert sorted(p for p, _ in server.bindings) == [f"default/train-{i}" for i in range(4)]
    assert {node_of(server, f"train-{i}") for i in range(4)} == {"n1", "n2", "n3", "n4"}
    pg = server.get("PodGroup", "train", "default")
    assert pg["status"]["phase"] == "Running"  # the phase patch went to /status
    # the next cycle, before or after the watch shows the binds, never binds again
    r.cycle(NOW + 1)
    assert wait_for(lambda: all(node_of(server, f"train-{i}") for i in range(4)))
    r.cycle(NOW + 2)
    assert len(server.bindings) == 4


def test_unschedulable_gang_gets_events_conditions_once(server: FakeAPI, runner_factory) -> None:
    """kube-scheduler's and Volcano's shapes: FailedScheduling Warning Events on the pods, Unschedulable on
    the PodGroup, PodScheduled=False/Unschedulable on each pod (what autoscalers read), Volcano's gang
    condition on the PodGroup; nothing written again while the reason holds."""
    server.add_all(gang_objects(count=5))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert res is not None and res.decisions.unschedulable and not server.bindings
    reason = res.decisions.unschedulable[0].reason
    events = server.objects("Event")
    kinds = Counter((e["involvedObject"]["kind"], e["reason"], e["type"]) for e in events)
    assert kinds == {("PodGroup", "Unschedulable", "Warning"): 1, ("Pod", "FailedScheduling", "Warning"): 5}
    assert all(e["message"] == reason for e in events)
    for i in range(5):
        conds = server.get("Pod", f"train-{i}", "default")["status"]["conditions"]
        assert [
            (c["type"], c["status"], c["reason"], c["message"]) for c in conds if c["type"] == "PodScheduled"
        ] == [("PodScheduled", "False", "Unschedulable", reason)]
    pg = server.get("PodGroup", "train", "default")["status"]
    [cond] = pg["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Unschedulable", "True", "NotEnoughResources")
    assert cond["message"] == f"5/5 tasks in gang unschedulable: {reason}" and cond["transitionID"]
    writes = len([m for m, _ in server.requests if m != "GET"])

    def seen(kind: str, key: str) -> bool:
        found = r.cache.find(kind, key)
        return found is not None and bool((found[1].get("status") or {}).get("conditions"))

    # the watch has shown every status the first cycle wrote (a loaded machine delivers them late)
    assert wait_for(
        lambda: seen("PodGroup", "default/train") and all(seen("Pod", f"default/train-{i}") for i in range(5))
    )
    r.cycle(NOW + 1)
    assert len(server.objects("Event")) == 6  # the same reason is not repeated at once
    assert len([m for m, _ in server.requests if m != "GET"]) == writes  # nor the conditions


def test_bind_clears_the_condition_and_records_scheduled(server: FakeAPI, runner_factory) -> None:
    server.add_all(gang_objects(count=5, nodes=4))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    assert server.get("Pod", "train-0", "default")["status"]["conditions"][0]["status"] == "False"
    server.add_all(expand({"nodes": [{"name": "n5"}]}))
    assert wait_for(lambda: r.cache.find("Node", "n5") is not None)
    r.cycle(NOW + 1)
    assert len(server.bindings) == 5
    for i in range(5):
        conds = server.get("Pod", f"train-{i}", "default")["status"]["conditions"]
        assert [c["status"] for c in conds if c["type"] == "PodScheduled"] == ["True"]
    scheduled = [e for e in server.objects("Event") if e["reason"] == "Scheduled"]
    assert len(scheduled) == 5 and all(e["type"] == "Normal" for e in scheduled)
    assert {e["message"] for e in scheduled} == {
        f"Successfully assigned default/train-{i} to {node_of(server, f'train-{i}')}" for i in range(5)
    }
    conds = {c["type"]: c for c in server.get("PodGroup", "train", "default")["status"]["conditions"]}
    assert conds["Scheduled"]["reason"] == "tasks in gang are ready to be scheduled"
    assert conds["Unschedulable"]["status"] == "True"  # Volcano replaces by type and keeps the others


def _victims_leave_then_preemptor_binds(server: FakeAPI, runner) -> None:
    """The evicted victims finish terminating; the next cycle binds the preemptor where it was nominated,
    and no pod was ever bound twice."""
    server.finish_deletions()
    assert wait_for(lambda: runner.cache.find("Pod", "default/low-a-0") is None)
    runner.cycle(NOW + 2)
    assert node_of(server, "high-0") == "n1"
    assert Counter(p for p, _ in server.bindings) == {"default/small-0": 1, "default/high-0": 1}


def test_preempt_evicts_then_binds_after_victims_leave(server: FakeAPI, runner_factory) -> None:
    server.add_all(preempt_objects())
    r = runner_factory(PREEMPT, now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    first = r.cycle(NOW)
    assert sorted(e.pod for e in first.decisions.evictions) == ["default/low-a-0", "default/low-a-1"]
    assert sorted(server.evictions) == ["default/low-a-0", "default/low-a-1"]
    assert server.get("Pod", "high-0", "default")["status"]["nominatedNodeName"] == "n1"
    assert node_of(server, "small-0") == "n3"
    preempted = sorted(
        (e["involvedObject"]["name"], e["type"], e["message"])
        for e in server.objects("Event")
        if e["reason"] == "Preempted"
    )
    assert preempted == [
        (f"low-a-{i}", "Normal", "Preempted by default/high on node n1 (corral action preempt)")
        for i in range(2)
    ]
    assert wait_for(
        lambda: all(
            server.get("Pod", f"low-a-{i}", "default")["metadata"].get("deletionTimestamp") for i in range(2)
        )
    )
    r.cycle(NOW + 1)  # victims still releasing: not evicted again
    assert sorted(server.evictions) == ["default/low-a-0", "default/low-a-1"]
    _victims_leave_then_preemptor_binds(server, r)


def test_pdb_refusal_is_reported_not_retried(server: FakeAPI, runner_factory) -> None:
    server.add_all(preempt_objects(pdb=True))
    r = runner_factory(PREEMPT, now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert sorted(res.report.get("evictions", "refused")) == ["default/low-a-0", "default/low-a-1"]
    assert r.log.matching("eviction refused by a disruption budget")
    assert any(e["reason"] == "EvictionRefused" for e in server.objects("Event"))
    asked = len(server.evictions)
    for k in range(1, 4):
        r.cycle(NOW + k)
    assert len(server.evictions) == asked  # no loop against the budget
    assert node_of(server, "small-0") == "n3"  # the other decisions were applied


def test_partial_gang_bind_is_reported_and_finished_next_cycle(server: FakeAPI, runner_factory) -> None:
    server.add_all(gang_objects())
    server.fail("POST", r"/pods/train-2/binding$", 500, count=2)  # read back, not bound: tried once more
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert res.report.partial_gangs == {"default/train": ["default/train-2"]}
    assert r.log.matching("gang partly bound: the rest is decided again next cycle")
    assert any(e["reason"] == "PartiallyBound" for e in server.objects("Event"))
    assert len(server.bindings) == 3
    r.cycle(NOW + 1)
    assert Counter(p for p, _ in server.bindings) == {f"default/train-{i}": 1 for i in range(4)}


def test_bind_conflict_rereads_and_counts_a_landed_bind(server: FakeAPI, runner_factory) -> None:
    server.add_all(gang_objects(count=1, nodes=1))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    server.update("Pod", "train-0", "default", {"spec": {"nodeName": "n1"}})  # someone bound it meanwhile
    with r.cache.lock:  # ... and the watch has not shown it yet
        stale = r.cache.stores[next(t for t in r.cache.resources if t.kind == "Pod")]["default/train-0"]
        stale.raw["spec"].pop("nodeName", None)
    outcome = r.applier._bind("default/train-0", "n1")
    assert outcome[0] == "done"
    assert ("GET", "/api/v1/namespaces/default/pods/train-0") in server.requests


def test_podgroup_status_conflict_is_retried_once(server: FakeAPI, runner_factory) -> None:
    server.add_all(gang_objects(count=1, nodes=1))
    server.fail("PATCH", r"/podgroups/train$", 409)
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert res.report.get("podgroups", "done") == ["default/train"]
    patches = [p for m, p in server.requests if m == "PATCH" and "/podgroups/train" in p]
    assert len(patches) == 2
    assert server.get("PodGroup", "train", "default")["status"]["phase"] == "Running"


def test_api_errors_and_dropped_watches_do_not_stop_the_cache(server: FakeAPI, runner_factory) -> None:
    server.fail("GET", r"^/api/v1/nodes\?limit", 500, count=2)
    server.fail("GET", r"^/api/v1/pods\?", 429, count=1)
    server.add_all(gang_objects(count=1, gpu=1, nodes=1))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    assert len(r.cache.stores[r.cache.resources[0]]) == 1
    server.drop_watches()
    server.add_all(expand({"jobs": [{"name": "late", "pods": [{"count": 1, "gpu": 1}]}]}))
    assert wait_for(lambda: r.cache.find("Pod", "default/late-0") is not None)
    server.fail("GET", r"^/api/v1/pods\?.*watch=true", 500, count=2)  # the watch cannot reconnect ...
    server.drop_watches()
    server.add_all(expand({"jobs": [{"name": "later", "pods": [{"count": 1, "gpu": 1}]}]}))
    server.compact()  # ... until its version is too old: 410, relist
    assert wait_for(lambda: r.cache.find("Pod", "default/later-0") is not None)
    assert r.log.matching("watch too old (410 Gone): relisting")
    r.cycle(NOW)
    assert {p for p, _ in server.bindings} == {"default/train-0", "default/late-0", "default/later-0"}
    errors = r.metrics.render().decode()
    for line in (
        'corral_api_errors_total{code="500",resource="nodes",verb="list"} 2.0',
        'corral_api_errors_total{code="429",resource="pods",verb="list"} 1.0',
    ):
        assert line in errors, line


class Killed(BaseException):
    pass


def test_killed_between_evictions_and_binds_resumes_without_repeats(server: FakeAPI, runner_factory) -> None:
    server.add_all(preempt_objects())
    first = runner_factory(PREEMPT, now=NOW)
    first.applier.after_evictions = lambda: (_ for _ in ()).throw(Killed())
    first.start()
    assert first.cache.wait_synced(5)
    with pytest.raises(Killed):
        first.cycle(NOW)
    first.cache.stop()  # the process is gone: no clean shutdown
    assert sorted(server.evictions) == ["default/low-a-0", "default/low-a-1"] and not server.bindings
    second = runner_factory(PREEMPT, now=NOW)
    second.start()
    assert second.cache.wait_synced(5)
    second.cycle(NOW + 1)
    assert sorted(server.evictions) == ["default/low-a-0", "default/low-a-1"]  # recognised, not repeated
    assert node_of(server, "small-0") == "n3"  # the binds of the lost cycle are decided again
    _victims_leave_then_preemptor_binds(server, second)


def test_leader_election_one_replica_schedules(server: FakeAPI, runner_factory) -> None:
    server.add_all(gang_objects(count=1, gpu=1, nodes=1))
    # a lease long enough that a loaded test machine never starves the renewals (a stops cleanly and
    # releases it, so b need not wait for it to run out)
    lease = (5.0, 3.0, 0.1)
    a = runner_factory(leader_elect=True, identity="a", period=0.05, lease_namespace="default", lease=lease)
    b = runner_factory(leader_elect=True, identity="b", period=0.05, lease_namespace="default", lease=lease)
    a.start()
    assert wait_for(a.is_leader)
    b.start()
    threads = [threading.Thread(target=x.run, daemon=True) for x in (a, b)]
    for t in threads:
        t.start()
    assert wait_for(lambda: node_of(server, "train-0") is not None)
    time.sleep(0.3)
    assert a.is_leader() and not b.is_leader() and a.cycle_no > 0 and b.cycle_no == 0
    assert b.health() == (True, "ok (standby)")
    a.stop()  # releases the lease
    assert wait_for(b.is_leader, 5)
    server.add_all(expand({"jobs": [{"name": "next", "pods": [{"count": 1, "gpu": 1}]}]}))
    assert wait_for(lambda: node_of(server, "next-0") == "n1")
    assert Counter(p for p, _ in server.bindings) == {"default/train-0": 1, "default/next-0": 1}
    lease = server.get("Lease", "corral", "default")
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] >= 1


def test_bad_objects_are_logged_once_and_left_out(server: FakeAPI, runner_factory) -> None:
    objs = gang_objects(count=1, nodes=1)
    bad_pod = expand({"jobs": [{"name": "bad", "bare": True, "pods": [{"count": 1, "cpu": "lots"}]}]})
    orphan_queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q1"},
        "spec": {"parent": "nowhere"},
    }
    server.add_all(objs + bad_pod + [orphan_queue])
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    for k in range(3):
        r.cycle(NOW + k)
    assert node_of(server, "train-0") == "n1"
    read = r.log.matching("object left out: the model cannot read it")
    used = r.log.matching("object left out: the model cannot use it")
    assert [(x["object"], x["field"]) for x in read] == [
        ("default/bad-0", "spec.containers[0].resources.requests.cpu")
    ]
    assert [(x["object"], x["field"]) for x in used] == [("Queue q1", "spec.parent")]
    assert r.metrics.bad._value.get() == 1


def test_missing_crds_are_skipped_with_one_line(runner_factory) -> None:
    srv = FakeAPI(served_groups=("scheduling.k8s.io", "policy", "coordination.k8s.io")).start()
    try:
        from tests.kube.conftest import make_runner

        r = make_runner(srv, now=NOW)
        srv.add_all([o for o in gang_objects(count=1, nodes=1) if o["kind"] in ("Node", "Pod")])
        r.start()
        assert r.cache.wait_synced(5)
        skipped = sorted(x["resource"] for x in r.log.matching("resource not served by the cluster: skipped"))
        assert skipped == [
            "deviceclasses.resource.k8s.io",  # a cluster without DRA (before 1.34): no devices, no claims
            "hypernodes.topology.volcano.sh",
            "podgroups.scheduling.run.ai",
            "podgroups.scheduling.volcano.sh",
            "podgroups.v1alpha2.scheduling.k8s.io",  # Kubernetes 1.36's: the fake serves 1.37's v1beta1
            "queues.scheduling.run.ai",
            "queues.scheduling.volcano.sh",
            "resourceclaims.resource.k8s.io",
            "resourceclaimtemplates.resource.k8s.io",
            "resourceslices.resource.k8s.io",
            "topologies.kai.scheduler",
        ]
        r.cycle(NOW)
        assert r.cycle_no == 1
        r.stop()
    finally:
        srv.stop()


def test_node_locks_set_and_remove_the_label(server: FakeAPI, runner_factory) -> None:
    server.add_all(gang_objects(count=1, nodes=2))
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    cluster, _ = r.cache.build()
    r.applier.apply(Decisions(node_locks=[NodeLock("n1", "default/train", 1)]), cluster, NOW)
    assert server.get("Node", "n1")["metadata"]["labels"][LOCK_LABEL] == "default.train"
    r.applier.apply(Decisions(node_locks=[NodeLock("n1", "", 2)]), cluster, NOW)
    assert wait_for(lambda: LOCK_LABEL not in server.get("Node", "n1")["metadata"]["labels"])


def test_dump_reads_back_with_the_same_decisions(server: FakeAPI, runner_factory, tmp_path) -> None:
    server.add_all(preempt_objects())
    r = runner_factory(PREEMPT, dry_run=True, cycles=1, now=NOW, dump=tmp_path / "dump")
    r.start()
    live = r.run()
    now = parse_time((tmp_path / "dump" / "NOW").read_text().strip())
    again = schedule_snapshot([tmp_path / "dump"], PREEMPT, now)
    assert again.to_json(1) == live.to_json(1) and live.evictions
    assert not server.bindings and not server.evictions  # dry run writes nothing
    assert all(m == "GET" for m, _ in server.requests)


def test_metrics_and_healthz(server: FakeAPI, runner_factory) -> None:
    server.add_all(gang_objects(count=1, nodes=1))
    r = runner_factory(now=NOW)
    http = serve(r.metrics, 0, r.health, host="127.0.0.1")
    try:
        port = http.server_address[1]
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)  # not synced yet
        r.start()
        assert r.cache.wait_synced(5)
        r.cycle(NOW)
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).read() == b"ok\n"
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        for name in (
            "corral_cycle_seconds_count 1.0",
            'corral_decisions_total{kind="binds"} 1.0',
            "corral_pending_pods 1.0",
            'corral_applied_total{kind="binds",outcome="done"} 1.0',
            'corral_cache_objects{resource="pods"} 1.0',
        ):
            assert name in text, name
    finally:
        http.shutdown()


def test_a_job_that_fits_nowhere_is_remembered_across_cycles(
    server: FakeAPI, runner_factory, monkeypatch
) -> None:
    """Each cycle's cluster is a new object; the runner hands every one its skip memory, so a job whose
    pod fit nowhere is known to fail in the next cycle (no placement search), with the same reason."""
    from corral.actions.common import skipping

    server.add_all(
        expand(
            {
                "nodes": [{"name": "n1"}, {"name": "n2"}],
                "jobs": [{"name": "big", "pods": [{"count": 1, "gpu": 16}]}],
            }
        )
    )
    blocked: list[bool] = []
    real = skipping.Skipper.still_blocked

    def recording(self, job):
        got = real(self, job)
        blocked.append(got)
        return got

    monkeypatch.setattr(skipping.Skipper, "still_blocked", recording)
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    first = r.cycle(NOW)
    assert first is not None and "default/big" in r.history.skip_memory.blocked
    assert not any(blocked)  # nothing known yet in the first cycle
    second = r.cycle(NOW + 1)
    assert second is not None and any(blocked)  # known to fail: its placement is not searched again
    assert [u.reason for u in second.decisions.unschedulable] == [
        u.reason for u in first.decisions.unschedulable
    ]
    assert second.decisions.unschedulable and not server.bindings


def test_kai_podgroups_get_kais_scheduling_condition(server: FakeAPI, runner_factory) -> None:
    """On a KAI PodGroup, KAI's own shape: status.schedulingConditions UnschedulableOnNodePool (through the
    status subresource its CRD declares), not Volcano's conditions."""
    server.add_all(
        expand(
            {
                "nodes": [{"name": "n1"}],
                "queues": [{"name": "q", "kai": True}],
                "jobs": [{"name": "big", "kai": True, "queue": "q", "pods": [{"count": 2, "gpu": 8}]}],
            }
        )
    )
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert res.decisions.unschedulable
    status = server.get("PodGroup", "big", "default")["status"]
    [cond] = status["schedulingConditions"]
    assert (cond["type"], cond["nodePool"], cond["reason"], cond["status"], cond["transitionID"]) == (
        "UnschedulableOnNodePool",
        "default",
        "Unschedulable",
        "True",
        "0",
    )
    assert "conditions" not in status
    assert any(m == "PATCH" and p.endswith("/podgroups/big/status") for m, p in server.requests)
