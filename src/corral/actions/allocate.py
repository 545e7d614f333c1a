"""``allocate`` (SPEC.md §3.1, Volcano ``actions/allocate``).

Queues in QueueOrder (an Overused queue is skipped for the rest of the cycle), one job at a time from
the chosen queue in JobOrder, its waiting tasks in TaskOrder; each task goes to the best feasible node
(``placement.best_node``), onto capacity being released (a pipeline) when nothing is free now. The job's
Statement is committed when JobReady, kept applied but uncommitted when only JobPipelined (the held
placement is nominated when the session closes, so it persists), and discarded otherwise. A task that
fits nowhere ends the job's attempt, as in Volcano.

Jobs with a topology constraint ask the session for their gang search space (seed 000, SPEC.md §3.3);
each domain is dry-run inside a save/restore and the best plan is re-applied (``place_in_domains``):
a domain holding the job's nominations first, then the lowest tier, then the best HyperNodeOrder score.
No topology logic lives here beyond that.

When enqueue is not among the configured actions, Pending podgroups are treated as admitted. A job that
becomes ready gets the ``kai.scheduler/last-start-timestamp`` annotation (seed 002), which appears in the
decisions as a podgroup update.
"""

from __future__ import annotations

import itertools

import numpy as np

from corral.actions.placement import best_node, no_fit_reason
from corral.framework import skipcache
from corral.framework.extension import Domain, Purpose
from corral.framework.plugin import Action
from corral.framework.session import PENDING_LIKE, Session
from corral.framework.statement import Statement
from corral.manifests.fields import format_time
from corral.model import Job, PodGroupPhase, Task, TaskStatus

__all__ = ["AllocateAction", "LAST_START", "waiting_tasks", "schedulable_jobs"]

LAST_START = "kai.scheduler/last-start-timestamp"
#: Domains dry-run per job at most (seed 000 asks for all; a cap keeps a cycle bounded on big trees).
MAX_DRY_RUNS = 32


def waiting_tasks(job: Job) -> list[Task]:
    return [t for t in job.tasks if t.status in PENDING_LIKE and t.managed and not t.best_effort]


def schedulable_jobs(session: Session, *, quiet: bool = False, skip=None) -> list[Job]:
    """Jobs with waiting pods that may be scheduled this cycle; the others get their reason (unless
    ``quiet``: the eviction actions ask again after allocate already said why). ``skip(job)`` True
    leaves a job out (known to fail, :func:`corral.framework.skipcache.pre_filter`)."""
    admit_all = "enqueue" not in session.actions
    out = []
    for uid in sorted(session.cluster.jobs):
        job = session.cluster.jobs[uid]
        if skip is not None and skip(job):
            continue
        if not waiting_tasks(job):
            continue
        if job.phase is PodGroupPhase.PENDING and not admit_all:
            if quiet:
                continue
            session.reasons.setdefault(job.uid, "podgroup not yet admitted (Pending): enqueue has not "
                                                "admitted it")
            continue
        reason = session.job_valid(job) or session.gang_predicate(job)
        queue = session.cluster.queues.get(job.queue)
        if not reason and (queue is None or not queue.open):
            reason = f"queue {job.queue!r} is closed"
        if reason:
            if not quiet:
                session.unschedulable(job, reason)
            continue
        out.append(job)
    return out


