"""Leader election on a ``coordination.k8s.io/v1`` Lease (client-go's ``leaderelection`` with a
``LeaseLock``), so two or more replicas of ``corral run --leader-elect`` can run and one schedules.

- Acquire: create the Lease, or take it over when its holder has not renewed it for
  ``leaseDurationSeconds`` *as observed locally* (the time this replica last saw the lease change, not the
  holder's clock, as client-go does, so clock skew between machines does not matter).
- Renew every ``retry`` seconds; a write is a ``PUT`` carrying the ``resourceVersion`` read, so two
  candidates racing get one success and one 409.
- A leader that cannot renew within ``renew_deadline`` stops being leader (``on_lost``); ``corral run``
  then exits so its Deployment restarts it as a candidate (kube-scheduler does the same).
- Leadership is a lease on time, not a flag: :meth:`LeaderElector.is_leader` is true only while the last
  successful renewal was *sent* less than ``renew_deadline`` ago (the lease duration minus a margin of
  ``duration - renew_deadline``, client-go's ``RenewDeadline < LeaseDuration`` rule). Another replica
  takes the lease over no earlier than ``duration`` after it last saw it change, which is later than
  that renewal was sent, so a leader that was frozen (a paused process, a stalled machine) or cannot reach
  the API server stops counting itself leader before anyone else can start: the runner checks it before a
  cycle starts and before each write of the apply phase.
- On a clean stop the leader releases the Lease (empty holder), so a standby takes over at once.
- A replica bids only once ``ready`` says so (the runner: its watch cache is listed), as kube-scheduler
  starts its informers and waits for their sync before ``leaderElector.Run``: a replica that won the
  lease before it could schedule would hold it while a synced standby waits a whole lease duration.
  While it waits it reads the lease (:meth:`LeaderElector.observe`), so the time the lease was last
  seen to change counts from then, as client-go's observation does, not from its first bid.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from corral.kube.api import LEASE, APIError, KubeAPI
from corral.kube.logs import Log

__all__ = ["LeaderElector"]


def _micro(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector(threading.Thread):
    def __init__(
        self,
        api: KubeAPI,
        namespace: str,
        name: str,
        identity: str,
        log: Log,
        *,
        duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry: float = 2.0,
        on_lost: Callable[[], None] | None = None,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(daemon=True, name="corral-leader")
        self.api, self.namespace, self.name, self.identity, self.log = api, namespace, name, identity, log
        self.duration, self.renew_deadline, self.retry = duration, renew_deadline, retry
        self.on_lost = on_lost
        self.ready = ready
        self.leading = threading.Event()
        self.stopping = threading.Event()
        self._writing = threading.Lock()  # a lease write of run() and stop()'s release, one at a time
        self.observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self.observed_at = 0.0
        self.last_renew = -1e18  # the clock when the last successful renewal was sent
        self.acquired_at = 0.0  # time.monotonic() when this replica last became leader
        self.clock: Callable[[], float] = time.monotonic  # a test moves it to freeze the leader
        if not 0 < renew_deadline < duration:
            raise ValueError(f"renew deadline {renew_deadline} must be below the lease duration {duration}")

    @property
    def path(self) -> str:
        return LEASE.item(self.name, self.namespace)

    def valid_for(self) -> float:
        """Seconds this replica may still act as leader (0 when it is not leader)."""
        if not self.leading.is_set():
            return 0.0
        return max(0.0, self.renew_deadline - (self.clock() - self.last_renew))

    def is_leader(self) -> bool:
        """Leading, and renewed within ``renew_deadline`` (see the module's docstring)."""
        return self.valid_for() > 0

    def run(self) -> None:
        while self.ready is not None and not self.ready() and not self.stopping.is_set():
            self.observe()  # no bid before this replica can schedule; the lease is watched meanwhile
            self.stopping.wait(self.retry)
        while not self.stopping.is_set():
            sent = self.clock()
            try:
                with self._writing:  # never beside stop()'s release: a renewal in flight would retake it
                    if self.stopping.is_set():
                        break
                    ok = self.try_acquire_or_renew()
            except APIError as exc:
                ok = False
                self.log.warning(
                    "lease request failed",
                    lease=f"{self.namespace}/{self.name}",
                    status=exc.status,
                    error=exc.message,
                )
            now = self.clock()
            if ok:
                self.last_renew = sent
                if not self.leading.is_set():
                    self.log.info(
                        "became leader", lease=f"{self.namespace}/{self.name}", identity=self.identity
                    )
                    self.acquired_at = time.monotonic()
                    self.leading.set()
            elif self.leading.is_set() and now - self.last_renew > self.renew_deadline:
                self.leading.clear()
                self.log.error(
                    "leadership lost", lease=f"{self.namespace}/{self.name}", identity=self.identity
                )
                if self.on_lost is not None:
                    self.on_lost()
            self.stopping.wait(self.retry)

    def observe(self) -> None:
        """Read the lease and note when it last changed, without bidding (a replica whose cache is not
        listed yet): once it may bid, a lease that stopped being renewed meanwhile is taken over as soon
        as its duration has passed since the change was seen, not a whole duration after the first bid."""
        try:
            lease = self.api.get(self.path)
        except APIError:
            return
        cur = lease.get("spec") or {}
        seen = (cur.get("holderIdentity") or "", str(cur.get("renewTime")))
        if seen != self.observed:
            self.observed, self.observed_at = seen, time.monotonic()

    def try_acquire_or_renew(self) -> bool:
        now = time.time()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.duration),
            "renewTime": _micro(now),
        }
        try:
            lease = self.api.get(self.path)
        except APIError as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {**spec, "acquireTime": _micro(now), "leaseTransitions": 0},
            }
            try:
                self.api.post(LEASE.collection(self.namespace), body)
            except APIError as again:
                if again.status == 409:
                    return False
                raise
            return True
        cur = lease.get("spec") or {}
        holder = cur.get("holderIdentity") or ""
        seen = (holder, str(cur.get("renewTime")))
        if seen != self.observed:
            self.observed, self.observed_at = seen, time.monotonic()
        duration = float(cur.get("leaseDurationSeconds") or self.duration)
        if holder and holder != self.identity and time.monotonic() - self.observed_at < duration:
            return False  # held by another, still fresh
        new_spec = {**cur, **spec}
        if holder != self.identity:
            new_spec["acquireTime"] = _micro(now)
            new_spec["leaseTransitions"] = int(cur.get("leaseTransitions") or 0) + 1
        body = {**lease, "spec": new_spec}
        try:
            self.api.put(self.path, body)
        except APIError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def stop(self, release: bool = True) -> None:
        """Stop bidding and, with ``release``, give the lease up (holder ""), as client-go's
        ``ReleaseOnCancel`` does. The release waits for a renewal in flight: one that read the lease
        before the release would otherwise write this replica back as its holder."""
        self.stopping.set()
        with self._writing:
            self._release(release)
        self.leading.clear()

    def _release(self, release: bool) -> None:
        if release and self.leading.is_set():
            try:
                lease = self.api.get(self.path)
                if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                    lease["spec"]["holderIdentity"] = ""
                    self.api.put(self.path, lease)
                    self.log.info("lease released", lease=f"{self.namespace}/{self.name}")
            except APIError as exc:
                self.log.warning("lease not released", status=exc.status, error=exc.message)
