"""Bad input never produces a traceback (SPEC.md §4, §5): one ``error:`` line naming the file, the object
and the field, exit code 2. Valid input that cannot be honoured (a missing podgroup or queue) is not bad
input: it is scheduled around and reported as unschedulable, exit 0."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from corral.cli import app
from tests.fuzzing import paths_of

NOW = "2026-01-01T00:00:00Z"

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"zone": "a"}},
    "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8", "pods": "110"}},
}


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def schedule(path: Path, *extra: str) -> Any:
    return run("schedule", str(path), "--now", NOW, *extra)


def assert_one_error(result: Any, *parts: str) -> str:
    """Exit 2, exactly one ``error:`` line (on stderr), no traceback; the line names every part."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("error: "), line
    assert result.stdout.strip() == "", result.stdout
    for part in parts:
        assert part in line, f"{part!r} not in {line!r}"
    return line


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def docs(tmp: Path, name: str, *objs: dict) -> Path:
    return write(tmp, name, yaml.safe_dump_all([NODE, *objs]))


def pod(name: str, **spec: Any) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "corral", "containers": [{"name": "c"}], **spec},
    }


# -- snapshots -------------------------------------------------------------------------------------------
def test_malformed_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: n1\n  labels: [\n")
    assert_one_error(schedule(path), str(path), "malformed YAML", "line")


def test_malformed_json(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.json", '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},}')
    assert_one_error(schedule(path), str(path), "malformed JSON", "line 1")


def test_not_an_object(tmp_path: Path) -> None:
    path = write(tmp_path, "scalar.yaml", "just a string\n")
    assert_one_error(schedule(path), str(path), "expected a Kubernetes object")


def test_missing_kind(tmp_path: Path) -> None:
    path = docs(tmp_path, "nokind.yaml", {"apiVersion": "v1", "metadata": {"name": "x"}})
    assert_one_error(schedule(path), str(path), "field kind", "missing kind")


def test_unknown_api_version_of_known_kind(tmp_path: Path) -> None:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1alpha9",
        "kind": "PodGroup",
        "metadata": {"name": "pg1", "namespace": "team"},
        "spec": {"minMember": 1},
    }
    path = docs(tmp_path, "api.yaml", pg)
    line = assert_one_error(
        schedule(path), str(path), "PodGroup pg1", "field apiVersion", "scheduling.volcano.sh/v1alpha9"
    )
    assert "scheduling.volcano.sh/v1beta1" in line  # names the allowed values


def test_unknown_kind_is_ignored(tmp_path: Path) -> None:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": "whatever"}}
    result = schedule(docs(tmp_path, "svc.yaml", svc))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("value", ["2x", "-1", "1.5.5", "Gi", ""])
def test_bad_quantity(tmp_path: Path, value: str) -> None:
    node = copy.deepcopy(NODE)
    node["status"]["allocatable"]["cpu"] = value
    path = write(tmp_path, "qty.yaml", yaml.safe_dump(node))
    assert_one_error(schedule(path), str(path), "Node n1", "field status.allocatable.cpu")


def test_bad_quantity_in_pod_request(tmp_path: Path) -> None:
    p = pod("p1", containers=[{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2x"}}}])
    path = docs(tmp_path, "podqty.yaml", p)
    assert_one_error(
        schedule(path),
        str(path),
        "Pod default/p1",
        "field spec.containers[0].resources.requests.nvidia.com/gpu",
        "'2x'",
    )


def test_node_without_name(tmp_path: Path) -> None:
    node = copy.deepcopy(NODE)
    del node["metadata"]["name"]
    path = write(tmp_path, "noname.yaml", yaml.safe_dump(node))
    assert_one_error(schedule(path), str(path), "Node", "field metadata.name", "missing name")


def test_node_without_allocatable(tmp_path: Path) -> None:
    node = copy.deepcopy(NODE)
    del node["status"]
    path = write(tmp_path, "noalloc.yaml", yaml.safe_dump(node))
    assert_one_error(schedule(path), str(path), "Node n1", "field status.allocatable")


def test_pod_without_containers(tmp_path: Path) -> None:
    p = pod("p1")
    del p["spec"]["containers"]
    path = docs(tmp_path, "nocont.yaml", p)
    assert_one_error(schedule(path), str(path), "Pod default/p1", "field spec.containers")


def test_podgroup_min_member_not_an_integer(tmp_path: Path) -> None:
    # minMember is optional (default 1, as in Volcano's CRD); a value that is not an integer is an error
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg1", "namespace": "team"},
        "spec": {"minMember": "many"},
    }
    path = docs(tmp_path, "pg.yaml", pg)
    assert_one_error(schedule(path), str(path), "PodGroup team/pg1", "field spec.minMember", "'many'")


def test_podgroup_negative_min_member(tmp_path: Path) -> None:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "pg1", "namespace": "team"},
        "spec": {"minMember": -2},
    }
    path = docs(tmp_path, "pg.yaml", pg)
    assert_one_error(schedule(path), str(path), "PodGroup team/pg1", "field spec.minMember")


def test_hypernode_without_tier(tmp_path: Path) -> None:
    hn = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "s1"},
        "spec": {"members": []},
    }
    path = docs(tmp_path, "hn.yaml", hn)
    assert_one_error(schedule(path), str(path), "HyperNode s1", "field spec.tier")


