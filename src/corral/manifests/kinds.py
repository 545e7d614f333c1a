"""One parser per snapshot kind (SPEC.md §1.1), from a manifest dict to a plain record
(:mod:`corral.manifests.records`).

Records keep resource amounts as ``{name: milli}`` dicts; :mod:`build` turns them into vectors once the
set of resource names of the whole snapshot is known.
"""

from __future__ import annotations

from typing import Any

from corral.errors import InputError
from corral.manifests.dra import (
    DRA_APIS,
    DRA_KINDS,
    NAMESPACED,
    claim_names,
    claim_refs,
    claim_statuses,
    parse_dra,
)
from corral.manifests.fieldcheck import check_fields
from corral.manifests.fields import Obj
from corral.manifests.kai_kinds import (
    GPU_FRACTION,
    GPU_FRACTION_DEVICES,
    GPU_MEMORY_MIB,
    KAI_QUEUE_LABEL,
    kai_gpu_share,
    kai_podgroup,
    topology,
)
from corral.manifests.native import (
    COMPOSITE_APIS,
    PODGROUP_APIS,
    WORKLOAD_APIS,
    native_pod_group,
    native_podgroup,
    parse_workload,
)
from corral.manifests.native_composite import parse_composite
from corral.manifests.records import (
    HyperNodeRec,
    NodeRec,
    PodGroupRec,
    PodRec,
    QueueRec,
)
from corral.manifests.selectors import LabelSelector, parse_affinity, parse_label_selector
from corral.model.notes import Notes
from corral.model.objects import Taint, Toleration
from corral.model.patterns import PatternError, compile_name_pattern
from corral.model.quantity import parse_quantity
from corral.model.subjobs import SubGroupPolicy

__all__ = [
    "GPU_FRACTION",
    "GPU_FRACTION_DEVICES",
    "GPU_MEMORY_MIB",
    "KAI_QUEUE_LABEL",
    "KNOWN_KINDS",
    "PREEMPTABLE_KEY",
    "TASK_SPEC_KEY",
    "parse_object",
]

TASK_SPEC_KEY = "volcano.sh/task-spec"
PREEMPTABLE_KEY = "volcano.sh/preemptable"

#: kind -> accepted apiVersions
KNOWN_KINDS: dict[str, tuple[str, ...]] = {
    "Node": ("v1",),
    "Pod": ("v1",),
    "PriorityClass": ("scheduling.k8s.io/v1", "scheduling.k8s.io/v1beta1"),
    "PodDisruptionBudget": ("policy/v1",),
    "PodGroup": ("scheduling.volcano.sh/v1beta1", "scheduling.run.ai/v2alpha2", *PODGROUP_APIS),
    "Workload": WORKLOAD_APIS,
    "CompositePodGroup": COMPOSITE_APIS,
    **dict.fromkeys(DRA_KINDS, DRA_APIS),
    "Queue": ("scheduling.volcano.sh/v1beta1", "scheduling.run.ai/v2"),
    "HyperNode": ("topology.volcano.sh/v1alpha1",),
    "Topology": ("kai.scheduler/v1alpha1",),
    "Namespace": ("v1",),
}


#: quantity text -> milli, for texts already parsed (snapshots repeat a handful of quantities over tens of
#: thousands of pods; parse_quantity is pure, and a text not seen yet is parsed with its full context)
_QUANTITIES: dict[str, float] = {}


def _resources(o: Obj, raw: Any, path: str) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise o.error("expected a mapping of resource quantities", path)
    out: dict[str, float] = {}
    for k, v in raw.items():
        milli = _QUANTITIES.get(v) if type(v) is str else None
        if milli is None:
            milli = parse_quantity(v, where=o.ident, field=f"{path}.{k}")
            if type(v) is str and len(_QUANTITIES) < 4096:
                _QUANTITIES[v] = milli
        out[str(k)] = milli
    return out


