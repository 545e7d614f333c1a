"""Allocating a PodGroup with Volcano sub-groups (``spec.subGroupPolicy``; Volcano ``actions/allocate``
``allocateForJob`` → ``allocateResourcesForSubJob``), used by ``allocate``.

The job's waiting pods are placed sub-group by sub-group, in TaskOrder of each sub-group's first pod;
pods of no sub-group are placed as a plain job's, after them. A sub-group is a gang of its own: its
placements are kept only when at least ``subGroupSize`` of its pods are then placed (or nominated onto
capacity being released) — otherwise they are undone and its reason kept. A sub-group with a
``networkTopology`` asks the session for its domains (``Session.subgroup_search_space``: the HyperNodes
of its allowed tiers inside the job's own domain) and takes the first, in the plugin's order, where it
holds its minimum; in soft mode the job's domain is the last resort. The job as a whole is then judged
by JobReady as usual (the gang plugin counts ``minSubGroups``). A job with sub-groups is placed in one
turn (Volcano allocates a job's sub-jobs in one pass).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from corral.framework.extension import Domain
from corral.model import ALLOCATED_STATES, Job, TaskStatus
from corral.model.subjobs import SubJob

if TYPE_CHECKING:
    from corral.framework.session import Session
    from corral.framework.statement import Statement

__all__ = ["place_by_subgroup", "started_subgroups"]

#: sub-group domains dry-run at most per sub-group
MAX_SUBGROUP_DOMAINS = 16
_READY = ALLOCATED_STATES | {TaskStatus.SUCCEEDED}
_PIPE = _READY | {TaskStatus.PIPELINED}


def _held(sj: SubJob, states: frozenset[TaskStatus]) -> int:
    return sum(1 for t in sj.tasks if t.status in states)


def started_subgroups(job: Job) -> int:
    """How many of the job's sub-groups hold their minimum of placed pods."""
    return sum(1 for sj in job.subjobs if _held(sj, _READY) >= sj.size)


def place_by_subgroup(
    action: Any, session: Session, job: Job, state: Any, stmt: Statement, within: np.ndarray | None
) -> None:
    """Place every waiting pod of ``state`` (from ``state.pos``) inside ``within`` (None: anywhere),
    sub-group by sub-group; ``state`` ends with the turn over and the last reason met."""
    buckets: dict[int, tuple[Any, list[Any]]] = {}
    for t in state.tasks[state.pos :]:
        sj = t.subjob
        buckets.setdefault(id(sj), (sj, []))[1].append(t)
    state.pos = len(state.tasks)
    loose = buckets.pop(id(None), None)
    for sj, group in buckets.values():
        reason = _place_subgroup(action, session, job, sj, type(state)(group), stmt, within)
        if reason:
            state.reason = reason
    if loose is not None:
        rest = type(state)(loose[1])
        action.place_tasks(session, job, rest, stmt, within, turn=False)
        if rest.reason:
            state.reason = rest.reason


def _place_subgroup(
    action: Any,
    session: Session,
    job: Job,
    sj: SubJob,
    pending: Any,
    stmt: Statement,
    within: np.ndarray | None,
) -> str:
    """Place one sub-group's waiting pods; "" when it holds its minimum afterwards, else why not (its
    placements undone)."""
    domains: list[Domain | None] = [None]
    if sj.topology_mode:
        domains = list(session.subgroup_search_space(job, sj, within)[:MAX_SUBGROUP_DOMAINS])
    why = ""
    for d in domains:
        mask = within if d is None else d.mask
        mark = stmt.save()
        trial = pending.copy()
        action.place_tasks(session, job, trial, stmt, mask, turn=False)
        if _held(sj, _READY) >= sj.size or _held(sj, _PIPE) >= sj.size:
            return ""
        stmt.restore(mark)
        where = "" if d is None else f" in {d.name}"
        why = trial.reason or f"fewer than {sj.size} of its pods fit"
        why = f"{why}{where}"
    if not domains:
        why = "no domain can hold it"
    return f"sub-group {sj.name} (subGroupSize {sj.size}) cannot start: {why}"
