"""The work an eviction destroys (seed 000 §3.2 cost model, SPEC.md §3.3).

A pod that is evicted restarts from nothing, or from its job's last checkpoint: the work lost is its
request times the hours it has run since it last started (``status.startTime``, else its creation) or
since the PodGroup's last checkpoint (annotation ``corral.io/last-checkpoint``, RFC 3339), whichever
is later. Who pays it is the cost model's business (:mod:`corral.actions.common.bundles`): only a healthy
gang that is broken loses its pods' work.
"""

from __future__ import annotations

from corral.manifests.fields import parse_time
from corral.model.objects import Job, Task

__all__ = ["CHECKPOINT", "checkpoint", "run_hours"]

#: PodGroup annotation: when the job last saved its state (RFC 3339); work before it is not lost.
CHECKPOINT = "corral.io/last-checkpoint"


def checkpoint(job: Job | None) -> float | None:
    """Seconds since the epoch of ``job``'s last checkpoint, None without one. A malformed value is an
    :class:`~corral.errors.InputError` naming the podgroup and the annotation."""
    if job is None:
        return None
    value = job.annotations.get(CHECKPOINT)
    if not value:
        return None
    return parse_time(value, obj=f"PodGroup {job.uid}", field=f"metadata.annotations.{CHECKPOINT}")


def run_hours(task: Task, now: float, since: float | None = None) -> float:
    """Hours ``task`` has run at ``now`` since it last started or since ``since`` (the job's last
    checkpoint), whichever is later; never negative."""
    start = task.start_time if task.start_time is not None else (task.creation or now)
    if since is not None and since > start:
        start = since
    return max(now - start, 0.0) / 3600.0