def _max_into(acc: dict[str, float], other: dict[str, float]) -> None:
    for k, v in other.items():
        if v > acc.get(k, 0.0):
            acc[k] = v


def _node(o: Obj) -> NodeRec:
    spec, status = o.section("spec"), o.section("status")
    alloc = status.get("allocatable") or status.get("capacity")
    if alloc is None:
        raise o.error("missing status.allocatable", "status.allocatable")
    taints = []
    for i, t in enumerate(o.listof(spec.get("taints"), "spec.taints")):
        if not isinstance(t, dict) or "key" not in t or "effect" not in t:
            raise o.error("a taint needs key and effect", f"spec.taints[{i}]")
        taints.append(Taint(str(t["key"]), str(t.get("value") or ""), str(t["effect"])))
    return NodeRec(
        o.name,
        o.strmap(o.meta.get("labels"), "metadata.labels"),
        tuple(taints),
        bool(spec.get("unschedulable", False)),
        _resources(o, alloc, "status.allocatable"),
        o.strmap(o.meta.get("annotations"), "metadata.annotations"),
        o.file,
    )


def _container_requests(o: Obj, containers: Any, path: str) -> list[dict[str, float]]:
    if containers is None:
        return []
    if not isinstance(containers, list):
        raise o.error("expected a list of containers", path)
    out = []
    for i, c in enumerate(containers):
        res = c.get("resources") if type(c) is dict else o.mapping(c, f"{path}[{i}]").get("resources")
        if type(res) is not dict:
            res = o.mapping(res, f"{path}[{i}].resources")
        limits, requests = res.get("limits"), res.get("requests")
        # Kubernetes defaults a missing request to the limit (field paths are spelled out only when
        # there is something to read: a snapshot has one or two containers per pod, tens of thousands)
        req = _resources(o, limits, f"{path}[{i}].resources.limits") if limits is not None else {}
        if requests is not None:
            req.update(_resources(o, requests, f"{path}[{i}].resources.requests"))
        out.append(req)
    return out


def _add_init_containers(o: Obj, inits: Any, requests: dict[str, float]) -> None:
    """Charge init containers as Kubernetes does (KEP-753, k8s ``resourcehelper.PodRequests``): a
    sidecar (``restartPolicy: Always``) keeps running, so it is added to the main containers' sum and
    to every later init container's request; the pod requests the larger of that sum and the largest
    init step."""
    steps: dict[str, float] = {}
    sidecars: dict[str, float] = {}
    reqs = _container_requests(o, inits, "spec.initContainers")
    for c, req in zip(inits or [], reqs):
        if c.get("restartPolicy") == "Always":
            for k, v in req.items():
                requests[k] = requests.get(k, 0.0) + v
                sidecars[k] = sidecars.get(k, 0.0) + v
            _max_into(steps, sidecars)
        else:
            _max_into(
                steps, {k: req.get(k, 0.0) + sidecars.get(k, 0.0) for k in req.keys() | sidecars.keys()}
            )
    _max_into(requests, steps)


def _pod_requests(o: Obj, spec: dict) -> dict[str, float]:
    """A pod's effective requests as kube-scheduler computes them: the containers' sum, raised to any
    init container's (sidecars included), plus ``spec.overhead``."""
    if "containers" not in spec:
        raise o.error("missing spec.containers", "spec.containers")
    requests: dict[str, float] = {}
    for req in _container_requests(o, spec.get("containers"), "spec.containers"):
        for k, v in req.items():
            requests[k] = requests.get(k, 0.0) + v
    if spec.get("initContainers") is not None:
        _add_init_containers(o, spec.get("initContainers"), requests)
    if spec.get("overhead") is not None:
        for k, v in _resources(o, spec.get("overhead"), "spec.overhead").items():
            requests[k] = requests.get(k, 0.0) + v
    return requests


