"""From snapshot objects to the model (corral.manifests.build and kinds): requests, task states,
priorities, group membership, roles, protection, queues and the decisions the spec leaves open."""

from __future__ import annotations

import math

import numpy as np
import pytest

from corral.errors import InputError
from corral.manifests.build import build_cluster
from corral.model import PodGroupPhase, TaskStatus

GI = 2**30
NOW = "2026-01-01T00:00:00Z"


def node(name: str = "n1", **alloc: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": alloc or {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8", "pods": "110"}
        },
    }


def pod(
    name: str,
    *,
    group: str | None = None,
    ns: str = "default",
    meta: dict | None = None,
    status: dict | None = None,
    **spec,
) -> dict:
    m = {"name": name, "namespace": ns, **(meta or {})}
    if group:
        m.setdefault("annotations", {})["scheduling.k8s.io/group-name"] = group
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": m,
        "spec": {"schedulerName": "corral", "containers": [{"name": "c"}], **spec},
        "status": status or {"phase": "Pending"},
    }


def podgroup(
    name: str,
    ns: str = "default",
    api: str = "scheduling.volcano.sh/v1beta1",
    phase: str | None = "Inqueue",
    meta: dict | None = None,
    **spec,
) -> dict:
    out = {
        "apiVersion": api,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, **(meta or {})},
        "spec": spec,
    }
    if phase:
        out["status"] = {"phase": phase}
    return out


def queue(name: str, api: str = "scheduling.volcano.sh/v1beta1", meta: dict | None = None, **spec) -> dict:
    return {"apiVersion": api, "kind": "Queue", "metadata": {"name": name, **(meta or {})}, "spec": spec}


def pclass(name: str, value: int, default: bool = False) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": default,
    }


def build(*objs: dict):
    return build_cluster([("snap.yaml", o) for o in objs])


def req(cluster, task_uid: str) -> dict[str, float]:
    return cluster.resources.as_dict(cluster.tasks[task_uid].request)


def containers(*reqs: dict, kind: str = "requests") -> list[dict]:
    return [{"name": f"c{i}", "resources": {kind: r}} for i, r in enumerate(reqs)]


# -- requests --------------------------------------------------------------------------------------------
def test_request_is_sum_of_containers_max_init_plus_overhead_plus_a_pod_slot() -> None:
    p = pod(
        "p",
        containers=containers({"cpu": "1", "nvidia.com/gpu": "2"}, {"cpu": "500m", "memory": "1Gi"}),
        initContainers=containers({"cpu": "4"}, {"memory": "512Mi"}),
        overhead={"cpu": "100m"},
    )
    c = build(node(), p)
    assert req(c, "default/p") == {"cpu": 4100, "memory": GI * 1000, "nvidia.com/gpu": 2000, "pods": 1000}


def test_a_missing_request_defaults_to_the_limit() -> None:
    p = pod(
        "p",
        containers=[
            {"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1"}}}
        ],
    )
    c = build(node(), p)
    assert req(c, "default/p") == {"cpu": 1000, "memory": GI * 1000, "pods": 1000}


def test_best_effort_pod() -> None:
    c = build(node(), pod("p"))
    t = c.tasks["default/p"]
    assert t.best_effort and req(c, "default/p") == {"pods": 1000}


def test_resource_index_includes_every_named_resource() -> None:
    c = build(
        node(),
        queue("q", capability={"example.com/fpga": "2"}),
        pod("p", containers=containers({"vendor/x": "1"})),
    )
    assert {"cpu", "memory", "pods", "nvidia.com/gpu", "example.com/fpga", "vendor/x"} <= set(
        c.resources.names
    )


def test_node_without_pods_has_no_pod_limit() -> None:
    c = build(node("n1", cpu="4"))
    assert math.isinf(c.nodes.allocatable[0, c.resources.pos("pods")])


# -- task states -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, meta, status, state",
    [
        ({}, {}, {"phase": "Pending"}, TaskStatus.PENDING),
        ({}, {}, {"phase": "Pending", "nominatedNodeName": "n1"}, TaskStatus.PIPELINED),
        ({}, {}, {"phase": "Pending", "nominatedNodeName": "gone"}, TaskStatus.PENDING),
        ({"nodeName": "n1"}, {}, {"phase": "Pending"}, TaskStatus.BOUND),
        ({"nodeName": "n1"}, {}, {"phase": "Running"}, TaskStatus.RUNNING),
        ({"nodeName": "n1"}, {"deletionTimestamp": NOW}, {"phase": "Running"}, TaskStatus.RELEASING),
        ({"nodeName": "n1"}, {}, {"phase": "Succeeded"}, TaskStatus.SUCCEEDED),
        ({"nodeName": "n1"}, {}, {"phase": "Failed"}, TaskStatus.FAILED),
        ({}, {"deletionTimestamp": NOW}, {"phase": "Pending"}, TaskStatus.FAILED),
    ],
)
def test_task_states(spec: dict, meta: dict, status: dict, state: TaskStatus) -> None:
    c = build(node(), pod("p", meta=meta, status=status, containers=containers({"cpu": "1"}), **spec))
    assert c.tasks["default/p"].status is state


