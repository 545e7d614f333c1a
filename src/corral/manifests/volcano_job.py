"""A Volcano ``Job`` (batch.volcano.sh/v1alpha1) expanded into the PodGroup and pods Volcano's job
controller creates for it (volcano-sh/volcano pkg/controllers/job: ``createOrUpdatePodGroup``,
``getMinTaskMember``, ``calcPGMinResources``, ``createJobPod``; defaults of the job admission webhook,
pkg/webhooks/admission/jobs/mutate).

- Defaults (webhook): ``queue`` "default", ``schedulerName`` "volcano", a task without a name is
  ``default<i>``; a task's minimum is its ``minAvailable``, else ``minPartitions × partitionSize`` of
  its ``partitionPolicy``, else its ``replicas``; the job's ``minAvailable`` (0 or unset) is the sum of
  the tasks' minimums. A minimum above the replicas is refused, as the webhook refuses it.
- PodGroup ``<job>-<uid>`` (``<job>`` without a uid, as older controllers name it): ``minMember`` the
  job's minAvailable, ``minTaskMember`` every task's minimum, ``queue``, ``priorityClassName``,
  ``networkTopology`` (``highestTierAllowed``, else ``highestTierName``), one ``subGroupPolicy`` per
  task with a ``partitionPolicy`` (matched by the ``volcano.sh/task-spec`` label and the
  ``volcano.sh/partition-id`` key), and ``minResources``: the requests of the first ``minAvailable``
  pods with tasks in priority order (their template's PriorityClass value, highest first), each task's
  minimum first and then its other replicas. The job's labels and annotations; ``runningEstimate``
  becomes corral's runtime estimate (``corral.io/expected-runtime``) unless the job sets one.
- Pods ``<job>-<task>-<index>`` from the task's template, with the annotations and labels the
  controller writes (task spec and index, group name, job name, queue, template key, partition id);
  ``schedulerName`` and ``priorityClassName`` from the job where the template has none; the job's
  ``volcano.sh/preemptable`` annotation or label is copied to the pods.
- A job whose PodGroup (either name) is in the snapshot was expanded by its controller already and is
  not expanded again; nor is a finished job (phase Completed, Failed, Terminated, Aborted).
- Refused: ``tasks[].dependsOn`` (corral would start every task at once). Warned: lifecycle
  ``policies`` (restarts after eviction are the controller's, which corral does not run) and a NUMA
  ``topologyPolicy`` (needs Volcano's numa-aware plugin). Inert: ``maxRetry``, ``minSuccess``,
  ``plugins``, ``ttlSecondsAfterFinished``, ``volumes``, ``totalPartitions``, status (but the phase).
"""

from __future__ import annotations

from typing import Any

from corral.manifests.fields import Obj
from corral.manifests.kinds import PREEMPTABLE_KEY, TASK_SPEC_KEY, parse_object
from corral.manifests.records import GROUP_ANNOTATION
from corral.manifests.workload_common import Existing, Made, check_pod_count, pod_from_template, quantity_text
from corral.model.annotations import EXPECTED_RUNTIME
from corral.model.notes import Notes

__all__ = ["VOLCANO_JOB_API", "expand_volcano_job"]

VOLCANO_JOB_API = "batch.volcano.sh/v1alpha1"
FINISHED = ("Completed", "Failed", "Terminated", "Aborted")
PARTITION_KEY = "volcano.sh/partition-id"
_NAME_KEY, _NS_KEY, _QUEUE_KEY = "volcano.sh/job-name", "volcano.sh/job-namespace", "volcano.sh/queue-name"
_INDEX_KEY, _VERSION_KEY, _TEMPLATE_KEY = (
    "volcano.sh/task-index",
    "volcano.sh/job-version",
    "volcano.sh/template-uid",
)


class _Task:
    __slots__ = ("min", "min_available", "name", "partition", "priority", "replicas", "request")

    def __init__(self) -> None:
        self.name = ""
        self.replicas = 0
        self.min_available: int | None = None
        self.min = 0
        self.partition: dict = {}
        self.priority = 0
        self.request: dict[str, float] = {}


