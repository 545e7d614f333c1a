"""Workloads expanded as their controllers would (manifests.workloads), the refusals and warnings of
manifests.fieldcheck, and how validate and schedule report them; each warned or refused message is the
one docs/compatibility.md quotes for its field."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from corral.cli import app
from corral.errors import InputError
from corral.manifests.build import build_cluster
from corral.manifests.workloads import expand_workloads
from corral.model.notes import Notes
from corral.model.quantity import MILLI
from tests.manifests.test_compatibility import DOC, tables

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"}},
}


def vjob(**spec) -> dict:
    tasks = spec.pop(
        "tasks",
        [
            {"name": "ps", "replicas": 1, "template": _tpl({"cpu": "2"})},
            {"name": "worker", "replicas": 2, "template": _tpl({"cpu": "4", "nvidia.com/gpu": "1"})},
        ],
    )
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "tf", "namespace": "ml", "uid": "u1"},
        "spec": {"tasks": tasks, **spec},
    }


def _tpl(requests: dict, **spec) -> dict:
    return {
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}], **spec}
    }


def build(*objects: dict):
    return build_cluster([("t.yaml", copy.deepcopy(o)) for o in (NODE, *objects)])


def res(cluster, job_uid: str, name: str) -> float:
    return float(cluster.jobs[job_uid].min_resources[cluster.resources.pos(name)])


def row(kind: str, api: str, path: str) -> tuple[str, str]:
    return tables(DOC.read_text())[(kind, api)][path]


# -- Volcano Job ------------------------------------------------------------------------------------


def test_volcano_job_expands_as_its_controller() -> None:
    c = build(vjob(queue="default", priorityClassName="", runningEstimate="2h"))
    job = c.jobs["ml/tf-u1"]
    assert job.min_member == 3 and job.min_task_member == {"ps": 1, "worker": 2}
    assert sorted(t.name for t in job.tasks) == ["tf-ps-0", "tf-worker-0", "tf-worker-1"]
    assert {t.role for t in job.tasks} == {"ps", "worker"}
    assert all(c.tasks[t.uid].labels["volcano.sh/job-name"] == "tf" for t in job.tasks)
    assert res(c, "ml/tf-u1", "cpu") == 10 * MILLI and res(c, "ml/tf-u1", "nvidia.com/gpu") == 2 * MILLI
    assert job.annotations["corral.io/expected-runtime"] == "2h"
    notes = c.notes
    assert [n.obj for n in notes.expansions] == ["Job ml/tf (batch.volcano.sh/v1alpha1)"]
    assert "PodGroup ml/tf-u1 (minMember 3, queue default), 3 pods" in notes.expansion_lines()[0]


def test_volcano_job_min_resources_first_pods_by_priority() -> None:
    """minAvailable below the tasks' minimums: the first minAvailable pods, higher priority task first
    (Volcano's CalcFirstCountResources)."""
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "hi"},
        "value": 9,
    }
    tasks = [
        {"name": "a", "replicas": 3, "template": _tpl({"cpu": "1"})},
        {"name": "b", "replicas": 2, "template": _tpl({"cpu": "10"}, priorityClassName="hi")},
    ]
    c = build(pc, vjob(minAvailable=3, tasks=tasks))
    assert res(c, "ml/tf-u1", "cpu") == (10 + 10 + 1) * MILLI
    # minAvailable at the tasks' minimums: each task's minimum, then other replicas
    tasks[0]["minAvailable"] = 1
    c = build(pc, vjob(minAvailable=4, tasks=tasks))
    assert c.jobs["ml/tf-u1"].min_task_member == {"a": 1, "b": 2}
    assert res(c, "ml/tf-u1", "cpu") == (10 + 10 + 1 + 1) * MILLI


