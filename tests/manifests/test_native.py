"""Kubernetes' own gang API (manifests/native.py): what is honoured, refused by name, or reported."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from typer.testing import CliRunner

from corral.errors import InputError
from corral.framework.decisions import Bind, Decisions, Eviction, Unschedulable
from corral.kube.native_status import native_conditions
from corral.manifests.build import build_cluster
from tests.scenarios.expand import expand


def _objects(**job: Any) -> list[tuple[str, dict]]:
    base = {"name": "train", "native": "v1beta1", "pods": [{"count": 2, "gpu": 4}]}
    case = {"nodes": [{"name": "n1"}, {"name": "n2"}], "jobs": [{**base, **job}]}
    return [("snap.yaml", o) for o in expand(case)]


def _podgroup(objects: list[tuple[str, dict]]) -> dict:
    return next(o for _, o in objects if o["kind"] == "PodGroup")


def test_gang_min_count_and_basic_policy() -> None:
    assert build_cluster(_objects(minMember=2)).jobs["default/train"].min_member == 2
    assert build_cluster(_objects(policy="basic")).jobs["default/train"].min_member == 1


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"schedulingPolicy": {}}, "spec.schedulingPolicy", "exactly one of gang and basic"),
        (
            {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 1}}},
            "spec.schedulingPolicy",
            "exactly one of gang and basic",
        ),
        (
            {"schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}},
            "spec.schedulingConstraints.topology",
            "at most one",
        ),
        ({"preemptionPolicy": "Sometimes"}, "spec.preemptionPolicy", "unknown preemptionPolicy"),
        ({"disruptionMode": {"all": {}}}, "spec.disruptionMode", "could evict part of it"),
    ],
)
def test_refused_by_name(spec: dict, field: str, words: str) -> None:
    objects = _objects(minMember=1)
    _podgroup(objects)["spec"].update(spec)
    with pytest.raises(InputError) as err:
        build_cluster(objects)
    assert err.value.field == field and err.value.obj == "PodGroup default/train"
    assert words in err.value.message


def test_disruption_mode_all_is_honoured_when_the_gang_is_every_pod() -> None:
    objects = _objects(podgroup_spec={"disruptionMode": {"all": {}}})
    assert build_cluster(objects).jobs["default/train"].min_member == 2
    v1alpha2 = _objects(native="v1alpha2", minMember=1, podgroup_spec={"disruptionMode": "PodGroup"})
    with pytest.raises(InputError, match="could evict part of it"):
        build_cluster(v1alpha2)


def _composite(name: str = "root", parent: str = "", **spec: Any) -> tuple[str, dict]:
    body: dict[str, Any] = {"schedulingPolicy": {"gang": {"minGroupCount": 1}}, **spec}
    if parent:
        body["parentCompositePodGroupName"] = parent
    return (
        "s.yaml",
        {
            "apiVersion": "scheduling.k8s.io/v1alpha3",
            "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": body,
        },
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"schedulingPolicy": {"basic": {}}}, "spec.schedulingPolicy.basic"),
        ({"disruptionMode": {"all": {}}}, "spec.disruptionMode.all"),
    ],
)
def test_composites_corral_cannot_keep_are_refused(spec: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        build_cluster([_composite(**spec)])
    assert err.value.field == field and err.value.obj == "CompositePodGroup default/root"


def test_a_composite_tree_is_one_job_of_sub_groups() -> None:
    objects = _objects(podgroup_spec={"parentCompositePodGroupName": "mid"})
    objects += [_composite("mid", parent="root"), _composite("root")]
    cluster = build_cluster(objects)
    assert "default/train" not in cluster.jobs
    job = cluster.jobs["default/root"]
    assert sorted(t.role for t in job.tasks) == ["train", "train"]
    tree = job.subgroup_tree
    assert (tree.groups["mid"].parent, tree.groups["train"].parent, tree.groups["train"].min_member) == (
        "",
        "mid",
        2,
    )
    assert job.min_member == 2 and not job.invalid_reason


def test_a_tree_s_podgroups_keep_their_own_refusals_and_claims() -> None:
    objects = _objects(
        podgroup_spec={"parentCompositePodGroupName": "root", "disruptionMode": {"all": {}}}, minMember=1
    )
    with pytest.raises(InputError) as err:
        build_cluster([*objects, _composite("root")])
    assert err.value.obj == "PodGroup default/train" and err.value.field == "spec.disruptionMode"
    claims = {
        "parentCompositePodGroupName": "root",
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
    }
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }
    pods = [{"count": 2, "cpu": 1, "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}]
    objects = [*_objects(podgroup_spec=claims, pods=pods), _composite("root"), ("s.yaml", claim)]
    cluster = build_cluster(objects)
    # the leaf PodGroup's claim is its pods' shared claim (KEP-5729), under a composite too
    assert not cluster.jobs["default/root"].invalid_reason
    assert cluster.dra is not None and cluster.dra.groups["default/c"][0] == "train"
    own = {"parentCompositePodGroupName": "root", "priority": 7, "preemptionPolicy": "Never"}
    cluster = build_cluster([*_objects(podgroup_spec=own), _composite("root")])
    assert cluster.notes.warning_lines() == [
        "warning: PodGroup default/train: spec.priority, spec.preemptionPolicy not used: the tree of composite "
        "default/root takes its root's priority and preemption policy"
    ]
    assert not any(t.preempt_never for t in cluster.jobs["default/root"].tasks)


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ([], "composite pod group default/mid does not exist"),
        ([_composite("mid", parent="mid")], "composite pod group cycle: mid -> mid"),
        (
            [_composite("mid", parent="l2"), _composite("l2", parent="l3"), _composite("l3", parent="l4")]
            + [_composite("l4", parent="l5"), _composite("l5")],
            "deeper than 4 levels",
        ),
    ],
)
def test_an_invalid_composite_layout_waits_with_its_reason(extra: list, reason: str) -> None:
    objects = _objects(podgroup_spec={"parentCompositePodGroupName": "mid"}) + extra
    cluster = build_cluster(objects)
    reasons = [j.invalid_reason for j in cluster.jobs.values() if j.tasks]
    assert len(reasons) == 1 and reason in reasons[0], reasons


def test_queue_rule() -> None:
    assert build_cluster(_objects()).jobs["default/train"].queue == "default"
    objects = _objects(queue="research")
    assert build_cluster(objects).jobs["default/train"].queue == "research"  # the Volcano annotation
    objects = _objects()
    _podgroup(objects)["metadata"]["labels"] = {"kai.scheduler/queue": "team-a"}
    job = build_cluster(objects).jobs["default/train"]
    assert job.queue == "team-a" and job.invalid_reason == "queue 'team-a' does not exist"


def test_priority_wins_over_the_class_and_preemption_policy_never() -> None:
    objects = _objects(priority=10, podgroup_spec={"priority": 500, "preemptionPolicy": "Never"})
    cluster = build_cluster(objects)
    job = cluster.jobs["default/train"]
    assert job.priority == 500
    assert all(t.preempt_never for t in job.tasks)


def test_a_pod_naming_a_volcano_podgroup_natively_is_refused() -> None:
    objects = _objects()
    pg = _podgroup(objects)
    pg["apiVersion"] = "scheduling.volcano.sh/v1beta1"
    pg["spec"] = {"minMember": 2}
    with pytest.raises(InputError) as err:
        build_cluster(objects)
    assert err.value.field == "spec.schedulingGroup.podGroupName"


def test_v1alpha1_missing_workload_or_group_waits_with_a_reason() -> None:
    objects = [(f, o) for f, o in _objects(native="v1alpha1") if o["kind"] != "Workload"]
    job = build_cluster(objects).jobs["default/train:main"]
    assert job.invalid_reason == "workload default/train does not exist"
    objects = _objects(native="v1alpha1")
    next(o for _, o in objects if o["kind"] == "Workload")["spec"]["podGroups"][0]["name"] = "other"
    assert "has no pod group 'main'" in build_cluster(objects).jobs["default/train:main"].invalid_reason


def test_native_scheduled_condition_reads_as_running() -> None:
    objects = _objects()
    _podgroup(objects)["status"] = {
        "conditions": [
            {
                "type": "PodGroupInitiallyScheduled",
                "status": "True",
                "reason": "Scheduled",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    assert build_cluster(objects).jobs["default/train"].phase.value == "Running"
    assert build_cluster(_objects()).jobs["default/train"].phase.value == "Pending"


def test_conditions_change_once_and_never_regress() -> None:
    cluster = build_cluster(_objects())
    waiting = Decisions(unschedulable=[Unschedulable("default/train", "no room", 1)])
    [c] = native_conditions(cluster, waiting, 1)
    assert (c.type, c.status, c.reason, c.message) == (
        "PodGroupInitiallyScheduled",
        "False",
        "Unschedulable",
        "no room",
    )
    assert native_conditions(cluster, waiting, 2) == []  # said already
    placed = Decisions(binds=[Bind("default/train-0", "n1", 3), Bind("default/train-1", "n1", 3)])
    [c] = native_conditions(cluster, placed, 3)
    assert (c.status, c.reason) == ("True", "Scheduled")
    assert native_conditions(cluster, copy.deepcopy(waiting), 4) == []  # True is never regressed
    evicted = Decisions(evictions=[Eviction("default/train-0", "n1", "preempt", "default/high", 5)])
    [c] = native_conditions(cluster, evicted, 5)
    assert (c.type, c.status, c.reason) == ("DisruptionTarget", "True", "PreemptionByScheduler")
    assert c.message == "evicted by preempt for default/high"


def test_v1alpha2_writes_podgroup_scheduled() -> None:
    cluster = build_cluster(_objects(native="v1alpha2"))
    placed = Decisions(binds=[Bind("default/train-0", "n1", 1), Bind("default/train-1", "n1", 1)])
    [c] = native_conditions(cluster, placed, 1)
    assert c.type == "PodGroupScheduled"


def test_validate_reports_what_it_read(tmp_path) -> None:
    import yaml

    from corral.cli import app
    from tests.scenarios.test_scenarios import CASES

    case = next(p for p in CASES if p.stem == "native_dra_gang_claims")
    docs = expand(yaml.safe_load(case.read_text()))
    docs.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu-as-extended"},
            "spec": {"extendedResourceName": "example.com/gpu"},
        }
    )
    snap = tmp_path / "s.yaml"
    snap.write_text(yaml.safe_dump_all(docs))
    out = CliRunner().invoke(app, ["validate", str(snap)])
    assert out.exit_code == 0, out.output
    assert "read Kubernetes' gang API (scheduling.k8s.io/v1beta1): 0 Workloads, 2 PodGroups" in out.output
    assert (
        "read Dynamic Resource Allocation objects (resource.k8s.io): 2 ResourceSlices (3 devices on 2 nodes; "
        "drivers gpu.nvidia.com); 2 DeviceClasses; 1 ResourceClaims (0 allocated, 1 not); "
        "1 ResourceClaimTemplates. corral allocates devices to the claims of the pods it schedules"
        in out.output
    )
    assert "cannot be honoured" not in out.output  # pods with claims are scheduled (plugins/dra.py)
    assert "Pod default/gpu-gang-0: spec.resourceClaims" not in out.output
    assert (
        "warning: DeviceClass gpu-as-extended: spec.extendedResourceName: Kubernetes serves requests for example.com/gpu"
        in out.output
    )


def test_schedule_tables_show_the_conditions(tmp_path) -> None:
    import yaml

    from corral.cli import app

    snap = tmp_path / "s.yaml"
    snap.write_text(yaml.safe_dump_all([o for _, o in _objects()]))
    out = CliRunner().invoke(app, ["schedule", str(snap), "--now", "2026-01-01T00:00:00Z"])
    assert out.exit_code == 0, out.output
    assert "PodGroup conditions (1)" in out.output and "PodGroupInitiallyScheduled" in out.output
    assert out.output.rstrip().endswith("1 podgroup conditions")