def test_node_columns_follow_task_states() -> None:
    gpu = containers({"nvidia.com/gpu": "2"})
    c = build(
        node(),
        pod("run", nodeName="n1", containers=gpu, status={"phase": "Running"}),
        pod(
            "rel", nodeName="n1", containers=gpu, meta={"deletionTimestamp": NOW}, status={"phase": "Running"}
        ),
        pod("nom", containers=gpu, status={"phase": "Pending", "nominatedNodeName": "n1"}),
        pod("done", nodeName="n1", containers=gpu, status={"phase": "Succeeded"}),
    )
    g = c.resources.pos("nvidia.com/gpu")
    assert c.nodes.used[0, g] == 4000 and c.nodes.releasing[0, g] == 2000 and c.nodes.pipelined[0, g] == 2000
    assert c.nodes.future_idle[0, g] == 8000 - 4000 + 2000 - 2000


# -- priorities ------------------------------------------------------------------------------------------
def test_pod_priority_resolution() -> None:
    c = build(
        node(),
        pclass("hi", 100),
        pclass("base", 7, default=True),
        pod("explicit", priority=5, priorityClassName="hi"),
        pod("byclass", priorityClassName="hi"),
        pod("default"),
        pod("unknown-class", priorityClassName="nope"),
        pod("critical", priorityClassName="system-node-critical"),
    )
    prio = {t.name: t.priority for t in c.tasks.values()}
    assert prio == {"explicit": 5, "byclass": 100, "default": 7, "unknown-class": 7, "critical": 2000001000}


def test_job_priority_from_podgroup_class_else_highest_pod() -> None:
    c = build(
        node(),
        pclass("hi", 100),
        pclass("lo", 1),
        podgroup("a", minMember=1, priorityClassName="lo"),
        pod("a-0", group="a", priorityClassName="hi"),
        podgroup("b", minMember=1),
        pod("b-0", group="b", priority=3),
        pod("b-1", group="b", priority=9),
    )
    assert c.jobs["default/a"].priority == 1
    assert c.jobs["default/b"].priority == 9


# -- groups, roles, protection ---------------------------------------------------------------------------
def test_group_membership_volcano_and_kai() -> None:
    kai = podgroup("k", api="scheduling.run.ai/v2alpha2", phase=None, minMember=2)
    c = build(
        node(),
        podgroup("v", minMember=1),
        kai,
        pod("v-0", group="v"),
        pod("k-0", meta={"labels": {"pod-group-name": "k"}}),
        pod("k-1", meta={"annotations": {"pod-group-name": "k"}}),
        pod("alone"),
    )
    assert [t.name for t in c.jobs["default/v"].tasks] == ["v-0"]
    assert sorted(t.name for t in c.jobs["default/k"].tasks) == ["k-0", "k-1"]
    assert c.jobs["default/k"].phase is PodGroupPhase.PENDING
    alone = c.jobs["default/alone"]
    assert alone.synthetic and alone.min_member == 1 and alone.queue == "default"


def test_roles_annotation_wins_over_label() -> None:
    c = build(
        node(),
        podgroup("g", minMember=1, minTaskMember={"ps": 1, "": 1}),
        pod("a", group="g", meta={"labels": {"volcano.sh/task-spec": "worker"}}),
        pod(
            "b",
            group="g",
            meta={
                "annotations": {"volcano.sh/task-spec": "ps"},
                "labels": {"volcano.sh/task-spec": "worker"},
            },
        ),
        pod("c", group="g"),
    )
    roles = {t.name: t.role for t in c.jobs["default/g"].tasks}
    assert roles == {"a": "worker", "b": "ps", "c": ""}
    assert c.jobs["default/g"].min_task_member == {"ps": 1, "": 1}


