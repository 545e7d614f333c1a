"""Closing a session (SPEC.md §2, §4): nominate the held pipelined placements, move ready podgroups to
Running, and finish the decisions — podgroup updates and the reasons why the jobs that did not start
could not. ``close(session) -> Decisions`` is the only entry.
"""

from __future__ import annotations

from typing import Any, Protocol

from corral.framework.decisions import Decisions, Nomination, PodGroupUpdate, Unschedulable
from corral.framework.ledger import Ledger
from corral.framework.memo import ClusterHistory
from corral.framework.memo.jobindex import JobIndex
from corral.model import Cluster, Job, PodGroupPhase, TaskStatus

__all__ = ["PENDING_LIKE", "close"]

#: Task states a placement action considers: waiting, or nominated by an earlier cycle.
PENDING_LIKE = frozenset({TaskStatus.PENDING, TaskStatus.PIPELINED})


class Session(Protocol):
    """What closing reads of the session."""

    cluster: Cluster
    cycle: int
    report_reasons: bool
    ledger: Ledger
    history: ClusterHistory
    index: JobIndex | None
    phase0: dict[str, PodGroupPhase]

    def job_uids(self) -> list[str]: ...

    def job_ready(self, job: Job) -> bool: ...

    def job_pipelined(self, job: Job) -> bool: ...

    def plugins(self) -> list[Any]: ...

    def reason_notes(self, job: Job, reason: str) -> str: ...


def close(session: Session) -> Decisions:
    """Nominate held pipelined placements, emit podgroup updates and unschedulable reasons."""
    ledger = session.ledger
    names, cycle = session.cluster.nodes.names, session.cycle
    for fn in ledger.closers:
        fn()
    for stmt in ledger.kept:
        for op in stmt.ops:
            t = op.task  # still where the held placement put it (a later action may move it)
            if (t.status is TaskStatus.PIPELINED and t.nominated == op.node) or (
                t.status is TaskStatus.ALLOCATED and t.node == op.node
            ):
                ledger.decisions.nominations.append(Nomination(t.key, names[op.node], cycle))
        stmt.closed = True
    jobs = session.cluster.jobs
    for uid in _closing(session):
        _close_job(session, jobs[uid])
    session.history.closed(ledger.moved_jobs)  # made Running by _close_job
    for p in session.plugins():
        p.on_session_close()
    ledger.decisions.touched = list(ledger.first_state.values())
    ledger.decisions.changed_jobs = ledger.touched_jobs | ledger.moved_jobs | set(ledger.annotations)
    return ledger.decisions


def _closing(session: Session) -> list[str]:
    """The jobs :func:`_close_job` must look at, sorted. Every job when reasons are reported or when the
    front end does not track its jobs' changes; otherwise only those that can have something to say: a
    pod changed by this session, a phase moved, an annotation or a reason given, or a change the front
    end reported since the last session closed (the simulator's events). Any other job was looked at by
    an earlier close in the same state, which made it Running if it was ready (JobReady is a function
    of the job's pods), so it has nothing new."""
    ledger, history = session.ledger, session.history
    # an annotation the session wrote may move a job's key (``las`` reads the attained service)
    annotated = ledger.annotations.keys()
    reported = history.forget_reported(ledger.touched_jobs | annotated)
    if reported is None or session.report_reasons:
        if reported is not None:
            history.closed(reported | ledger.touched_jobs | ledger.moved_jobs | annotated)
        return session.job_uids()
    jobs = session.cluster.jobs
    if session.index is not None:
        picked = set(ledger.moved_jobs)
    else:
        phase0 = session.phase0
        picked = {uid for uid, job in jobs.items() if job.phase is not phase0.get(uid)}
    picked.update(reported, ledger.annotations, ledger.touched_jobs)
    # a job only given a reason changed nothing the index keeps (a phase _close_job moves is named after)
    history.closed(picked)
    picked.update(ledger.reasons)
    return sorted(uid for uid in picked if uid in jobs)


def _close_job(session: Session, job: Job) -> None:
    if not job.tasks and not job.invalid_reason:
        return
    ledger, cycle = session.ledger, session.cycle
    if (
        job.phase is not PodGroupPhase.COMPLETED
        and job.phase is not PodGroupPhase.RUNNING
        and job.tasks
        and job.ready_count() >= job.min_member
        and session.job_ready(job)
        and not job.invalid_reason
    ):
        ledger.set_phase(job, PodGroupPhase.RUNNING)
    notes = ledger.annotations.get(job.uid, {})
    if not job.synthetic and (job.phase is not session.phase0.get(job.uid) or notes):
        ledger.decisions.podgroups.append(
            PodGroupUpdate(job.uid, job.phase.value, dict(sorted(notes.items())), cycle)
        )
    if not session.report_reasons and job.uid not in ledger.reasons:
        return  # a job skipped as known to fail keeps the reason it had
    waiting = [t for t in job.tasks if t.status in PENDING_LIKE and t.managed]
    reason = ledger.reasons.get(job.uid)
    if callable(reason):
        reason = reason()
    nominated = sum(1 for t in waiting if t.status is TaskStatus.PIPELINED)
    if reason and nominated and session.job_pipelined(job) and not reason.startswith("waiting for"):
        reason = (
            f"waiting for resources being released: {nominated} pod(s) nominated, "
            f"{job.ready_count()} of {job.min_member} placed"
        )
    if job.invalid_reason:
        reason = job.invalid_reason
    if waiting and reason:  # a ready job's reason is about its further pods (allocate)
        reason = session.reason_notes(job, reason)
        ledger.decisions.unschedulable.append(Unschedulable(job.uid, reason, cycle))
