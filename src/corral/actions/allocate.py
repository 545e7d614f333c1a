"""``allocate`` (SPEC.md §3.1, Volcano ``actions/allocate/allocate.go``).

Turns, as Volcano's ``allocateResources``: the queue first in QueueOrder (asked again before every turn:
shares change as pods are placed; an Overused queue is skipped for the rest of the cycle) gives a turn
to its first job in JobOrder, which places its waiting tasks in TaskOrder; each task goes to the best
feasible node (``placement.best_node``), onto capacity being released (a pipeline) when nothing is free
now. The turn ends when the job becomes ready with pods still waiting — its Statement commits and the
job goes back into its queue's JobOrder — so an already-ready job gets one pod per turn and queues
interleave by share. A turn that placed nothing never requeues its job. At the end of its last turn
the job's Statement is committed when JobReady, kept applied but uncommitted when only JobPipelined
(the held placement is nominated when the session closes, so it persists), and discarded otherwise.

Continue-allocating (Volcano ``JobInfo.NeedContinueAllocating``/``TaskHasFitErrors``): a task refused
by the queue's Allocatable is skipped and does not end the job (the job's reason is the refusing
plugin's own, ``Session.allocatable_refusal``); a task that fits nowhere marks its role
failed (the other pods of that role are skipped) and the job goes on with its next task when it can
still reach its minimums without that role — an elastic job (minMember below the sum of the role
minimums) when its ready pods plus the waiting pods of roles not failed reach minMember, any other job
when every failed role already holds its role minimum; a job that needs every one of its pods
(minMember = its pod count) stops at the first failure. Pods without a role are never skipped for a
sibling's failure (Volcano keys fit errors by the task spec name).

Jobs with a topology constraint ask the session for their gang search space (seed 000, SPEC.md §3.3);
each domain is dry-run inside a save/restore and the best plan is re-applied (``place_in_domains``):
a domain holding the job's nominations first, then the lowest tier, then the best HyperNodeOrder score.
A dry run that placed no pod is not a plan, even for a job already ready (Volcano skips a hyperNode
whose statement has no operations). No topology logic lives here beyond that.

When enqueue is not among the configured actions, Pending podgroups are treated as admitted. A job that
becomes ready gets the ``kai.scheduler/last-start-timestamp`` annotation (seed 002), which appears in the
decisions as a podgroup update.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from corral.actions.common import skipping as skipcache
from corral.actions.common.jobs import (
    LAST_START,
    Pending,
    continue_allocating,
    schedulable_jobs,
    waiting_tasks,
)
from corral.actions.common.placement import best_node, no_fit_reason, overused_reason
from corral.actions.common.subgroups import place_by_subgroup, started_subgroups
from corral.framework.extension import Domain, Purpose
from corral.framework.plugin import Action
from corral.framework.session import PENDING_LIKE, Session
from corral.framework.statement import Statement
from corral.model import Job, PodGroupPhase, Queue, TaskStatus
from corral.model.clock import format_time

__all__ = ["AllocateAction"]

#: Domains dry-run per job at most (seed 000 asks for all; a cap keeps a cycle bounded on big trees).
MAX_DRY_RUNS = 32


class AllocateAction(Action):
    name = "allocate"
    #: pass over the jobs behind a closed line (:meth:`pass_over`) while skipping is on; a switch for
    #: the equivalence tests (decisions and records are the same either way)
    pass_over_lines = True

    def execute(self, session: Session) -> None:
        queues = session.cluster.queues
        by_queue: dict[str, skipcache.JobHeap] = {}
        job_key, task_key = session.job_sort_key(), session.task_key()
        seq = itertools.count()
        self.skip = skipcache.skipper_for(session)
        group = skipcache.grouping(self.skip, session)
        for job in schedulable_jobs(session, skip=skipcache.pre_filter(self.skip, session)):
            if job.queue not in by_queue:
                by_queue[job.queue] = skipcache.JobHeap(group)
            by_queue[job.queue].push((job_key(job), next(seq), job))
        queue_key = session.queue_key()
        pending: dict[str, Pending] = {}
        lines = self.pass_over_lines and session.history.skip and bool(session.implementers("LineRefusal"))
        passing = ""  # the queue whose last job was passed over (nothing changed since its turn began)
        while by_queue:
            if passing and len(by_queue) == 1 and passing in by_queue:
                name = passing  # the only queue left, still not Overused: nothing was placed since
            else:
                name = min(by_queue, key=lambda n: queue_key(queues[n]))
                if session.overused(queues[name]):
                    for _, _, job in by_queue.pop(name):
                        session.ledger.unschedulable(job, overused_reason(session, job))
                    continue
            queue = queues[name]
            _, _, job = by_queue[name].pop()
            if not by_queue[name]:
                del by_queue[name]
            passing = ""
            if lines and job.uid not in pending and self.pass_over(session, queue, job, task_key):
                passing = name
                continue
            state = pending.get(job.uid)
            if state is None:
                state = pending[job.uid] = Pending(sorted(waiting_tasks(job), key=task_key))
            if self.place_job(session, job, state):
                # the turn ended because the job became ready: back into its queue's JobOrder
                if name not in by_queue:
                    by_queue[name] = skipcache.JobHeap(group)
                by_queue[name].push((job_key(job), next(seq), job))

    # -- a job behind a closed line: its reason without a turn -----------------------------------
    def pass_over(self, session: Session, queue: Queue, job: Job, task_key: Any = None) -> bool:
        """Give ``job`` the outcome of its turn without the turn when the first Allocatable plugin says
        the queue's line is closed before it (LineRefusal: strict FIFO's blocked head): every pod would
        be refused for that one reason, so the turn would place nothing and end with the job's reason
        "``k`` of ``m`` pods placed; <refusal>" (and, for a plain job, a first-pod failure in the skip
        memory, or no reason at all when the skip memory knows it fails and reasons are not
        reported) — exactly that is recorded here. A job with a topology constraint or sub-groups
        takes its turn (its reason names the domains). False: the job takes its turn."""
        if job.topology_mode or job.subjobs:
            return False
        why = session.line_refusal(queue, job)
        if why is None:
            return False
        tasks = sorted(waiting_tasks(job), key=task_key or session.task_key())
        if not tasks:
            return False
        if session.history.check_index:  # CORRAL_CHECK_INDEX=1: the promise holds for every pod
            for t in tasks:
                got = session.allocatable_refusal(queue, t)
                if got != why:
                    raise AssertionError(f"LineRefusal says {why!r} for {job.uid}, pod {t.name}: {got!r}")
        skip: skipcache.Skipper | None = getattr(self, "skip", None)
        plain = (
            skip is not None and not session.job_ready(job) and all(t.klass == tasks[0].klass for t in tasks)
        )
        reason = f"{job.ready_count()} of {job.min_member} pods placed; {why}"
        if plain and skip is not None and skip.known_to_fail(job, tasks[0]):
            if session.report_reasons:
                session.ledger.unschedulable(job, reason)
            return True
        session.ledger.unschedulable(job, reason)
        if plain and skip is not None:
            skip.record(job, tasks[0], True)
        return True

    # -- one turn of one job ---------------------------------------------------------------------
    def place_job(self, session: Session, job: Job, state: Pending | None = None) -> bool:
        """One turn of ``job``; True when it should get another (it became ready with pods still waiting
        and this turn placed at least one)."""
        if state is None:
            state = Pending(sorted(waiting_tasks(job), key=session.task_key()))
        was_ready = session.job_ready(job)
        stmt = session.statement()
        skip: skipcache.Skipper | None = getattr(self, "skip", None)
        tasks = state.tasks[state.pos :]
        # skipping (actions/common/skipping.py) only where a first pod that fits nowhere ends the whole
        # attempt with nothing placed: a job not yet ready whose waiting pods are all of one class
        # (under the continue-allocating rule, pods of other classes would still be tried)
        plain = (
            skip is not None
            and not was_ready
            and not job.topology_mode
            and not job.subjobs
            and bool(tasks)
            and all(t.klass == tasks[0].klass for t in tasks)
        )
        if plain and skip is not None and skip.known_to_fail(job, tasks[0]):
            # fails at its first pod; the reason as the attempt would give it, when reasons are
            # reported (else the job keeps the reason of its last attempt)
            if not session.report_reasons:
                stmt.discard()
                return False
            probe = Pending(tasks[:1])
            self.place_tasks(session, job, probe, stmt, None)
            if not stmt.ops:
                self.finish(session, job, stmt, was_ready, probe.reason)
                return False
            stmt.discard()  # cannot happen; try the job after all, in a fresh statement
            stmt = session.statement()
        domains: list[Any] = [None]
        if job.topology_mode:
            domains = session.gang_search_space(job, Purpose.ALLOCATE)
        if len(domains) == 1:
            only = domains[0]
            self.place_pods(session, job, state, stmt, None if only is None else only.mask)
        else:
            reason = self.place_in_domains(session, job, state, stmt, domains)
            state.reason = reason
        placed = bool(stmt.ops)
        failed_first = plain and bool(state.reason) and not stmt.ops
        self.finish(session, job, stmt, was_ready, state.reason)
        if plain and skip is not None:
            skip.record(job, tasks[0], failed_first)
        return placed and state.left() and session.job_ready(job)

    def place_in_domains(
        self, session: Session, job: Job, state: Pending, stmt: Statement, domains: list[Domain]
    ) -> str:
        """Dry-run the domains (save/restore) and re-apply the best plan (seed 000 §2.2): a domain holding
        the job's nominations first, then (a job with Volcano sub-groups) the plan that starts the most
        sub-groups — as Volcano's guide shows a job held to tier 2 running both of its tier-1
        partitions rather than one — then the lowest tier, then the best HyperNodeOrder score after
        placement (bin-packing), then the plugin's order. A dry run that placed nothing is no plan. Dry
        runs stop at the first ready plan in the nominated domain, when the tier rises above the best
        plan's (not for a job with sub-groups), or after ``MAX_DRY_RUNS`` domains; with no ready plan the first pipelined one is kept.
        ``state`` moves on as the chosen plan's turn did."""
        tasks = state.tasks[state.pos :]
        nominated = np.array(
            [t.nominated for t in tasks if t.status is TaskStatus.PIPELINED and t.nominated >= 0],
            dtype=np.int64,
        )

        def holds(d: Domain) -> bool:
            return bool(nominated.size) and bool(d.mask[nominated].all())

        def tier(d: Domain) -> int:
            return d.tier if d.tier is not None else 1 << 30  # the whole cluster comes last

        domains = sorted(domains, key=lambda d: not holds(d))  # stable: plugin order otherwise
        reasons: list[tuple[str, str]] = []
        best, fallback = None, None
        for i, d in enumerate(domains):
            if i >= MAX_DRY_RUNS or (best is not None and not job.subjobs and tier(d) > best[0][2]):
                break
            mark = stmt.save()
            trial = state.copy()
            self.place_pods(session, job, trial, stmt, d.mask)
            if len(stmt.ops) == mark:
                reasons.append((d.name, trial.reason))
            elif session.job_ready(job):
                key = (
                    0 if holds(d) else 1,
                    -started_subgroups(job),
                    tier(d),
                    -float(session.hypernode_scores(job, [d])[0]),
                    i,
                )
                if best is None or key < best[0]:
                    best = (key, d)
            elif fallback is None and session.job_pipelined(job):
                fallback = d
            else:
                reasons.append((d.name, trial.reason))
            stmt.restore(mark)
            if best is not None and best[0][0] == 0:
                break
        chosen = best[1] if best is not None else fallback
        if chosen is not None:
            self.place_pods(session, job, state, stmt, chosen.mask)
            return state.reason
        state.pos = len(state.tasks)  # nothing placed: the turn is over
        return _no_domain(reasons, session.job_ready(job))

    def place_pods(
        self, session: Session, job: Job, state: Pending, stmt: Statement, domain: np.ndarray | None
    ) -> None:
        """Place the job's waiting pods inside ``domain``: task by task (:meth:`place_tasks`), or, for a
        PodGroup with Volcano sub-groups, sub-group by sub-group (:mod:`corral.actions.common.subgroups`)."""
        if job.subjobs:
            place_by_subgroup(self, session, job, state, stmt, domain)
        else:
            self.place_tasks(session, job, state, stmt, domain)

    def place_tasks(
        self,
        session: Session,
        job: Job,
        state: Pending,
        stmt: Statement,
        domain: np.ndarray | None,
        turn: bool = True,
    ) -> None:
        """Place ``state``'s tasks from ``state.pos`` on: stop when the job becomes ready with tasks
        left (the turn ends; not when ``turn`` is False), or when a task fits nowhere and the job cannot
        go on without its role (:func:`continue_allocating`; for a pod of a sub-group: when the
        sub-group needs every one of its pods). A task refused by Allocatable, or of a role that already
        failed, is skipped."""
        queue = session.cluster.queues[job.queue]
        placed = job.ready_count()
        tasks = state.tasks
        while state.pos < len(tasks):
            task = tasks[state.pos]
            state.pos += 1
            if task.status not in PENDING_LIKE:
                continue
            refused = session.allocatable_refusal(queue, task)
            if refused:
                state.reason = f"{placed} of {job.min_member} pods placed; {refused}"
                continue
            if task.role and task.role in state.failed:
                continue
            row, pipelined = best_node(session, task, domain)
            if row < 0:
                state.reason = no_fit_reason(session, job, task, placed, domain)
                state.failed.add(task.role)
                sj = task.subjob
                if sj is not None and len(sj.tasks) > sj.size:
                    continue  # Volcano NeedContinueAllocating for a sub-group
                if sj is None and continue_allocating(job, state.failed, tasks[state.pos :]):
                    continue
                state.pos = len(tasks)  # the job stops here
                return
            if pipelined:
                stmt.pipeline(task, row)
            else:
                stmt.allocate(task, row)
            placed += 1
            if turn and state.pos < len(tasks) and session.job_ready(job):
                return  # ready: the turn ends

    def finish(self, session: Session, job: Job, stmt: Statement, was_ready: bool, reason: str) -> None:
        if session.job_ready(job):
            stmt.commit()
            if not was_ready:
                session.ledger.set_phase(job, PodGroupPhase.RUNNING)
                session.ledger.annotate(job, LAST_START, format_time(session.now))
            if reason:
                # an already-ready job whose further pods could not be placed says why
                session.ledger.unschedulable(job, reason)
        elif session.job_pipelined(job) and stmt.ops:
            session.ledger.keep(stmt)
            session.ledger.unschedulable(
                job,
                "waiting for resources being released; placement held as "
                "nominations" + (f" ({reason})" if reason else ""),
            )
        else:
            stmt.discard()
            session.ledger.unschedulable(
                job, reason or f"gang not ready: {job.ready_count()} of {job.min_member} pods can be placed"
            )


def _no_domain(reasons: list[tuple[str, str]], ready: bool) -> str:
    """The reason of a gang no topology domain can hold: the domains tried (``reasons``: each one's name
    and why its dry run placed nothing) and the last one's reason."""
    if not reasons:
        return "no topology domain can hold the gang"
    names = ", ".join(n for n, _ in reasons[:5]) + (", ..." if len(reasons) > 5 else "")
    last, why = reasons[-1]
    return (
        f"none of {len(reasons)} topology domain(s) ({names}) can hold the "
        + ("gang's waiting pods" if ready else "gang")
        + (f"; in {last}: {why}" if why else "")
    )