def test_queue_cycle(tmp_path: Path) -> None:
    qa = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "a"},
        "spec": {"parent": "b"},
    }
    qb = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "b"},
        "spec": {"parent": "a"},
    }
    path = docs(tmp_path, "queues.yaml", qa, qb)
    assert_one_error(schedule(path), str(path), "Queue a", "field spec.parent", "cycle")


def test_queue_own_parent_and_missing_parent(tmp_path: Path) -> None:
    q = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "a"},
        "spec": {"parent": "a"},
    }
    path = docs(tmp_path, "self.yaml", q)
    assert_one_error(schedule(path), str(path), "Queue a", "field spec.parent")
    q["spec"]["parent"] = "nowhere"
    path = docs(tmp_path, "orphan.yaml", q)
    assert_one_error(schedule(path), str(path), "Queue a", "field spec.parent", "'nowhere'")


def test_hypernode_cycle(tmp_path: Path) -> None:
    def hn(name: str, member: str) -> dict:
        return {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {
                "tier": 2,
                "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": member}}}],
            },
        }

    path = docs(tmp_path, "hn.yaml", hn("s1", "s2"), hn("s2", "s1"))
    assert_one_error(schedule(path), str(path), "HyperNode s1", "field spec.members", "cycle")


def test_duplicate_node(tmp_path: Path) -> None:
    path = write(tmp_path, "dup.yaml", yaml.safe_dump_all([NODE, NODE]))
    assert_one_error(schedule(path), str(path), "Node n1", "field metadata.name", "duplicate")


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"containers": ["oops"]}, "spec.containers[0]"),
        ({"containers": [{"name": "c", "resources": "big"}]}, "spec.containers[0].resources"),
        ({"tolerations": "all"}, "spec.tolerations"),
        ({"tolerations": [{"key": "a", "operator": "Maybe"}]}, "spec.tolerations[0].operator"),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": ["x"]}
                    }
                }
            },
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "z", "operator": "Near", "values": ["a"]}]}
                            ]
                        }
                    }
                }
            },
            "nodeSelectorTerms[0].matchExpressions[0].operator",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "z", "operator": "Gt", "values": ["ten"]}]}
                            ]
                        }
                    }
                }
            },
            "nodeSelectorTerms[0].matchExpressions[0].values",
        ),
        (
            {
                "affinity": {
                    "podAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": "heavy", "podAffinityTerm": {"topologyKey": "zone"}}
                        ]
                    }
                }
            },
            "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        ),
        (
            {
                "affinity": {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": {"app": "x"}}}
                        ]
                    }
                }
            },
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
        ),
        (
            {
                "affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 1,
                                "podAffinityTerm": {
                                    "topologyKey": "zone",
                                    "labelSelector": {},
                                    "namespaceSelector": {
                                        "matchExpressions": [{"key": "team", "operator": "Is"}]
                                    },
                                },
                            }
                        ]
                    }
                }
            },
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
            ".podAffinityTerm.namespaceSelector.matchExpressions[0].operator",
        ),
        (
            {
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": "zone", "matchLabelKeys": ["version"]}
                        ]
                    }
                }
            },
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys",
        ),
        ({"priority": "high"}, "spec.priority"),
        ({"nodeSelector": ["zone=a"]}, "spec.nodeSelector"),
    ],
)
def test_malformed_pod_fields(tmp_path: Path, spec: dict, field: str) -> None:
    path = docs(tmp_path, "pod.yaml", pod("p1", **spec))
    line = assert_one_error(schedule(path), str(path), "Pod default/p1", "field spec.", field)
    assert line.index("field spec.") < line.index(field)


