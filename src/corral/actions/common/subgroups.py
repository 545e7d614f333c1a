"""Holding Volcano sub-groups (``spec.subGroupPolicy``) to their own topology, for every action that
places pods: one helper, so that allocate, preempt, reclaim, gangpreempt, gangreclaim, backfill, flow,
timeslice and elect keep each sub-group exactly as allocate does (Volcano ``actions/allocate``
``allocateForSubJob``; gangpreempt's ``BuildNominationPlanInDomain`` runs the same search per sub-job
with purpose Evict).

A sub-group is a gang of its own: its placements are kept only when at least ``subGroupSize`` of its
pods are then placed (or nominated onto capacity being released) — otherwise they are undone and the
reason kept. A sub-group with a ``networkTopology`` asks the session for its domains
(``Session.subgroup_search_space``: the HyperNodes of its allowed tiers inside the job's own domain,
ordered for the purpose — allocate's order, or the eviction order) and takes the first, in that
order, where it holds its minimum; in soft mode the job's domain is the last resort; in hard mode with
no HyperNode allowed it is placed nowhere. What a placement is — bind now, nominate, evict to make
room — is the action's ``trial``; the helper only confines it to one domain at a time and undoes a
domain that does not hold the sub-group. When it cannot fit its tier the sub-group waits: nothing
stays placed, evicted or nominated for it.

For allocate (:func:`place_by_subgroup`) the job's waiting pods are placed sub-group by sub-group, in
TaskOrder of each sub-group's first pod; pods of no sub-group are placed as a plain job's, after them.
A job with sub-groups is placed in one turn (Volcano allocates a job's sub-jobs in one pass). The job
as a whole is then judged by JobReady/JobPipelined as usual (the gang plugin counts ``minSubGroups``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.actions.common.placement import best_node, no_fit_reason, pick
from corral.framework.extension import Domain, Purpose
from corral.model import ALLOCATED_STATES, Job, Task, TaskStatus
from corral.model.subjobs import SubJob

if TYPE_CHECKING:
    from corral.framework.session import Session
    from corral.framework.statement import Statement

__all__ = [
    "Trial",
    "greedy_trial",
    "has_subgroup_topology",
    "place_by_subgroup",
    "place_held",
    "place_job",
    "place_subgroup",
    "started_subgroups",
    "subgroup_units",
]

#: sub-group domains dry-run at most per sub-group
MAX_SUBGROUP_DOMAINS = 16
_READY = ALLOCATED_STATES | {TaskStatus.SUCCEEDED}
_PIPE = _READY | {TaskStatus.PIPELINED}

#: ``trial(tasks, mask)``: the action places ``tasks`` inside ``mask`` (None: anywhere) on its
#: Statement and returns why the last pod it could not place was not ("" when all went)
Trial = Callable[[list[Task], "np.ndarray | None"], str]


def _held(sj: SubJob, states: frozenset[TaskStatus]) -> int:
    return sum(1 for t in sj.tasks if t.status in states)


def _holds_minimum(sj: SubJob) -> bool:
    return _held(sj, _READY) >= sj.size or _held(sj, _PIPE) >= sj.size


def started_subgroups(job: Job) -> int:
    """How many of the job's sub-groups hold their minimum of placed pods."""
    return sum(1 for sj in job.subjobs if _held(sj, _READY) >= sj.size)


def has_subgroup_topology(job: Job) -> bool:
    """Does one of the job's Volcano sub-groups carry its own ``networkTopology``?"""
    return any(sj.topology_mode for sj in job.subjobs)


def subgroup_units(tasks: list[Task]) -> list[tuple[SubJob | None, list[Task]]]:
    """``tasks`` (in the action's order) as units of placement: the pods of one sub-group with a
    topology constraint together, where its first pod stands; every other pod alone."""
    out: list[tuple[SubJob | None, list[Task]]] = []
    where: dict[int, int] = {}
    for t in tasks:
        sj = t.subjob
        if sj is None or not sj.topology_mode:
            out.append((None, [t]))
        elif id(sj) in where:
            out[where[id(sj)]][1].append(t)
        else:
            where[id(sj)] = len(out)
            out.append((sj, [t]))
    return out


def place_subgroup(
    session: Session,
    job: Job,
    sj: SubJob,
    tasks: list[Task],
    stmt: Statement,
    within: np.ndarray | None,
    trial: Trial,
    purpose: Purpose = Purpose.ALLOCATE,
    undo: Callable[[], None] | None = None,
) -> str:
    """Place one sub-group's ``tasks`` through ``trial``, domain by domain of the sub-group (inside
    ``within``), keeping the first domain where it holds its minimum; "" then, else why not — every
    placement of it undone (``stmt`` restored, and ``undo`` called for the action's own state)."""
    domains: list[Domain | None] = [None]
    if sj.topology_mode:
        domains = list(session.subgroup_search_space(job, sj, within, purpose)[:MAX_SUBGROUP_DOMAINS])
    why = ""
    for d in domains:
        mask = within if d is None else d.mask
        mark = stmt.save()
        reason = trial(list(tasks), mask)
        if _holds_minimum(sj):
            return ""
        stmt.restore(mark)
        if undo is not None:
            undo()
        where = "" if d is None else f" in {d.name}"
        why = f"{reason or f'fewer than {sj.size} of its pods fit'}{where}"
    if not domains:
        why = "no domain can hold it"
    return f"sub-group {sj.name} (subGroupSize {sj.size}) cannot start: {why}"


