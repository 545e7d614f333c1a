"""``reserve`` (seed 001 "Implementation", Volcano's removed ``actions/reserve``): lock nodes for the
target job, release them when it no longer needs them.

Each cycle: every node locked for a job that is not the waiting target any more (it runs, it is gone,
it was replaced) is released — a ``node_locks`` decision with an empty job, as an empty nomination clears
one. If the target still waits, the ReservedNodes extension point (the ``reservation`` plugin, by its
``lockMode``) says which nodes to lock; each newly locked node becomes a ``node_locks`` decision (the
front end labels it ``corral.io/locked-for``). Nominations that other jobs hold on a locked node (from
earlier cycles) are cleared unless the plugin's predicate still lets that pod use the node (a planned
backfill), so nothing but the target is nominated there. A target that has just become ready gets its
``corral.io/target-since`` annotation cleared here.
"""

from __future__ import annotations

import numpy as np

from corral.actions.common.checks import check_order
from corral.framework.plugin import Action
from corral.framework.reservation import TARGET_SINCE, current_target, elected_at, lock_owners
from corral.framework.session import Session
from corral.model import Job, TaskStatus

__all__ = ["ReserveAction"]


class ReserveAction(Action):
    name = "reserve"
    check_config = staticmethod(check_order)

    def execute(self, session: Session) -> None:
        cluster = session.cluster
        owners = lock_owners(cluster.nodes, cluster.jobs)
        target = current_target(cluster)
        if target is not None and session.job_ready(target) and target.ready_count() >= target.min_member:
            target = None
        uid = target.uid if target is not None else ""
        for job in cluster.jobs.values():  # a target placed by this cycle stops being one
            if elected_at(job) is not None and job is not target and job.ready_count() >= job.min_member:
                session.ledger.annotate(job, TARGET_SINCE, "")
                session.ledger.lock_version += 1
        stale = np.flatnonzero((owners != "") & (owners != uid))
        session.ledger.lock_nodes(stale.tolist(), "")
        if target is None:
            return
        locked = owners == uid
        mask = session.reserved_nodes(target, locked)
        if mask is None:
            return
        session.ledger.lock_nodes(np.flatnonzero(locked & ~mask).tolist(), "")
        session.ledger.lock_nodes(np.flatnonzero(mask & ~locked).tolist(), uid)
        self._clear_nominations(session, target, mask)

    @staticmethod
    def _clear_nominations(session: Session, target: Job, locked: np.ndarray) -> None:
        pods = [
            t
            for t in session.ledger.open_nominations.values()
            if t.status is TaskStatus.PIPELINED
            and t.job is not target
            and t.nominated >= 0
            and locked[t.nominated]
        ]
        if not pods:
            return
        with session.statement() as stmt:
            for t in sorted(pods, key=lambda t: t.key):
                if not session.predicate(t)[t.nominated]:
                    stmt.clear_nomination(t)
            stmt.commit()
