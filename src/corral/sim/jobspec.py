"""What a workload trace says about one job, before the simulator turns it into pods.

Every workload loader (corral's CSV/Parquet schema, Philly, Alibaba GPU-2023, the synthetic generator)
produces a list of :class:`JobSpec`; the simulator only ever sees these. Requests are plain base units as
Kubernetes writes them without suffix: cpu in cores, memory in bytes, ``nvidia.com/gpu`` in devices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["GPU", "JobSpec", "RoleSpec"]

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class RoleSpec:
    """One role of a gang: ``count`` identical pods, of which ``min_count`` must run (minTaskMember)."""

    name: str
    count: int
    requests: Mapping[str, float]
    min_count: int | None = None


@dataclass(frozen=True)
class JobSpec:
    """One job of a workload.

    ``duration`` is the run time in seconds when the job runs uninterrupted. ``min_member`` defaults to
    the total pod count (a rigid gang). ``topology`` is ``None`` or ``(mode, highest_tier)`` with mode
    ``"hard"`` or ``"soft"``. ``source`` names the file and row the job came from, for error messages.
    """

    name: str
    submit: float
    duration: float
    queue: str
    roles: tuple[RoleSpec, ...]
    priority: int = 0
    min_member: int | None = None
    topology: tuple[str, int] | None = None
    source: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def num_pods(self) -> int:
        return sum(r.count for r in self.roles)

    @property
    def min_pods(self) -> int:
        return self.min_member if self.min_member is not None else self.num_pods

    def total(self, resource: str) -> float:
        """Total amount of ``resource`` over all pods of the job (plain units)."""
        return sum(r.count * float(r.requests.get(resource, 0.0)) for r in self.roles)

    @property
    def gpus(self) -> float:
        return self.total(GPU)
