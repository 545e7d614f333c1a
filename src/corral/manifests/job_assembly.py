"""Assembly step for the work of a cluster: PodGroup and Pod records into the model's jobs and tasks.

One public step, :func:`assemble_jobs_and_tasks`, that :func:`corral.manifests.build.assemble_cluster`
runs once over every record and that ``corral run``'s incremental model (:mod:`corral.kube.model`) runs
again on a cluster holding only the job a change touched, so that both build the same jobs and tasks.
"""

from __future__ import annotations

import numpy as np

from corral.errors import InputError
from corral.manifests.kai import KAI_NON_PREEMPTIBLE_PRIORITY, SUBGROUP_LABEL, apply_podgroup, join_subgroup
from corral.manifests.kinds import KAI_QUEUE_LABEL, PREEMPTABLE_KEY, TASK_SPEC_KEY
from corral.manifests.native import apply_native, finish_native, join_native
from corral.manifests.native_assembly import composite_redirect
from corral.manifests.queue_assembly import resource_vector
from corral.manifests.records import PodGroupRec, PodRec
from corral.manifests.selectors import Affinity
from corral.model.cluster import Cluster
from corral.model.notes import Note
from corral.model.objects import OCCUPYING_STATES, Job, PodClass, PodGroupPhase, Task, TaskStatus
from corral.model.resources import PODS, ResourceIndex
from corral.model.subjobs import resolve_subgroups

__all__ = ["assemble_jobs_and_tasks"]

SYSTEM_CRITICAL = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}


def _pod_priority(cluster: Cluster, rec: PodRec) -> int:
    if rec.priority is not None:
        return rec.priority
    if rec.priority_class:
        pc = cluster.priority_classes.get(rec.priority_class)
        if pc is not None:
            return pc.value
        if rec.priority_class in SYSTEM_CRITICAL:
            return SYSTEM_CRITICAL[rec.priority_class]
    return _global_default(cluster)


def _global_default(cluster: Cluster) -> int:
    """The value of the globalDefault PriorityClass (the first by name if several), else 0; one pass
    without sorting, as it runs for every pod without a priority."""
    defaults = [pc for pc in cluster.priority_classes.values() if pc.global_default]
    return min(defaults, key=lambda p: p.name).value if defaults else 0


def _task_status(rec: PodRec, node: int) -> TaskStatus:
    if rec.phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if rec.phase == "Failed":
        return TaskStatus.FAILED
    if rec.node_name:
        if rec.deleting:
            return TaskStatus.RELEASING
        return TaskStatus.RUNNING if rec.phase == "Running" else TaskStatus.BOUND
    if rec.deleting:
        return TaskStatus.FAILED  # a pending pod being deleted holds nothing and will not run
    return TaskStatus.PIPELINED if rec.nominated else TaskStatus.PENDING


def _preemptable(labels: dict[str, str], annotations: dict[str, str]) -> bool:
    value = annotations.get(PREEMPTABLE_KEY, labels.get(PREEMPTABLE_KEY, "true"))
    return value.strip().lower() != "false"


def _request(
    resources: ResourceIndex, requests: dict[str, float], seen: dict
) -> tuple[np.ndarray, bool, bytes]:
    """``(vector, best effort, its bytes)`` of a pod's requests; pods repeat a handful of request
    shapes, so each shape is worked out once per build (``seen``) and every pod gets its own copy."""
    key = tuple(requests.items())
    got = seen.get(key)
    if got is None:
        req = np.zeros(len(resources))
        for k, v in requests.items():
            req[resources.pos(k)] = v
        best_effort = not req.any()
        req[resources.pos(PODS)] = 1000.0
        got = seen[key] = (req, best_effort, req.tobytes())
    return got[0].copy(), got[1], got[2]