def _tolerations(o: Obj, spec: dict) -> tuple[Toleration, ...]:
    """``spec.tolerations``; an operator other than ``Equal``/``Exists`` is an error."""
    tolerations = []
    for i, t in enumerate(o.listof(spec.get("tolerations"), "spec.tolerations")):
        if not isinstance(t, dict):
            raise o.error("expected a toleration mapping", f"spec.tolerations[{i}]")
        op = t.get("operator", "Equal")
        if op not in ("Equal", "Exists"):
            raise o.error(
                f"unknown operator {op!r} (allowed: Equal, Exists)", f"spec.tolerations[{i}].operator"
            )
        tolerations.append(
            Toleration(str(t.get("key") or ""), op, str(t.get("value") or ""), str(t.get("effect") or ""))
        )
    return tuple(tolerations)


def _pod(o: Obj) -> PodRec:
    spec, status = o.section("spec"), o.section("status")
    requests = _pod_requests(o, spec)
    tolerations = _tolerations(o, spec)
    priority = spec.get("priority")
    meta = o.meta
    creation = meta.get("creationTimestamp")
    start = status.get("startTime")
    annotations = o.strmap(meta.get("annotations"), "metadata.annotations")
    labels = o.strmap(meta.get("labels"), "metadata.labels")
    share = (
        kai_gpu_share(o, annotations, requests)
        if GPU_FRACTION in annotations or GPU_MEMORY_MIB in annotations
        else None
    )
    native_group, workload_ref = (
        native_pod_group(o, spec) if "schedulingGroup" in spec or "workloadRef" in spec else ("", None)
    )
    if share is not None and share[1] > 0:
        # KAI charges a fraction to the GPU resource (``GpuResourceRequirement.GPUs``: portion x devices)
        requests["nvidia.com/gpu"] = round(share[1] * 100) * share[0] * 10.0
    return PodRec(
        name=o.name,
        namespace=o.namespace,
        uid=o.string(meta.get("uid"), "metadata.uid") or f"{o.namespace}/{o.name}",
        labels=labels,
        annotations=annotations,
        creation=o.time(creation, "metadata.creationTimestamp") if creation else 0.0,
        deleting=bool(meta.get("deletionTimestamp")),
        scheduler=o.string(spec.get("schedulerName"), "spec.schedulerName") or "default-scheduler",
        node_name=o.string(spec.get("nodeName"), "spec.nodeName"),
        priority=None if priority is None else o.integer(priority, "spec.priority"),
        priority_class=o.string(spec.get("priorityClassName"), "spec.priorityClassName"),
        preempt_never=spec.get("preemptionPolicy") == "Never",
        requests=requests,
        node_selector=o.strmap(spec.get("nodeSelector"), "spec.nodeSelector"),
        affinity=parse_affinity(spec.get("affinity"), o.ident, labels) if spec.get("affinity") else None,
        tolerations=tolerations,
        phase=o.string(status.get("phase"), "status.phase") or "Pending",
        nominated=o.string(status.get("nominatedNodeName"), "status.nominatedNodeName"),
        start_time=o.time(start, "status.startTime") if start else None,
        file=o.file,
        gpu_share=share,
        native_group=native_group,
        workload_ref=workload_ref,
        claims=claim_names(o, spec["resourceClaims"]) if spec.get("resourceClaims") else (),
        claim_refs=claim_refs(o, spec["resourceClaims"]) if spec.get("resourceClaims") else (),
        claim_statuses=claim_statuses(o, status.get("resourceClaimStatuses"))
        if status.get("resourceClaimStatuses")
        else {},
    )


