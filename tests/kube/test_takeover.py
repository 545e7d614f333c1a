"""A takeover that is quick to schedule (issue 31, recovery after a kill within two periods): a replica
bids for the lease only once its cache is listed (kube-scheduler waits for its informers' sync before
``leaderElector.Run``), and a standby keeps its model up to date, so its first cycle as leader builds only
what changed since."""

from __future__ import annotations

import threading
import time

from tests.kube.fakeapi import FakeAPI
from tests.kube.test_live import gang_objects, wait_for

LEASE = (5.0, 3.0, 0.05)


def _hold_lease(server: FakeAPI, holder: str, duration: int = 60) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    server.add(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "corral", "namespace": "default"},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": duration,
                "renewTime": now,
                "acquireTime": now,
            },
        }
    )


def test_no_bid_for_the_lease_before_the_cache_is_listed(server: FakeAPI, runner_factory) -> None:
    server.add_all(gang_objects(count=1, nodes=1))
    server.fail("GET", r"/api/v1/pods\?", 503, count=1000)  # the pods cannot be listed
    r = runner_factory(leader_elect=True, identity="a", lease_namespace="default", lease=LEASE)
    r.start()
    time.sleep(0.5)
    lease_writes = [p for m, p in server.requests if "/leases" in p and m != "GET"]
    assert not lease_writes, "bid before the cache was listed"
    assert not r.is_leader()
    with server.lock:
        server.faults = []
    assert wait_for(r.cache.is_synced, 5)
    assert wait_for(r.is_leader, 5)


def test_a_lease_left_unrenewed_while_syncing_is_taken_over_at_once(server: FakeAPI, runner_factory) -> None:
    """The lease is read while the cache is listed: a lease its holder stopped renewing during the sync
    is taken over as soon as the sync ends and its duration has passed since it was first read, not a
    whole duration after the first bid."""
    server.add_all(gang_objects(count=1, nodes=1))
    _hold_lease(server, "gone", duration=1)
    server.fail("GET", r"/api/v1/pods\?", 503, count=1000)
    r = runner_factory(leader_elect=True, identity="b", lease_namespace="default", lease=(1.0, 0.6, 0.05))
    r.start()
    time.sleep(1.5)  # the holder's lease ran out while b was listing
    with server.lock:
        server.faults = []
    assert wait_for(r.cache.is_synced, 5)
    synced = time.monotonic()
    assert wait_for(r.is_leader, 5)
    assert time.monotonic() - synced < 0.5  # not another lease duration (1 s) after the sync


def test_a_standby_keeps_its_model_up_to_date(server: FakeAPI, runner_factory) -> None:
    server.add_all(gang_objects(count=2, nodes=2))
    _hold_lease(server, "other")  # another replica leads
    b = runner_factory(leader_elect=True, identity="b", period=0.05, lease_namespace="default", lease=LEASE)
    b.start()
    t = threading.Thread(target=b.run, daemon=True)
    t.start()
    assert wait_for(lambda: b.cache.model.ready, 5)  # built while standing by
    assert b.cycle_no == 0 and not b.is_leader()
    server.update("Pod", "train-1", "default", {"metadata": {"labels": {"seen": "yes"}}})
    assert wait_for(lambda: b.cache.model.last == "incremental", 5)  # the change came in as a standby
    assert b.cycle_no == 0
    b.stopping.set()
    t.join(5)