def expand_volcano_job(file: str, raw: dict, existing: Existing, notes: Notes) -> Made | None:
    """The PodGroup and pods of one Volcano Job; None when it is not expanded (the reason is noted)."""
    o = Obj(raw, file, "Job", True)
    spec, status = o.section("spec"), o.section("status")
    phase = o.mapping(status.get("state"), "status.state").get("phase")
    uid = o.string(o.meta.get("uid"), "metadata.uid")
    pg_name = f"{o.name}-{uid}" if uid else o.name
    if phase in FINISHED:
        notes.made(o.ident, f"not expanded: the job is {phase}, its controller has removed its pods", file)
        return None
    if (o.namespace, pg_name) in existing.podgroups or (o.namespace, o.name) in existing.podgroups:
        notes.made(o.ident, "not expanded: its PodGroup is in the snapshot (its controller made it)", file)
        return None
    queue = o.string(spec.get("queue"), "spec.queue") or "default"
    scheduler = o.string(spec.get("schedulerName"), "spec.schedulerName") or "volcano"
    pclass = o.string(spec.get("priorityClassName"), "spec.priorityClassName")
    job_ann = o.strmap(o.meta.get("annotations"), "metadata.annotations")
    job_labels = o.strmap(o.meta.get("labels"), "metadata.labels")
    _warn(o, spec, notes)
    made = Made(podgroup=f"{o.namespace}/{pg_name}")
    tasks: list[_Task] = []
    raw_tasks = o.listof(spec.get("tasks"), "spec.tasks")
    if not raw_tasks:
        raise o.error("a Job needs at least one task", "spec.tasks")
    check_pod_count(o, sum(_replicas(o, rt, i) for i, rt in enumerate(raw_tasks)), "spec.tasks")
    for i, rt in enumerate(raw_tasks):
        task, pods = _task(
            o,
            rt,
            i,
            pg_name,
            queue,
            job_ann,
            job_labels,
            {"schedulerName": scheduler, "priorityClassName": pclass},
        )
        task.priority = existing.priority.get(str(_template_class(rt) or ""), 0)
        if pods:
            parsed = parse_object(file, pods[0])
            task.request = parsed[1].requests if parsed else {}
        tasks.append(task)
        for pod in pods:
            if (o.namespace, pod["metadata"]["name"]) not in existing.pods:
                made.objects.append((file, pod))
                made.pods.append(pod["metadata"]["name"])
    min_member = _job_min(o, spec, tasks)
    made.objects.insert(
        0, (file, _podgroup(o, spec, pg_name, queue, pclass, tasks, min_member, job_ann, job_labels))
    )
    made.summary = f"minMember {min_member}, queue {queue}"
    return made


def _replicas(o: Obj, rt: Any, i: int) -> int:
    rt = o.mapping(rt, f"spec.tasks[{i}]")
    return o.integer(rt.get("replicas", 0), f"spec.tasks[{i}].replicas", minimum=0)


def _template_class(rt: Any) -> Any:
    template = rt.get("template") if isinstance(rt, dict) else None
    tspec = template.get("spec") if isinstance(template, dict) else None
    return tspec.get("priorityClassName") if isinstance(tspec, dict) else None


def _warn(o: Obj, spec: dict, notes: Notes) -> None:
    policies = "lifecycle policies act in Volcano's job controller when pods end or are evicted; corral does not run it: evicted pods are not restarted"
    if spec.get("policies"):
        notes.warn(o.ident, "spec.policies", policies, o.file)
    for i, rt in enumerate(o.listof(spec.get("tasks"), "spec.tasks")):
        if not isinstance(rt, dict):
            continue
        if rt.get("policies"):
            notes.warn(o.ident, f"spec.tasks[{i}].policies", policies, o.file)
        if rt.get("topologyPolicy") not in (None, "", "none"):
            notes.warn(
                o.ident,
                f"spec.tasks[{i}].topologyPolicy",
                "a NUMA topology policy needs Volcano's numa-aware plugin, which corral does not provide: placed without it",
                o.file,
            )
        if rt.get("dependsOn"):
            raise o.error(
                "corral does not hold a task back until the tasks it depends on run (it would start them all "
                "at once); remove dependsOn or submit the tasks as separate jobs",
                f"spec.tasks[{i}].dependsOn",
            )