def min_resources(raw: dict[str, float]) -> dict[str, float]:
    """A PodGroup's minResources as Volcano reads what its job controller writes there (a quota-style
    usage list): ``count/<kind>`` keys count objects and are no resource; ``requests.X`` and ``limits.X``
    are resource X — the plain key ``X`` first, then ``requests.X``, then ``limits.X`` (requests are what
    scheduling counts; a limit stands for a missing request, as Kubernetes defaults it); ``pods`` is the
    pod slots the job takes."""
    out: dict[str, float] = {}
    rank: dict[str, int] = {}
    for key, value in raw.items():
        if key.startswith("count/"):
            continue
        name, r = key, 0
        if key.startswith("requests."):
            name, r = key[len("requests.") :], 1
        elif key.startswith("limits."):
            name, r = key[len("limits.") :], 2
        if name and r < rank.get(name, 3):
            out[name], rank[name] = value, r
    return out


def network_topology(o: Obj, raw: Any, path: str) -> tuple[str, int | None, str]:
    """A Volcano ``networkTopology`` as ``(mode, highestTierAllowed, highestTierName)``; mode "" when
    absent. Volcano's admission refuses both tier fields at once, so does corral."""
    nt = o.mapping(raw, path)
    if not nt:
        return "", None, ""
    mode = str(nt.get("mode") or "hard")
    if mode not in ("hard", "soft"):
        raise o.error(f"unknown mode {mode!r} (allowed: hard, soft)", f"{path}.mode")
    tier = None
    if nt.get("highestTierAllowed") is not None:
        # the CRD allows 0 (tier-0 HyperNodes only in hard mode; ignored in soft mode)
        tier = o.integer(nt["highestTierAllowed"], f"{path}.highestTierAllowed", minimum=0)
    name = o.string(nt.get("highestTierName"), f"{path}.highestTierName")
    if name and tier is not None:
        raise o.error(
            "highestTierAllowed and highestTierName cannot be set together (Volcano refuses it); keep one",
            f"{path}.highestTierName",
        )
    return mode, tier, name


def subgroup_policies(o: Obj, raw: Any) -> tuple[SubGroupPolicy, ...]:
    """``spec.subGroupPolicy`` (Volcano ``SubGroupPolicySpec``), in spec order."""
    out = []
    seen: set[str] = set()
    for i, p in enumerate(o.listof(raw, "spec.subGroupPolicy")):
        path = f"spec.subGroupPolicy[{i}]"
        p = o.mapping(p, path)
        name = o.string(p.get("name"), f"{path}.name")
        if not name:
            raise o.error("a subGroupPolicy needs a name", f"{path}.name")
        if name in seen:
            raise o.error(f"duplicate subGroupPolicy name {name!r}", f"{path}.name")
        seen.add(name)
        size = o.integer(p.get("subGroupSize", 1), f"{path}.subGroupSize", minimum=1)
        min_groups = o.integer(p.get("minSubGroups", 0), f"{path}.minSubGroups", minimum=0)
        selector = None
        if p.get("labelSelector") is not None:
            selector = parse_label_selector(p["labelSelector"], o.ident, f"{path}.labelSelector")
        keys = tuple(str(k) for k in o.listof(p.get("matchLabelKeys"), f"{path}.matchLabelKeys"))
        mode, tier, tier_name = network_topology(o, p.get("networkTopology"), f"{path}.networkTopology")
        out.append(SubGroupPolicy(name, size, min_groups, selector, keys, mode, tier, tier_name))
    return tuple(out)


