"""Workloads submitted to KAI-Scheduler, grouped as KAI's pod-grouper groups them
(kai-scheduler/KAI-Scheduler pkg/podgrouper/podgrouper/plugins: ``defaultgrouper``, ``job``,
``jobset``).

**When**: a ``batch/v1`` Job or a JobSet (``jobset.x-k8s.io``) whose pod template names
``schedulerName: kai-scheduler``. KAI's pod-grouper acts only on the pods of its own scheduler, so the
workload asks for KAI behaviour exactly as it does in a KAI cluster; a Job for another scheduler is
left alone (reported as an object corral does not serve). A bare pod of KAI's scheduler is its own
podgroup of minMember 1 (KAI's pod-job grouping), which is how corral reads every pod without a group.

**What**, for either kind (the default grouper): one KAI PodGroup ``pg-<name>-<uid>`` with the
owner's labels and annotations; ``queue`` from the label ``kai.scheduler/queue`` on the owner, else
on the pod template, else ``project`` (owner, else template), else ``default-queue``;
``priorityClassName`` from the label ``priorityClassName`` on the owner, else on the template, else the
template's ``priorityClassName`` — the first that names a PriorityClass of the snapshot — else
``train``; ``preemptibility`` from the label ``kai.scheduler/preemptibility`` (owner, else template);
``topologyConstraint`` from the owner's annotations ``kai.scheduler/topology``,
``kai.scheduler/topology-required-placement``, ``kai.scheduler/topology-preferred-placement``.
Pods carry the annotation ``pod-group-name``.

- **batch/v1 Job**: the pods Kubernetes' Job controller starts — ``parallelism`` (default 1) of them,
  at most the ``completions`` not yet succeeded — named ``<job>-<i>`` (Kubernetes adds a random suffix;
  corral's names are stable) with the labels ``job-name``, ``batch.kubernetes.io/job-name``,
  ``controller-uid``, ``batch.kubernetes.io/controller-uid`` and, for ``completionMode: Indexed``, the
  completion index annotation. minMember 1, or the Job's annotation ``kai.scheduler/batch-min-member``.
  A suspended Job has no pods.
- **JobSet** (KAI's ``jobset`` grouper): a child Job ``<jobset>-<replicatedJob>-<index>`` per replica of
  every replicated job, its pods ``<child>-<i>`` labelled ``jobset.sigs.k8s.io/jobset-name``,
  ``replicatedjob-name``, ``job-index`` and their KAI sub-group (``kai.scheduler/subgroup-name``). The
  PodGroup's ``subGroups`` are KAI's: a parent per replicated job needing every replica, a leaf
  ``<replicatedJob>-replica-<index>`` per replica needing ``parallelism`` pods (or the template's
  ``kai.scheduler/batch-min-member``) under the template's topology annotations (a per-replica
  constraint); the root's ``minSubGroup`` is every replicated job with ``startupPolicyOrder: AnyOrder``
  (the default), 1 with ``InOrder`` — the JobSet controller then creates the first replicated job alone,
  which is what is expanded — or the JobSet's ``kai.scheduler/batch-min-member`` when smaller. JobSet's
  exclusive placement (``alpha.jobset.sigs.k8s.io/exclusive-topology``) by its node-selector strategy is
  written as its controller writes it (:func:`_place_exclusively`); by its pod webhook it is refused
  (:func:`_exclusive_selector` says why).

- **bare pods** of KAI's scheduler (no ``pod-group-name``, no ``scheduling.k8s.io/group-name``): the
  pods of one owner share a PodGroup ``pg-<owner>-<owner uid>`` (the owner as the snapshot names it
  in the controller reference; KAI walks up to the top owner, which groups the same pods), a pod
  without an owner is its own ``pg-<pod>-<uid>``; minMember 1, queue and priority class from the
  pod's labels and spec by the rules above.

A workload whose PodGroup or pods are in the snapshot already is not expanded again.
"""

