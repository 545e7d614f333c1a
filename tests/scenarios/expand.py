"""Expand the scenario shorthand (nodes, queues, jobs) into Kubernetes objects, so every scenario runs
through the real snapshot loader. Raw objects can be given under ``objects:`` as well.

Shorthand:
- node: ``name``, ``cpu`` (96), ``memory`` (1Ti), ``gpu`` (8; 0 for none), ``pods`` (110), ``labels``,
  ``taints``, ``unschedulable``, ``allocatable`` (extra resources);
- queue: ``name``, ``annotations``, ``state`` (status.state), anything else goes into ``spec``
  (``weight``, ``capability``, ``deserved``, ``guarantee``, ``parent`` ...);
- job: ``name``, ``namespace``, ``queue``, ``priority`` (a PriorityClass ``p<N>`` is generated),
  ``minMember`` (default: all pods), ``minTaskMember``, ``minResources``, ``phase`` (Inqueue),
  ``created``, ``annotations`` (of the podgroup), ``podgroup_spec`` (more podgroup spec fields, as is), ``bare`` (pods without a podgroup), ``no_group``
  (pods name a podgroup that is not created), ``group`` (the podgroup name the pods use), ``kai``
  (a KAI podgroup, pods labelled ``pod-group-name``), ``pods``: groups of pods with ``count``,
  ``role``, ``cpu``/``memory``/``gpu``/``requests``, ``priority``, ``labels``, ``annotations``,
  ``nodeSelector``, ``affinity``, ``tolerations``, ``preemptionPolicy``, ``scheduler``, ``created``,
  ``nodes`` (pod i runs on nodes[i]), ``phase`` and ``started`` (of those), ``deleting`` (those carry
  a deletionTimestamp), ``nominated`` (status.nominatedNodeName per pod);
- pdb (a policy/v1 PodDisruptionBudget): ``name``, ``namespace``, ``selector`` (matchLabels),
  ``minAvailable`` / ``maxUnavailable``;
- hypernode: ``name``, ``tier``, ``nodes`` (member nodes by exact name), ``hypernodes`` (member
  hypernodes by exact name), ``regex`` (member nodes by pattern), ``tierName``; a job's
  ``networkTopology`` and ``subGroupPolicy`` go into its podgroup as is.
  hypernodes by exact name), ``regex`` (member nodes by pattern); a job's ``networkTopology`` goes into
  its podgroup as is;
- KAI podgroups (``kai: true``): ``subGroups``, ``minSubGroup``, ``topologyConstraint``, ``preemptibility`` go into the
  spec as is, ``minMember: null`` leaves minMember out, ``podgroup_labels`` labels the podgroup.
- Kubernetes' own groups (``native: v1beta1``, ``v1alpha3``, ``v1alpha2``, ``v1alpha1``): see
  :func:`_native_group`; pods name it by ``spec.schedulingGroup`` (``spec.workloadRef`` for
  ``v1alpha1``, a pod group's ``replicaKey`` as its ``podGroupReplicaKey``); a pod group's
  ``resourceClaims`` goes into its pods' spec.
"""

from __future__ import annotations

from typing import Any

__all__ = ["expand"]

T0 = "2026-01-01T00:00:00Z"


def _requests(spec: dict) -> dict:
    req = {}
    for short, name in (("cpu", "cpu"), ("memory", "memory"), ("gpu", "nvidia.com/gpu")):
        if short in spec:
            req[name] = str(spec[short])
    req.update({k: str(v) for k, v in (spec.get("requests") or {}).items()})
    return req


def _node(n: dict) -> dict:
    labels = {"kubernetes.io/hostname": n["name"], **(n.get("labels") or {})}
    alloc = {
        "cpu": str(n.get("cpu", 96)),
        "memory": str(n.get("memory", "1Ti")),
        "pods": str(n.get("pods", 110)),
    }
    if n.get("gpu", 8):
        alloc["nvidia.com/gpu"] = str(n.get("gpu", 8))
    alloc.update({k: str(v) for k, v in (n.get("allocatable") or {}).items()})
    spec: dict[str, Any] = {}
    if n.get("taints"):
        spec["taints"] = n["taints"]
    if n.get("unschedulable"):
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": n["name"], "labels": labels},
        "spec": spec,
        "status": {"allocatable": alloc},
    }


