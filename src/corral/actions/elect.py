"""``elect`` (seed 001 "Implementation", Volcano's removed ``actions/elect``): make sure one target job
exists for the reservation.

The target stays elected until it runs or is deleted: a job whose ``corral.io/target-since`` annotation
is set and that still waits keeps the election (the earliest elected, when several claim it). A target
that now runs, or a second claimant, gets the annotation cleared (``""``). With no target, the
candidates are the Pending and Inqueue podgroups with waiting pods that are valid (JobValid, the gang
fast-fail), and the TargetJob extension point (the ``reservation`` plugin) picks one; the choice is
written back as a podgroup update carrying ``corral.io/target-since: <election time>``, so a later cycle,
the simulator and a restarted scheduler keep the same target.

Action order (checked when the configuration loads, :func:`check_order`): Volcano documented both
``elect, enqueue, reserve, allocate, backfill`` (v1.2.1) and ``enqueue, elect, allocate, backfill,
reserve`` (v1.1.0); ``elect`` must come before ``allocate`` and before ``reserve``, ``reserve`` needs
``elect``, and both need the ``reservation`` plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.errors import ConfigError
from corral.framework.plugin import Action
from corral.framework.reservation import TARGET_SINCE, elected_at, parse_lock_nodes, waiting
from corral.framework.session import Session
from corral.manifests.fields import format_time
from corral.model import PodGroupPhase

if TYPE_CHECKING:
    from corral.framework.config import Config

__all__ = ["ElectAction", "check_order"]

_CANDIDATE_PHASES = (PodGroupPhase.PENDING, PodGroupPhase.INQUEUE)


def check_order(config: "Config", file: str) -> None:
    """Reject an action order under which the reservation cannot work, naming the file and the rule."""
    names = [a.name for a in config.actions]

    def fail(rule: str) -> None:
        raise ConfigError(f"{rule} (actions: {', '.join(names)}; Volcano's orders: 'elect, enqueue, reserve, "
                          "allocate, backfill' or 'enqueue, elect, allocate, backfill, reserve')",
                          file=file, field="actions")

    plugin = config.plugin("reservation")
    if plugin is None:
        fail("elect and reserve need the reservation plugin in the tiers")
    lock_nodes = getattr(plugin.args, "lock_nodes", "")
    try:
        parse_lock_nodes(lock_nodes, 1)
    except ValueError:
        raise ConfigError(f"expected a node count N or a percentage N% (0-100), got {lock_nodes!r}", file=file,
                          field="reservation.arguments.lockNodes") from None
    if "reserve" in names and "elect" not in names:
        fail("reserve needs elect before it")
    if "elect" in names and "reserve" in names and names.index("reserve") < names.index("elect"):
        fail("reserve must come after elect")
    if "elect" in names and "allocate" in names and names.index("elect") > names.index("allocate"):
        fail("elect must come before allocate")


class ElectAction(Action):
    name = "elect"
    check_config = staticmethod(check_order)

    def execute(self, session: Session) -> None:
        jobs = session.cluster.jobs
        claimants = sorted((since, uid) for uid, job in jobs.items()
                           if (since := elected_at(job)) is not None)
        kept = None
        for _, uid in claimants:
            job = jobs[uid]
            if kept is None and job.ready_count() < job.min_member and waiting(job):
                kept = job
            else:
                session.annotate(job, TARGET_SINCE, "")
        if claimants:
            session.lock_version += 1
        if kept is not None:
            return
        candidates = [job for uid, job in sorted(jobs.items())
                      if job.phase in _CANDIDATE_PHASES and not job.synthetic and waiting(job)
                      and job.ready_count() < job.min_member and self._valid(session, job)]
        target = session.target_job(candidates)
        if target is not None:
            session.annotate(target, TARGET_SINCE, format_time(session.now))
            session.lock_version += 1

    @staticmethod
    def _valid(session: Session, job) -> bool:
        if session.job_valid(job) or session.gang_predicate(job):
            return False
        queue = session.cluster.queues.get(job.queue)
        return queue is not None and queue.open