from __future__ import annotations

from typing import Any

from corral.manifests.fields import Obj
from corral.manifests.load import SourcedObject
from corral.manifests.records import GROUP_ANNOTATION, KAI_GROUP_KEY
from corral.manifests.workload_common import Existing, Made, check_pod_count, pod_from_template
from corral.model.notes import Notes
from corral.model.subgroups import SUBGROUP_LABEL

__all__ = [
    "KAI_SCHEDULER",
    "expand_batch_job",
    "expand_jobset",
    "group_bare_pods",
    "is_bare_kai_pod",
    "kai_template",
]

KAI_SCHEDULER = "kai-scheduler"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
MIN_MEMBER_KEY = "kai.scheduler/batch-min-member"
DEFAULT_QUEUE = "default-queue"
DEFAULT_PRIORITY_CLASS = "train"
#: the JobSet controller's exclusive placement (sigs.k8s.io/jobset ``api/jobset/v1alpha2``)
JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOBSET_NODE_SELECTOR = "alpha.jobset.sigs.k8s.io/node-selector"
JOBSET_NAMESPACED_JOB = "alpha.jobset.sigs.k8s.io/namespaced-job"
JOBSET_NO_SCHEDULE = "alpha.jobset.sigs.k8s.io/no-schedule"
_TOPOLOGY = (
    ("kai.scheduler/topology", "topology"),
    ("kai.scheduler/topology-required-placement", "requiredTopologyLevel"),
    ("kai.scheduler/topology-preferred-placement", "preferredTopologyLevel"),
)


def kai_template(template: Any) -> bool:
    """Whether a pod template is for KAI's scheduler."""
    spec = template.get("spec") if isinstance(template, dict) else None
    return isinstance(spec, dict) and spec.get("schedulerName") == KAI_SCHEDULER