def test_malformed_queue_and_podgroup_fields(tmp_path: Path) -> None:
    q = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"guarantee": 5},
    }
    path = docs(tmp_path, "q.yaml", q)
    assert_one_error(schedule(path), str(path), "Queue q", "field spec.guarantee")
    q["spec"] = {"weight": 0}
    path = docs(tmp_path, "q0.yaml", q)
    assert_one_error(schedule(path), str(path), "Queue q", "field spec.weight")
    kai = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "k"},
        "spec": {"resources": {"gpu": 4}},
    }
    path = docs(tmp_path, "kai.yaml", kai)
    assert_one_error(schedule(path), str(path), "Queue k", "field spec.resources.gpu")
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"networkTopology": "hard"},
    }
    path = docs(tmp_path, "pg.yaml", pg)
    assert_one_error(schedule(path), str(path), "PodGroup default/g", "field spec.networkTopology")


def test_missing_file_and_empty_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert_one_error(schedule(missing), str(missing), "no such file")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_error(schedule(empty), str(empty))


def test_error_names_the_right_file_of_several(tmp_path: Path) -> None:
    good = docs(tmp_path, "good.yaml")
    bad = write(
        tmp_path,
        "bad.yaml",
        yaml.safe_dump(pod("p1", containers=[{"name": "c", "resources": {"requests": {"cpu": "lots"}}}])),
    )
    line = assert_one_error(run("schedule", str(good), str(bad), "--now", NOW), str(bad))
    assert str(good) not in line


# -- the command line and the configuration ------------------------------------------------------------
@pytest.mark.parametrize("value", ["yesterday", "2026-13-01T00:00:00Z", "1700000000x"])
def test_bad_now(tmp_path: Path, value: str) -> None:
    assert_one_error(run("schedule", str(docs(tmp_path, "s.yaml")), "--now", value), "--now", repr(value))


def test_bad_output_format(tmp_path: Path) -> None:
    assert_one_error(schedule(docs(tmp_path, "s.yaml"), "-o", "xml"), "--output", "json or table")


CONFIG_CASES = {
    "unknown_action": (
        'actions: "enqueue, allocate, teleport"\ntiers: []\n',
        ["field actions", "'teleport'", "allowed:", "allocate"],
    ),
    "unknown_plugin": (
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: magic\n',
        ["field tiers[0].plugins[1].name", "'magic'", "allowed:", "proportion"],
    ),
    "unknown_argument": (
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n    arguments: {binpack.wieght: 3}\n',
        ["field tiers[0].plugins[0].arguments.binpack.wieght", "allowed:", "binpack.weight"],
    ),
    "wrong_argument_type": (
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n'
        "    arguments: {binpack.weight: heavy}\n",
        ["field tiers[0].plugins[0].arguments.binpack.weight", "expected a number"],
    ),
    "unknown_switch": (
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableMagic: true\n',
        ["field tiers[0].plugins[0].enableMagic", "allowed:", "enablePreemptable"],
    ),
    "wrong_switch_type": (
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrder: "yes"\n',
        ["field tiers[0].plugins[0].enableJobOrder", "true or false"],
    ),
    "wrong_action_argument_type": (
        'actions: "enqueue, allocate"\nconfigurations:\n- name: enqueue\n'
        "  arguments: {overcommit-factor: lots}\ntiers: []\n",
        ["field configurations[0].arguments.overcommit-factor", "expected a number"],
    ),
    "unknown_action_argument": (
        'actions: "enqueue, allocate"\nconfigurations:\n- name: enqueue\n'
        "  arguments: {overcommit: 2}\ntiers: []\n",
        ["field configurations[0].arguments.overcommit", "allowed:", "overcommit-factor"],
    ),
    "unknown_configured_action": (
        'actions: "allocate"\nconfigurations:\n- name: teleport\ntiers: []\n',
        ["field configurations[0].name", "'teleport'"],
    ),
    "plugin_twice": (
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: gang\n',
        ["field tiers[1].plugins[0].name", "twice"],
    ),
    "no_actions": ("tiers: []\n", ["field actions"]),
    "unknown_top_level_key": ('actions: "allocate"\ntires: []\n', ["tires"]),
    "malformed_yaml": ("actions: [allocate\n", ["malformed YAML"]),
    "overcommit_below_one": (
        'actions: "enqueue, allocate"\nconfigurations:\n- name: enqueue\n'
        "  arguments: {overcommit-factor: 0.5}\ntiers: []\n",
        ["field configurations[0].arguments.overcommit-factor", "at least 1.0"],
    ),
}
#: known bugs outside tests/, plugins/ and manifests/ (see the final report)
CONFIG_XFAIL: dict[str, str] = {}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=CONFIG_XFAIL[n], strict=True))
        if n in CONFIG_XFAIL
        else n
        for n in sorted(CONFIG_CASES)
    ],
)
def test_bad_config(tmp_path: Path, name: str) -> None:
    text, parts = CONFIG_CASES[name]
    cfg = write(tmp_path, "sched.yaml", text)
    snap = docs(tmp_path, "s.yaml")
    assert_one_error(run("schedule", str(snap), "-c", str(cfg), "--now", NOW), str(cfg), *parts)
    assert_one_error(run("validate", str(snap), "-c", str(cfg)), str(cfg), *parts)


