"""What ``corral run`` keeps per job between cycles, so a steady cycle's bookkeeping costs the jobs that
changed, not every job nor the backlog of jobs that wait (docs/kubernetes.md, "The model between
cycles").

:class:`JobFacts` holds, for the jobs of the kept model (:class:`~corral.kube.model.LiveModel`), what the
applier and the runner used to find by walking every job each cycle, as each job is *built* (the state a
cycle starts from):

- ``below``: the podgroups below their gang minimum with pods on nodes
  (:func:`corral.kube.partial.below_minimum`), the candidates of the partly bound gangs the applier
  completes or releases (:meth:`corral.kube.partial.PartialGangs._incomplete`);
- ``waiting``: per job, its pods of a served scheduler waiting for a node, the start of the per-queue
  count of unschedulable pods (:func:`corral.kube.queuemetrics.unschedulable_by_queue`).

:class:`PodGroupNotices` keeps each podgroup's notices (:func:`corral.framework.notices.job_notices`,
what the configuration will not act on for it), which the runner tells once per object: made again for
a job only when the job was rebuilt, and not looked at when no job changed since the last cycle.

The model brings them up to date from what it rebuilds (a full assembly: every job; an incremental
step: the jobs rebuilt). What a cycle changes on top — a cycle moves pods from one state to another only
through its operations, which it lists (``Decisions.touched``: each pod with its state before the first
change) — is added by the users from those pods alone.

``CORRAL_CHECK_INDEX=1`` (the switch of the scheduling core's kept indexes, read when a model is made)
compares every kept answer with a walk over every job each time it is used, and raises
:class:`IndexMismatch` on a difference (which the runner lets through instead of logging the cycle as
failed); ``tests/kube/test_jobfacts.py`` runs the scenario suite and the wire tests with it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from corral.framework.notices import cluster_notices, job_notices, topology_provider
from corral.model import Cluster, Job, TaskStatus
from corral.model.notes import Note

__all__ = ["IndexMismatch", "JobFacts", "PodGroupNotices", "check_enabled", "waiting_count"]

_WAITING = frozenset({TaskStatus.PENDING, TaskStatus.PIPELINED})
_PLACED = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})
_READY = _PLACED | {TaskStatus.SUCCEEDED}


class IndexMismatch(AssertionError):
    """A kept index differs from a walk over every job (only with ``CORRAL_CHECK_INDEX=1``)."""


def check_enabled() -> bool:
    """``CORRAL_CHECK_INDEX`` is set (1, true, yes): compare kept answers with full walks."""
    return os.environ.get("CORRAL_CHECK_INDEX", "") in ("1", "true", "yes")


def below_minimum(job: Job) -> bool:
    """Pods on nodes, but fewer bound, running or succeeded than the gang's minimum (what the cycle
    started from: this cycle's own placements not counted)."""
    if job.min_member < 2:
        return False
    ready, placed = 0, False
    for t in job.tasks:
        if t.status in _READY:
            ready += 1
            if ready >= job.min_member:
                return False  # whole: most running gangs stop here
            placed = placed or (t.status in _PLACED and t.managed)
    return placed


def waiting_count(job: Job) -> int:
    """The job's pods of a served scheduler waiting for a node (Pending or Pipelined)."""
    return sum(1 for t in job.tasks if t.managed and t.status in _WAITING)


class JobFacts:
    """The kept facts of the model's jobs as built (see the module docstring)."""

    def __init__(self) -> None:
        self.below: set[str] = set()
        self.waiting: dict[str, int] = {}
        self.check = check_enabled()

    def reset(self, jobs: Iterable[Job]) -> None:
        """Every job of a full assembly."""
        self.below, self.waiting = set(), {}
        self.replace((), jobs)

    def replace(self, gone: Iterable[str], jobs: Iterable[Job]) -> None:
        """Jobs rebuilt: the uids ``gone`` left (or were rebuilt), ``jobs`` are as built now."""
        for uid in gone:
            self.below.discard(uid)
            self.waiting.pop(uid, None)
        for job in jobs:
            if not job.synthetic and below_minimum(job):
                self.below.add(job.uid)
            count = waiting_count(job)
            if count:
                self.waiting[job.uid] = count

    def differences(self, jobs: dict[str, Job]) -> list[str]:
        """How the kept facts differ from ``jobs`` as they stand (as built: before a cycle runs)."""
        fresh = JobFacts()
        fresh.reset(jobs.values())
        wrong = []
        if fresh.below != self.below:
            wrong.append(f"below minimum: kept {sorted(self.below ^ fresh.below)} differ")
        if fresh.waiting != self.waiting:
            keys = {
                k
                for k in fresh.waiting.keys() | self.waiting.keys()
                if fresh.waiting.get(k) != self.waiting.get(k)
            }
            wrong.append(f"waiting pods differ for {sorted(keys)[:5]}")
        return wrong


class PodGroupNotices:
    """Every podgroup's notices in the cluster's job order (:func:`corral.framework.notices.cluster_notices`),
    kept by job object across cycles of one configuration."""

    def __init__(self, config: Any, registry: Any) -> None:
        self.config, self.registry = config, registry
        self.provider = topology_provider(config, registry)
        self.by_job: dict[str, tuple[Job, list[Note]]] = {}
        self.key: tuple = ()
        self.last: list[Note] = []
        self.check = check_enabled()

    def of(self, cluster: Cluster, version: int | None) -> list[Note]:
        """The notices of ``cluster``; ``version``: the model's build version when ``cluster`` is the
        kept model's (None: any other cluster, walked afresh)."""
        if version is None or cluster.dra is not None:  # DRA's notice reads every pod's claims
            return cluster_notices(cluster, self.config, self.registry)
        has_tree = bool(cluster.hypernodes)
        key = (version, has_tree)
        if key != self.key:
            if not self.key or self.key[1] != has_tree:
                self.by_job = {}
            kept, out = {}, []
            for uid, job in cluster.jobs.items():
                got = self.by_job.get(uid)
                if got is None or got[0] is not job:
                    got = (job, job_notices(job, self.provider, has_tree))
                kept[uid] = got
                out.extend(got[1])
            self.by_job, self.key, self.last = kept, key, out
        if self.check:
            full = cluster_notices(cluster, self.config, self.registry)
            if full != self.last:
                raise IndexMismatch(f"podgroup notices: kept {len(self.last)}, walked {len(full)} differ")
        return self.last
