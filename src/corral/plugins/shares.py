"""What jobs hold, for the plugins' allocate/deallocate events (Volcano's ``AllocateFunc`` /
``DeallocateFunc`` event handlers). The cluster-wide sums a plugin opens with are the Session's queries
(:mod:`corral.framework.queries`)."""

from __future__ import annotations

from corral.framework.queries import HOLDING, holding

__all__ = ["HOLDING", "holding"]
