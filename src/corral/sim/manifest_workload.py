"""A workload of Kubernetes manifests for the simulator: the objects users submit (Volcano Jobs, KAI's
batch Jobs and JobSets, or PodGroups with their pods), each job submitted at its
``metadata.creationTimestamp`` and running for its ``corral.io/duration`` annotation.

The file is read exactly as ``corral schedule`` reads a snapshot (:func:`corral.manifests.build_cluster`:
workloads expanded as their controllers would, every field honoured, refused or warned as
docs/compatibility.md says); every podgroup then becomes one :class:`~corral.sim.jobspec.JobSpec`:

- ``submit``: the podgroup's creation time, counted from the earliest one in the file (seconds);
- ``duration``: the annotation ``corral.io/duration`` on the podgroup (a Volcano Job's or a batch Job's
  annotations reach its PodGroup), a duration such as ``90m`` or ``3600`` — required;
- ``queue``, ``min_member``, the roles with their ``minTaskMember`` and pod requests, the priority (the
  PriorityClass the podgroup names, else its pods' highest), the annotations (``corral.io/expected-runtime``
  is the scheduler's estimate), and a hard or soft topology with ``highestTierAllowed``.

Refused by name: a podgroup without pods, a role whose pods request different amounts, a topology the
simulator's job model cannot carry (a tier given by name, KAI topology levels), and a pod already bound
to a node (a workload file submits jobs; a cluster's running pods belong in the cluster snapshot).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from corral.errors import InputError
from corral.manifests.build import build_cluster
from corral.manifests.load import read_objects
from corral.model.clock import parse_duration
from corral.model.cluster import Cluster
from corral.model.objects import Job, Task
from corral.model.quantity import MILLI
from corral.model.resources import PODS
from corral.sim.jobspec import JobSpec, RoleSpec

__all__ = ["DURATION_KEY", "load_manifest_workload", "looks_like_manifests"]

DURATION_KEY = "corral.io/duration"


def looks_like_manifests(text: str) -> bool:
    """Whether a YAML text holds Kubernetes objects (a top-level ``apiVersion`` and ``kind``)."""
    keys = {line.split(":", 1)[0] for line in text.splitlines() if line[:1].isalpha()}
    return {"apiVersion", "kind"} <= keys


def load_manifest_workload(path: str | Path) -> list[JobSpec]:
    """The jobs of a manifest file or folder, in submission order (creation time, then name)."""
    objects = read_objects([path])
    cluster = build_cluster(objects)
    jobs = sorted(cluster.jobs.values(), key=lambda j: (j.creation, j.uid))
    if not jobs:
        raise InputError(
            "the workload holds no job (no PodGroup, pod or workload corral expands)", file=str(path)
        )
    start = jobs[0].creation
    specs = [_spec(cluster, job, start, str(path)) for job in jobs]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):  # the simulator runs every job in one namespace
        specs = [_renamed(s, job) for s, job in zip(specs, jobs)]
    return specs


def _renamed(spec: JobSpec, job: Job) -> JobSpec:
    return replace(spec, name=f"{job.namespace}-{job.name}")


def _spec(cluster: Cluster, job: Job, start: float, file: str) -> JobSpec:
    ident = f"PodGroup {job.uid}"
    if job.invalid_reason and job.invalid_reason.startswith("podgroup"):
        raise InputError(job.invalid_reason, file=file, obj=ident)
    if not job.tasks:
        raise InputError("a job of a workload needs pods", file=file, obj=ident)
    raw = job.annotations.get(DURATION_KEY) or (
        job.tasks[0].annotations.get(DURATION_KEY) if job.synthetic else None
    )
    if not raw:
        raise InputError(
            f"a job of a workload needs its run time: annotation {DURATION_KEY} (e.g. 2h)",
            file=file,
            obj=ident,
            field=f"metadata.annotations.{DURATION_KEY}",
        )
    duration = parse_duration(raw, file=file, obj=ident, field=f"metadata.annotations.{DURATION_KEY}")
    topology = None
    if job.topology_mode:
        if job.topology_tier is None:
            raise InputError(
                "the simulator's jobs carry a topology limit as a tier number: give highestTierAllowed",
                file=file,
                obj=ident,
                field="spec.networkTopology",
            )
        topology = (job.topology_mode, job.topology_tier)
    return JobSpec(
        name=job.name,
        submit=job.creation - start,
        duration=duration,
        queue=job.queue,
        roles=_roles(cluster, job, file, ident),
        priority=job.priority,
        min_member=None if job.synthetic else job.min_member,
        topology=topology,
        source=f"{file}: {ident}",
        annotations={k: v for k, v in job.annotations.items() if k != DURATION_KEY},
    )


def _roles(cluster: Cluster, job: Job, file: str, ident: str) -> tuple[RoleSpec, ...]:
    names = [n for n in cluster.resources.names if n != PODS]
    by_role: dict[str, list[Task]] = {}
    for task in sorted(job.tasks, key=lambda t: t.name):
        if task.node >= 0:
            raise InputError(
                f"pod {task.name} is bound to a node: a workload submits jobs (running pods belong in the cluster)",
                file=file,
                obj=ident,
            )
        by_role.setdefault(task.role, []).append(task)
    roles = []
    for role, tasks in by_role.items():
        first = tasks[0].request
        if any((t.request != first).any() for t in tasks[1:]):
            raise InputError(f"the pods of role {role!r} request different amounts", file=file, obj=ident)
        requests = {
            n: float(first[cluster.resources.pos(n)]) / MILLI
            for n in names
            if first[cluster.resources.pos(n)]
        }
        roles.append(RoleSpec(role, len(tasks), requests, job.min_task_member.get(role)))
    return tuple(roles)