def _labels_of(template: Any) -> dict:
    meta = template.get("metadata") if isinstance(template, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def _podgroup(o: Obj, pg_name: str, template: dict, existing: Existing, spec: dict[str, Any]) -> dict:
    """The default grouper's PodGroup for owner ``o`` and its pod ``template``."""
    labels = o.strmap(o.meta.get("labels"), "metadata.labels")
    annotations = o.strmap(o.meta.get("annotations"), "metadata.annotations")
    tlabels = {str(k): str(v) for k, v in _labels_of(template).items()}
    queue = labels.get(KAI_QUEUE_LABEL) or tlabels.get(KAI_QUEUE_LABEL) or labels.get("project")
    queue = queue or tlabels.get("project") or DEFAULT_QUEUE
    raw_tspec = template.get("spec")
    tspec: dict = raw_tspec if isinstance(raw_tspec, dict) else {}
    pclass = DEFAULT_PRIORITY_CLASS
    for candidate in (
        labels.get("priorityClassName"),
        tlabels.get("priorityClassName"),
        tspec.get("priorityClassName"),
    ):
        if candidate and candidate in existing.priority:
            pclass = str(candidate)
            break
    pg_spec: dict[str, Any] = {"queue": queue, "priorityClassName": pclass, **spec}
    preempt = labels.get("kai.scheduler/preemptibility") or tlabels.get("kai.scheduler/preemptibility")
    if preempt:
        pg_spec["preemptibility"] = preempt
    topology = {field: annotations[key] for key, field in _TOPOLOGY if annotations.get(key)}
    if topology:
        pg_spec["topologyConstraint"] = topology
    meta: dict[str, Any] = {
        "name": pg_name,
        "namespace": o.namespace,
        "labels": labels,
        "annotations": annotations,
    }
    if o.meta.get("creationTimestamp"):
        meta["creationTimestamp"] = o.meta["creationTimestamp"]
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": meta, "spec": pg_spec}


def _min_override(o: Obj, annotations: Any, path: str) -> int | None:
    value = annotations.get(MIN_MEMBER_KEY) if isinstance(annotations, dict) else None
    return None if value is None else o.integer(value, f"{path}.{MIN_MEMBER_KEY}", minimum=1)


def _pod_count(o: Obj, spec: dict, path: str, succeeded: int = 0) -> int:
    parallelism = o.integer(spec.get("parallelism", 1), f"{path}.parallelism", minimum=0)
    if spec.get("completions") is None:
        return parallelism
    completions = o.integer(spec["completions"], f"{path}.completions", minimum=0)
    return max(0, min(parallelism, completions - succeeded))


def _not_again(o: Obj, kind: str, pg_name: str, existing: Existing, notes: Notes) -> bool:
    if (o.namespace, pg_name) in existing.podgroups:
        notes.made(o.ident, "not expanded: its PodGroup is in the snapshot", o.file)
        return True
    if (o.namespace, kind, o.name) in existing.owned:
        notes.warn(
            o.ident,
            "",
            "not expanded: its pods are in the snapshot without their PodGroup; each is scheduled on its own",
            o.file,
        )
        return True
    return False


def expand_batch_job(file: str, raw: dict, existing: Existing, notes: Notes) -> Made | None:
    """The PodGroup and pods of a ``batch/v1`` Job for KAI (see the module text)."""
    o = Obj(raw, file, "Job", True)
    spec, status = o.section("spec"), o.section("status")
    template = o.mapping(spec.get("template"), "spec.template")
    uid = o.string(o.meta.get("uid"), "metadata.uid")
    pg_name = f"pg-{o.name}-{uid}" if uid else f"pg-{o.name}"
    if _not_again(o, "Job", pg_name, existing, notes):
        return None
    if o.boolean(spec.get("suspend"), "spec.suspend", False):
        notes.made(o.ident, "not expanded: the Job is suspended (no pods)", file)
        return None
    succeeded = o.integer(status.get("succeeded", 0), "status.succeeded", minimum=0)
    count = _pod_count(o, spec, "spec", succeeded)
    check_pod_count(o, count, "spec.parallelism")
    min_member = _min_override(o, o.meta.get("annotations"), "metadata.annotations") or 1
    made = Made(podgroup=f"{o.namespace}/{pg_name}")
    made.objects.append((file, _podgroup(o, pg_name, template, existing, {"minMember": min_member})))
    indexed = spec.get("completionMode") == "Indexed"
    for i in range(count):
        labels = {"job-name": o.name, "batch.kubernetes.io/job-name": o.name}
        if uid:
            labels.update({"controller-uid": uid, "batch.kubernetes.io/controller-uid": uid})
        ann = {KAI_GROUP_KEY: pg_name}
        if indexed:
            ann["batch.kubernetes.io/job-completion-index"] = str(i)
        pod = pod_from_template(o, template, "spec.template", f"{o.name}-{i}", labels, ann, {})
        made.objects.append((file, pod))
        made.pods.append(pod["metadata"]["name"])
    made.summary = f"minMember {min_member}, queue {made.objects[0][1]['spec']['queue']}"
    return made


def _jobset_pods(o: Obj, rj: Any, r: int) -> int:
    p = f"spec.replicatedJobs[{r}]"
    rj = o.mapping(rj, p)
    jspec = o.mapping(o.mapping(rj.get("template"), f"{p}.template").get("spec"), f"{p}.template.spec")
    return o.integer(rj.get("replicas", 1), f"{p}.replicas", minimum=0) * _pod_count(
        o, jspec, f"{p}.template.spec"
    )


def expand_jobset(file: str, raw: dict, existing: Existing, notes: Notes) -> Made | None:
    """The PodGroup and pods of a JobSet for KAI (see the module text)."""
    o = Obj(raw, file, "JobSet", True)
    spec = o.section("spec")
    uid = o.string(o.meta.get("uid"), "metadata.uid")
    pg_name = f"pg-{o.name}-{uid}" if uid else f"pg-{o.name}"
    if _not_again(o, "JobSet", pg_name, existing, notes):
        return None
    if o.boolean(spec.get("suspend"), "spec.suspend", False):
        notes.made(o.ident, "not expanded: the JobSet is suspended (no pods)", file)
        return None
    rjobs = o.listof(spec.get("replicatedJobs"), "spec.replicatedJobs")
    if not rjobs:
        raise o.error("a JobSet needs replicatedJobs", "spec.replicatedJobs")
    js_ann = o.strmap(o.meta.get("annotations"), "metadata.annotations")
    override = _min_override(o, js_ann, "metadata.annotations")
    order = o.mapping(spec.get("startupPolicy"), "spec.startupPolicy").get("startupPolicyOrder") or "AnyOrder"
    # KAI's JobSet grouper: the podgroup needs min(override, n) of its n replicated jobs, 1 with InOrder
    # (the JobSet controller creates the first replicated job alone), else every one
    min_subgroup = (
        min(override, len(rjobs)) if override is not None else 1 if order == "InOrder" else len(rjobs)
    )
    created = 1 if order == "InOrder" else len(rjobs)
    check_pod_count(
        o, sum(_jobset_pods(o, rj, r) for r, rj in enumerate(rjobs[:created])), "spec.replicatedJobs"
    )
    made = Made(podgroup=f"{o.namespace}/{pg_name}")
    subgroups: list[dict[str, Any]] = []
    first_template: dict = {}
    for r, rj in enumerate(rjobs):  # the queue and priority class come from the first pod template
        template = _replicated_job(o, r, rj, js_ann, pg_name, made, subgroups, r < created)
        first_template = first_template or template
    pg = _podgroup(
        o, pg_name, first_template, existing, {"minSubGroup": min_subgroup, "subGroups": subgroups}
    )
    made.objects.insert(0, (file, pg))
    leaves = sum(1 for sg in subgroups if sg.get("parent"))
    made.summary = f"{min_subgroup} of {len(rjobs)} replicated jobs over {leaves} replica sub-groups, queue {pg['spec']['queue']}"
    return made


def _replicated_job(
    o: Obj,
    r: int,
    rj: Any,
    js_ann: dict[str, str],
    pg_name: str,
    made: Made,
    subgroups: list[dict[str, Any]],
    create: bool,
) -> dict:
    """KAI's sub-groups of replicated job ``r`` — a parent needing every replica, a leaf per replica
    needing its ``parallelism`` pods (or the template's min-member annotation) under the template's
    topology annotations — and, when ``create``, its pods (labelled with their leaf, placed as the JobSet
    controller's exclusive placement asks); its pod template."""
    p = f"spec.replicatedJobs[{r}]"
    rj = o.mapping(rj, p)
    name = o.string(rj.get("name"), f"{p}.name")
    if not name:
        raise o.error("a replicated job needs a name", f"{p}.name")
    jt = o.mapping(rj.get("template"), f"{p}.template")
    jmeta, jspec = (
        o.mapping(jt.get("metadata"), f"{p}.template.metadata"),
        o.mapping(jt.get("spec"), f"{p}.template.spec"),
    )
    jann = o.strmap(jmeta.get("annotations"), f"{p}.template.metadata.annotations")
    template = o.mapping(jspec.get("template"), f"{p}.template.spec.template")
    count = _pod_count(o, jspec, f"{p}.template.spec")
    leaf_min = _min_override(o, jann, f"{p}.template.metadata.annotations") or o.integer(
        jspec.get("parallelism", 1), f"{p}.template.spec.parallelism", minimum=0
    )
    topology = {field: jann[key] for key, field in _TOPOLOGY if jann.get(key)}
    exclusive = _exclusive_selector(o, js_ann, jann, p)
    replicas = o.integer(rj.get("replicas", 1), f"{p}.replicas", minimum=0)
    subgroups.append({"name": name, "minSubGroup": replicas})
    for idx in range(replicas):
        leaf = f"{name}-replica-{idx}"
        subgroups.append(
            {
                "name": leaf,
                "parent": name,
                "minMember": leaf_min,
                **({"topologyConstraint": topology} if topology else {}),
            }
        )
        if create:
            _replica_pods(o, template, p, name, idx, count, pg_name, exclusive, made)
    return template


def _replica_pods(
    o: Obj,
    template: dict,
    p: str,
    name: str,
    idx: int,
    count: int,
    pg_name: str,
    exclusive: bool,
    made: Made,
) -> None:
    """The ``count`` pods of replica ``idx`` of replicated job ``name`` (at ``p``), as the JobSet
    controller's child Job ``<jobset>-<name>-<idx>`` makes them: labelled with the JobSet's labels and
    their leaf sub-group, annotated with podgroup ``pg_name``, placed exclusively when asked."""
    child = f"{o.name}-{name}-{idx}"
    leaf = f"{name}-replica-{idx}"
    for i in range(count):
        labels = {
            "jobset.sigs.k8s.io/jobset-name": o.name,
            "jobset.sigs.k8s.io/replicatedjob-name": name,
            "jobset.sigs.k8s.io/job-index": str(idx),
            "job-name": child,
            SUBGROUP_LABEL: leaf,
        }
        ann = {KAI_GROUP_KEY: pg_name}
        pod = pod_from_template(o, template, f"{p}.template.spec.template", f"{child}-{i}", labels, ann, {})
        if exclusive:
            _place_exclusively(pod, f"{o.namespace}_{child}")
        made.objects.append((o.file, pod))
        made.pods.append(pod["metadata"]["name"])


def _exclusive_selector(o: Obj, js_ann: dict[str, str], jann: dict[str, str], p: str) -> bool:
    """Whether the JobSet controller places replicated job ``p``'s child Jobs by its node-selector
    strategy (``alpha.jobset.sigs.k8s.io/exclusive-topology`` with ``.../node-selector``, on the JobSet or
    the replicated job's template, the template's first); refused: exclusive placement by its pod
    webhook (the default strategy), see docs/compatibility.md."""
    if JOBSET_EXCLUSIVE in jann:
        where, ann = f"{p}.template.metadata.annotations", jann
    elif JOBSET_EXCLUSIVE in js_ann:
        where, ann = "metadata.annotations", js_ann
    else:
        return False
    if JOBSET_NODE_SELECTOR in ann:
        return True
    raise o.error(
        "exclusive placement by the JobSet pod webhook cannot be honoured: the webhook admits a replica's "
        "follower pods only once its leader pod is bound (so KAI's gang of the replica never sees them); "
        f"use the node-selector strategy ({JOBSET_NODE_SELECTOR}) or a per-replica topology "
        "(kai.scheduler/topology with kai.scheduler/topology-required-placement on the replicated job's template)",
        f"{where}.{JOBSET_EXCLUSIVE}",
    )


def _place_exclusively(pod: dict, namespaced_job: str) -> None:
    """The JobSet controller's node-selector strategy on a child Job's pod: a nodeSelector on the
    ``alpha.jobset.sigs.k8s.io/namespaced-job`` node label (``<namespace>_<job>``, set on the nodes of the
    job's domain by the user) and a toleration of the ``alpha.jobset.sigs.k8s.io/no-schedule`` taint."""
    spec = pod["spec"]
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), JOBSET_NAMESPACED_JOB: namespaced_job}
    spec["tolerations"] = [
        *(spec.get("tolerations") or []),
        {"key": JOBSET_NO_SCHEDULE, "operator": "Exists", "effect": "NoSchedule"},
    ]