def _podgroup(o: Obj, api: str) -> PodGroupRec:
    if api in PODGROUP_APIS:  # Kubernetes' own (scheduling.k8s.io): manifests/native.py
        return native_podgroup(o, api)
    spec, status = o.section("spec"), o.section("status")
    kai = api.startswith("scheduling.run.ai")
    min_member = o.integer(spec.get("minMember", 1), "spec.minMember", minimum=0)
    mtm = spec.get("minTaskMember") or {}
    if not isinstance(mtm, dict):
        raise o.error("expected a mapping of role to count", "spec.minTaskMember")
    min_task = {str(k): o.integer(v, f"spec.minTaskMember.{k}", minimum=0) for k, v in mtm.items()}
    mode, tier, tier_name = "", None, ""
    policies: tuple[SubGroupPolicy, ...] = ()
    if not kai:  # KAI's topologyConstraint and subGroups are read by kai_podgroup (manifests/kai.py)
        mode, tier, tier_name = network_topology(o, spec.get("networkTopology"), "spec.networkTopology")
        policies = subgroup_policies(o, spec.get("subGroupPolicy"))
    min_res = spec.get("minResources")
    creation = o.meta.get("creationTimestamp")
    labels = o.strmap(o.meta.get("labels"), "metadata.labels")
    queue = o.string(spec.get("queue"), "spec.queue")
    if kai and not queue:  # KAI's pod-grouper names the queue by the label when spec.queue is empty
        queue = labels.get(KAI_QUEUE_LABEL, "")
    rec = PodGroupRec(
        name=o.name,
        namespace=o.namespace,
        min_member=min_member,
        min_task_member=min_task,
        min_resources=min_resources(_resources(o, min_res, "spec.minResources"))
        if min_res is not None
        else None,
        queue=queue or "default",
        priority_class=o.string(spec.get("priorityClassName"), "spec.priorityClassName"),
        topology_mode=mode,
        topology_tier=tier,
        phase=o.string(status.get("phase"), "status.phase") or "Pending",
        creation=o.time(creation, "metadata.creationTimestamp") if creation else 0.0,
        annotations=o.strmap(o.meta.get("annotations"), "metadata.annotations"),
        labels=labels,
        file=o.file,
        preemptible={"preemptible": True, "non-preemptible": False}.get(str(spec.get("preemptibility")))
        if kai
        else None,
        topology_tier_name=tier_name,
        subgroup_policies=policies,
    )
    if kai:
        kai_podgroup(o, rec, spec)
    return rec


_KAI_UNITS = {"gpu": ("nvidia.com/gpu", 1000.0), "cpu": ("cpu", 1.0), "memory": ("memory", 1e6 * 1000)}


def _kai_queue(o: Obj, rec: QueueRec, spec: dict) -> None:
    rec.parent = o.string(spec.get("parentQueue"), "spec.parentQueue") or None
    resources = o.mapping(spec.get("resources"), "spec.resources")
    cap: dict[str, float] = {}
    des: dict[str, float] = {}
    for key, (name, scale) in _KAI_UNITS.items():
        path = f"spec.resources.{key}"
        r = o.mapping(resources.get(key), path)
        quota, limit = r.get("quota"), r.get("limit")
        if quota is not None and o.number(quota, f"{path}.quota") >= 0:
            des[name] = o.number(quota, f"{path}.quota") * scale
        if limit is not None and o.number(limit, f"{path}.limit") >= 0:
            cap[name] = o.number(limit, f"{path}.limit") * scale
        if key == "gpu" and r.get("overQuotaWeight") is not None:
            rec.weight = o.number(r["overQuotaWeight"], f"{path}.overQuotaWeight")
    rec.capability = cap or None
    rec.deserved = des or None
    for f in ("preemptMinRuntime", "reclaimMinRuntime"):
        if spec.get(f) is not None:
            setattr(
                rec,
                "preempt_min_runtime" if f.startswith("preempt") else "reclaim_min_runtime",
                o.duration(spec[f], f"spec.{f}"),
            )


