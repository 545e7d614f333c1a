"""``elect`` (seed 001 "Implementation", Volcano's removed ``actions/elect``): make sure one target job
exists for the reservation.

The target stays elected until it runs or is deleted: a job whose ``corral.io/target-since`` annotation
is set and that still waits keeps the election (the earliest elected, when several claim it). A target
that now runs, that became invalid (its queue closed, too few pods), or a second claimant, gets the
annotation cleared (``""``). With no target, the
candidates are the Pending and Inqueue podgroups with waiting pods that are valid (JobValid, the gang
fast-fail), and the TargetJob extension point (the ``reservation`` plugin) picks one — passing over a
job that would fit in what is idle now (it is not starving; electing it would lock nodes for one cycle
for nothing). A Pending target is admitted (Inqueue) at once unless its queue votes against it. The choice is
written back as a podgroup update carrying ``corral.io/target-since: <election time>``, so a later cycle,
the simulator and a restarted scheduler keep the same target.

Action order (checked when the configuration loads, :func:`check_order`): Volcano documented both
``elect, enqueue, reserve, allocate, backfill`` (v1.2.1) and ``enqueue, elect, allocate, backfill,
reserve`` (v1.1.0); ``elect`` must come before ``allocate`` and before ``reserve``, ``reserve`` needs
``elect``, and both need the ``reservation`` plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from corral.actions.common.checks import check_order
from corral.actions.common.subgroups import greedy_trial, has_subgroup_topology, place_held
from corral.framework.plugin import Action
from corral.framework.reservation import TARGET_SINCE, elected_at, waiting
from corral.framework.session import Session
from corral.model import Job, PodGroupPhase
from corral.model.clock import format_time
from corral.model.resources import EPS

if TYPE_CHECKING:
    pass

__all__ = ["ElectAction", "check_order", "fits_now"]

_CANDIDATE_PHASES = (PodGroupPhase.PENDING, PodGroupPhase.INQUEUE)
#: Jobs that would start at once are passed over; after this many such picks nobody is elected.
MAX_PICKS = 16


def fits_now(session: Session, job: Job) -> bool:
    """Would the pods ``job`` needs to start fit in what is idle now (predicates included; pods of one
    class packed greedily node by node)? Such a job is not starving and is not elected: electing it
    would lock nodes for one cycle for nothing. A job whose Volcano sub-groups carry their own topology
    fits when a dry run places it as allocate would, each such sub-group inside one of its domains
    (:mod:`corral.actions.common.subgroups`), in what is idle now."""
    if has_subgroup_topology(job):
        stmt = session.statement()
        place_held(
            session,
            job,
            waiting(job),
            stmt,
            None,
            greedy_trial(session, job, stmt, pipeline=False, now=True, queue_limits=False),
        )
        ready = session.job_ready(job)
        stmt.discard()
        return ready
    tasks = waiting(job)
    short = max(job.min_member - job.ready_count(), 0)
    tasks = tasks[:short] if 0 < short < len(tasks) else tasks
    nodes = session.cluster.nodes
    free = nodes.allocatable - nodes.used - nodes.pipelined
    groups: dict[Any, Any] = {}
    for t in tasks:
        groups.setdefault(t.klass or id(t), []).append(t)
    for group in groups.values():
        rep = group[0]
        cols, amounts = session.capacity.request_cols(rep)
        slots = np.floor((free[:, cols] + EPS) / amounts).min(axis=1)
        slots = np.where(session.predicate(rep), np.maximum(slots, 0), 0)
        if slots.sum() < len(group):
            return False
        take = np.minimum(slots, np.maximum(len(group) - (np.cumsum(slots) - slots), 0))
        free[:, cols] -= take[:, None] * amounts
    return True


class ElectAction(Action):
    name = "elect"
    check_config = staticmethod(check_order)

    def execute(self, session: Session) -> None:
        jobs = session.cluster.jobs
        claimants = sorted(
            (since, uid) for uid, job in jobs.items() if (since := elected_at(job)) is not None
        )
        kept = None
        for _, uid in claimants:
            job = jobs[uid]
            if (
                kept is None
                and job.ready_count() < job.min_member
                and waiting(job)
                and self._valid(session, job)
            ):
                kept = job
            else:
                session.ledger.annotate(job, TARGET_SINCE, "")
        if claimants:
            session.ledger.lock_version += 1
        if kept is not None:
            self._admit(session, kept)
            return
        candidates = [
            job
            for uid, job in sorted(jobs.items())
            if job.phase in _CANDIDATE_PHASES
            and not job.synthetic
            and waiting(job)
            and job.ready_count() < job.min_member
            and self._valid(session, job)
        ]
        for _ in range(MAX_PICKS):
            target = session.target_job(candidates)
            if target is None or not fits_now(session, target):
                break
            candidates = [j for j in candidates if j is not target]  # it will start: not starving
        else:
            target = None
        if target is not None:
            session.ledger.annotate(target, TARGET_SINCE, format_time(session.now))
            session.ledger.lock_version += 1
            self._admit(session, target)

    @staticmethod
    def _admit(session: Session, job: Job) -> None:
        """Admit a Pending target (its queue's JobEnqueueable votes still apply): the locked capacity is
        for it, and enqueue's overcommit budget, spent on jobs the locks keep waiting, would otherwise
        never let it in (a deadlock the seed's order ``elect, enqueue`` leaves open)."""
        if (
            job.phase is PodGroupPhase.PENDING
            and "enqueue" in session.actions
            and session.job_enqueueable(job)
        ):
            session.ledger.set_phase(job, PodGroupPhase.INQUEUE)
            session.job_enqueued(job)

    @staticmethod
    def _valid(session: Session, job: Job) -> bool:
        if session.job_valid(job) or session.gang_predicate(job):
            return False
        queue = session.cluster.queues.get(job.queue)
        return queue is not None and queue.open
