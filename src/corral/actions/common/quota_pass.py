"""Lucid's pass, ``timeslice`` argument ``mode: quota`` (S-Lab-System-Group/Lucid
``simulation/policy/tiresias.py`` and ``srtf.py``, steps 3-5), taken as it is: every running job outside
the GPU quota is stopped, whether or not a waiting job can use its room, and only the waiting jobs inside
the quota start, placed by this pass itself (bound where the room is free, nominated where a stop frees
it; the follow-up cycle at the same instant binds them); a job inside the quota that cannot be placed
keeps its share of the quota, so the jobs behind it wait even when GPUs are idle. Configure it without
``allocate`` and ``backfill``. It ranks the whole cluster together (``perQueue`` is refused with it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.actions.common.broken import healthy
from corral.actions.common.jobs import schedulable_jobs, waiting_tasks
from corral.actions.common.placement import best_node
from corral.actions.common.timeslice_jobs import (
    STOPPED_AT,
    Walk,
    demand,
    held,
    nominate,
    running_jobs,
    stop_jobs,
    stoppable,
)
from corral.framework.session import Session
from corral.framework.statement import Statement
from corral.model import Job, Task, TaskStatus
from corral.model.clock import format_time
from corral.model.resources import EPS

__all__ = ["PLACE_REASON", "QUOTA_REASON", "quota_pass", "quota_walk"]

_HELD_NOW = frozenset({TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING})
_SIZED = _HELD_NOW | {TaskStatus.PIPELINED, TaskStatus.PENDING}

QUOTA_REASON = "timeslice: ranks outside the quota (the better-ranked jobs take the cluster's GPUs)"
PLACE_REASON = "timeslice: inside the quota, but no placement fits it now"


def _nominated(task: Task) -> bool:
    return task.status is TaskStatus.PIPELINED and task.nominated >= 0


def _ranked(
    session: Session, waiting: list[Job], min_lease: float, action: str
) -> tuple[list[tuple[Any, bool, Job, np.ndarray]], np.ndarray]:
    """Every stoppable running job (``False``) and every waiting job (``True``) with its key and the
    room it needs, in rank order, and the quota they walk against: the idle room plus what they hold or
    have nominated (Lucid's ``quota = total GPUs``)."""
    cluster = session.cluster
    nodes = cluster.nodes
    live = ~(nodes.down | nodes.unschedulable)
    width = len(cluster.resources)
    key = session.job_sort_key()
    top = min(waiting, key=key)
    quota = nodes.future_idle[live].sum(axis=0)
    ranked: list[tuple[Any, bool, Job, np.ndarray]] = []
    for job in running_jobs(session):
        if stoppable(session, job, top, min_lease, action):
            mine = demand(held(job), width)
            quota = quota + mine
            ranked.append((key(job), False, job, mine))
    for job in waiting:
        # what it holds or has nominated already is in the quota (outside the idle room), its size is
        # what it needs: Lucid counts a job whole
        tasks = [t for t in job.tasks if t.managed and not t.best_effort]
        own = [t for t in tasks if (t.status in _HELD_NOW and t.node >= 0) or _nominated(t)]
        quota = quota + demand(own, width)
        need = demand([t for t in tasks if t.status in _SIZED], width)
        ranked.append((key(job), True, job, need))
    ranked.sort(key=lambda r: r[0])
    return ranked, quota


def quota_walk(session: Session, min_lease: float = 0.0, action: str = "timeslice") -> tuple[Walk, list[Job]]:
    """Lucid's walk: every stoppable running job and every waiting job, ranked together by the JobOrder,
    walk against the quota; a job whose whole size fits takes it from the quota (``if gpu_num <=
    quota``), a running job that does not fit is stopped — whether or not a waiting job can use its
    room. The waiting jobs inside the quota are the ones to start, in rank order (``prerun_list``);
    every other waiting job waits, even when GPUs are idle (the second list: the waiting jobs left
    out)."""
    # a job nominated by the last pass is not starving (gang) but is still to be bound, if it ranks inside
    waiting = [
        j
        for j in schedulable_jobs(session, quiet=True)
        if (session.job_starving(j) or any(_nominated(t) for t in j.tasks)) and not (held(j) and healthy(j))
    ]
    if not waiting:
        return Walk([], []), []
    ranked, quota = _ranked(session, waiting, min_lease, action)
    stop: list[Job] = []
    start: list[Job] = []
    left: list[Job] = []
    for _, is_waiting, job, need in ranked:
        if bool(np.all(need <= quota + EPS)):
            quota = quota - need
            if is_waiting:
                start.append(job)
        elif not is_waiting:
            stop.append(job)
        else:
            left.append(job)
            session.ledger.unschedulable(job, QUOTA_REASON)
    return Walk(stop, start), left


def quota_pass(session: Session, min_lease: float, action: str) -> None:
    """One Lucid pass: stop the running jobs outside the quota, then place the waiting jobs inside it
    in rank order with the session's placement (``binpack`` on GPUs is Lucid's consolidate placer):
    onto free room at once (bound), onto room a stop is freeing as a nomination that the follow-up
    cycle at the same instant binds (Lucid places after its stops, in the same step). A job inside the
    quota that cannot be placed waits for the next pass (Lucid: "may place fail because consolidate
    requirement"); the stops stand even then."""
    walk, left = quota_walk(session, min_lease, action)
    # a nomination of a job left out holds room no job inside the quota could use (Lucid has none)
    dropped = [t for job in left for t in job.tasks if _nominated(t)]
    if not walk.stop and not walk.start and not dropped:
        return
    with session.statement() as stmt:
        for task in dropped:
            stmt.clear_nomination(task)
        stop_jobs(stmt, walk.stop, action)
        placed = []
        for job in walk.start:
            if _place(session, stmt, job):
                placed.append(job)
            else:
                for task in job.tasks:
                    if _nominated(task):
                        stmt.clear_nomination(task)
                session.ledger.unschedulable(job, PLACE_REASON)
        for op in stmt.ops:
            if op.kind == "evict":
                if placed:
                    op.preemptor = placed[0].uid
                op.reason = f"{action}: ranks outside the quota"
        stmt.commit()
    stamp = format_time(session.now)
    for job in walk.stop:
        session.ledger.annotate(job, STOPPED_AT, stamp)


def _place(session: Session, stmt: Statement, job: Job) -> bool:
    """Place every waiting pod of ``job`` (all or nothing): allocated where the room is free, nominated
    where it is still being freed; a nomination from an earlier cycle is kept when its node fits."""
    if job.subjobs:
        return nominate(session, stmt, job)
    mark = stmt.save()
    for task in sorted(waiting_tasks(job), key=session.task_key()):
        row, later = best_node(session, task)
        if row < 0:
            stmt.restore(mark)
            return False
        if later:
            stmt.pipeline(task, row)
        else:
            stmt.allocate(task, row)
    return True
