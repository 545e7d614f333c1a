"""``backfill`` (SPEC.md §3.1, Volcano ``actions/backfill``): best-effort pods — pods that request no
resources besides their pod slot — go onto the best feasible node with a free pod slot. A job's
best-effort pods are placed in one Statement that commits only when the job is ready, so a gang of
best-effort pods never binds below minMember (SPEC.md §5)."""

from __future__ import annotations

from corral.actions.common.placement import no_fit_reason, pick
from corral.framework.plugin import Action
from corral.framework.session import PENDING_LIKE, Session
from corral.model import PodGroupPhase

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
                for task in sorted(tasks, key=session.task_key()):
                    row = pick(session, task, session.predicate(task) & session.capacity.fits(task))
                    if row < 0:
                        session.ledger.unschedulable(
                            job, no_fit_reason(session, job, task, job.ready_count())
                        )
                        break
                    stmt.allocate(task, row)
                if session.job_ready(job):
                    stmt.commit()