def place_held(
    session: Session,
    job: Job,
    tasks: list[Task],
    stmt: Statement,
    within: np.ndarray | None,
    trial: Trial,
    purpose: Purpose = Purpose.ALLOCATE,
    undo: Callable[[], None] | None = None,
) -> str:
    """Place ``tasks`` in order (:func:`subgroup_units`): a sub-group with a topology constraint in one
    of its domains (:func:`place_subgroup`), every other pod by ``trial`` inside ``within``. Returns
    the last reason met ("" when every unit was placed)."""
    reason = ""
    for sj, unit in subgroup_units(tasks):
        if sj is None:
            why = trial(unit, within)
        else:
            why = place_subgroup(session, job, sj, unit, stmt, within, trial, purpose, undo)
        reason = why or reason
    return reason


def greedy_trial(
    session: Session,
    job: Job,
    stmt: Statement,
    *,
    pipeline: bool,
    now: bool = False,
    queue_limits: bool = True,
) -> Trial:
    """The plain pod-by-pod placement the non-allocate actions make: each pod, within the queue's
    Allocatable (unless not ``queue_limits``), on the best feasible node in the mask (:func:`~corral.actions.common.placement.best_node`)
    — onto free capacity, or onto capacity being released (``now``: free capacity only); nominated
    when ``pipeline`` (or when only released capacity holds it), else placed. Stops at the first pod
    that fits nowhere."""
    queue = session.cluster.queues[job.queue]

    def trial(tasks: list[Task], mask: np.ndarray | None) -> str:
        for task in tasks:
            if task.status is not TaskStatus.PENDING and task.status is not TaskStatus.PIPELINED:
                continue
            refused = session.allocatable_refusal(queue, task) if queue_limits else ""
            if refused:
                return refused
            if now:
                fits = session.predicate(task) & session.capacity.fits(task)
                row, later = pick(session, task, fits if mask is None else fits & mask), False
            else:
                row, later = best_node(session, task, mask)
            if row < 0:
                return no_fit_reason(session, job, task, job.ready_count(), mask)
            if pipeline or later:
                stmt.pipeline(task, row)
            else:
                stmt.allocate(task, row)
        return ""

    return trial


def place_job(session: Session, job: Job, tasks: list[Task], stmt: Statement) -> str:
    """Place ``job``'s waiting ``tasks`` as allocate places a job with sub-groups, through
    :func:`greedy_trial` (flow's jobs with sub-group topology): in the first domain of the job's own
    search space (purpose Allocate; the cluster when it has no topology) where it becomes ready, else
    in the first where it is pipelined, else nowhere; each sub-group with its own topology inside one
    of its domains (:func:`place_held`). Returns the last reason met."""
    trial = greedy_trial(session, job, stmt, pipeline=False)
    domains: list[Domain | None] = [None]
    if job.topology_mode:
        domains = list(session.gang_search_space(job, Purpose.ALLOCATE))
    reason, kept = "", -1
    for i, d in enumerate(domains):
        reason = place_held(session, job, tasks, stmt, None if d is None else d.mask, trial)
        if session.job_ready(job):
            return reason
        if kept < 0 and stmt.ops and session.job_pipelined(job):
            kept = i
        stmt.restore(0)
    if kept >= 0:
        d = domains[kept]
        reason = place_held(session, job, tasks, stmt, None if d is None else d.mask, trial)
    return reason


def place_by_subgroup(
    action: Any, session: Session, job: Job, state: Any, stmt: Statement, within: np.ndarray | None
) -> None:
    """allocate: place every waiting pod of ``state`` (from ``state.pos``) inside ``within`` (None:
    anywhere), sub-group by sub-group; ``state`` ends with the turn over and the last reason met."""
    buckets: dict[int, tuple[Any, list[Any]]] = {}
    for t in state.tasks[state.pos :]:
        sj = t.subjob
        buckets.setdefault(id(sj), (sj, []))[1].append(t)
    state.pos = len(state.tasks)
    loose = buckets.pop(id(None), None)
    for sj, group in buckets.values():

        def trial(tasks: list[Task], mask: np.ndarray | None) -> str:
            pending = type(state)(tasks)
            action.place_tasks(session, job, pending, stmt, mask, turn=False)
            return str(pending.reason)

        reason = place_subgroup(session, job, sj, group, stmt, within, trial)
        if reason:
            state.reason = reason
    if loose is not None:
        rest = type(state)(loose[1])
        action.place_tasks(session, job, rest, stmt, within, turn=False)
        if rest.reason:
            state.reason = rest.reason