def _task(cluster: Cluster, rec: PodRec, seen: dict | None = None) -> Task:
    resources, nodes = cluster.resources, cluster.nodes
    dra_key = None
    requests = rec.requests
    if cluster.dra is not None and rec.uid in cluster.dra.pod_key:  # its claims' devices (corral.dra)
        dra_key = cluster.dra.pod_key[rec.uid]
        extra = cluster.dra.pod_extra.get(rec.uid)
        if extra:
            requests = dict(requests)
            for k, v in extra.items():
                requests[k] = requests.get(k, 0.0) + v
    req, best_effort, req_bytes = _request(resources, requests, {} if seen is None else seen)
    best_effort = best_effort and rec.gpu_share is None  # a pod sharing a GPU asks for part of one
    node = nodes.index.get(rec.node_name, -1) if rec.node_name else -1
    status = _task_status(rec, node)
    nominated = nodes.index.get(rec.nominated, -1) if rec.nominated else -1
    if status is TaskStatus.PIPELINED and nominated < 0:
        status = TaskStatus.PENDING
    role = rec.annotations.get(TASK_SPEC_KEY, rec.labels.get(TASK_SPEC_KEY, ""))
    affinity = rec.affinity
    sub = rec.labels.get(SUBGROUP_LABEL)
    klass = PodClass(
        request=req_bytes,
        node_selector=tuple(sorted(rec.node_selector.items())) if rec.node_selector else (),
        affinity=affinity,
        tolerations=rec.tolerations,
        namespace=rec.namespace if affinity is not None and _pod_terms(affinity) else "",
        # "" (not None) for a GPU-sharing pod without a sub-group: the classes of old snapshots' keys
        subgroup=(sub or "") if sub is not None or rec.gpu_share is not None else None,
        gpu_share=rec.gpu_share,
        claims=dra_key,
    )
    return Task(
        uid=rec.uid,
        name=rec.name,
        namespace=rec.namespace,
        request=req,
        role=role,
        priority=_pod_priority(cluster, rec),
        status=status,
        node=node,
        nominated=nominated,
        labels=rec.labels,
        annotations=rec.annotations,
        node_selector=rec.node_selector,
        affinity=affinity,
        tolerations=rec.tolerations,
        creation=rec.creation,
        start_time=rec.start_time,
        preemptable=_preemptable(rec.labels, rec.annotations),
        preempt_never=rec.preempt_never,
        priority_class=rec.priority_class,
        best_effort=best_effort,
        klass=klass,
        gpu_share=rec.gpu_share,
    )


def _job_from_group(cluster: Cluster, pg: PodGroupRec) -> Job:
    resources = cluster.resources
    job = Job(
        uid=f"{pg.namespace}/{pg.name}",
        name=pg.name,
        namespace=pg.namespace,
        queue=pg.queue,
        min_member=pg.min_member,
        min_task_member=pg.min_task_member,
        min_resources=resource_vector(resources, pg.min_resources, 0.0),
        priority_class=pg.priority_class,
        creation=pg.creation,
        annotations=pg.annotations,
        labels=pg.labels,
        topology_mode=pg.topology_mode,
        topology_tier=pg.topology_tier,
        topology_tier_name=pg.topology_tier_name,
        subgroup_policies=pg.subgroup_policies,
        preemptable=_preemptable(pg.labels, pg.annotations) if pg.preemptible is None else pg.preemptible,
    )
    try:
        job.phase = PodGroupPhase(pg.phase)
    except ValueError:
        job.phase = PodGroupPhase.PENDING
    if pg.queue not in cluster.queues:
        job.invalid_reason = f"queue {pg.queue!r} does not exist"
    if pg.kai:
        apply_podgroup(cluster, job, pg)
    if pg.native is not None:
        apply_native(cluster, job, pg)
    return job


def assemble_jobs_and_tasks(
    cluster: Cluster, groups: list[PodGroupRec], pods: list[PodRec], schedulers: set[str]
) -> None:
    """Add to ``cluster`` (whose resources, nodes, queues, priority classes and DRA books are set) the
    jobs of ``groups`` and the tasks of ``pods``, each job finished (priority, minimum resources,
    preemptibility, KAI and Kubernetes-native gang rules, sub-groups).

    Podgroups are taken by namespace and name, then pods by namespace and name, so ``cluster.jobs`` and
    ``cluster.tasks`` hold them in that order (a pod's job that no PodGroup names follows in the order of
    its first pod). A pod of one of ``schedulers`` joins its podgroup's job (one made invalid, "podgroup
    ... does not exist", when the PodGroup is missing) or, without a podgroup, a job of its own in its KAI
    queue label's queue, else ``default`` (Volcano's and KAI's pod groupers). A pod of another
    scheduler that holds a node is fixed load (``cluster.foreign``, never preempted); one that does not
    is left out. A duplicate podgroup or pod, or a pod without podgroup named as a podgroup, is an
    :class:`InputError`. Reads nothing but its arguments and ``cluster``: ``corral run``'s incremental
    model runs it on a cluster holding one job's records and gets that job as a full assembly makes it.
    """
    for pg in sorted(groups, key=lambda g: (g.namespace, g.name)):
        grouped = _job_from_group(cluster, pg)
        if grouped.uid in cluster.jobs:
            raise InputError(
                "duplicate podgroup",
                file=pg.file or None,
                obj=f"PodGroup {grouped.uid}",
                field="metadata.name",
            )
        cluster.jobs[grouped.uid] = grouped
    shapes: dict = {}
    redirect = composite_redirect(groups)  # a PodGroup under a composite: its root's job
    for rec in sorted(pods, key=lambda p: (p.namespace, p.name)):
        task = _task(cluster, rec, shapes)
        if task.uid in cluster.tasks:  # foreign tasks are in cluster.tasks too
            raise InputError("duplicate pod", file=rec.file, obj=f"Pod {task.key}", field="metadata.uid")
        if rec.scheduler not in schedulers:
            if task.node >= 0 and task.status in (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.RELEASING):
                task.managed = False
                task.preemptable = False
                cluster.foreign.append(task)
                cluster.tasks[task.uid] = task
            continue
        if rec.gpu_share is not None:
            cluster.kai_gpu_shared = True
        job = _job_of_pod(cluster, rec, task, redirect)
        if job is None:
            continue
        task.job = job
        if rec.claims or rec.native_group or rec.workload_ref is not None:
            join_native(cluster, job, rec, task)
        job.tasks.append(task)
        cluster.tasks[task.uid] = task
        if task.node < 0 and rec.node_name and task.status in OCCUPYING_STATES:
            cluster.off_nodes.append((task.key, rec.node_name))  # holds nothing corral can see
    for job in cluster.jobs.values():
        _finish_job(cluster, job)
        if job.subgroup_policies or job.topology_tier_name:
            resolve_subgroups(cluster, job)
    if not cluster.namespace_labels:
        cluster.notes.extend(namespace_selector_notes(pods, schedulers))


