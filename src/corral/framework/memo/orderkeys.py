"""Job order keys kept across cycles (issue "cycles that cost what changed"): a cycle does not recompute
the JobOrder key of every waiting job, only of the jobs whose pods changed since the key was computed.
Held by :class:`~corral.framework.memo.history.ClusterHistory`; read through
:meth:`corral.framework.session.Session.job_sort_key`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from corral.model import Job, TaskStatus

__all__ = ["OrderKeys"]


class OrderKeys:
    """The kept keys: per job uid, ``(job, state, key)`` computed under one context (the plugins'
    ``job_order_key_context()``); a new context drops them all."""

    __slots__ = ("context", "horizons", "kept")

    def __init__(self) -> None:
        self.context: tuple[Any, ...] | None = None
        # uid -> (job, state, key, whether the key's moving parts are taken again at each use)
        self.kept: dict[str, tuple[Job, Any, tuple[Any, ...], bool]] = {}
        # uid -> (the kept key it was taken from, the instant it holds until, the key with moving parts)
        self.horizons: dict[str, tuple[tuple[Any, ...], float, tuple[Any, ...]]] = {}

    def forget(self, *groups: Iterable[str]) -> None:
        """Drop the kept keys of jobs whose pods changed (a closing session's and the front end's)."""
        kept, horizons = self.kept, self.horizons
        for group in groups:
            for uid in group:
                kept.pop(uid, None)
                horizons.pop(uid, None)

    def keyed(
        self,
        jobs: dict[str, Job],
        context: tuple[Any, ...],
        compute: Callable[[Job], tuple[Any, ...]],
        touched: set[str],
        changed: set[str] | None,
        *,
        moving: Callable[[Job, tuple[Any, ...]], tuple[Any, ...]] | None = None,
    ) -> Callable[[Job], tuple[Any, ...]]:
        """A key function that reuses kept keys, when every JobOrder plugin says its key is a function of
        the job's own pods and fields (its priority and minMember are checked too) plus ``context``: a
        job's key is computed again only when its pods' states (status, nomination) or the context
        changed. ``changed`` (the front end tracks its jobs' changes) names the jobs changed since the
        last session closed; ``touched`` the jobs this session changed; a closing session forgets both
        (:meth:`forget`). Without tracking (``changed`` None) each job's pod states are compared. A job
        with a nominated pod is not kept (a nomination from an earlier cycle counts for its job only
        once the session places it again). ``moving``: the keys of jobs with a running pod move with
        the clock (``JobOrderKey.running_keys_move``); such a job's key is kept but its moving parts are
        taken again at each use (``moving(job, kept_key)``: the other plugins' keys stay)."""
        if self.context != context:
            self.context, self.kept, self.horizons = context, {}, {}
        if len(self.kept) > 2 * len(jobs) + 64:
            for uid in [u for u in self.kept if u not in jobs]:
                del self.kept[uid]
            for uid in [u for u in self.horizons if u not in jobs]:
                del self.horizons[uid]
        if changed is not None:
            return self._tracked(compute, touched, changed, moving)
        return self._walked(compute, moving)

    def _tracked(
        self,
        compute: Callable[[Job], tuple[Any, ...]],
        touched: set[str],
        changed: set[str],
        moving: Callable[[Job, tuple[Any, ...]], tuple[Any, ...]] | None,
    ) -> Callable[[Job], tuple[Any, ...]]:
        """The key function where the front end names the jobs changed since the last session."""
        kept = self.kept
        pipelined = TaskStatus.PIPELINED
        # the pod state whose jobs' keys move with the clock (none without a moving plugin)
        live = TaskStatus.RUNNING if moving is not None else None

        def tracked(job: Job) -> tuple[Any, ...]:
            uid = job.uid
            got = kept.get(uid)
            if (
                got is not None
                and got[0] is job
                and uid not in changed
                and uid not in touched
                and got[1][0] == job.priority
                and got[1][1] == job.min_member
            ):
                return moving(job, got[2]) if got[3] and moving is not None else got[2]
            key = compute(job)
            if all(t.status is not pipelined for t in job.tasks):
                kept[uid] = (
                    job,
                    (job.priority, job.min_member),
                    key,
                    any(t.status is live for t in job.tasks),
                )
            return key

        return tracked

    def _walked(
        self,
        compute: Callable[[Job], tuple[Any, ...]],
        moving: Callable[[Job, tuple[Any, ...]], tuple[Any, ...]] | None,
    ) -> Callable[[Job], tuple[Any, ...]]:
        """The key function without tracking: each job's pod states are compared with the kept ones."""
        kept = self.kept
        pipelined = TaskStatus.PIPELINED
        live = TaskStatus.RUNNING if moving is not None else None

        def walked(job: Job) -> tuple[Any, ...]:
            state = (job.priority, job.min_member, [(t.status, t.nominated) for t in job.tasks])
            got = kept.get(job.uid)
            if got is not None and got[0] is job and got[1] == state:
                return moving(job, got[2]) if got[3] and moving is not None else got[2]
            key = compute(job)
            if all(s is not pipelined for s, _ in state[2]):
                kept[job.uid] = (job, state, key, any(s is live for s, _ in state[2]))
            return key

        return walked

    def until_horizon(
        self,
        moved: Callable[[Job, tuple[Any, ...]], tuple[Any, ...]],
        untils: list[Callable[[Job], float]],
        now: float,
        check: bool = False,
    ) -> Callable[[Job, tuple[Any, ...]], tuple[Any, ...]]:
        """``moved`` (a running job's kept key with its moving parts taken again) where every moving
        plugin tells until when its part holds (``KeyHorizon``: ``las``'s next threshold crossing): the
        key taken once is reused while ``now`` is before the earliest of those instants and the job's
        kept key is the one it was taken from (the job did not change). ``check``
        (``CORRAL_CHECK_INDEX=1``): a reused key is compared with one taken afresh."""
        horizons = self.horizons

        def held(job: Job, kept: tuple[Any, ...]) -> tuple[Any, ...]:
            hit = horizons.get(job.uid)
            if hit is not None and hit[0] is kept and now < hit[1]:
                if check and moved(job, kept) != hit[2]:
                    raise AssertionError(f"the kept key of {job.uid} changed before its horizon")
                return hit[2]
            key = moved(job, kept)
            horizons[job.uid] = (kept, min(until(job) for until in untils), key)
            return key

        return held
