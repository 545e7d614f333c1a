"""A token bucket for the writes ``corral run`` makes about its decisions rather than the decisions
themselves (Events and pod conditions, :mod:`corral.kube.conventions`).

kube-scheduler sends every request through client-go's token-bucket limiter
(``flowcontrol.NewTokenBucketRateLimiter(qps, burst)``), whose defaults come from
``KubeSchedulerConfiguration.clientConnection``: 50 requests a second with bursts of 100; its Events go
through a second client with a limiter of its own. A backlog of pods that cannot be placed therefore
reaches the API server at that pace, however fast the scheduler decides, and costs the scheduler's
process in proportion to time, not to the backlog. :class:`TokenBucket` is that limiter without the
waiting: a write that finds no token is left for a later cycle instead of blocking the cycle.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["KUBE_SCHEDULER_BURST", "KUBE_SCHEDULER_QPS", "TokenBucket"]

#: ``clientConnection.qps`` / ``.burst`` defaults of KubeSchedulerConfiguration (kube-scheduler)
KUBE_SCHEDULER_QPS = 50.0
KUBE_SCHEDULER_BURST = 100


class TokenBucket:
    """``burst`` tokens, refilled at ``qps`` a second up to ``burst``; :meth:`take` spends one. The
    bucket starts full, as client-go's does."""

    def __init__(
        self,
        qps: float = KUBE_SCHEDULER_QPS,
        burst: int = KUBE_SCHEDULER_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if qps < 0 or burst < 1:
            raise ValueError(f"token bucket needs qps >= 0 and burst >= 1, got {qps}, {burst}")
        self.qps, self.burst, self.clock = float(qps), int(burst), clock
        self.tokens = float(burst)
        self.at = clock()
        self.lock = threading.Lock()

    def _refill(self) -> None:
        now = self.clock()
        if now > self.at:
            self.tokens = min(float(self.burst), self.tokens + (now - self.at) * self.qps)
        self.at = now

    def available(self) -> int:
        """Whole tokens now."""
        with self.lock:
            self._refill()
            return int(self.tokens)

    def take(self) -> bool:
        """Spend a token; False (nothing spent) when none is left."""
        with self.lock:
            self._refill()
            if self.tokens < 1.0:
                return False
            self.tokens -= 1.0
            return True