def _queue(o: Obj, api: str) -> QueueRec:
    spec, status = o.section("spec"), o.section("status")
    ann = o.strmap(o.meta.get("annotations"), "metadata.annotations")
    creation = o.meta.get("creationTimestamp")
    rec = QueueRec(
        name=o.name,
        source="kai" if api.startswith("scheduling.run.ai") else "volcano",
        annotations=ann,
        state=o.string(status.get("state"), "status.state") or "Open",
        file=o.file,
        creation=o.time(creation, "metadata.creationTimestamp") if creation else 0.0,
    )
    if spec.get("priority") is not None:
        rec.priority = o.integer(spec["priority"], "spec.priority")
    if rec.source == "kai":
        _kai_queue(o, rec, spec)
        return rec
    if spec.get("weight") is not None:
        rec.weight = o.number(spec["weight"], "spec.weight")
        if rec.weight <= 0:
            raise o.error("expected a positive weight", "spec.weight")
    if spec.get("capability") is not None:
        rec.capability = _resources(o, spec["capability"], "spec.capability")
    if spec.get("deserved") is not None:
        rec.deserved = _resources(o, spec["deserved"], "spec.deserved")
    if o.mapping(spec.get("guarantee"), "spec.guarantee").get("resource") is not None:
        rec.guarantee = _resources(o, spec["guarantee"]["resource"], "spec.guarantee.resource")
    rec.reclaimable = o.boolean(spec.get("reclaimable"), "spec.reclaimable", True)
    rec.parent = o.string(spec.get("parent"), "spec.parent") or None
    for key, attr in (
        ("preemptMinRuntime", "preempt_min_runtime"),
        ("reclaimMinRuntime", "reclaim_min_runtime"),
    ):
        ann_key = "corral.io/" + (
            "preempt-min-runtime" if key.startswith("preempt") else "reclaim-min-runtime"
        )
        if spec.get(key) is not None:
            setattr(rec, attr, o.duration(spec[key], f"spec.{key}"))
        elif ann_key in ann:
            setattr(rec, attr, o.duration(ann[ann_key], f"metadata.annotations.{ann_key}"))
    return rec


def _hypernode(o: Obj) -> HyperNodeRec:
    spec = o.section("spec")
    if spec.get("tier") is None:
        raise o.error("missing tier", "spec.tier")
    tier = o.integer(spec["tier"], "spec.tier", minimum=0)
    members: list[tuple[str, str, str | LabelSelector]] = []
    for i, m in enumerate(o.listof(spec.get("members"), "spec.members")):
        p = f"spec.members[{i}]"
        if not isinstance(m, dict):
            raise o.error("expected a member mapping", p)
        mtype = m.get("type", "Node")
        if mtype not in ("Node", "HyperNode"):
            raise o.error(f"unknown member type {mtype!r} (allowed: Node, HyperNode)", f"{p}.type")
        sel = o.mapping(m.get("selector"), f"{p}.selector")
        if "exactMatch" in sel:
            name = o.mapping(sel["exactMatch"], f"{p}.selector.exactMatch").get("name")
            if not name:
                raise o.error("exactMatch needs name", f"{p}.selector.exactMatch.name")
            members.append((mtype, "exact", str(name)))
        elif "regexMatch" in sel:
            pattern = o.mapping(sel["regexMatch"], f"{p}.selector.regexMatch").get("pattern")
            if not pattern:
                raise o.error("regexMatch needs pattern", f"{p}.selector.regexMatch.pattern")
            try:
                compile_name_pattern(pattern)  # RE2: linear time, Volcano's (Go) syntax
            except PatternError as exc:
                raise o.error(f"bad pattern: {exc}", f"{p}.selector.regexMatch.pattern") from None
            members.append((mtype, "regex", str(pattern)))
        elif "labelMatch" in sel:
            members.append(
                (mtype, "label", parse_label_selector(sel["labelMatch"], o.ident, f"{p}.selector.labelMatch"))
            )
        else:
            raise o.error("selector needs exactMatch, regexMatch or labelMatch", f"{p}.selector")
    tier_name = o.string(spec.get("tierName"), "spec.tierName")
    return HyperNodeRec(o.name, tier, members, o.file, tier_name)


def _group(api: Any) -> str:
    return str(api).rpartition("/")[0] if isinstance(api, str) else ""