def namespace_selector_notes(pods: list[PodRec], schedulers: set[str]) -> list[Note]:
    """A warning per served pod whose inter-pod (anti-)affinity term has a non-empty
    ``namespaceSelector`` when the input holds no ``Namespace`` object at all: the selector then
    matches no namespace (kube-scheduler merges into the term the namespaces its lister finds)."""
    out = []
    for rec in pods:
        aff = rec.affinity
        if aff is None or rec.scheduler not in schedulers:
            continue
        terms = (
            aff.pod_affinity
            + aff.pod_anti_affinity
            + aff.pod_affinity_preferred
            + aff.pod_anti_affinity_preferred
        )
        if any(t.ns_selector is not None for t in terms):
            out.append(
                Note(
                    f"Pod {rec.namespace}/{rec.name}",
                    "spec.affinity (namespaceSelector)",
                    "the input holds no Namespace objects, so the namespaceSelector matches no namespace "
                    "(as kube-scheduler, which matches only the Namespace objects it lists); add the "
                    "v1 Namespace objects to the snapshot",
                )
            )
    return out


def _job_of_pod(cluster: Cluster, rec: PodRec, task: Task, redirect: dict[str, str]) -> Job | None:
    """The job a served pod joins, made and added to ``cluster.jobs`` when there is none yet; None when
    its KAI sub-group refuses it (:func:`~corral.manifests.kai.join_subgroup`)."""
    group = rec.group
    if group:
        uid = f"{rec.namespace}/{group}"
        uid = redirect.get(uid, uid) if redirect else uid
        existing = cluster.jobs.get(uid)
        if existing is not None:
            job = existing
        else:
            job = Job(
                uid=uid,
                name=group,
                namespace=rec.namespace,
                creation=rec.creation,
                invalid_reason=f"podgroup {uid} does not exist",
            )
            cluster.jobs[uid] = job
        if job.uid not in cluster.native_groups and not join_subgroup(cluster, job, task):
            return None  # (a native composite's sub-groups are joined by join_native)
        return job
    uid = f"{rec.namespace}/{rec.name}"
    queue = rec.labels.get(KAI_QUEUE_LABEL) or "default"
    job = Job(
        uid=uid,
        name=rec.name,
        namespace=rec.namespace,
        queue=queue,
        creation=rec.creation,
        min_resources=task.request.copy(),
        synthetic=True,
        invalid_reason="" if queue in cluster.queues else f"queue {queue!r} does not exist",
    )
    if uid in cluster.jobs:
        raise InputError(
            "a pod without podgroup has the name of a podgroup",
            file=rec.file or None,
            obj=f"Pod {uid}",
            field="metadata.name",
        )
    cluster.jobs[uid] = job
    return job


def _finish_job(cluster: Cluster, job: Job) -> None:
    queue = cluster.queues.get(job.queue)
    if queue is not None and not job.invalid_reason:
        job.invalid_reason = queue.not_leaf_reason()  # only leaf queues hold work (SPEC.md §3.2)
    if job.priority_class and job.priority_class in cluster.priority_classes:
        job.priority = cluster.priority_classes[job.priority_class].value
    elif job.tasks:
        job.priority = max(t.priority for t in job.tasks)
    else:
        job.priority = _global_default(cluster)
    if job.min_resources is None:
        job.min_resources = np.zeros(len(cluster.resources))
    if job.synthetic and job.tasks and job.tasks[0].status is not TaskStatus.PENDING:
        job.phase = PodGroupPhase.RUNNING
    if job.kai_priority_preemptible and job.priority >= KAI_NON_PREEMPTIBLE_PRIORITY:
        job.preemptable = False  # KAI: unset preemptibility follows the priority
    if not job.preemptable:
        for t in job.tasks:
            t.preemptable = False
    if cluster.native_groups:
        finish_native(cluster, job)


def _pod_terms(affinity: Affinity) -> bool:
    """Has the pod inter-pod terms, required or preferred? (They select pods of its own namespace by
    default, so two pods alike but for their namespace are placed or scored differently.)"""
    return bool(
        affinity.has_pod_terms or affinity.pod_affinity_preferred or affinity.pod_anti_affinity_preferred
    )
