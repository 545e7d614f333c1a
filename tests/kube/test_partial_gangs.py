"""A gang left below its minimum with pods on nodes is completed or released in the next cycle, on the
wire: a leader killed between two binds of a gang (the new leader repairs it in its first cycle), binds
that fail twice, and a cache that lags behind the binds of a replica that died."""

from __future__ import annotations

from corral.framework.decisions import Decisions
from corral.kube.api import NotLeader
from tests.kube.fakeapi import FakeAPI
from tests.kube.test_live import NOW, wait_for
from tests.scenarios.expand import expand


def _cluster(server: FakeAPI) -> None:
    server.add_all(
        expand(
            {
                "nodes": [{"name": "n1"}, {"name": "n2"}],
                "jobs": [{"name": "train", "pods": [{"count": 2, "gpu": 8}]}],
            }
        )
    )


# Leases longer than the suite's fast ones: a loaded test machine can stall a renewing thread past 0.6 s,
# and a leader that misses its renew deadline stops writing mid-test (as it must).
LEASE = (3.0, 2.0, 0.1)


def _killed_after_one_bind(server: FakeAPI, runner_factory):
    """Replica ``a`` leads, binds one pod of the gang ``train`` and is killed before the second bind
    (no write goes out from then on, its lease is not released); replica ``b`` stands by."""
    a = runner_factory(leader_elect=True, identity="a", lease_namespace="default", now=NOW, lease=LEASE)
    a.start()
    assert a.cache.wait_synced(5) and wait_for(a.is_leader)
    b = runner_factory(leader_elect=True, identity="b", lease_namespace="default", now=NOW, lease=LEASE)
    b.start()
    assert b.cache.wait_synced(5) and not b.is_leader()
    guarded = a.applier.api
    post = guarded.post
    binds = []

    def killed_mid_gang(path: str, body: dict) -> dict:
        if path.endswith("/binding"):
            binds.append(path)
            if len(binds) > 1:
                a.elector.stopping.set()  # SIGKILL: no renewal, no release
                guarded.may_write = lambda: False
                raise NotLeader(path)
        return post(path, body)

    a.applier.workers = 1
    a.applier.pool._max_workers = 1  # noqa: SLF001 - the gang's binds one after the other
    guarded.post = killed_mid_gang
    assert a.cycle(NOW) is None  # stopped mid-apply
    assert len(server.bindings) == 1
    assert wait_for(b.is_leader, timeout=10)
    assert wait_for(lambda: b.cache.find("Pod", server.bindings[0][0])[1]["spec"].get("nodeName"))
    return b


def test_a_new_leader_releases_a_gang_the_dead_leader_left_half_bound(
    server: FakeAPI, runner_factory
) -> None:
    """The capacity the dead leader meant for the gang's second pod goes to a job of higher priority in
    the new leader's first cycle: the gang cannot complete, so that same cycle evicts its bound pod."""
    _cluster(server)
    b = _killed_after_one_bind(server, runner_factory)
    server.add_all(expand({"jobs": [{"name": "urgent", "priority": 100, "pods": [{"count": 1, "gpu": 8}]}]}))
    assert wait_for(lambda: b.cache.find("Pod", "default/urgent-0") and b.cache.find("PriorityClass", "p100"))
    res = b.cycle(NOW + 1)
    assert res.report.released == ["default/train"]
    assert server.evictions == [server.bindings[0][0]]
    assert dict(server.bindings)["default/urgent-0"]
    assert any(e["reason"] == "GangReleased" for e in server.objects("Event"))


def test_a_new_leader_completes_a_gang_the_dead_leader_left_half_bound(
    server: FakeAPI, runner_factory
) -> None:
    _cluster(server)
    b = _killed_after_one_bind(server, runner_factory)
    res = b.cycle(NOW + 1)
    assert not res.report.released and not server.evictions
    assert sorted(p for p, _n in server.bindings) == ["default/train-0", "default/train-1"]


def test_a_gang_whose_binds_fail_again_is_released_in_that_cycle(server: FakeAPI, runner_factory) -> None:
    """Cycle 1 binds one pod of two (the other's bind is refused twice: 409, re-read, retried, 409); cycle
    2 decides the rest again and its bind is refused again: the gang is released in cycle 2, not left
    holding a node while the next cycles try."""
    _cluster(server)
    server.fail("POST", r"/pods/train-1/binding$", 409, count=4)
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    assert set(r.cycle(NOW).report.partial_gangs) == {"default/train"}
    res = r.cycle(NOW + 1)
    assert res.report.released == ["default/train"]
    assert server.evictions == ["default/train-0"]


def test_a_gang_bound_in_full_on_the_server_is_not_released_on_a_lagging_cache(
    server: FakeAPI, runner_factory
) -> None:
    """The cache shows one pod of two bound (the other bind, by a replica that died, has not arrived) and
    the cycle does not complete the gang: before releasing it, its pods are read back, and a gang at its
    minimum on the server is left alone."""
    _cluster(server)
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    server.update("Pod", "train-0", "default", {"spec": {"nodeName": "n1"}})
    assert wait_for(lambda: r.cache.find("Pod", "default/train-0")[1]["spec"].get("nodeName"))
    cluster, _ = r.cache.build()  # the view of a cycle whose watch lags
    server.update("Pod", "train-1", "default", {"spec": {"nodeName": "n2"}})
    report = r.applier.apply(Decisions(), cluster, NOW)
    assert not report.released and not server.evictions
    server.update("Pod", "train-1", "default", {"spec": {"nodeName": None}})  # not bound after all
    report = r.applier.apply(Decisions(), cluster, NOW)
    assert report.released == ["default/train"] and server.evictions == ["default/train-0"]