def test_volcano_job_defaults_and_partitions() -> None:
    tasks = [
        {
            "replicas": 4,
            "partitionPolicy": {"partitionSize": 2, "minPartitions": 1},
            "template": _tpl({"cpu": "1"}),
        }
    ]
    c = build(vjob(tasks=tasks))
    job = c.jobs["ml/tf-u1"]
    assert job.queue == "default" and job.min_member == 2 and job.min_task_member == {"default0": 2}
    pods = sorted(job.tasks, key=lambda t: t.name)
    assert [t.labels["volcano.sh/partition-id"] for t in pods] == ["0", "0", "1", "1"]
    assert {c.tasks[t.uid].labels["volcano.sh/task-spec"] for t in pods} == {"default0"}


def test_volcano_job_finished_or_expanded_is_not_expanded_again() -> None:
    done = vjob()
    done["status"] = {"state": {"phase": "Completed"}}
    c = build(done)
    assert not c.jobs and "not expanded: the job is Completed" in c.notes.expansion_lines()[0]
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "tf", "namespace": "ml"},
        "spec": {"minMember": 1},
    }
    c = build(vjob(), pg)
    assert list(c.jobs) == ["ml/tf"] and not c.tasks


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda j: j["spec"]["tasks"][0].update(dependsOn={"name": ["worker"]}), "spec.tasks[0].dependsOn"),
        (lambda j: j["spec"].update(minAvailable=9), "spec.minAvailable"),
        (lambda j: j["spec"]["tasks"][1].update(minAvailable=5), "spec.tasks[1].minAvailable"),
        (lambda j: j["spec"].update(tasks=[]), "spec.tasks"),
        (
            lambda j: j["spec"]["tasks"][0].update(template={"spec": {}}),
            "spec.tasks[0].template.spec.containers",
        ),
    ],
)
def test_volcano_job_refusals_name_the_field(change, field: str) -> None:
    job = vjob()
    change(job)
    with pytest.raises(InputError) as err:
        build(job)
    assert err.value.field == field and err.value.obj == "Job ml/tf" and err.value.file == "t.yaml"


def test_volcano_job_depends_on_message_is_the_documented_one() -> None:
    job = vjob()
    job["spec"]["tasks"][0]["dependsOn"] = {"name": ["worker"]}
    with pytest.raises(InputError) as err:
        build(job)
    status, text = row("Job", "batch.volcano.sh/v1alpha1", "spec.tasks[].dependsOn")
    assert status == "refused" and str(err.value).split("dependsOn: ")[-1][:60] in text


def test_volcano_job_warnings_are_the_documented_ones() -> None:
    job = vjob(policies=[{"event": "PodEvicted", "action": "RestartJob"}])
    job["spec"]["tasks"][1]["topologyPolicy"] = "single-numa-node"
    job["spec"]["tasks"][1]["policies"] = [{"exitCode": 3, "action": "RestartTask"}]
    notes = build(job).notes
    got = {n.field: n.message for n in notes.warnings}
    assert set(got) == {"spec.policies", "spec.tasks[1].policies", "spec.tasks[1].topologyPolicy"}
    api = "batch.volcano.sh/v1alpha1"
    assert got["spec.policies"] in row("Job", api, "spec.policies")[1]
    assert got["spec.tasks[1].topologyPolicy"] in row("Job", api, "spec.tasks[].topologyPolicy")[1]
    assert len(notes.warning_lines()) == 1 and notes.warning_lines()[0].startswith("warning: Job ml/tf: ")


# -- KAI: batch Job and JobSet ---------------------------------------------------------------------


def bjob(scheduler: str = "kai-scheduler", **meta) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "default", "uid": "b1", **meta},
        "spec": {
            "parallelism": 4,
            "completions": 6,
            "template": {
                "metadata": {"labels": {"priorityClassName": "hi"}},
                "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "x"}]},
            },
        },
        "status": {"succeeded": 3},
    }