def test_validate_reports_bad_snapshot(tmp_path: Path) -> None:
    node = copy.deepcopy(NODE)
    node["status"]["allocatable"]["cpu"] = "2x"
    path = write(tmp_path, "qty.yaml", yaml.safe_dump(node))
    assert_one_error(run("validate", str(path)), str(path), "Node n1", "field status.allocatable.cpu")


# -- valid input that cannot be honoured: exit 0, reported ----------------------------------------------
def test_missing_queue_and_missing_podgroup_are_unschedulable(tmp_path: Path) -> None:
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "lost", "namespace": "default"},
        "spec": {"minMember": 1, "queue": "nope"},
        "status": {"phase": "Inqueue"},
    }
    wants = [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
    in_lost = pod("in-lost", containers=wants)
    in_lost["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "lost"}
    orphan = pod("orphan", containers=wants)
    orphan["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "ghost"}
    path = docs(tmp_path, "s.yaml", pg, in_lost, orphan)
    result = schedule(path, "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    reasons = {u["podgroup"]: u["reason"] for u in out["unschedulable"]}
    assert "queue 'nope' does not exist" in reasons["default/lost"]
    assert "podgroup default/ghost does not exist" in reasons["default/ghost"]
    assert out["binds"] == []
    table = schedule(path)
    assert table.exit_code == 0 and "does not exist" in table.stdout
    check = run("validate", str(path))
    assert check.exit_code == 0 and "cannot be honoured" in check.stdout


def test_pod_on_a_node_not_in_the_snapshot_is_reported(tmp_path: Path, caplog: Any) -> None:
    """A served pod bound to a node the snapshot lacks is named (pod and node) by validate and by
    schedule, and left out of queue usage (SPEC.md §5: nothing silently dropped)."""
    wants = [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]
    ghost = pod("ghost", containers=wants, nodeName="gone-7")
    ghost["status"] = {"phase": "Running"}
    path = docs(tmp_path, "s.yaml", ghost, pod("next", containers=wants))
    check = run("validate", str(path))
    assert check.exit_code == 0, check.output
    line = "pods bound to nodes not in the snapshot, left out of queue usage: 1 (default/ghost on 'gone-7')"
    assert line in check.stdout
    caplog.clear()
    result = schedule(path, "-o", "json")
    assert result.exit_code == 0 and line in caplog.messages  # on stderr, as the skipped-objects notice
    assert [b["pod"] for b in json.loads(result.stdout)["binds"]] == ["default/next"]


# -- fuzz: any damage to a valid snapshot is exit 0 or one error line, never a traceback ----------------
def _valid_snapshot() -> list[dict]:
    gang = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default", "creationTimestamp": NOW},
        "spec": {
            "minMember": 2,
            "minTaskMember": {"w": 1},
            "queue": "q",
            "priorityClassName": "hi",
            "minResources": {"nvidia.com/gpu": "2"},
            "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
        },
        "status": {"phase": "Inqueue"},
    }

    def member(i: int) -> dict:
        p = pod(
            f"g-{i}",
            priorityClassName="hi",
            containers=[
                {
                    "name": "c",
                    "resources": {
                        "requests": {"nvidia.com/gpu": "1", "cpu": "500m"},
                        "limits": {"memory": "1Gi"},
                    },
                }
            ],
            initContainers=[{"name": "i", "resources": {"requests": {"cpu": "1"}}}],
            nodeSelector={"zone": "a"},
            tolerations=[{"key": "t", "operator": "Exists", "effect": "NoSchedule"}],
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
                                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
                            }
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 5,
                            "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]},
                        }
                    ],
                },
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"app": "g"}},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ],
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 3,
                            "podAffinityTerm": {
                                "labelSelector": {
                                    "matchExpressions": [{"key": "app", "operator": "In", "values": ["g"]}]
                                },
                                "topologyKey": "zone",
                            },
                        }
                    ],
                },
            },
        )
        p["metadata"].update(
            {
                "labels": {"app": "g"},
                "creationTimestamp": NOW,
                "annotations": {"scheduling.k8s.io/group-name": "g", "volcano.sh/task-spec": "w"},
            }
        )
        p["status"] = (
            {"phase": "Pending", "nominatedNodeName": "n1"} if i else {"phase": "Running", "startTime": NOW}
        )
        if not i:
            p["spec"]["nodeName"] = "n1"
        return p

    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {
            "name": "q",
            "annotations": {"volcano.sh/hierarchy": "root/q", "volcano.sh/hierarchy-weights": "1/2"},
        },
        "spec": {
            "weight": 2,
            "capability": {"nvidia.com/gpu": "16"},
            "deserved": {"cpu": "4"},
            "guarantee": {"resource": {"cpu": "1"}},
            "parent": "root",
            "reclaimable": True,
        },
        "status": {"state": "Open"},
    }
    kai_queue = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "k"},
        "spec": {
            "parentQueue": "q",
            "resources": {"gpu": {"quota": 2, "limit": -1, "overQuotaWeight": 1}},
            "preemptMinRuntime": "5m",
        },
    }
    kai_pg = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "kg", "namespace": "default"},
        "spec": {"minMember": 1, "queue": "k", "topologyConstraint": {"requiredTopologyLevel": "rack"}},
    }
    kai_pod = pod("kp", containers=[{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}])
    kai_pod["metadata"]["labels"] = {"pod-group-name": "kg"}
    node = copy.deepcopy(NODE)
    node["spec"] = {"taints": [{"key": "t", "value": "v", "effect": "NoSchedule"}], "unschedulable": False}
    node["metadata"]["labels"]["kubernetes.io/hostname"] = "n1"
    hn = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "s1"},
        "spec": {
            "tier": 1,
            "members": [
                {"type": "Node", "selector": {"exactMatch": {"name": "n1"}}},
                {"type": "Node", "selector": {"regexMatch": {"pattern": "n.*"}}},
                {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"zone": "a"}}}},
            ],
        },
    }
    hn2 = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "s2"},
        "spec": {"tier": 2, "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": "s1"}}}]},
    }
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "hi"},
        "value": 100,
        "globalDefault": False,
    }
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "g"}}},
    }
    return [node, queue, kai_queue, hn, hn2, pc, pdb, gang, member(0), member(1), member(2), kai_pg, kai_pod]


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(["", "x", "-1", "2x", "1e400", "n1"]),
    st.lists(st.sampled_from(["a", 1]), max_size=2),
    st.dictionaries(st.sampled_from(["a", "name"]), st.sampled_from(["b", 0]), max_size=2),
)
BASE = _valid_snapshot()
PATHS = [(i, p) for i, d in enumerate(BASE) for p in paths_of(d) if p]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PATHS), JUNK, st.booleans()), min_size=1, max_size=3))
def test_damaged_snapshot_never_crashes(damage: list) -> None:
    objs = copy.deepcopy(BASE)
    for (i, path), junk, delete in damage:
        parent = objs[i]
        try:
            for key in path[:-1]:
                parent = parent[key]
            if delete and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = junk
        except (KeyError, IndexError, TypeError):
            continue  # an earlier damage removed this path
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "snap.yaml"
        path.write_text(yaml.safe_dump_all(objs))
        result = run("schedule", str(path), "--now", NOW, "-o", "json", "--cycles", "2")
        assert "Traceback" not in result.output
        assert result.exit_code in (0, 2), (result.exit_code, result.output, damage)
        if result.exit_code == 2:
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            assert len(lines) == 1 and lines[0].startswith("error: ") and str(path) in lines[0], result.stderr
        else:
            json.loads(result.stdout)


def test_the_undamaged_fuzz_base_is_valid(tmp_path: Path) -> None:
    path = write(tmp_path, "snap.yaml", yaml.safe_dump_all(BASE))
    result = run("schedule", str(path), "--now", NOW, "-o", "json")
    assert result.exit_code == 0, result.output
