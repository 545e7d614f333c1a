"""``overcommit`` (Volcano ``plugins/overcommit``): admission of podgroups by the cluster's size.

A Pending podgroup is admitted (JobEnqueueable PERMIT) while its minResources, added to what the
admitted jobs still have to start, fit in the cluster's allocatable capacity times
``overcommit-factor`` (default 1.2) minus what is used; otherwise REJECT (any REJECT rejects). A job
without minResources is always admitted. Each admission (``on_job_enqueued``) adds its minResources to
the reserved amount, so one cycle never admits more than the budget.

As in Volcano, what an admitted job still has to start is its minResources for an Inqueue podgroup;
corral counts, for an Inqueue or Running podgroup that is not yet ready, its minResources less what its
pods already hold (those are in ``used`` already), so a partly started job is not counted twice.
Resources no node offers (infinite or zero capacity everywhere) and nothing else are left out of the
check: ``count/*`` keys of minResources never become resources (:mod:`corral.manifests.kinds`).

With this plugin configured, the ``enqueue`` action leaves the cluster-size check to it (SPEC.md §3.1:
the factor is the plugin's argument as in current Volcano, or enqueue's as the seed 001 config writes it;
when only enqueue is given one, the plugin uses it; when both are, the plugin's wins).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corral.framework.config import arg
from corral.framework.extension import EnqueueReason, JobEnqueueable, JobEnqueued, Vote
from corral.framework.plugin import Plugin
from corral.model import Job, PodGroupPhase
from corral.model.resources import EPS, admission_refusal
from corral.plugins.shares import holding

__all__ = ["OvercommitArgs", "OvercommitPlugin"]


@dataclass(frozen=True)
class OvercommitArgs:
    factor: float = arg(
        "overcommit-factor",
        None,
        "admit podgroups while their minResources fit in this "
        "multiple of the cluster (default: enqueue's overcommit-factor, else 1.2)",
        minimum=1.0,
    )


class OvercommitPlugin(Plugin, JobEnqueueable, EnqueueReason, JobEnqueued):
    name = "overcommit"
    Args = OvercommitArgs

    def on_session_open(self) -> None:
        cluster = self.session.cluster
        self.factor = (
            self.args.factor if self.args.factor is not None else self.session.config.overcommit_factor()
        )
        total = cluster.total_allocatable().astype(float)
        self.checked = np.isfinite(total)
        self.idle = cluster.admission_room(self.factor)
        self.reserved = np.zeros_like(total)
        for job in cluster.jobs.values():
            if job.min_resources is None or job.phase not in (PodGroupPhase.INQUEUE, PodGroupPhase.RUNNING):
                continue
            if job.ready_count() >= job.min_member:
                continue
            held = sum((t.request for t in job.tasks if holding(t)), np.zeros_like(total))
            self.reserved += np.maximum(job.min_resources - held, 0.0)

    def _left(self) -> np.ndarray:
        """What the cluster can still admit, per resource (inf where unchecked)."""
        return np.where(self.checked, self.idle - self.reserved, np.inf)

    def job_enqueueable(self, job: Job) -> Vote:
        if job.min_resources is None or not job.min_resources.any():
            return Vote.PERMIT
        return Vote.PERMIT if bool(np.all(job.min_resources <= self._left() + EPS)) else Vote.REJECT

    def enqueue_refusal(self, job: Job) -> str | None:
        """Why ``job_enqueueable`` rejects ``job`` (None if it does not)."""
        if job.min_resources is None or self.job_enqueueable(job) is Vote.PERMIT:
            return None
        return admission_refusal(self.session.cluster.resources, job.min_resources, self._left(), self.factor)

    def on_job_enqueued(self, job: Job) -> None:
        if job.min_resources is not None:
            self.reserved = self.reserved + job.min_resources
