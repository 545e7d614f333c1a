"""The walk over the cluster's pods that every gang-level eviction search starts with (``gangpreempt``,
``gangreclaim``, ``consolidate``): which running pods of other jobs may leave their node for a
waiting job at all, before the victim filters thin them per plan."""

from __future__ import annotations

from collections.abc import Callable

from corral.actions.common.evict import VICTIM_STATES
from corral.framework.session import Session
from corral.model import Job, Task

__all__ = ["victim_walk"]


def victim_walk(session: Session, job: Job, action: str, allowed: Callable[[Task], bool]) -> list[Task]:
    """The running or bound pods, in the cluster's order, that are managed by corral, of another job than
    ``job``, preemptable, ``allowed`` by the action's own rule, and of a job the VictimFilter (asked once
    per victim job, with the action's name: ``minruntime``, the preempt and reclaim rules) lets go —
    Volcano's preempt and reclaim walk the same pods (``Running`` tasks of other jobs, then the
    plugins' victim filters), KAI's consolidation its preemptible running jobs."""
    pool: list[Task] = []
    verdict: dict[int, bool] = {}
    for t in session.cluster.tasks.values():
        v = t.job
        if (
            t.status not in VICTIM_STATES
            or not t.managed
            or t.node < 0
            or v is None
            or v is job
            or not t.preemptable
            or not allowed(t)
        ):
            continue
        ok = verdict.get(id(v))
        if ok is None:
            ok = verdict[id(v)] = session.victim_filter(job, v, action)
        if ok:
            pool.append(t)
    return pool
