"""The jobs a placement action works on, shared by every action that places or makes room: which
podgroups are schedulable now and in what order (``schedulable_jobs``), their waiting pods, a job's
turn state (``Pending``) and Volcano's continue-allocating rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from corral.framework.session import PENDING_LIKE, Session
from corral.model import ALLOCATED_STATES, Job, PodGroupPhase, Task, TaskStatus

__all__ = ["LAST_START", "Pending", "continue_allocating", "schedulable", "schedulable_jobs", "waiting_tasks"]

LAST_START = "kai.scheduler/last-start-timestamp"
#: Pods that count toward a role minimum already held (ready).
READY_STATES = ALLOCATED_STATES | {TaskStatus.SUCCEEDED}


def waiting_tasks(job: Job, *, best_effort: bool = False) -> list[Task]:
    """The job's waiting pods; best-effort ones (no requests but their pod slot) only if asked: allocate
    leaves them to backfill, as Volcano's allocate skips ``Resreq.IsEmpty()`` tasks."""
    return [
        t for t in job.tasks if t.status in PENDING_LIKE and t.managed and (best_effort or not t.best_effort)
    ]


def schedulable_jobs(
    session: Session,
    *,
    quiet: bool = False,
    skip: Callable[[Job], bool] | None = None,
    best_effort: bool = False,
) -> list[Job]:
    """Jobs with waiting pods that may be scheduled this cycle; the others get their reason (unless
    ``quiet``: the eviction actions ask again after allocate already said why). ``skip(job)`` True
    leaves a job out (known to fail, :func:`corral.actions.common.skipping.pre_filter`). ``best_effort``: a
    job whose only waiting pods are best-effort counts too (the eviction actions: Volcano's preempt and
    reclaim take every Pending task)."""
    admit_all = "enqueue" not in session.actions
    # a podgroup enqueue has not admitted is passed over first; its reason is left to the report when
    # reasons are not reported every cycle (the simulator gives it at the end, or enqueue's when it
    # tried the job): no work per waiting podgroup
    silent = quiet or not session.report_reasons
    out = []
    jobs = session.cluster.jobs
    index = session.index
    if index is not None and silent:
        # only jobs with waiting pods have anything to do here, and with enqueue only admitted ones: the
        # session's job index hands those over (plus any job the session changed), in the same order
        walk = index.candidates(
            session.ledger.since_open(),
            "waiting_all" if best_effort else "waiting",
            within="" if admit_all else "admitted",
        )
    else:
        walk = session.job_uids()
    for uid in walk:
        job = jobs[uid]
        if silent and not admit_all and job.phase is PodGroupPhase.PENDING:
            continue
        if skip is not None and skip(job):
            continue
        if not waiting_tasks(job, best_effort=best_effort):
            continue
        if job.phase is PodGroupPhase.PENDING and not admit_all:
            if quiet:
                continue
            session.ledger.reasons.setdefault(
                job.uid, "podgroup not yet admitted (Pending): enqueue has not admitted it"
            )
            continue
        reason = _blocker(session, job)
        if reason:
            if not quiet:
                session.ledger.unschedulable(job, reason)
            continue
        out.append(job)
    return out


def _blocker(session: Session, job: Job) -> str | None:
    """Why a job with waiting pods may not be scheduled this cycle (None or "": it may)."""
    reason = session.job_valid(job) or session.gang_predicate(job)
    queue = session.cluster.queues.get(job.queue)
    if not reason and (queue is None or not queue.open):
        reason = f"queue {job.queue!r} is closed"
    return reason


def schedulable(session: Session, job: Job, admit_all: bool) -> bool:
    """Would ``schedulable_jobs(session, quiet=True)`` hand ``job`` over (``admit_all``: no ``enqueue``
    action in the session)? One job's test, for a walk that takes jobs in its own order and stops early
    (``timeslice`` from its kept lines)."""
    if not admit_all and job.phase is PodGroupPhase.PENDING:
        return False
    return bool(waiting_tasks(job)) and not _blocker(session, job)


@dataclass
class Pending:
    """A job's waiting tasks across its allocate turns, in TaskOrder (Volcano's ``pendingTasks``): the
    turn resumes at ``pos``. ``failed``: the roles with a pod that fit nowhere (Volcano's fit errors by
    task spec); ``reason``: why the last task that could not be placed was not."""

    tasks: list[Task]
    pos: int = 0
    failed: set[str] = field(default_factory=set)
    reason: str = ""

    def left(self) -> bool:
        return self.pos < len(self.tasks)

    def copy(self) -> Pending:
        return Pending(self.tasks, self.pos, set(self.failed), self.reason)


def continue_allocating(job: Job, failed: set[str], rest: list[Task]) -> bool:
    """May the job go on with its next task after a pod of each role in ``failed`` fit nowhere (Volcano
    ``JobInfo.NeedContinueAllocating``)? ``rest``: its tasks not yet tried. Never when the job needs every
    pod; for an elastic job (minMember below the sum of role minimums) when its ready pods plus the
    waiting pods of roles not failed still reach minMember; otherwise when every failed role already
    holds its role minimum (a role without one always does)."""
    if job.min_member >= len(job.tasks):
        return False
    if job.elastic:
        left = sum(1 for t in rest if t.status in PENDING_LIKE and (not t.role or t.role not in failed))
        return job.ready_count() + left >= job.min_member
    if not job.min_task_member:
        return True
    held = job.role_counts(READY_STATES)
    return all(held.get(role, 0) >= job.min_task_member.get(role, 0) for role in failed if role)