def group_bare_pods(objects: list[SourcedObject], existing: Existing, notes: Notes) -> list[SourcedObject]:
    """Pods of KAI's scheduler without a podgroup, grouped as KAI's pod-grouper groups them: the pods of
    one owner (their controller reference, else their first owner) share a PodGroup
    ``pg-<owner>-<owner uid>``, a pod without an owner has its own ``pg-<pod>-<uid>`` (KAI's pod-job
    grouping); minMember 1, queue and priority class by the default grouper's rules from the pod's
    labels and spec. Each pod gets the annotation ``pod-group-name``; other objects pass unchanged."""
    out: list[SourcedObject] = []
    made: dict[tuple[str, str], dict] = {}
    count = 0
    for file, raw in objects:
        if not is_bare_kai_pod(raw):
            out.append((file, raw))
            continue
        o = Obj(raw, file, "Pod", True)
        pg_name = _owner_group_name(o)
        if (o.namespace, pg_name) not in made and (o.namespace, pg_name) not in existing.podgroups:
            pg = _bare_pod_group(o, file, pg_name, existing)
            made[(o.namespace, pg_name)] = pg
            out.append((file, pg))
        if o.section("spec").get("nodeName") and (o.namespace, pg_name) in made:  # its podgroup has started
            made[(o.namespace, pg_name)]["status"] = {"phase": "Running"}
        pod = dict(raw)
        pod["metadata"] = {
            **o.meta,
            "annotations": {
                **o.strmap(o.meta.get("annotations"), "metadata.annotations"),
                KAI_GROUP_KEY: pg_name,
            },
        }
        out.append((file, pod))
        count += 1
    if count:
        notes.made(
            f"{count} pod{'s' if count != 1 else ''} of {KAI_SCHEDULER} without a podgroup",
            f"{len(made)} PodGroup{'s' if len(made) != 1 else ''} as KAI's pod-grouper makes them (minMember 1)",
        )
    return out


