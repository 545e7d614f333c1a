"""``backfill`` (SPEC.md §3.1, Volcano ``actions/backfill``): best-effort pods — pods that request no
resources besides their pod slot — go onto the best feasible node with a free pod slot. A job's
best-effort pods are placed in one Statement that commits only when the job is ready, so a gang of
best-effort pods never binds below minMember (SPEC.md §5). The pods of a Volcano sub-group with its
own ``networkTopology`` go inside one of its domains, or none of them (as allocate places it,
:mod:`corral.actions.common.subgroups`)."""

from __future__ import annotations

import numpy as np

from corral.actions.common.placement import no_fit_reason, pick
from corral.actions.common.subgroups import Trial, place_subgroup, subgroup_units
from corral.framework.plugin import Action
from corral.framework.session import PENDING_LIKE, Session
from corral.framework.statement import Statement
from corral.model import Job, PodGroupPhase, Task

__all__ = ["BackfillAction"]


class BackfillAction(Action):
    name = "backfill"

    def execute(self, session: Session) -> None:
        cluster = session.cluster
        admit_all = "enqueue" not in session.actions
        jobs = cluster.jobs
        index = session.index
        # with the session's job index, only jobs with waiting best-effort pods (or changed by the session)
        walk = (
            session.job_uids()
            if index is None
            else index.candidates(session.ledger.since_open(), "best_effort")
        )
        for uid in walk:
            job = jobs[uid]
            if job.phase is PodGroupPhase.PENDING and not admit_all and not job.synthetic:
                continue  # not admitted: passed over before looking at its pods
            tasks = [t for t in job.tasks if t.best_effort and t.managed and t.status in PENDING_LIKE]
            if not tasks:
                continue
            if session.job_valid(job):
                session.ledger.unschedulable(job, session.job_valid(job) or "")
                continue
            with session.statement() as stmt:
                tasks.sort(key=session.task_key())
                trial = _trial(session, job, stmt)
                for sj, unit in subgroup_units(tasks) if job.subjobs else [(None, tasks)]:
                    why = (
                        trial(unit, None)
                        if sj is None
                        else place_subgroup(session, job, sj, unit, stmt, None, trial)
                    )
                    if why:
                        session.ledger.unschedulable(job, why)
                        break
                if session.job_ready(job):
                    stmt.commit()


def _trial(session: Session, job: Job, stmt: Statement) -> Trial:
    """Place best-effort pods in order on the best feasible node with a free pod slot (inside the
    mask, a sub-group's domain); stop at the first that fits nowhere, saying why."""

    def trial(pods: list[Task], mask: np.ndarray | None) -> str:
        for task in pods:
            fits = session.predicate(task) & session.capacity.fits(task)
            row = pick(session, task, fits if mask is None else fits & mask)
            if row < 0:
                return no_fit_reason(session, job, task, job.ready_count(), mask)
            stmt.allocate(task, row)
        return ""

    return trial