def test_batch_job_for_kai_grouped_as_kais_podgrouper() -> None:
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "hi"},
        "value": 9,
    }
    c = build(pc, bjob(labels={"kai.scheduler/queue": "team"}))
    job = c.jobs["default/pg-train-b1"]
    assert job.min_member == 1 and job.queue == "team" and job.priority_class == "hi"
    assert sorted(t.name for t in job.tasks) == ["train-0", "train-1", "train-2"]  # 6 - 3 succeeded
    assert job.invalid_reason == "queue 'team' does not exist"


def test_batch_job_defaults_and_other_schedulers() -> None:
    c = build(bjob())
    job = c.jobs["default/pg-train-b1"]
    assert job.queue == "default-queue" and job.priority_class == "train"
    c = build(bjob(scheduler="default-scheduler"))
    assert not c.jobs and not c.notes.expansions  # not KAI's: left alone
    suspended = bjob()
    suspended["spec"]["suspend"] = True
    assert not build(suspended).jobs


def test_batch_job_pods_in_snapshot_are_not_made_again() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-x",
            "namespace": "default",
            "ownerReferences": [{"kind": "Job", "name": "train"}],
        },
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]},
    }
    c = build(bjob(), pod)
    assert list(c.tasks) == ["default/train-x"]
    assert "its pods are in the snapshot" in c.notes.warning_lines()[0]


def jobset(**meta) -> dict:
    def rj(name: str, replicas: int, parallelism: int) -> dict:
        return {
            "name": name,
            "replicas": replicas,
            "template": {
                "spec": {
                    "parallelism": parallelism,
                    "template": {"spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]}},
                }
            },
        }

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "default", "uid": "j1", **meta},
        "spec": {"replicatedJobs": [rj("driver", 1, 1), rj("workers", 2, 3)]},
    }


