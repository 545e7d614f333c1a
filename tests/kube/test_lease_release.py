"""Leader election's release (src/corral/kube/leader.py): ``stop()`` gives the lease up even while a
renewal is in flight — a renewal that reads the lease after the release must not take it back."""

from __future__ import annotations

import copy
import io
import threading
import time
from typing import Any

from corral.kube.api import APIError
from corral.kube.leader import LeaderElector
from corral.kube.logs import Log


class LeaseStore:
    """One Lease with resourceVersion checks, as the API server keeps it. ``hold`` makes the next read
    wait until the elector is stopping, then a little longer (so a release not kept apart from the
    renewal lands first)."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.hold: LeaderElector | None = None
        self.lock = threading.Lock()

    def get(self, path: str) -> dict[str, Any]:
        elector, self.hold = self.hold, None
        if elector is not None:
            while not elector.stopping.is_set():
                time.sleep(0.005)
            time.sleep(0.2)
        with self.lock:
            if self.lease is None:
                raise APIError(404, "not found")
            return copy.deepcopy(self.lease)

    def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            assert self.lease is not None
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                raise APIError(409, "conflict")
            self.version += 1
            self.lease = copy.deepcopy(body)
            self.lease["metadata"]["resourceVersion"] = str(self.version)
            return copy.deepcopy(self.lease)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.version += 1
            self.lease = copy.deepcopy(body)
            self.lease["metadata"]["resourceVersion"] = str(self.version)
            return copy.deepcopy(self.lease)


def test_a_renewal_in_flight_does_not_take_back_a_released_lease() -> None:
    store = LeaseStore()
    elector = LeaderElector(
        store,  # type: ignore[arg-type]  # the three calls the elector makes
        "default",
        "corral",
        "a",
        Log(stream=io.StringIO()),
        duration=5.0,
        renew_deadline=3.0,
        retry=0.05,
    )
    assert elector.try_acquire_or_renew()
    elector.leading.set()
    elector.last_renew = elector.clock()
    store.hold = elector  # the next renewal reads the lease only once stop() has begun
    elector.start()
    while store.hold is not None:
        time.sleep(0.005)
    elector.stop(release=True)
    elector.join(5)
    assert store.lease is not None and store.lease["spec"]["holderIdentity"] == ""