def test_preemptable_annotation_label_and_podgroup() -> None:
    key = "volcano.sh/preemptable"
    c = build(
        node(),
        podgroup("safe", minMember=1, meta={"annotations": {key: "false"}}),
        pod("s-0", group="safe"),
        pod("by-label", meta={"labels": {key: "false"}}),
        pod("ann-wins", meta={"labels": {key: "false"}, "annotations": {key: "true"}}),
        pod("plain"),
    )
    pre = {t.name: t.preemptable for t in c.tasks.values()}
    assert pre == {"s-0": False, "by-label": False, "ann-wins": True, "plain": True}


def test_preemption_policy_never() -> None:
    c = build(node(), pod("p", preemptionPolicy="Never"), pod("q", preemptionPolicy="PreemptLowerPriority"))
    assert c.tasks["default/p"].preempt_never and not c.tasks["default/q"].preempt_never


def test_foreign_pods_are_fixed_load_and_pending_ones_ignored() -> None:
    gpu = containers({"nvidia.com/gpu": "3"})
    c = build(
        node(),
        pod(
            "theirs",
            nodeName="n1",
            schedulerName="default-scheduler",
            containers=gpu,
            status={"phase": "Running"},
        ),
        pod("theirs-pending", schedulerName="default-scheduler", containers=gpu),
        pod("volcano", schedulerName="volcano", containers=gpu),
        pod("kai", schedulerName="kai-scheduler", containers=gpu),
    )
    assert [t.name for t in c.foreign] == ["theirs"]
    assert not c.foreign[0].managed and not c.foreign[0].preemptable
    assert "default/theirs-pending" not in c.tasks
    assert c.tasks["default/volcano"].managed and c.tasks["default/kai"].managed
    assert c.nodes.used[0, c.resources.pos("nvidia.com/gpu")] == 3000


def test_scheduler_names_can_be_chosen() -> None:
    c = build_cluster([("s", node()), ("s", pod("mine", schedulerName="other"))], schedulers=("other",))
    assert c.tasks["default/mine"].managed


# -- valid input that cannot be honoured ------------------------------------------------------------------
def test_missing_podgroup_and_missing_queue_are_invalid_jobs_not_errors() -> None:
    c = build(
        node(),
        podgroup("lost", queue="nope", minMember=1),
        pod("l-0", group="lost"),
        pod("o-0", group="ghost"),
    )
    assert c.jobs["default/lost"].invalid_reason == "queue 'nope' does not exist"
    assert c.jobs["default/ghost"].invalid_reason == "podgroup default/ghost does not exist"


def test_podgroup_namespace_scopes_membership() -> None:
    c = build(node(), podgroup("g", ns="a", minMember=1), pod("p", ns="b", group="g"))
    assert c.jobs["b/g"].invalid_reason and not c.jobs["a/g"].tasks


# -- queues ----------------------------------------------------------------------------------------------
def test_default_and_root_queues_are_implicit() -> None:
    flat = build(node(), queue("a"))
    assert set(flat.queues) == {"a", "default"} and flat.queues["default"].parent is None
    tree = build(node(), queue("a", parent="root"), queue("b", parent="a"))
    assert tree.queues["root"].source == "implicit" and tree.queues["default"].parent == "root"
    assert tree.queue_chain("b") == ["b", "a", "root"]
    assert tree.queues["a"].children == ["b"]


def test_volcano_queue_fields() -> None:
    c = build(
        node(),
        queue(
            "q",
            weight=3,
            capability={"nvidia.com/gpu": "4"},
            deserved={"cpu": "2"},
            guarantee={"resource": {"memory": "1Gi"}},
            reclaimable=False,
            priority=5,
            preemptMinRuntime="5m",
            meta={"annotations": {"corral.io/reclaim-min-runtime": "90s"}},
        ),
    )
    q, r = c.queues["q"], c.resources
    assert q.weight == 3 and not q.reclaimable and q.priority == 5
    assert q.capability[r.pos("nvidia.com/gpu")] == 4000 and math.isinf(q.capability[r.pos("cpu")])
    assert q.deserved[r.pos("cpu")] == 2000 and q.deserved[r.pos("memory")] == 0
    assert q.guarantee[r.pos("memory")] == GI * 1000
    assert q.preempt_min_runtime == 300 and q.reclaim_min_runtime == 90


def test_queue_state() -> None:
    closed = queue("c")
    closed["status"] = {"state": "Closed"}
    c = build(node(), closed, queue("o"))
    assert not c.queues["c"].open and c.queues["o"].open