def _owner_group_name(o: Obj) -> str:
    """KAI's pod-grouper name for a bare pod's PodGroup: ``pg-<owner>-<owner uid>`` of its controller
    reference (else its first owner), ``pg-<pod>-<uid>`` for a pod without an owner."""
    refs = [
        r for r in o.listof(o.meta.get("ownerReferences"), "metadata.ownerReferences") if isinstance(r, dict)
    ]
    owner = next((r for r in refs if r.get("controller") is True), refs[0] if refs else None)
    name, uid = (
        (str(owner.get("name")), str(owner.get("uid") or ""))
        if owner
        else (o.name, o.string(o.meta.get("uid"), "metadata.uid"))
    )
    return f"pg-{name}-{uid}" if uid else f"pg-{name}"


def _bare_pod_group(o: Obj, file: str, pg_name: str, existing: Existing) -> dict:
    """The PodGroup (minMember 1) KAI's pod-grouper makes for bare pod ``o``, from its labels and spec."""
    template = {
        "metadata": {"labels": o.strmap(o.meta.get("labels"), "metadata.labels")},
        "spec": o.section("spec"),
    }
    owner_meta = {
        "name": pg_name,
        "namespace": o.namespace,
        "creationTimestamp": o.meta.get("creationTimestamp"),
    }
    return _podgroup(
        Obj({"metadata": owner_meta}, file, "Pod", True), pg_name, template, existing, {"minMember": 1}
    )


def is_bare_kai_pod(raw: dict) -> bool:
    if raw.get("kind") != "Pod" or raw.get("apiVersion") != "v1":
        return False
    spec, meta = raw.get("spec"), raw.get("metadata")
    if not isinstance(spec, dict) or spec.get("schedulerName") != KAI_SCHEDULER or not isinstance(meta, dict):
        return False
    if spec.get("schedulingGroup") or spec.get("workloadRef"):  # in a Kubernetes gang (manifests/native.py)
        return False
    labels, annotations = meta.get("labels"), meta.get("annotations")
    for notes in (labels, annotations):
        if isinstance(notes, dict) and (notes.get(KAI_GROUP_KEY) or notes.get(GROUP_ANNOTATION)):
            return False
    return True
