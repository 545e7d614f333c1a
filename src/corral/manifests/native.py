"""Kubernetes' own gang API (``scheduling.k8s.io``, KEP-4671 "Gang Scheduling using Workload Object" and
its successors) onto corral's model: a ``PodGroup`` with a gang policy is a corral job with that
minimum, a basic policy is a plain group, its topology constraint is a topology domain.

The API per Kubernetes release (the schemas of the ``kubernetes-validate`` package, folders
``v1.35.0-local`` … ``v1.37.0-local``):

- **1.35** (``v1alpha1``): no PodGroup kind. A ``Workload`` lists ``spec.podGroups[]`` (``name``,
  ``policy.gang.minCount`` or ``policy.basic``); a pod joins one by ``spec.workloadRef`` (``name``: the
  Workload, ``podGroup``: the group, ``podGroupReplicaKey``: pods of one key form one replica of the
  group, each replica its own gang). corral names that job ``<workload>:<podGroup>[:<replicaKey>]`` (a
  colon is no part of a Kubernetes name, so no such name clashes with a PodGroup's); kube-scheduler
  writes no status for it, neither does corral.
- **1.36** (``v1alpha2``) and **1.37** (``v1alpha3``, ``v1beta1``): the ``Workload`` holds
  ``podGroupTemplates`` that controllers copy into runtime ``PodGroup`` objects; a pod names its
  PodGroup by ``spec.schedulingGroup.podGroupName``. The PodGroup is what kube-scheduler schedules,
  so it is what corral reads; the Workload's templates are inert. 1.37's ``CompositePodGroup``
  (``v1alpha3``) groups PodGroups into one gang: :mod:`corral.manifests.native_composite`.

Decisions (each following kube-scheduler's gang scheduling as the KEP and the API documentation
describe it):

- ``schedulingPolicy.gang.minCount``: the gang minimum; ``schedulingPolicy.basic``: a plain group
  (minimum 1: each pod is placed on its own). A policy with neither or both is refused (the API server
  refuses it too).
- ``schedulingConstraints.topology[].key`` (at most one): every pod of the group in one domain of that
  node label — a hard constraint over the domains of the label, each domain the nodes sharing a value of
  it (nodes without the label are in none). Enforced by the ``network-topology-aware`` plugin, as KAI's
  required level is; ``corral validate`` says so when the configuration lacks it.
- ``priority`` (set by admission from ``priorityClassName``) is the job's priority, else the
  ``priorityClassName``'s value, else its pods' highest (as for every podgroup).
- ``preemptionPolicy: Never``: the group's pods preempt nothing (as a pod's ``preemptionPolicy``).
- ``disruptionMode`` ``all`` (``PodGroup`` in ``v1alpha2``): the group is disrupted only as a whole.
  corral's eviction keeps a gang at its minimum or evicts all of it, which is the whole group only when
  the minimum is every pod: a group of more pods than its minimum is refused by name (corral could
  evict part of it). ``single`` (``Pod``, the default): each pod on its own, as corral does.
- A PodGroup under a composite (``spec.parentCompositePodGroupName``) is a sub-group of its root
  composite's job (:mod:`corral.manifests.native_composite`).
- Dynamic resource claims of a group (``spec.resourceClaims``, KEP-5729, 1.36 on): a pod of the group
  whose own ``spec.resourceClaims`` entry matches one of the group's exactly (same name, same claim or
  template) shares the group's claim — the named claim, or the one claim generated for the group from
  the template (``status.resourceClaimStatuses``; corral instantiates ``<podgroup>-<entry>`` until the
  resourceclaim controller has made it). It is allocated once, for the first pod placed, and the
  other pods go where its devices are (:mod:`corral.dra.pods`); ``status.resourceClaimStatuses`` is
  honoured, a group claim no pod names is inert.
- **Queue** (the API has none): the PodGroup's (1.35: the Workload's) annotation
  ``scheduling.volcano.sh/queue-name`` (Volcano's queue annotation), else its label
  ``kai.scheduler/queue`` (KAI's), else the queue ``default``.
- **Phase** (the API has none): a group whose scheduled condition is True (``PodGroupScheduled`` in
  ``v1alpha2``, ``PodGroupInitiallyScheduled`` from ``v1alpha3``) is Running, else Pending (``enqueue``
  admits it in the cycle). ``corral run`` keeps the phase its cycles decide in its cache only (an
  assumption, never written to the object: the API server would drop it), as ``corral schedule
  --cycles`` keeps it in its model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from corral.errors import InputError
from corral.manifests.fields import Obj
from corral.manifests.records import PodGroupRec, PodRec, TopologyRec, workload_group_name


class _Named(Protocol):
    name: str
    namespace: str
    file: str


R = TypeVar("R", bound=_Named)

if TYPE_CHECKING:
    from corral.model.cluster import Cluster
    from corral.model.objects import Job, Task

__all__ = [
    "COMPOSITE_APIS",
    "NATIVE_GROUP",
    "PODGROUP_APIS",
    "QUEUE_ANNOTATION",
    "WORKLOAD_APIS",
    "NativeGroup",
    "WorkloadRec",
    "apply_native",
    "finish_native",
    "join_native",
    "native_pod_group",
    "native_podgroup",
    "native_topologies",
    "parse_workload",
    "scheduled_condition",
    "topology_family",
    "workload_podgroups",
]

NATIVE_GROUP = "scheduling.k8s.io"
PODGROUP_APIS = tuple(f"{NATIVE_GROUP}/{v}" for v in ("v1alpha2", "v1alpha3", "v1beta1"))
WORKLOAD_APIS = tuple(f"{NATIVE_GROUP}/{v}" for v in ("v1alpha1", "v1alpha2", "v1alpha3", "v1beta1"))
COMPOSITE_APIS = (f"{NATIVE_GROUP}/v1alpha3",)
#: the queue of a native group (the API has none): Volcano's queue annotation, else KAI's queue label
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
QUEUE_LABEL = "kai.scheduler/queue"
#: the prefix of the topology family of a node-label constraint (a colon is no part of a Kubernetes
#: name, so it never clashes with a KAI Topology's name)
TOPOLOGY_PREFIX = "node-label:"


def scheduled_condition(api: str) -> str:
    """The condition kube-scheduler writes on a PodGroup of ``api`` once it is scheduled ("": none)."""
    version = api.rpartition("/")[2]
    if version == "v1alpha2":
        return "PodGroupScheduled"
    return "PodGroupInitiallyScheduled" if version in ("v1alpha3", "v1beta1") else ""


def topology_family(key: str) -> str:
    return TOPOLOGY_PREFIX + key


@dataclass
class NativeGroup:
    """What a ``scheduling.k8s.io`` group adds to its job (``Cluster.native_groups``, by job uid)."""

    api: str
    #: the condition kube-scheduler writes ("" for a 1.35 Workload's group: it writes none)
    condition: str = ""
    #: the group's conditions as read, then as corral's decisions set them: type -> status, type -> message
    conditions: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    topology_key: str = ""
    disruption_all: bool = False
    preempt_never: bool = False
    priority: int | None = None
    #: the group's resource claims (spec.resourceClaims[]: name, resourceClaimName,
    #: resourceClaimTemplateName) and the claims generated for its templates
    #: (status.resourceClaimStatuses: name -> resourceClaimName, "" when none was needed), KEP-5729
    claims: tuple[tuple[str, str, str], ...] = ()
    claim_statuses: dict[str, str] = field(default_factory=dict)
    uid: str = ""
    #: the Workload it was made from ("" when none is named)
    workload: str = ""
    file: str = ""
    #: ``spec.parentCompositePodGroupName`` ("" for a group of its own)
    parent: str = ""
    #: a root composite's tree (manifests.native_composite.CompositeTree), None for a PodGroup
    composite: Any = None

    def copy(self) -> NativeGroup:
        """A copy whose conditions (and its leaves') can change without changing this one's."""
        out = replace(self, conditions=dict(self.conditions), messages=dict(self.messages))
        if self.composite is not None:
            out.composite = replace(
                self.composite, leaves={n: g.copy() for n, g in self.composite.leaves.items()}
            )
        return out


@dataclass
class WorkloadRec:
    """A ``Workload``: its ``v1alpha1`` pod groups by name as ``(minimum, gang)``; templates of later
    versions are counted only (controllers copy them into PodGroups)."""

    name: str
    namespace: str
    api: str
    groups: dict[str, tuple[int, bool]]
    templates: int
    labels: dict[str, str]
    annotations: dict[str, str]
    creation: float
    file: str = ""


def _policy(o: Obj, raw: Any, path: str, count_key: str = "minCount") -> tuple[int, bool]:
    """``(minimum, gang)`` of a scheduling policy: exactly one of ``gang`` and ``basic``."""
    policy = o.mapping(raw, path)
    gang, basic = policy.get("gang"), policy.get("basic")
    if (gang is None) == (basic is None):
        raise o.error("a scheduling policy needs exactly one of gang and basic (the API requires it)", path)
    if basic is not None:
        o.mapping(basic, f"{path}.basic")
        return 1, False
    gang = o.mapping(gang, f"{path}.gang")
    if gang.get(count_key) is None:
        raise o.error(f"a gang policy needs {count_key}", f"{path}.gang.{count_key}")
    return o.integer(gang[count_key], f"{path}.gang.{count_key}", minimum=1), True


def _topology_key(o: Obj, raw: Any, path: str) -> str:
    constraints = o.listof(o.mapping(raw, path).get("topology"), f"{path}.topology")
    if len(constraints) > 1:
        raise o.error("at most one topology constraint can be given (the API allows one)", f"{path}.topology")
    if not constraints:
        return ""
    key = o.string(o.mapping(constraints[0], f"{path}.topology[0]").get("key"), f"{path}.topology[0].key")
    if not key:
        raise o.error("a topology constraint needs key (a node label)", f"{path}.topology[0].key")
    return key


def _disruption_all(o: Obj, raw: Any, api: str) -> bool:
    if raw is None:
        return False
    if api.endswith("/v1alpha2"):  # a string there: Pod (default) or PodGroup
        mode = o.string(raw, "spec.disruptionMode")
        if mode not in ("", "Pod", "PodGroup"):
            raise o.error(f"unknown disruptionMode {mode!r} (allowed: Pod, PodGroup)", "spec.disruptionMode")
        return mode == "PodGroup"
    mode_map = o.mapping(raw, "spec.disruptionMode")
    if mode_map.get("all") is not None and mode_map.get("single") is not None:
        raise o.error("a disruptionMode is one of single and all", "spec.disruptionMode")
    return mode_map.get("all") is not None


def _claims(o: Obj, raw: Any, path: str) -> tuple[tuple[str, str, str], ...]:
    """A PodGroup's ``spec.resourceClaims`` (the pod's shape: exactly one of the two sources)."""
    from corral.manifests.dra import claim_refs

    return claim_refs(o, raw, path)


def native_podgroup(o: Obj, api: str) -> PodGroupRec:
    """A ``scheduling.k8s.io`` PodGroup (``v1alpha2``, ``v1alpha3``, ``v1beta1``) as a podgroup record."""
    spec, status = o.section("spec"), o.section("status")
    if spec.get("schedulingPolicy") is None:
        raise o.error("a PodGroup needs schedulingPolicy (gang or basic)", "spec.schedulingPolicy")
    minimum, _gang = _policy(o, spec["schedulingPolicy"], "spec.schedulingPolicy")
    native = NativeGroup(api, scheduled_condition(api), file=o.file)
    native.topology_key = _topology_key(o, spec.get("schedulingConstraints"), "spec.schedulingConstraints")
    native.disruption_all = _disruption_all(o, spec.get("disruptionMode"), api)
    policy = o.string(spec.get("preemptionPolicy"), "spec.preemptionPolicy")
    if policy not in ("", "Never", "PreemptLowerPriority"):
        raise o.error(
            f"unknown preemptionPolicy {policy!r} (allowed: Never, PreemptLowerPriority)",
            "spec.preemptionPolicy",
        )
    native.preempt_never = policy == "Never"
    if spec.get("priority") is not None:
        native.priority = o.integer(spec["priority"], "spec.priority")
    native.claims = _claims(o, spec.get("resourceClaims"), "spec.resourceClaims")
    if native.claims:
        from corral.manifests.dra import claim_statuses

        native.claim_statuses = claim_statuses(
            o, status.get("resourceClaimStatuses"), "status.resourceClaimStatuses"
        )
    native.uid = o.string(o.meta.get("uid"), "metadata.uid")
    native.parent = o.string(spec.get("parentCompositePodGroupName"), "spec.parentCompositePodGroupName")
    ref = o.mapping(spec.get("workloadRef") or spec.get("podGroupTemplateRef"), "spec.workloadRef")
    if "workload" in ref:  # v1alpha2: podGroupTemplateRef.workload.workloadName
        ref = o.mapping(ref["workload"], "spec.podGroupTemplateRef.workload")
    native.workload = o.string(ref.get("workloadName"), "spec.workloadRef.workloadName")
    for i, c in enumerate(o.listof(status.get("conditions"), "status.conditions")):
        c = o.mapping(c, f"status.conditions[{i}]")
        ctype = o.string(c.get("type"), f"status.conditions[{i}].type")
        native.conditions[ctype] = o.string(c.get("status"), f"status.conditions[{i}].status")
        native.messages[ctype] = o.string(c.get("message"), f"status.conditions[{i}].message")
    labels, annotations = _queue_keys(o)
    creation = o.meta.get("creationTimestamp")
    scheduled = native.condition and native.conditions.get(native.condition) == "True"
    return PodGroupRec(
        name=o.name,
        namespace=o.namespace,
        min_member=minimum,
        min_task_member={},
        min_resources=None,
        queue=_queue(labels, annotations),
        priority_class=o.string(spec.get("priorityClassName"), "spec.priorityClassName"),
        topology_mode="",
        topology_tier=None,
        # the API has no phase: corral's own decided phase, overlaid on its cache between cycles (never
        # written to the object), else the scheduled condition's
        phase="Running" if scheduled else (o.string(status.get("phase"), "status.phase") or "Pending"),
        creation=o.time(creation, "metadata.creationTimestamp") if creation else 0.0,
        annotations=annotations,
        labels=labels,
        file=o.file,
        native=native,
    )


def _queue_keys(o: Obj) -> tuple[dict[str, str], dict[str, str]]:
    return o.strmap(o.meta.get("labels"), "metadata.labels"), o.strmap(
        o.meta.get("annotations"), "metadata.annotations"
    )


def _queue(labels: dict[str, str], annotations: dict[str, str]) -> str:
    return annotations.get(QUEUE_ANNOTATION) or labels.get(QUEUE_LABEL) or "default"


def parse_workload(o: Obj, api: str) -> WorkloadRec:
    """A ``Workload`` of any version: ``v1alpha1``'s pod groups (which pods join by ``workloadRef``), or
    the templates of later versions (inert: controllers copy them into PodGroups); composite templates
    are refused."""
    spec = o.section("spec")
    groups: dict[str, tuple[int, bool]] = {}
    for i, g in enumerate(o.listof(spec.get("podGroups"), "spec.podGroups")):
        path = f"spec.podGroups[{i}]"
        g = o.mapping(g, path)
        name = o.string(g.get("name"), f"{path}.name")
        if not name:
            raise o.error("a pod group needs a name", f"{path}.name")
        if name in groups:
            raise o.error(f"pod group {name!r} is given twice", f"{path}.name")
        groups[name] = _policy(o, g.get("policy"), f"{path}.policy")
    templates = o.listof(spec.get("podGroupTemplates"), "spec.podGroupTemplates")
    for i, t in enumerate(templates):  # checked as the PodGroups made from them will be
        path = f"spec.podGroupTemplates[{i}]"
        t = o.mapping(t, path)
        if t.get("schedulingPolicy") is not None:
            _policy(o, t["schedulingPolicy"], f"{path}.schedulingPolicy")
    creation = o.meta.get("creationTimestamp")
    return WorkloadRec(
        name=o.name,
        namespace=o.namespace,
        api=api,
        groups=groups,
        templates=len(templates),
        labels=o.strmap(o.meta.get("labels"), "metadata.labels"),
        annotations=o.strmap(o.meta.get("annotations"), "metadata.annotations"),
        creation=o.time(creation, "metadata.creationTimestamp") if creation else 0.0,
        file=o.file,
    )


def native_pod_group(o: Obj, spec: dict) -> tuple[str, tuple[str, str, str] | None]:
    """How a pod joins a native group: ``spec.schedulingGroup.podGroupName`` (1.36 on) and
    ``spec.workloadRef`` (1.35: workload, pod group, replica key)."""
    group = o.mapping(spec.get("schedulingGroup"), "spec.schedulingGroup")
    name = o.string(group.get("podGroupName"), "spec.schedulingGroup.podGroupName")
    ref = spec.get("workloadRef")
    if ref is None:
        return name, None
    ref = o.mapping(ref, "spec.workloadRef")
    workload = o.string(ref.get("name"), "spec.workloadRef.name")
    podgroup = o.string(ref.get("podGroup"), "spec.workloadRef.podGroup")
    if not workload or not podgroup:
        raise o.error("a workloadRef needs name and podGroup", "spec.workloadRef")
    key = o.string(ref.get("podGroupReplicaKey"), "spec.workloadRef.podGroupReplicaKey")
    return name, (workload, podgroup, key)


def workload_podgroups(workloads: list[WorkloadRec], pods: list[PodRec]) -> list[PodGroupRec]:
    """The podgroup records of the ``v1alpha1`` groups pods join by ``spec.workloadRef``, one per
    (workload, pod group, replica key) some pod names. A missing Workload, or a pod group the Workload
    does not list, leaves the job unschedulable with that reason (kube-scheduler keeps such pods waiting)."""
    by_name = unique_by_name(workloads, "workload", "Workload")
    out: dict[tuple[str, str], PodGroupRec] = {}
    for pod in pods:
        if pod.workload_ref is None or (pod.namespace, workload_group_name(pod.workload_ref)) in out:
            continue
        workload, group, _key = pod.workload_ref
        name = workload_group_name(pod.workload_ref)
        found = by_name.get((pod.namespace, workload))
        minimum, problem = 1, ""
        if found is None:
            problem = f"workload {pod.namespace}/{workload} does not exist"
        elif group not in found.groups:
            problem = f"workload {pod.namespace}/{workload} has no pod group {group!r}"
        else:
            minimum = found.groups[group][0]
        labels, annotations = (found.labels, found.annotations) if found is not None else ({}, {})
        rec = PodGroupRec(
            name=name,
            namespace=pod.namespace,
            min_member=minimum,
            min_task_member={},
            min_resources=None,
            queue=_queue(labels, annotations),
            priority_class="",
            topology_mode="",
            topology_tier=None,
            phase="Pending",
            creation=found.creation if found is not None else pod.creation,
            annotations={},
            labels={},
            file=found.file if found is not None else pod.file,
            native=NativeGroup(
                found.api if found is not None else f"{NATIVE_GROUP}/v1alpha1", workload=workload
            ),
            invalid=problem,
        )
        out[(pod.namespace, name)] = rec
    return list(out.values())


def native_topologies(groups: list[PodGroupRec]) -> list[TopologyRec]:
    """One single-level topology per node label a native group's constraint names (its domains: the
    nodes sharing a value of the label), built with KAI's Topology domains
    (:func:`corral.manifests.kai.topology_domains`)."""
    keys: set[str] = set()
    for g in groups:
        if g.native is not None:
            keys.add(g.native.topology_key)
            if g.native.composite is not None:
                keys.update(key for _p, _k, _m, key in g.native.composite.nodes.values())
    keys.discard("")
    return [TopologyRec(topology_family(k), [(k, "")]) for k in sorted(keys)]


def apply_native(cluster: Cluster, job: Job, pg: PodGroupRec) -> None:
    """What a native group adds to its job once it is made (before its pods join)."""
    # a copy: what the cycles' decisions set (kube.native_status) belongs to this cluster, not to the
    # record (corral run's cache keeps records across cycles; each cycle starts from the object's status)
    native: NativeGroup = pg.native.copy()
    cluster.native_groups[job.uid] = native
    if pg.invalid and not job.invalid_reason:
        job.invalid_reason = pg.invalid
    if native.topology_key:
        # a hard constraint at the only level of the label's topology (tier 1; its root is tier 2)
        job.topology_mode, job.topology_tier, job.topology_low_tier = "hard", 1, 1
        job.topology_family = topology_family(native.topology_key)
    if native.composite is not None:
        _composite_tree(job, native.composite)
        for obj, message in native.composite.notes:
            cluster.notes.warn(obj, "", message)


def _composite_tree(job: Job, tree: Any) -> None:
    """A root composite's tree as the job's sub-groups (KAI's model, :mod:`corral.model.subgroups`)."""
    from corral.model.subgroups import SubGroup, SubGroupConstraint, SubGroupTree

    groups: dict[str, SubGroup] = {}
    for name, (parent, kind, minimum, key) in tree.nodes.items():
        g = SubGroup(name, parent)
        if kind == "leaf":
            g.min_member = minimum
        else:
            g.min_subgroup = minimum
        if key:
            g.constraint = SubGroupConstraint(name, "hard", topology_family(key), 1, 1)
        groups[name] = g
    for name, g in groups.items():
        if g.parent in groups:
            groups[g.parent].children.append(name)
    for g in groups.values():  # a set without groups under it: nothing can satisfy it
        if g.min_subgroup is not None and not g.children and not job.invalid_reason:
            job.invalid_reason = f"composite pod group {job.namespace}/{g.name} has no group under it"
    sub_tree = SubGroupTree(groups, tree.root_min)
    job.subgroup_tree = sub_tree
    if sub_tree.all_required():
        job.min_task_member = {n: groups[n].min_member or 0 for n in sub_tree.leaves()}
        job.min_member = sum(job.min_task_member.values())
    else:
        job.subgroups = sub_tree
        job.min_task_member = {}
        job.min_member = sub_tree.fewest_pods()


def join_native(cluster: Cluster, job: Job, rec: PodRec, task: Task) -> None:
    """Check that a pod naming a native group joins a native group's job (a pod of a PodGroup under a
    composite takes the PodGroup's name as its role), and leave the job unschedulable when a pending pod
    of it waits for a resource claim that does not exist yet (:mod:`corral.dra.pods`)."""
    native = cluster.native_groups.get(job.uid)
    if native is not None and native.composite is not None and rec.native_group in native.composite.leaves:
        task.role = rec.native_group
    if rec.native and job.uid not in cluster.native_groups and not job.invalid_reason:
        raise InputError(
            f"names PodGroup {job.name!r}, which is not a scheduling.k8s.io PodGroup (a Volcano or KAI "
            "podgroup has that name); name a scheduling.k8s.io PodGroup or drop the field",
            file=rec.file or None,
            obj=f"Pod {rec.namespace}/{rec.name}",
            field="spec.schedulingGroup.podGroupName",
        )
    why = cluster.dra.missing.get(task.uid, "") if cluster.dra is not None else ""
    if why and not job.invalid_reason:  # a claim that cannot be had (corral.dra.pods): the pod waits
        job.invalid_reason = why


def finish_native(cluster: Cluster, job: Job) -> None:
    """What a native group adds once its pods have joined: its priority, its preemption policy, and the
    refusal of an ``all`` disruption mode corral cannot keep."""
    native: NativeGroup | None = cluster.native_groups.get(job.uid)
    if native is None:
        return
    if native.priority is not None:
        job.priority = native.priority
    if native.preempt_never:
        for t in job.tasks:
            t.preempt_never = True
    groups = [(job.uid, native, job.min_member, len(job.tasks))]
    if native.composite is not None:  # the tree's PodGroups, each to its own minimum
        groups = [
            (
                f"{job.namespace}/{leaf}",
                group,
                native.composite.nodes[leaf][2],
                sum(1 for t in job.tasks if t.role == leaf),
            )
            for leaf, group in sorted(native.composite.leaves.items())
        ]
    for uid, group, minimum, pods in groups:
        _check_disruption(uid, group, minimum, pods)


def _check_disruption(uid: str, native: NativeGroup, minimum: int, pods: int) -> None:
    if native.disruption_all and minimum < pods:
        raise InputError(
            f"disruptionMode all: the group may be disrupted only as a whole, but corral keeps a gang at its "
            f"minimum ({minimum} of {pods} pods) and could evict part of it; set the gang's minCount to "
            "every pod or use disruptionMode single",
            file=native.file or None,
            obj=f"PodGroup {uid}",
            field="spec.disruptionMode",
        )


def unique_by_name(records: Iterable[R], what: str, kind: str) -> dict[tuple[str, str], R]:
    """``records`` by (namespace, name); a second object of the same name is an input error."""
    out: dict[tuple[str, str], R] = {}
    for r in records:
        key = (r.namespace, r.name)
        if key in out:
            raise InputError(
                f"duplicate {what}",
                file=r.file or None,
                obj=f"{kind} {key[0]}/{key[1]}",
                field="metadata.name",
            )
        out[key] = r
    return out