class AllocateAction(Action):
    name = "allocate"

    def execute(self, session: Session) -> None:
        queues = session.cluster.queues
        by_queue: dict[str, skipcache.JobHeap] = {}
        job_key = session.job_sort_key()
        seq = itertools.count()
        self.skip = skipcache.skipper_for(session)
        group = skipcache.grouping(self.skip, session)
        for job in schedulable_jobs(session, skip=skipcache.pre_filter(self.skip, session)):
            if job.queue not in by_queue:
                by_queue[job.queue] = skipcache.JobHeap(group)
            by_queue[job.queue].push((job_key(job), next(seq), job))
        queue_key = session.queue_key()
        while by_queue:
            name = min(by_queue, key=lambda n: queue_key(queues[n]))
            queue = queues[name]
            if session.overused(queue):
                for _, _, job in by_queue.pop(name):
                    session.unschedulable(job, f"queue {name!r} already holds its deserved share")
                continue
            _, _, job = by_queue[name].pop()
            if not by_queue[name]:
                del by_queue[name]
            self.place_job(session, job)

    # -- one job ---------------------------------------------------------------------------------
    def place_job(self, session: Session, job: Job) -> None:
        was_ready = session.job_ready(job)
        tasks = sorted(waiting_tasks(job), key=session.task_key())
        stmt = session.statement()
        skip = getattr(self, "skip", None)
        plain = skip is not None and not was_ready and not job.topology_mode and bool(tasks)
        if plain and skip.known_to_fail(job, tasks[0]):
            # fails at its first pod (framework/skipcache.py); the reason as the attempt would give it,
            # when reasons are reported (else the job keeps the reason of its last attempt)
            if not session.report_reasons:
                return stmt.discard()
            reason = self.place_tasks(session, job, tasks[:1], stmt, None)
            if not stmt.ops:
                return self.finish(session, job, stmt, was_ready, reason)
            stmt.discard()                                    # cannot happen; try the job after all
        domains: list = [None]
        if job.topology_mode:
            domains = session.gang_search_space(job, Purpose.ALLOCATE)
        if len(domains) == 1:
            only = domains[0]
            reason = self.place_tasks(session, job, tasks, stmt, None if only is None else only.mask)
        else:
            reason = self.place_in_domains(session, job, tasks, stmt, domains)
        failed_first = plain and bool(reason) and not stmt.ops
        self.finish(session, job, stmt, was_ready, reason)
        if plain:
            skip.record(job, tasks[0], failed_first)

    def place_in_domains(self, session: Session, job: Job, tasks: list[Task], stmt: Statement,
                         domains: list[Domain]) -> str:
        """Dry-run the domains (save/restore) and re-apply the best plan (seed 000 §2.2): a domain holding
        the job's nominations first, then the lowest tier, then the best HyperNodeOrder score after
        placement (bin-packing), then the plugin's order. Dry runs stop at the first ready plan in the
        nominated domain, when the tier rises above the best plan's, or after ``MAX_DRY_RUNS`` domains;
        with no ready plan the first pipelined one is kept."""
        nominated = np.array([t.nominated for t in tasks if t.status is TaskStatus.PIPELINED and t.nominated >= 0],
                             dtype=np.int64)

        def holds(d: Domain) -> bool:
            return bool(nominated.size) and bool(d.mask[nominated].all())

        def tier(d: Domain) -> int:
            return d.tier if d.tier is not None else 1 << 30          # the whole cluster comes last
        domains = sorted(domains, key=lambda d: not holds(d))         # stable: plugin order otherwise
        reasons: list[tuple[str, str]] = []
        best, fallback = None, None
        for i, d in enumerate(domains):
            if i >= MAX_DRY_RUNS or (best is not None and tier(d) > best[0][1]):
                break
            mark = stmt.save()
            reason = self.place_tasks(session, job, tasks, stmt, d.mask)
            if session.job_ready(job):
                key = (0 if holds(d) else 1, tier(d), -float(session.hypernode_scores(job, [d])[0]), i)
                if best is None or key < best[0]:
                    best = (key, d)
            elif fallback is None and session.job_pipelined(job):
                fallback = d
            else:
                reasons.append((d.name, reason))
            stmt.restore(mark)
            if best is not None and best[0][0] == 0:
                break
        chosen = best[1] if best is not None else fallback
        if chosen is not None:
            self.place_tasks(session, job, tasks, stmt, chosen.mask)
            return ""
        if not reasons:
            return "no topology domain can hold the gang"
        names = ", ".join(n for n, _ in reasons[:5]) + (", ..." if len(reasons) > 5 else "")
        last, why = reasons[-1]
        return (f"none of {len(reasons)} topology domain(s) ({names}) can hold the gang"
                + (f"; in {last}: {why}" if why else ""))

    def place_tasks(self, session: Session, job: Job, tasks: list[Task], stmt: Statement,
                    domain: np.ndarray | None) -> str:
        queue = session.cluster.queues[job.queue]
        placed = job.ready_count()
        for task in tasks:
            if task.status not in PENDING_LIKE:
                continue
            if not session.allocatable(queue, task):
                return (f"{placed} of {job.min_member} pods placed; queue {job.queue!r} would exceed its "
                        f"capability with pod {task.name}")
            row, pipelined = best_node(session, task, domain)
            if row < 0:
                return no_fit_reason(session, job, task, placed, domain)
            if pipelined:
                stmt.pipeline(task, row)
            else:
                stmt.allocate(task, row)
            placed += 1
        return ""

    def finish(self, session: Session, job: Job, stmt: Statement, was_ready: bool, reason: str) -> None:
        if session.job_ready(job):
            stmt.commit()
            if not was_ready:
                job.phase = PodGroupPhase.RUNNING
                session.annotate(job, LAST_START, format_time(session.now))
        elif session.job_pipelined(job) and stmt.ops:
            session.keep(stmt)
            session.unschedulable(job, "waiting for resources being released; placement held as "
                                       "nominations" + (f" ({reason})" if reason else ""))
        else:
            stmt.discard()
            session.unschedulable(job, reason or f"gang not ready: {job.ready_count()} of "
                                                 f"{job.min_member} pods can be placed")