def test_kai_queue_units_and_unlimited() -> None:
    kai = queue(
        "k",
        api="scheduling.run.ai/v2",
        parentQueue="dept",
        preemptMinRuntime="10m",
        resources={
            "gpu": {"quota": 2, "limit": -1, "overQuotaWeight": 3},
            "cpu": {"quota": 1500, "limit": 4000},
            "memory": {"quota": -1, "limit": 1024},
        },
    )
    c = build(node(), queue("dept", api="scheduling.run.ai/v2"), kai)
    q, r = c.queues["k"], c.resources
    assert q.source == "kai" and q.parent == "dept" and q.weight == 3 and q.preempt_min_runtime == 600
    assert q.deserved[r.pos("nvidia.com/gpu")] == 2000 and q.deserved[r.pos("cpu")] == 1500
    assert math.isinf(q.capability[r.pos("nvidia.com/gpu")])  # -1: unlimited
    assert q.capability[r.pos("cpu")] == 4000  # millicores
    assert q.capability[r.pos("memory")] == 1024 * 10**6 * 1000  # MB


def test_podgroup_fields() -> None:
    c = build(
        node(),
        podgroup(
            "g",
            minMember=3,
            queue="default",
            minResources={"nvidia.com/gpu": "8"},
            networkTopology={"mode": "soft", "highestTierAllowed": 2},
            phase="Running",
        ),
        podgroup(
            "k",
            api="scheduling.run.ai/v2alpha2",
            phase=None,
            topologyConstraint={"requiredTopologyLevel": "rack"},
        ),
    )
    g = c.jobs["default/g"]
    assert g.min_member == 3 and g.topology_mode == "soft" and g.topology_tier == 2
    assert g.phase is PodGroupPhase.RUNNING
    assert g.min_resources[c.resources.pos("nvidia.com/gpu")] == 8000
    k = c.jobs["default/k"]
    # KAI applies a topology constraint only with its topology named: without one it is noted, not acted on
    assert k.topology_mode == "" and k.min_member == 1 and k.queue == "default"
    assert any(
        "PodGroup default/k: spec.topologyConstraint names no topology" in n for n in c.notes.warning_lines()
    )
    assert np.all(k.min_resources == 0)


# -- bad input -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "objs, obj, field",
    [
        ((node(), node()), "Node n1", "metadata.name"),
        ((queue("a", parent="b"), queue("b", parent="a")), "Queue a", "spec.parent"),
        ((queue("a", parent="zzz"),), "Queue a", "spec.parent"),
        ((podgroup("g"), podgroup("g")), "PodGroup default/g", "metadata.name"),
        ((pod("p"), pod("p")), "Pod default/p", "metadata.uid"),
        ((podgroup("p"), pod("p")), "Pod default/p", "metadata.name"),
    ],
)
def test_structural_errors_name_file_object_and_field(objs: tuple, obj: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        build(*objs)
    assert err.value.file == "snap.yaml" and err.value.obj == obj and err.value.field == field


def test_hypernode_errors() -> None:
    def hn(name: str, tier: int, *members: dict) -> dict:
        return {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {"tier": tier, "members": list(members)},
        }

    child = {"type": "HyperNode", "selector": {"exactMatch": {"name": "missing"}}}
    with pytest.raises(InputError) as err:
        build(node(), hn("s", 2, child))
    assert err.value.obj == "HyperNode s" and err.value.file == "snap.yaml"
    me = {"type": "HyperNode", "selector": {"exactMatch": {"name": "s"}}}
    with pytest.raises(InputError, match="cannot contain itself"):
        build(node(), hn("s", 2, me))


def test_hypernode_members_resolve_to_node_masks() -> None:
    def hn(name: str, tier: int, *members: dict) -> dict:
        return {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {"tier": tier, "members": list(members)},
        }

    n3 = node("x3")
    n3["metadata"]["labels"] = {"rack": "r2"}
    c = build(
        node("n1"),
        node("n2"),
        n3,
        hn("leaf-a", 1, {"type": "Node", "selector": {"regexMatch": {"pattern": "n[0-9]"}}}),
        hn("leaf-b", 1, {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r2"}}}}),
        hn(
            "spine",
            2,
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-a"}}},
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-b"}}},
        ),
    )
    tree = c.hypernodes
    assert list(tree.hypernodes["leaf-a"].mask) == [True, True, False]
    assert list(tree.hypernodes["leaf-b"].mask) == [False, False, True]
    assert tree.hypernodes["spine"].mask.all() and tree.tiers == [1, 2]
    assert tree.lca_tier(np.array([0, 1])) == 1 and tree.lca_tier(np.array([0, 2])) == 2