def test_jobset_one_role_per_replica() -> None:
    c = build(jobset())
    job = c.jobs["default/pg-js-j1"]
    assert job.min_task_member == {"driver-replica-0": 1, "workers-replica-0": 3, "workers-replica-1": 3}
    assert job.min_member == 7 and len(job.tasks) == 7
    js = jobset()
    js["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    assert build(js).jobs["default/pg-js-j1"].min_member == 1


def test_jobset_sub_groups_as_kais_grouper() -> None:
    """KAI's JobSet grouper: a parent sub-group per replicated job needing every replica, a leaf per
    replica needing its parallelism; the podgroup needs every replicated job, min(override, n) of them
    with the JobSet's batch-min-member annotation."""
    c = build(jobset())
    pg = next(o for o in _expanded(jobset()) if o["kind"] == "PodGroup")
    assert pg["spec"]["minSubGroup"] == 2 and "minMember" not in pg["spec"]
    assert [
        (g["name"], g.get("parent"), g.get("minMember"), g.get("minSubGroup"))
        for g in pg["spec"]["subGroups"]
    ] == [
        ("driver", None, None, 1),
        ("driver-replica-0", "driver", 1, None),
        ("workers", None, None, 2),
        ("workers-replica-0", "workers", 3, None),
        ("workers-replica-1", "workers", 3, None),
    ]
    assert c.jobs["default/pg-js-j1"].min_member == 7 and not c.notes.warnings
    one = build(jobset(annotations={"kai.scheduler/batch-min-member": "1"})).jobs["default/pg-js-j1"]
    assert one.subgroups is not None and one.min_member == 1  # the driver alone may start
    assert not one.min_task_member


def test_jobset_queue_from_the_first_pod_template() -> None:
    js = jobset()
    js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["metadata"] = {
        "labels": {"kai.scheduler/queue": "other"}
    }
    pg = next(o for o in _expanded(js) if o["kind"] == "PodGroup")
    assert pg["spec"]["queue"] == "default-queue"


def test_jobset_replica_topology_is_each_leafs_constraint() -> None:
    js = jobset()
    js["spec"]["replicatedJobs"][1]["template"]["metadata"] = {
        "annotations": {"kai.scheduler/topology": "t", "kai.scheduler/topology-required-placement": "rack"}
    }
    pg = next(o for o in _expanded(js) if o["kind"] == "PodGroup")
    leaves = {g["name"]: g.get("topologyConstraint") for g in pg["spec"]["subGroups"] if g.get("parent")}
    assert leaves == {
        "driver-replica-0": None,
        "workers-replica-0": {"topology": "t", "requiredTopologyLevel": "rack"},
        "workers-replica-1": {"topology": "t", "requiredTopologyLevel": "rack"},
    }


def test_jobset_exclusive_placement() -> None:
    """The node-selector strategy is what the JobSet controller writes on the child Jobs' pods; the pod
    webhook's strategy (the default) is refused by name."""
    js = jobset(
        annotations={
            "alpha.jobset.sigs.k8s.io/exclusive-topology": "pool",
            "alpha.jobset.sigs.k8s.io/node-selector": "true",
        }
    )
    pods = {o["metadata"]["name"]: o["spec"] for o in _expanded(js) if o["kind"] == "Pod"}
    assert pods["js-workers-1-2"]["nodeSelector"] == {
        "alpha.jobset.sigs.k8s.io/namespaced-job": "default_js-workers-1"
    }
    assert pods["js-workers-1-2"]["tolerations"] == [
        {"key": "alpha.jobset.sigs.k8s.io/no-schedule", "operator": "Exists", "effect": "NoSchedule"}
    ]
    with pytest.raises(InputError) as err:
        build(jobset(annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": "pool"}))
    assert err.value.field == "metadata.annotations.alpha.jobset.sigs.k8s.io/exclusive-topology"
    assert "follower pods only once its leader pod is bound" in str(err.value)
    js = jobset()
    js["spec"]["replicatedJobs"][1]["template"]["metadata"] = {
        "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "pool"}
    }
    with pytest.raises(InputError) as err:
        build(js)
    assert err.value.field == (
        "spec.replicatedJobs[1].template.metadata.annotations.alpha.jobset.sigs.k8s.io/exclusive-topology"
    )


def _expanded(obj: dict) -> list[dict]:
    return [raw for _f, raw in expand_workloads([("f", obj)], Notes())]


# -- fields of served kinds -------------------------------------------------------------------------


def kai_pg(**spec) -> dict:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "default"},
        "spec": {"minMember": 1, "queue": "default", **spec},
    }


def test_kai_preemptibility_is_the_victim_flag() -> None:
    c = build(kai_pg(preemptibility="non-preemptible"))
    assert c.jobs["default/pg"].preemptable is False
    assert build(kai_pg(preemptibility="preemptible")).jobs["default/pg"].preemptable is True
    assert build(kai_pg()).jobs["default/pg"].preemptable is True
    with pytest.raises(InputError) as err:
        build(kai_pg(preemptibility="sometimes"))
    assert err.value.field == "spec.preemptibility"


@pytest.mark.parametrize(
    ("obj", "kind", "api", "field"),
    [
        (kai_pg(preemptionDelay="5m"), "PodGroup", "scheduling.run.ai/v2alpha2", "spec.preemptionDelay"),
        (
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "q"},
                "spec": {"dequeueStrategy": "fifo"},
            },
            "Queue",
            "scheduling.volcano.sh/v1beta1",
            "spec.dequeueStrategy",
        ),
    ],
)
def test_refused_fields_say_what_the_table_says(obj: dict, kind: str, api: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        build(obj)
    assert err.value.field == field
    status, text = row(kind, api, field)
    assert status == "refused" and err.value.args[0].split(f"{field}: ")[-1][:50] in text


VQ = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}}
KQ = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "k"}}


