"""What earlier cycles learned about jobs that fit nowhere (the skip memory of
:class:`~corral.framework.memo.history.ClusterHistory`): the data only; the per-``allocate`` logic that
reads and writes it is :mod:`corral.actions.common.skipping`, which explains why skipping is exact."""

from __future__ import annotations

from typing import Any

from corral.model import Job, Task, TaskStatus

__all__ = ["SkipMemory", "own_state", "plain"]


def own_state(job: Job) -> tuple[Any, ...]:
    """What a job's own pods look like: changes when any pod is placed, nominated, evicted, added, or
    replaced by another pod (its uid) or another spec (its class: request and constraints) — the live
    scheduler builds a changed job's pods anew, where the simulator keeps its pod objects."""
    return tuple([(t.uid, t.klass, t.status, t.nominated) for t in job.tasks])


def plain(task: Task) -> bool:
    """A pod whose failure to fit says the same about any no-easier pod later in the cycle."""
    aff = task.affinity
    return (
        task.status is TaskStatus.PENDING
        and task.nominated < 0
        and bool(task.klass)
        and (aff is None or not getattr(aff, "has_pod_terms", False))
    )


class SkipMemory:
    """Jobs whose last attempt failed at their first pod, kept across cycles by the front end's history."""

    __slots__ = ("blocked",)

    def __init__(self) -> None:
        self.blocked: dict[str, tuple[tuple[Any, ...], Task]] = {}  # job uid -> (own_state, first pod)

    def prune(self, jobs: dict[Any, Any]) -> None:
        """Forget jobs that left the cluster (run now and then, not every cycle)."""
        if len(self.blocked) > 2 * len(jobs) + 64:
            self.blocked = {u: e for u, e in self.blocked.items() if u in jobs}
