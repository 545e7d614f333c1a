"""From a workload's :class:`~corral.sim.jobspec.JobSpec` to the model's podgroup and pods, and what the
engine reads back from the pods (:mod:`corral.sim.engine`).

Contract: :meth:`JobBuilder.build` makes a :class:`~corral.model.Job` in the engine's namespace with
every pod Pending, named ``<job>-<i>`` (one unnamed role) or ``<job>-<role>-<i>``; its minResources is
the request of its minimum (Volcano's podgroup controller: :func:`~corral.sim.checks.min_counts`).
The request vectors of a role are shared by all its pods — nothing writes into a pod's request — and
kept across the jobs of a trace that share the role tuple. :func:`meets_minimum` is the gang rule the
engine's progress follows (minMember pods running, and every role's minTaskMember);
:func:`placement` names where a gang first ran, for its record; :func:`remember_run` writes what a
job's runs gave it onto its podgroup, as its controller would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from corral.model import Job, PodClass, Task, TaskStatus
from corral.model.annotations import ATTAINED_SERVICE, COMPLETED_RUNTIME, EXPECTED_RUNTIME
from corral.model.clock import parse_duration
from corral.model.quantity import MILLI
from corral.model.resources import GPU
from corral.sim.checks import min_counts, pod_vector
from corral.sim.simjob import SimJob

if TYPE_CHECKING:
    from corral.model import Cluster
    from corral.sim.jobspec import JobSpec
    from corral.sim.options import SimOptions

__all__ = ["JobBuilder", "meets_minimum", "placement", "remember_run"]

_RUNNING = frozenset({TaskStatus.RUNNING})


class JobBuilder:
    """Builds the jobs of one run on ``cluster`` (its resources give the request vectors)."""

    def __init__(
        self, cluster: Cluster, options: SimOptions, created: dict[str, float] | None = None
    ) -> None:
        self.cluster, self.options = cluster, options
        #: a tied job's creation time, moved by the tie order (sim/workload.py ``tie_times``)
        self.created = created or {}
        self.gpu = cluster.resources.get(GPU)
        self._role_cache: dict[int, list[Any]] = {}

    def roles(self, spec: JobSpec) -> list[tuple[Any, np.ndarray, PodClass, float]]:
        """Per role (role, request vector, pod class, GPUs of one pod); cached by the role tuple."""
        got = self._role_cache.get(id(spec.roles))
        if got is None or got[0] is not spec.roles:
            res = self.cluster.resources
            rows = []
            for role in spec.roles:
                req = pod_vector(res, role.requests, spec.source or spec.name)
                gpus = float(req[self.gpu]) / MILLI if self.gpu is not None else 0.0
                rows.append((role, req, PodClass(req.tobytes()), gpus))
            got = self._role_cache[id(spec.roles)] = [spec.roles, rows]
        return got[1]

    def build(self, spec: JobSpec) -> SimJob:
        """The Job and its Pending pods, wrapped as the engine's :class:`SimJob`."""
        ns = self.options.namespace
        job = Job(
            uid=f"{ns}/{spec.name}",
            name=spec.name,
            namespace=ns,
            queue=spec.queue,
            min_member=spec.min_pods,
            priority=spec.priority,
            creation=self.created.get(spec.name, spec.submit),
            annotations=dict(spec.annotations),
            min_resources=self.cluster.resources.zeros(),
        )
        if self.options.estimates is not None:
            job.annotations[EXPECTED_RUNTIME] = (
                f"{self.options.estimates.estimate(spec.name, spec.duration):.0f}s"
            )
        job.min_task_member = {r.name: r.min_count for r in spec.roles if r.min_count is not None}
        if spec.topology is not None:
            job.topology_mode, job.topology_tier = spec.topology
        rows, counts, gpus = self.roles(spec), min_counts(spec), 0.0
        for role, req, klass, g in rows:
            job.min_resources += req * counts[role.name]
            prefix = (
                f"{spec.name}-" if len(rows) == 1 and not role.name else f"{spec.name}-{role.name or 'pod'}-"
            )
            for i in range(role.count):
                job.tasks.append(
                    Task(
                        uid=f"{ns}/{prefix}{i}",
                        name=f"{prefix}{i}",
                        namespace=ns,
                        request=req,
                        job=job,
                        role=role.name,
                        priority=spec.priority,
                        creation=spec.submit,
                        klass=klass,
                    )
                )
            gpus += g * role.count
        return SimJob(spec, job, gpus)


def meets_minimum(job: Job) -> bool:
    """Does ``job`` run at its minimum: minMember pods Running, and every role's minTaskMember?"""
    running = sum(1 for t in job.tasks if t.status is TaskStatus.RUNNING)
    if running < job.min_member:
        return False
    if job.min_task_member:
        counts = job.role_counts(_RUNNING)
        return all(counts.get(r, 0) >= n for r, n in job.min_task_member.items())
    return True


def placement(cluster: Cluster, job: Job) -> str:
    """The smallest topology domain holding every placed pod of a gang of two or more pods: "node",
    "tier N" (one hypernode of tier N, as network-topology-aware counts tiers), "cluster" (none
    does), or "nodes" on a cluster without hypernodes; "" for a job of one pod."""
    if len(job.tasks) < 2:
        return ""
    rows = np.unique(np.fromiter((t.node for t in job.tasks if t.node >= 0), dtype=np.int64))
    if len(rows) <= 1:
        return "node"
    tree = cluster.hypernodes
    if not tree:
        return "nodes"
    tier = tree.lca_tier(rows)
    return "cluster" if tier is None else f"tier {tier}"


def remember_run(sim: SimJob, ran: float, held_gpus: float) -> None:
    """Write what the job's past runs gave it onto its PodGroup, as a real cluster's controller would:
    the service it received (``ran`` seconds of progress times the ``held_gpus`` it held, added up) and
    the progress it keeps (read by the ``las`` and ``srtf`` baselines)."""
    notes = sim.job.annotations
    attained = parse_duration(notes.get(ATTAINED_SERVICE, 0)) + ran * held_gpus
    notes[ATTAINED_SERVICE] = f"{attained:.3f}s"
    notes[COMPLETED_RUNTIME] = f"{sim.progress:.3f}s"
