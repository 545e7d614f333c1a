"""Volcano configurations and objects work unchanged (SPEC.md §1.2, §3.1): the configurations Volcano's
installer and user guides use (fixtures in volcano_configs/, written for this project) validate and run;
Volcano's switch spellings; the scheduler ConfigMap; fixed, inert and refused names; minResources keys
as Volcano's job controller writes them; snapshot objects corral does not serve."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from corral.cli import EXAMPLE, app
from corral.errors import ConfigError
from corral.framework.config import load_config_file, parse_config
from corral.framework.session import Session
from corral.manifests.build import build_cluster
from corral.manifests.kinds import min_resources
from corral.registry import REGISTRY

CONFIGS = sorted((Path(__file__).parent / "volcano_configs").glob("*"))
NOW = "2026-01-01T00:00:00Z"
BASE = {"actions": "enqueue, allocate", "tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"}]}]}


def parse(raw) -> object:
    return parse_config(raw, REGISTRY, "sched.yaml")


def err(raw) -> str:
    with pytest.raises(ConfigError) as e:
        parse(raw)
    assert e.value.exit_code == 2
    return str(e.value)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_volcano_configurations_validate_and_run(path: Path) -> None:
    load_config_file(path, REGISTRY)
    runner = CliRunner()
    result = runner.invoke(app, ["validate", str(EXAMPLE), "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok:") and str(path) in result.stdout
    result = runner.invoke(app, ["schedule", str(EXAMPLE), "--config", str(path), "--now", NOW, "-o", "json"])
    assert result.exit_code == 0, result.output
    assert '"binds"' in result.stdout


def test_configmap_is_unwrapped() -> None:
    folder = Path(__file__).parent / "volcano_configs"
    wrapped = load_config_file(folder / "installer_configmap.yaml", REGISTRY)
    plain = load_config_file(folder / "installer_default.conf", REGISTRY)
    assert (
        [a.name for a in wrapped.actions]
        == [a.name for a in plain.actions]
        == ["enqueue", "allocate", "backfill"]
    )
    assert [[p.name for p in t] for t in wrapped.tiers] == [[p.name for p in t] for t in plain.tiers]
    text = yaml.safe_dump(BASE)
    cfg = parse({"apiVersion": "v1", "kind": "ConfigMap", "data": {"scheduler.yaml": text}})  # a single key
    assert [a.name for a in cfg.actions] == ["enqueue", "allocate"]
    assert "volcano-scheduler.conf" in err({"kind": "ConfigMap", "data": {"a": text, "b": text}})
    assert "malformed YAML" in err({"kind": "ConfigMap", "data": {"volcano-scheduler.conf": "actions: [\n"}})
    assert "needs data" in err({"kind": "ConfigMap", "data": {}})


def test_volcano_switch_spellings_mean_the_same_switch() -> None:
    both = dict(
        BASE,
        tiers=[
            {
                "plugins": [
                    {"name": "proportion", "enabledOverused": False, "enabledAllocatable": False},
                    {"name": "conformance", "enabledVictim": False},
                    {
                        "name": "network-topology-aware",
                        "enabledHyperNodeOrder": False,
                        "enabledHyperNodeGradient": False,
                        "enabledClusterOrder": True,
                    },
                ]
            }
        ],
    )
    cfg = parse(both)
    prop = cfg.plugin("proportion")
    assert not prop.enabled("enableOverused") and not prop.enabled("enableAllocatable")
    assert not cfg.plugin("conformance").enabled("enableVictim")
    topo = cfg.plugin("network-topology-aware")
    assert not topo.enabled("enableHyperNodeOrder") and not topo.enabled("enableGangSearchSpace")
    cluster = build_cluster([("s", yaml.safe_load(EXAMPLE.read_text().split("---")[0]))])
    session = Session(cluster, cfg, REGISTRY, 0.0)
    owners = {fn.__self__.name for row in session.points["Overused"] for fn in row}
    assert "proportion" not in owners
    # corral's own spelling stays accepted, and the two may not contradict each other
    assert (
        not parse(dict(BASE, tiers=[{"plugins": [{"name": "proportion", "enableOverused": False}]}]))
        .plugin("proportion")
        .enabled("enableOverused")
    )
    assert "contradicts" in err(
        dict(
            BASE,
            tiers=[{"plugins": [{"name": "proportion", "enableOverused": True, "enabledOverused": False}]}],
        )
    )
    assert "unknown switch 'enabledJobOrder'" in err(
        dict(BASE, tiers=[{"plugins": [{"name": "priority", "enabledJobOrder": True}]}])
    )


def test_fixed_action_arguments_are_type_checked() -> None:
    cfg = parse(
        dict(
            BASE,
            actions="enqueue, allocate, preempt",
            configurations=[
                {
                    "name": "preempt",
                    "arguments": {"enableTopologyAwarePreemption": False, "maxCandidateNodesAbsolute": 5},
                }
            ],
        )
    )
    preempt = next(a for a in cfg.actions if a.name == "preempt")
    assert preempt.args.max_candidates == 5
    assert "expected true or false" in err(
        dict(BASE, configurations=[{"name": "preempt", "arguments": {"enableTopologyAwarePreemption": 3}}])
    )
    line = err(dict(BASE, configurations=[{"name": "reclaim", "arguments": {"nope": 1}}]))
    assert "unknown argument 'nope'" in line and "predicateErrorCacheEnable" in line  # the allowed keys


def test_refused_and_inert_names() -> None:
    line = err(dict(BASE, tiers=[{"plugins": [{"name": "tdm"}]}]))
    assert (
        "'tdm' is a Volcano plugin corral does not implement" in line and "tiers[0].plugins[0].name" in line
    )
    assert "minruntime" in err(dict(BASE, tiers=[{"plugins": [{"name": "cdp"}]}]))
    assert "Volcano action corral does not implement" in err(dict(BASE, actions="enqueue, dequeue"))
    assert "unknown plugin 'nosuch'" in err(dict(BASE, tiers=[{"plugins": [{"name": "nosuch"}]}]))
    cfg = parse(
        dict(
            BASE,
            actions="enqueue, allocate, shuffle",
            tiers=[{"plugins": [{"name": "resourcequota"}, {"name": "usage", "arguments": {"x": 1}}]}],
        )
    )
    assert [a.name for a in cfg.actions][-1] == "shuffle" and cfg.plugin("usage") is not None


def test_gpu_sharing_predicate_brings_the_gpushare_plugin() -> None:
    cfg = parse(
        dict(
            BASE,
            tiers=[{"plugins": [{"name": "predicates", "arguments": {"predicate.GPUSharingEnable": True}}]}],
        )
    )
    assert [p.name for p in cfg.tiers[0]] == ["predicates", "gpushare"]
    cfg = parse(
        dict(
            BASE,
            tiers=[
                {
                    "plugins": [
                        {"name": "gpushare"},
                        {"name": "predicates", "arguments": {"predicate.GPUSharingEnable": True}},
                    ]
                }
            ],
        )
    )
    assert [p.name for p in cfg.tiers[0]] == ["gpushare", "predicates"]


def test_min_resources_keys_as_volcano_reads_them() -> None:
    written = {
        "count/pods": 2,
        "count/persistentvolumeclaims": 1,
        "pods": 2,
        "cpu": 2,
        "requests.cpu": 2,
        "limits.cpu": 4,
        "limits.memory": 8,
        "requests.nvidia.com/gpu": 16,
    }
    assert min_resources(written) == {"pods": 2, "cpu": 2, "memory": 8, "nvidia.com/gpu": 16}


def test_objects_of_other_groups_are_skipped_with_one_line(caplog) -> None:
    node = yaml.safe_load(EXAMPLE.read_text().split("---")[0])
    others = [
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "coscheduled", "namespace": "ml"},
            "spec": {"minMember": 3},
        },
        {  # a batch Job of the default scheduler (one for kai-scheduler, or a Volcano Job, is expanded)
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "vj", "namespace": "ml"},
            "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
        },
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ml"}},
    ]
    with caplog.at_level(logging.WARNING, logger="corral"):
        cluster = build_cluster([("snap.yaml", node)] + [("snap.yaml", o) for o in others])
    assert len(cluster.nodes) == 1 and not cluster.jobs
    lines = [r.getMessage() for r in caplog.records if r.name == "corral"]
    assert len(lines) == 1
    for part in (
        "PodGroup (scheduling.x-k8s.io/v1alpha1): ml/coscheduled",
        "Job (batch/v1): ml/vj",
        "Deployment (apps/v1): ml/web",
    ):
        assert part in lines[0]


def test_overcommit_factor_from_plugin_else_enqueue() -> None:
    node = yaml.safe_load(EXAMPLE.read_text().split("---")[0])

    def factor(raw) -> float:
        cluster = build_cluster([("s", node)])
        session = Session(cluster, parse(raw), REGISTRY, 0.0)
        plugin = session.plugin("overcommit")
        plugin.on_session_open()
        return plugin.factor

    tiers = [{"plugins": [{"name": "overcommit"}]}]
    assert factor(dict(BASE, tiers=tiers)) == 1.2
    assert (
        factor(
            dict(
                BASE,
                tiers=tiers,
                configurations=[{"name": "enqueue", "arguments": {"overcommit-factor": 2.0}}],
            )
        )
        == 2.0
    )
    own = [{"plugins": [{"name": "overcommit", "arguments": {"overcommit-factor": 1.5}}]}]
    assert (
        factor(
            dict(
                BASE, tiers=own, configurations=[{"name": "enqueue", "arguments": {"overcommit-factor": 2.0}}]
            )
        )
        == 1.5
    )
    assert "at least" in err(
        dict(BASE, tiers=[{"plugins": [{"name": "overcommit", "arguments": {"overcommit-factor": 0.5}}]}])
    )