@pytest.mark.parametrize(
    ("obj", "kind", "api", "field", "doc_field"),
    [
        (
            {
                **VQ,
                "spec": {
                    "affinity": {
                        "nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["a"]}
                    }
                },
            },
            "Queue",
            "scheduling.volcano.sh/v1beta1",
            "spec.affinity",
            "spec.affinity",
        ),
        (
            {**VQ, "spec": {"extendClusters": [{"name": "c2"}]}},
            "Queue",
            "scheduling.volcano.sh/v1beta1",
            "spec.extendClusters",
            "spec.extendClusters",
        ),
        (
            {**KQ, "spec": {"resources": {"gpu": {"overQuotaWeight": 2}, "cpu": {"overQuotaWeight": 1}}}},
            "Queue",
            "scheduling.run.ai/v2",
            "spec.resources.cpu.overQuotaWeight",
            "spec.resources.cpu.overQuotaWeight",
        ),
        (
            kai_pg(stalenessGracePeriod="60s"),
            "PodGroup",
            "scheduling.run.ai/v2alpha2",
            "spec.stalenessGracePeriod",
            "spec.stalenessGracePeriod",
        ),
        (
            kai_pg(preemptibility="non-preemptible"),
            "PodGroup",
            "scheduling.run.ai/v2alpha2",
            "spec.preemptibility",
            "spec.preemptibility",
        ),
    ],
)
def test_warned_fields_say_what_the_table_says(
    obj: dict, kind: str, api: str, field: str, doc_field: str
) -> None:
    notes = build(obj).notes
    assert [n.field for n in notes.warnings] == [field]
    status, text = row(kind, api, doc_field)
    assert status == "warned" and notes.warnings[0].message.split(" (")[0] in text


def test_unwarned_values() -> None:
    """The peer's defaults are no reason for a warning."""
    quiet = [
        kai_pg(stalenessGracePeriod="-1s", preemptibility="preemptible"),
        {**VQ, "spec": {"dequeueStrategy": "traverse", "affinity": {}}},
        {**KQ, "spec": {"resources": {"gpu": {"overQuotaWeight": 2}, "cpu": {"overQuotaWeight": 2}}}},
    ]
    assert not build(*quiet).notes.warnings


def test_notes_one_line_per_object() -> None:
    notes = Notes()
    notes.warn("Queue q", "spec.a", "one")
    notes.warn("Queue q", "spec.a", "one")
    notes.warn("Queue q", "spec.b", "two")
    notes.warn("Job ns/j", "", "three")
    assert notes.warning_lines() == ["warning: Queue q: spec.a: one; spec.b: two", "warning: Job ns/j: three"]


# -- the commands ------------------------------------------------------------------------------------


def _write(tmp_path: Path, *objects: dict) -> str:
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all([NODE, *objects]))
    return str(path)


def test_validate_lists_what_it_made_and_warns(tmp_path: Path) -> None:
    snap = _write(tmp_path, vjob(policies=[{"event": "PodEvicted", "action": "RestartJob"}]))
    out = CliRunner().invoke(app, ["validate", snap])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].startswith("ok: 1 nodes, 3 pods, 1 podgroups") and "1 objects with warnings" in lines[0]
    assert lines[1] == (
        "made from Job ml/tf (batch.volcano.sh/v1alpha1): PodGroup ml/tf-u1 (minMember 3, queue default), "
        "3 pods (tf-ps-0, tf-worker-0, tf-worker-1)"
    )
    assert lines[2].startswith("warning: Job ml/tf: spec.policies: lifecycle policies")


def test_schedule_warns_once_and_refusals_exit_2(tmp_path: Path) -> None:
    snap = _write(tmp_path, vjob(policies=[{"event": "PodEvicted", "action": "RestartJob"}]))
    out = CliRunner().invoke(
        app, ["schedule", snap, "-o", "json", "--cycles", "3", "--now", "2026-01-01T00:00:00Z"]
    )
    assert out.exit_code == 0
    assert out.stderr.count("warning: Job ml/tf") == 1
    assert '"pod": "ml/tf-ps-0"' in out.stdout
    job = vjob()
    job["spec"]["tasks"][0]["dependsOn"] = {"name": ["worker"]}
    out = CliRunner().invoke(app, ["validate", _write(tmp_path, job)])
    assert out.exit_code == 2 and "spec.tasks[0].dependsOn" in out.output