def _queue(q: dict) -> dict:
    spec = {k: v for k, v in q.items() if k not in ("name", "annotations", "state")}
    meta = {"name": q["name"]}
    if q.get("annotations"):
        meta["annotations"] = q["annotations"]
    out = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": meta, "spec": spec}
    if q.get("state"):
        out["status"] = {"state": q["state"]}
    return out


def _hypernode(h: dict) -> dict:
    members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in h.get("nodes") or []]
    members += [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": n}}} for n in h.get("hypernodes") or []
    ]
    if h.get("regex"):
        members.append({"type": "Node", "selector": {"regexMatch": {"pattern": h["regex"]}}})
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": h["name"]},
        "spec": {
            "tier": h["tier"],
            "members": members,
            **({"tierName": h["tierName"]} if h.get("tierName") else {}),
        },
    }


def _pods(job: dict, ns: str, created: str) -> list[dict]:
    out = []
    index = 0
    for group in job.get("pods") or []:
        nodes = group.get("nodes") or []
        count = group.get("count", len(nodes) or 1)
        for i in range(count):
            name = f"{job['name']}-{group['role']}-{i}" if group.get("role") else f"{job['name']}-{index}"
            index += 1
            meta: dict[str, Any] = {
                "name": name,
                "namespace": ns,
                "uid": f"{ns}-{name}",
                "creationTimestamp": group.get("created", created),
                "labels": dict(group.get("labels") or {}),
                "annotations": dict(group.get("annotations") or {}),
            }
            native = job.get("native")
            if job.get("kai"):
                meta["labels"]["pod-group-name"] = job.get("group", job["name"])
            elif native or job.get("bare"):
                pass
            else:
                meta["annotations"]["scheduling.k8s.io/group-name"] = job.get("group", job["name"])
            if group.get("role"):
                meta["annotations"]["volcano.sh/task-spec"] = group["role"]
            spec: dict[str, Any] = {
                "schedulerName": group.get("scheduler", "corral"),
                "containers": [{"name": "c", "resources": {"requests": _requests(group)}}],
            }
            prio = group.get("priority", job.get("priority"))
            if prio is not None:
                spec["priorityClassName"] = f"p{prio}"
            for key in ("nodeSelector", "affinity", "tolerations", "preemptionPolicy", "resourceClaims"):
                if key in group:
                    spec[key] = group[key]
            if native == "v1alpha1":  # Kubernetes 1.35: the Workload's pod group by workloadRef
                ref = {"name": job["name"], "podGroup": "main"}
                if group.get("replicaKey"):
                    ref["podGroupReplicaKey"] = group["replicaKey"]
                spec["workloadRef"] = ref
            elif native:  # 1.36 on: the PodGroup by name
                spec["schedulingGroup"] = {"podGroupName": job.get("group", job["name"])}
            status: dict[str, Any] = {"phase": "Pending"}
            if i < len(nodes) and nodes[i]:
                spec["nodeName"] = nodes[i]
                status = {"phase": group.get("phase", "Running"), "startTime": group.get("started", created)}
                if group.get("deleting"):
                    meta["deletionTimestamp"] = T0
            if group.get("nominated"):
                status["nominatedNodeName"] = group["nominated"][i]
            out.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status})
    return out


