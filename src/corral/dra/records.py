"""The ``claim_allocations`` decision (SPEC.md §4, added in wave 3): one record per claim of a pod bound
this cycle, with the devices kube-scheduler's DRA plugin would write into the claim's
``status.allocation.devices.results``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from corral.dra.inventory import Inventory

__all__ = ["ClaimAllocation", "devices_of"]


@dataclass(frozen=True)
class ClaimAllocation:
    claim: str  # "ns/name" (for a claim corral instantiates from a template: "ns/<pod>-<entry>")
    pod: str
    node: str
    devices: list[dict[str, Any]] = field(default_factory=list)  # request, driver, pool, device
    template: str = ""  # the ResourceClaimTemplate the claim is made from, when not yet created
    cycle: int = 0


def devices_of(inv: Inventory, devs: tuple[tuple[str, int], ...]) -> list[dict[str, Any]]:
    out = []
    for request, d in devs:
        driver, pool, device = inv.dev_id[d]
        out.append({"request": request, "driver": driver, "pool": pool, "device": device})
    return out