# -- hostile shapes --------------------------------------------------------------------------------


def _paths(value, prefix=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


def _mutated(obj: dict, path: tuple, new):
    out = copy.deepcopy(obj)
    parent = out
    for key in path[:-1]:
        parent = parent[key]
    if new is _DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return out


_DELETE = object()


@pytest.mark.parametrize("make", [vjob, bjob, jobset], ids=["volcano-job", "batch-job", "jobset"])
def test_every_field_of_a_workload_broken_is_input_error_or_read(make, monkeypatch) -> None:
    """Each field deleted or given another type or a huge value: the snapshot is read or refused with
    an InputError naming the file — never another exception (SPEC.md §5)."""
    monkeypatch.setenv("CORRAL_MAX_WORKLOAD_PODS", "1000")
    base = make()
    base["spec"]["minAvailable" if make is vjob else "parallelism"] = 2
    for path in list(_paths(base)):
        for new in (_DELETE, 5, "x", [], {"a": 1}, None, -1, 10**12, True):
            obj = _mutated(base, path, new)
            try:
                build(obj)
            except InputError as exc:
                assert exc.file == "t.yaml", (path, new, exc)


def test_workload_pod_limit(monkeypatch) -> None:
    monkeypatch.setenv("CORRAL_MAX_WORKLOAD_PODS", "2")
    with pytest.raises(InputError) as err:
        build(vjob())
    assert err.value.field == "spec.tasks" and "CORRAL_MAX_WORKLOAD_PODS" in str(err.value)
    monkeypatch.setenv("CORRAL_MAX_WORKLOAD_PODS", "3")
    assert len(build(vjob()).tasks) == 3


def test_pending_pods_of_corral_warn_about_constraints_it_does_not_evaluate() -> None:
    def pod(name: str, scheduler: str, node: str = "") -> dict:
        spec = {
            "schedulerName": scheduler,
            "containers": [{"name": "c"}],
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
            ],
            "schedulingGates": [{"name": "wait"}],
        }
        if node:
            spec["nodeName"] = node
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": spec,
        }

    notes = build(pod("p", "volcano"), pod("q", "default-scheduler"), pod("r", "corral", "n1")).notes
    assert [(n.obj, n.field) for n in notes.warnings] == [
        ("Pod ns/p", "spec.topologySpreadConstraints"),
        ("Pod ns/p", "spec.schedulingGates"),
    ]


def test_notes_cut_short_on_request() -> None:
    notes = Notes()
    for i in range(25):
        notes.warn(f"Pod ns/p{i}", "spec.schedulingGates", "not evaluated")
    assert len(notes.warning_lines()) == 25
    lines = notes.warning_lines(most=20)
    assert (
        len(lines) == 21 and lines[-1] == "warning: 5 more objects with warnings (corral validate lists them)"
    )


def test_bare_kai_pods_grouped_by_owner_or_alone() -> None:
    def pod(name: str, owner: str = "", **meta) -> dict:
        m = {
            "name": name,
            "namespace": "ns",
            "uid": f"u-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            **meta,
        }
        if owner:
            m["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "uid": "o1", "controller": True}]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": m,
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]},
        }

    grouped = {"annotations": {"pod-group-name": "mine"}}
    c = build(pod("a", "rs"), pod("b", "rs"), pod("solo"), pod("g", **grouped))
    assert sorted(t.name for t in c.jobs["ns/pg-rs-o1"].tasks) == ["a", "b"]
    solo = c.jobs["ns/pg-solo-u-solo"]
    assert solo.min_member == 1 and solo.queue == "default-queue" and solo.creation > 0
    assert c.jobs["ns/mine"].invalid_reason  # a pod naming its podgroup keeps it (missing here)
    assert c.notes.expansion_lines() == [
        "made from 3 pods of kai-scheduler without a podgroup: 2 PodGroups as KAI's pod-grouper makes them (minMember 1)"
    ]