def expand(case: dict) -> list[dict]:
    docs: list[dict] = [_node(n) for n in case.get("nodes") or []]
    docs += [_queue(q) for q in case.get("queues") or []]
    docs += [_hypernode(h) for h in case.get("hypernodes") or []]
    prios = set()
    for job in case.get("jobs") or []:
        ns = job.get("namespace", "default")
        created = job.get("created", T0)
        for p in [job.get("priority")] + [g.get("priority") for g in job.get("pods") or []]:
            if p is not None:
                prios.add(int(p))
        if job.get("native") and not job.get("no_group"):
            docs.append(_native_group(job, ns, created))
        elif not job.get("bare") and not job.get("no_group"):
            spec: dict[str, Any] = {
                "minMember": job.get(
                    "minMember",
                    sum(g.get("count", len(g.get("nodes") or []) or 1) for g in job.get("pods") or []),
                ),
                "queue": job.get("queue", "default"),
            }
            if job.get("priority") is not None:
                spec["priorityClassName"] = f"p{job['priority']}"
            for key in ("minResources", "minTaskMember", "networkTopology", "subGroupPolicy"):
                if key in job:
                    spec[key] = job[key]
            for key in (
                "subGroups",
                "minSubGroup",
                "topologyConstraint",
                "preemptibility",
            ):  # KAI's own fields
                if key in job:
                    spec[key] = job[key]
            if spec["minMember"] is None:  # minMember: null leaves it out (KAI podgroups with sub-groups)
                del spec["minMember"]
            pg_labels = dict(job.get("podgroup_labels") or {})
            spec.update(job.get("podgroup_spec") or {})
            # KAI podgroups carry no phase unless one is given; Volcano ones default to Inqueue (admitted)
            api = "scheduling.run.ai/v2alpha2" if job.get("kai") else "scheduling.volcano.sh/v1beta1"
            phase = job.get("phase", None if job.get("kai") else "Inqueue")
            status = {"phase": phase} if phase else {}
            docs.append(
                {
                    "apiVersion": api,
                    "kind": "PodGroup",
                    "metadata": {
                        "name": job["name"],
                        "namespace": ns,
                        "creationTimestamp": created,
                        "annotations": job.get("annotations") or {},
                        "labels": pg_labels,
                    },
                    "spec": spec,
                    "status": status,
                }
            )
        docs += _pods(job, ns, created)
    for p in sorted(prios):
        docs.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": f"p{p}"},
                "value": p,
            }
        )
    docs += [_pdb(b) for b in case.get("pdbs") or []]
    docs += case.get("objects") or []
    return docs


def _native_group(job: dict, ns: str, created: str) -> dict:
    """Kubernetes' own group of a job with ``native: <version>``: a PodGroup (``v1alpha2`` on) or, for
    ``v1alpha1``, a Workload with one pod group ``main``; ``policy: basic`` or a gang of ``minMember``
    (default: all pods); ``queue`` as the annotation ``scheduling.volcano.sh/queue-name``;
    ``podgroup_spec`` and ``podgroup_status`` as is."""
    count = sum(g.get("count", len(g.get("nodes") or []) or 1) for g in job.get("pods") or [])
    policy: dict[str, Any] = (
        {"basic": {}} if job.get("policy") == "basic" else {"gang": {"minCount": job.get("minMember", count)}}
    )
    meta: dict[str, Any] = {"name": job["name"], "namespace": ns, "creationTimestamp": created}
    if job.get("queue"):
        meta["annotations"] = {"scheduling.volcano.sh/queue-name": job["queue"]}
    api = f"scheduling.k8s.io/{job['native']}"
    if job["native"] == "v1alpha1":
        spec: dict[str, Any] = {"podGroups": [{"name": "main", "policy": policy}]}
        return {"apiVersion": api, "kind": "Workload", "metadata": meta, "spec": spec}
    spec = {"schedulingPolicy": policy}
    if job.get("priority") is not None:
        spec["priorityClassName"] = f"p{job['priority']}"
    spec.update(job.get("podgroup_spec") or {})
    out = {"apiVersion": api, "kind": "PodGroup", "metadata": meta, "spec": spec}
    if job.get("podgroup_status"):
        out["status"] = job["podgroup_status"]
    return out


def _pdb(b: dict) -> dict:
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(b.get("selector") or {})}}
    for key in ("minAvailable", "maxUnavailable"):
        if key in b:
            spec[key] = b[key]
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": b["name"], "namespace": b.get("namespace", "default")},
        "spec": spec,
    }
