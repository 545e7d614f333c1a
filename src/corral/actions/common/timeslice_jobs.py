"""The running jobs ``timeslice`` may stop and how it stops and starts them, shared by its two passes
(corral's ``useful`` pass, :mod:`corral.actions.timeslice`, and Lucid's ``quota`` pass,
:mod:`corral.actions.common.quota_pass`).

Which running jobs may be stopped: every pod they hold is a possible victim — managed by corral, not
``volcano.sh/preemptable: "false"``, not in ``kube-system`` nor of a system-critical priority class (the
rule of ``conformance``) — their current run started at least the minimum lease ago (the run starts when
the earliest held pod started), and the VictimFilter point (``minruntime``) lets them go with the
best-ranked waiting job as the preemptor. A stop evicts the gang whole (SPEC.md §5); a start nominates
or binds every waiting pod of a job or none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corral.actions.common.broken import healthy
from corral.actions.common.jobs import waiting_tasks
from corral.actions.common.placement import best_node
from corral.actions.common.subgroups import greedy_trial, place_held
from corral.framework.session import Session
from corral.framework.statement import Statement
from corral.model import Job, Task, TaskStatus

__all__ = [
    "HELD",
    "STOPPED_AT",
    "Walk",
    "demand",
    "held",
    "nominate",
    "run_facts",
    "run_start",
    "running_jobs",
    "stop_jobs",
    "stoppable",
]

#: When ``timeslice`` last stopped the job (RFC 3339), on its PodGroup: the start of its wait.
STOPPED_AT = "corral.io/timeslice-stopped-at"
#: the states of a pod that holds its node for a run (running, or bound by an earlier cycle)
HELD = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})
_CRITICAL = frozenset({"system-cluster-critical", "system-node-critical"})


@dataclass
class Walk:
    """The outcome of one ranking: the running jobs to stop and the waiting jobs that fit."""

    stop: list[Job]
    start: list[Job]


def _victim(task: Task) -> bool:
    return (
        task.managed
        and task.preemptable
        and task.namespace != "kube-system"
        and task.priority_class not in _CRITICAL
    )


def held(job: Job) -> list[Task]:
    """The job's pods that hold a node for a run."""
    return [t for t in job.tasks if t.status in HELD and t.node >= 0]


def demand(tasks: list[Task], width: int) -> np.ndarray:
    """The summed request of ``tasks`` (a vector over the cluster's resources)."""
    out = np.zeros(width)
    for t in tasks:
        out += t.request
    return out


def running_jobs(session: Session) -> list[Job]:
    """Jobs running at or above their minimums whose pods hold nodes and none is leaving or placed in
    this cycle, in the cluster's order. With the session's job index only the jobs holding a node at
    open, or changed by the session, are looked at (the others hold nothing)."""
    out = []
    jobs = session.cluster.jobs
    index = session.index
    if index is None:
        walk = list(jobs.values())
    else:
        touched, moved = session.ledger.since_open()
        maybe = index.holding.keys() | touched | moved
        walk = [job for uid, job in jobs.items() if uid in maybe]
    for job in walk:
        if not held(job) or not healthy(job):
            continue
        if any(t.status in (TaskStatus.RELEASING, TaskStatus.ALLOCATED) for t in job.tasks):
            continue
        out.append(job)
    return out


def run_start(job: Job) -> float | None:
    """When the job's current run started: the earliest start of a pod it holds."""
    starts = [t.start_time for t in held(job) if t.start_time is not None]
    return min(starts) if starts else None


def run_facts(job: Job) -> tuple[bool, float | None]:
    """What :func:`stoppable` reads of the job's own pods, constant while they are: whether every pod
    it holds is a possible victim, and when its current run started (:func:`run_start`)."""
    return all(_victim(t) for t in job.tasks if t.status in HELD), run_start(job)


def stoppable(
    session: Session,
    job: Job,
    top: Job | None,
    lease: float,
    action: str,
    facts: tuple[bool, float | None] | None = None,
) -> bool:
    """May ``action`` stop ``job`` for ``top`` (the best-ranked waiting job)? See the module docstring.
    ``facts``: the job's :func:`run_facts` when the caller keeps them."""
    if top is None:
        return False
    victims, start = run_facts(job) if facts is None else facts
    if not victims or start is None or session.now - start < lease:
        return False
    return session.victim_filter(top, job, action)


def stop_jobs(stmt: Statement, jobs: list[Job], action: str) -> None:
    """Evict every pod the ``jobs`` hold (gangs whole)."""
    for job in jobs:
        for task in sorted(held(job), key=lambda t: t.name):
            stmt.evict(task, f"{action}: stopped", action=action)


def nominate(session: Session, stmt: Statement, job: Job) -> bool:
    """Nominate every waiting pod of ``job`` to the best node whose capacity is free or being freed
    (``allocate`` binds a nominated pod to its node in the next cycle); all or nothing. Nominations
    hold their room, so ``allocate`` does not give it to a job ranked lower (or to a stopped one)."""
    mark = stmt.save()
    tasks = sorted(waiting_tasks(job), key=session.task_key())
    if job.subjobs:  # a sub-group with its own topology inside one of its domains, as allocate places it
        trial = greedy_trial(session, job, stmt, pipeline=True, queue_limits=False)
        if place_held(session, job, tasks, stmt, None, trial):
            stmt.restore(mark)
            return False
        return True
    for task in tasks:
        row, _ = best_node(session, task)
        if row < 0:
            stmt.restore(mark)
            return False
        stmt.pipeline(task, row)
    return True