def parse_object(file: str, raw: dict, notes: Notes | None = None) -> tuple[str, Any] | None:
    """``(kind, record)`` for a known kind; None for objects corral does not serve: other kinds
    (Services, Deployments, ...; the workloads corral expands are expanded before, see
    :mod:`corral.manifests.workloads`) and known kinds of another API group (a PodGroup of
    ``scheduling.x-k8s.io``, left to its own scheduler). A known kind of a known group in a version
    corral does not read is an error. Fields corral refuses raise; fields it accepts without acting on
    them are warned about in ``notes`` (:mod:`corral.manifests.fieldcheck`)."""
    kind, api = raw.get("kind"), raw.get("apiVersion")
    if not isinstance(kind, str):
        name = (raw.get("metadata") or {}).get("name", "?") if isinstance(raw.get("metadata"), dict) else "?"
        raise InputError("missing kind", file=file, obj=str(name), field="kind")
    if kind not in KNOWN_KINDS:
        return None
    if api not in KNOWN_KINDS[kind] and _group(api) not in {_group(a) for a in KNOWN_KINDS[kind]}:
        return None  # the same kind of another API group (scheduler-plugins' PodGroup): not ours
    if api not in KNOWN_KINDS[kind]:
        name = (raw.get("metadata") or {}).get("name", "?") if isinstance(raw.get("metadata"), dict) else "?"
        raise InputError(
            f"unknown apiVersion {api!r} for kind {kind} (expected one of: {', '.join(KNOWN_KINDS[kind])})",
            file=file,
            obj=f"{kind} {name}",
            field="apiVersion",
        )
    try:
        return _parse_known(file, raw, kind, api, notes)
    except InputError as exc:
        # helpers below the object (quantities, selectors, affinity) know the object and field but not
        # the file: every input error names the file it is about
        if exc.file is None:
            exc.file = file
            exc.args = (exc.describe(),)
        raise
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        # a value of a shape no parser above expected (a string where a mapping belongs, ...): still
        # bad input, not an internal fault (SPEC.md §5)
        meta = raw.get("metadata")
        if not isinstance(meta, dict):
            meta = {}
        name = meta.get("name", "?")
        ns = meta.get("namespace")
        raise InputError(
            f"malformed object: {type(exc).__name__}: {exc}",
            file=file,
            obj=f"{kind} {ns + '/' if ns else ''}{name}",
        ) from None


def _parse_known(file: str, raw: dict, kind: str, api: str, notes: Notes | None) -> tuple[str, Any]:
    namespaced = kind in (
        "Pod",
        "PodGroup",
        "PodDisruptionBudget",
        "Workload",
        "CompositePodGroup",
        *NAMESPACED,
    )
    o = Obj(raw, file, kind, namespaced)
    if kind in DRA_KINDS:
        return kind, parse_dra(o)
    if kind == "Workload":
        return kind, parse_workload(o, api)
    if kind == "CompositePodGroup":
        return kind, parse_composite(o, api)
    if kind in ("Queue", "PodGroup"):
        check_fields(o, kind, api, notes)
    if kind == "Node":
        return kind, _node(o)
    if kind == "Pod":
        return kind, _pod(o)
    if kind == "PodGroup":
        return kind, _podgroup(o, api)
    if kind == "Queue":
        return kind, _queue(o, api)
    if kind == "HyperNode":
        return kind, _hypernode(o)
    if kind == "Topology":
        return kind, topology(o)
    if kind == "Namespace":  # its labels are what namespaceSelectors match; the rest is inert
        return kind, (o.name, o.strmap(o.meta.get("labels"), "metadata.labels"))
    if kind == "PriorityClass":
        if raw.get("value") is None:
            raise o.error("missing value", "value")
        return kind, (
            o.name,
            o.integer(raw["value"], "value"),
            o.boolean(raw.get("globalDefault"), "globalDefault", False),
        )
    spec = o.section("spec")  # PodDisruptionBudget
    sel = parse_label_selector(spec.get("selector"), o.ident, "spec.selector")
    return kind, (o.namespace, o.name, sel, spec.get("minAvailable"), spec.get("maxUnavailable"))