def _task(
    o: Obj,
    rt: Any,
    i: int,
    pg_name: str,
    queue: str,
    job_ann: dict[str, str],
    job_labels: dict[str, str],
    defaults: dict[str, str],
) -> tuple[_Task, list[dict]]:
    p = f"spec.tasks[{i}]"
    rt = o.mapping(rt, p)
    t = _Task()
    t.name = o.string(rt.get("name"), f"{p}.name") or f"default{i}"
    size = _task_minimum(o, rt, p, t)
    pods = []
    for ix in range(t.replicas):
        ann = {
            _INDEX_KEY: str(ix),
            TASK_SPEC_KEY: t.name,
            GROUP_ANNOTATION: pg_name,
            _NAME_KEY: o.name,
            _QUEUE_KEY: queue,
            _VERSION_KEY: "0",
            _TEMPLATE_KEY: f"{o.name}-{t.name}",
        }
        labels = {
            _INDEX_KEY: str(ix),
            _NAME_KEY: o.name,
            TASK_SPEC_KEY: t.name,
            _NS_KEY: o.namespace,
            _QUEUE_KEY: queue,
        }
        if PREEMPTABLE_KEY in job_ann:
            ann[PREEMPTABLE_KEY] = job_ann[PREEMPTABLE_KEY]
        if PREEMPTABLE_KEY in job_labels:
            labels[PREEMPTABLE_KEY] = job_labels[PREEMPTABLE_KEY]
        if t.partition:
            labels[PARTITION_KEY] = str(ix // size if size > 0 else 0)
        pods.append(
            pod_from_template(
                o, rt.get("template"), f"{p}.template", f"{o.name}-{t.name}-{ix}", labels, ann, defaults
            )
        )
    return t, pods


def _task_minimum(o: Obj, rt: dict, p: str, t: _Task) -> int:
    """Set task ``t``'s replicas and minimum as Volcano's admission defaults them (``minAvailable``,
    else ``partitionSize × minPartitions`` of its partition policy, else every replica); a minimum above
    the replicas is refused, as Volcano's admission does. Returns the partition size (0: none)."""
    t.replicas = o.integer(rt.get("replicas", 0), f"{p}.replicas", minimum=0)
    if rt.get("minAvailable") is not None:
        t.min_available = o.integer(rt["minAvailable"], f"{p}.minAvailable", minimum=0)
    t.partition = o.mapping(rt.get("partitionPolicy"), f"{p}.partitionPolicy")
    size = o.integer(t.partition.get("partitionSize", 0), f"{p}.partitionPolicy.partitionSize", minimum=0)
    parts = o.integer(t.partition.get("minPartitions", 0), f"{p}.partitionPolicy.minPartitions", minimum=0)
    if t.min_available is not None:
        t.min = t.min_available
    elif t.partition and size and parts:
        t.min = size * parts
    else:
        t.min = t.replicas
    if t.min > t.replicas:
        raise o.error(
            f"the task's minimum ({t.min}) is above its replicas ({t.replicas}); Volcano's admission refuses it",
            f"{p}.minAvailable",
        )
    return size


def _job_min(o: Obj, spec: dict, tasks: list[_Task]) -> int:
    total = sum(t.replicas for t in tasks)
    min_member = o.integer(spec.get("minAvailable", 0), "spec.minAvailable", minimum=0) or sum(
        t.min for t in tasks
    )
    if min_member > total:
        raise o.error(
            f"minAvailable ({min_member}) is above the job's replicas ({total}); Volcano's admission refuses it",
            "spec.minAvailable",
        )
    return min_member


def _min_resources(tasks: list[_Task], job_min: int) -> dict[str, float]:
    """Volcano's ``calcPGMinResources``: tasks by template priority, highest first."""
    ordered = sorted(tasks, key=lambda t: -t.priority)
    counts: dict[int, int] = {}
    if job_min < sum(t.min for t in tasks):  # CalcFirstCountResources: the first job_min pods
        left = job_min
        for t in ordered:
            counts[id(t)] = min(left, t.replicas)
            left -= counts[id(t)]
            if left <= 0:
                break
    else:  # CalcPGMinResources: every task's minimum, then its other replicas
        left = job_min
        for t in ordered:
            counts[id(t)] = min(t.min, left)
            left -= counts[id(t)]
        for t in ordered:
            if left <= 0:
                break
            extra = min(t.replicas - t.min, left)
            counts[id(t)] = counts.get(id(t), 0) + extra
            left -= extra
    out: dict[str, float] = {}
    for t in ordered:
        for name, milli in t.request.items():
            out[name] = out.get(name, 0.0) + milli * counts.get(id(t), 0)
    return out


def _podgroup(
    o: Obj,
    spec: dict,
    pg_name: str,
    queue: str,
    pclass: str,
    tasks: list[_Task],
    min_member: int,
    job_ann: dict[str, str],
    job_labels: dict[str, str],
) -> dict:
    pg_spec: dict[str, Any] = {
        "minMember": min_member,
        "minTaskMember": {t.name: t.min for t in tasks},
        "queue": queue,
        "minResources": {k: quantity_text(v) for k, v in sorted(_min_resources(tasks, min_member).items())},
    }
    if pclass:
        pg_spec["priorityClassName"] = pclass
    nt = o.mapping(spec.get("networkTopology"), "spec.networkTopology")
    if nt:
        pg_spec["networkTopology"] = _topology(nt)
    policies = []
    for t in tasks:
        if not t.partition:
            continue
        policy: dict[str, Any] = {
            "name": t.name,
            "subGroupSize": t.partition.get("partitionSize", 0),
            "minSubGroups": t.partition.get("minPartitions", 0),
            "labelSelector": {"matchLabels": {TASK_SPEC_KEY: t.name}},
            "matchLabelKeys": [PARTITION_KEY],
        }
        pnt = t.partition.get("networkTopology")
        if isinstance(pnt, dict) and pnt:
            policy["networkTopology"] = {k: v for k, v in pnt.items() if v is not None}
        policies.append(policy)
    if policies:
        pg_spec["subGroupPolicy"] = policies
    ann = dict(job_ann)
    if spec.get("runningEstimate") and EXPECTED_RUNTIME not in ann:
        ann[EXPECTED_RUNTIME] = str(spec["runningEstimate"])
    meta: dict[str, Any] = {
        "name": pg_name,
        "namespace": o.namespace,
        "annotations": ann,
        "labels": dict(job_labels),
    }
    if o.meta.get("creationTimestamp"):
        meta["creationTimestamp"] = o.meta["creationTimestamp"]
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": pg_spec,
    }


def _topology(nt: dict) -> dict:
    out: dict[str, Any] = {"mode": nt.get("mode") or "hard"}
    if nt.get("highestTierAllowed") is not None:
        out["highestTierAllowed"] = nt["highestTierAllowed"]
    elif nt.get("highestTierName"):
        out["highestTierName"] = nt["highestTierName"]
    return out
