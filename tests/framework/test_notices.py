"""corral validate and corral schedule warn, per object, about what they accept but will not act on
(framework/notices.py): a topology constraint no plugin enforces, arguments read without effect."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from corral.cli import app
from corral.framework.config import parse_config
from corral.framework.notices import config_notices
from corral.registry import REGISTRY
from tests.scenarios.expand import expand

NOW = "2026-01-01T00:00:00Z"
PEERS = Path(__file__).resolve().parents[3] / "shared" / "peers" / "volcano" / "volcano-scheduler.conf"

#: Volcano's shipped scheduler configuration (installer/helm/chart/volcano/config/volcano-scheduler.conf)
VOLCANO_CONF = {
    "actions": "enqueue, allocate, backfill",
    "tiers": [
        {
            "plugins": [
                {"name": "priority"},
                {"name": "gang", "enablePreemptable": False},
                {"name": "conformance"},
            ]
        },
        {
            "plugins": [
                {"name": "overcommit"},
                {"name": "drf", "enablePreemptable": False},
                {"name": "predicates"},
                {"name": "proportion"},
                {"name": "nodeorder"},
                {"name": "binpack"},
            ]
        },
    ],
}

CASE = {
    "hypernodes": [
        {"name": "s1", "tier": 1, "nodes": ["n1", "n2"]},
        {"name": "s2", "tier": 1, "nodes": ["n3", "n4"]},
        {"name": "spine", "tier": 2, "hypernodes": ["s1", "s2"]},
    ],
    "nodes": [{"name": f"n{i}"} for i in range(1, 5)],
    "jobs": [
        {"name": "g", "networkTopology": {"mode": "hard", "highestTierAllowed": 1}, "pods": [{"count": 2}]},
        {
            "name": "h",
            "subGroupPolicy": [{"name": "p", "networkTopology": {"mode": "soft"}}],
            "pods": [{"count": 2}],
        },
        {"name": "plain", "pods": [{"count": 1}]},
    ],
}


def _files(tmp_path: Path, conf: dict) -> tuple[Path, Path]:
    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump_all(expand(CASE)))
    cfg = tmp_path / "conf.yaml"
    cfg.write_text(yaml.safe_dump(conf))
    return snap, cfg


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("warning:")]


def test_validate_warns_once_per_podgroup_field_naming_the_plugin(tmp_path: Path) -> None:
    conf = yaml.safe_load(PEERS.read_text()) if PEERS.exists() else VOLCANO_CONF
    snap, cfg = _files(tmp_path, conf)
    result = CliRunner().invoke(app, ["validate", str(snap), "-c", str(cfg)])
    assert result.exit_code == 0, result.output
    got = _warnings(result.stderr)
    assert len(got) == 2, got
    assert got[0].startswith(
        "warning: PodGroup default/g: spec.networkTopology: (hard, tier <= 1) not enforced"
    )
    assert got[1].startswith("warning: PodGroup default/h: spec.subGroupPolicy[p].networkTopology: (soft")
    assert all("add network-topology-aware to the configuration" in line for line in got)
    assert "2 warnings" in result.stdout


def test_schedule_warns_on_stderr_and_in_the_decisions_once(tmp_path: Path) -> None:
    snap, cfg = _files(tmp_path, VOLCANO_CONF)
    result = CliRunner().invoke(
        app, ["schedule", str(snap), "-c", str(cfg), "--now", NOW, "--cycles", "3", "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    assert len(_warnings(result.stderr)) == 2
    out = json.loads(result.stdout)
    assert [(w["podgroup"], w["field"], w["cycle"]) for w in out["warnings"]] == [
        ("default/g", "spec.networkTopology", 1),
        ("default/h", "spec.subGroupPolicy[p].networkTopology", 1),
    ]


def test_default_config_enforces_topology_no_warning(tmp_path: Path) -> None:
    snap, _ = _files(tmp_path, VOLCANO_CONF)
    result = CliRunner().invoke(app, ["validate", str(snap)])
    assert result.exit_code == 0 and not _warnings(result.stderr), result.output


def test_snapshot_without_hypernodes_warns_even_with_the_plugin(tmp_path: Path) -> None:
    case = {**CASE, "hypernodes": []}
    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump_all(expand(case)))
    result = CliRunner().invoke(app, ["validate", str(snap)])
    assert any("the snapshot has no HyperNode" in line for line in _warnings(result.stderr)), result.stderr


def test_config_notices_name_unread_binpack_arguments() -> None:
    conf = parse_config(
        {
            "actions": "allocate",
            "tiers": [
                {
                    "plugins": [
                        {
                            "name": "network-topology-aware",
                            "arguments": {
                                "hypernode.binpack.resources": "nvidia.com/gpu",
                                "hypernode.binpack.resources.example.com/foo": 3,
                                "hypernode.binpack.normal-pod.enable": False,
                                "hypernode.binpack.normal-pod.fading": 0.5,
                            },
                        }
                    ]
                }
            ],
        },
        REGISTRY,
        "t",
    )
    fields = [n.field for n in config_notices(conf)]
    assert fields == [
        "tiers[0].plugins[0].arguments.hypernode.binpack.resources.example.com/foo",
        "tiers[0].plugins[0].arguments.hypernode.binpack.normal-pod.fading",
    ]


def _conf(plugin: dict) -> dict:
    return {"actions": "enqueue, allocate", "tiers": [{"plugins": [{"name": "gang"}, plugin]}]}


def test_deviceshare_refuses_what_corral_does_not_model_by_name(tmp_path: Path) -> None:
    for key in (
        "deviceshare.VGPUEnable",
        "deviceshare.GPUNumberEnable",
        "deviceshare.ASCEND310PVNPUEnable",
    ):
        snap, cfg = _files(tmp_path, _conf({"name": "deviceshare", "arguments": {key: True}}))
        result = CliRunner().invoke(app, ["validate", str(snap), "-c", str(cfg)])
        assert result.exit_code == 2, result.output
        assert f"field tiers[0].plugins[1].arguments.{key}" in result.stderr
        assert "is not served" in result.stderr
    both = {"deviceshare.GPUSharingEnable": True, "deviceshare.GPUNumberEnable": True}
    snap, cfg = _files(tmp_path, _conf({"name": "deviceshare", "arguments": both}))
    result = CliRunner().invoke(app, ["validate", str(snap), "-c", str(cfg)])
    assert result.exit_code == 2 and "is not served" in result.stderr


def test_deviceshare_inert_arguments_are_named(tmp_path: Path) -> None:
    args = {
        "deviceshare.GPUSharingEnable": True,
        "deviceshare.NodeLockEnable": True,
        "deviceshare.SchedulePolicy": "binpack",
        "deviceshare.ScheduleWeight": 10,
    }
    snap, cfg = _files(tmp_path, _conf({"name": "deviceshare", "arguments": args}))
    result = CliRunner().invoke(app, ["validate", str(snap), "-c", str(cfg)])
    assert result.exit_code == 0, result.output
    got = _warnings(result.stderr)
    assert any("deviceshare.NodeLockEnable: no effect" in line for line in got), got
    assert any("deviceshare.SchedulePolicy: no effect" in line for line in got), got


def test_capacity_dra_quota_keys_nothing_charges_are_named(tmp_path: Path) -> None:
    case = {
        **CASE,
        "queues": [
            {
                "name": "gpu-team",
                "capability": {
                    "cpu": "64",
                    "deviceclass/gpu.nvidia.com": "8",
                    "memory.deviceclass/vgpu": "80Gi",
                },
            }
        ],
    }
    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump_all(expand(case)))

    def warnings(args: dict) -> list[str]:
        cfg = tmp_path / "conf.yaml"
        cfg.write_text(yaml.safe_dump(_conf({"name": "capacity", "arguments": args})))
        result = CliRunner().invoke(app, ["validate", str(snap), "-c", str(cfg)])
        assert result.exit_code == 0, result.output
        return _warnings(result.stderr)

    # switch on: deviceclass/ keys are charged (corral.dra); the consumable key is not
    got = warnings(
        {"capacity.DynamicResourceAllocationEnable": True, "capacity.DRAConsumableCapacityEnable": True}
    )
    assert any(
        line.startswith("warning: config: tiers[0].plugins[1].arguments: capacity.DRAConsumable")
        for line in got
    ), got
    assert any(
        line.startswith("warning: Queue gpu-team: spec.capability: memory.deviceclass/vgpu not enforced")
        for line in got
    ), got
    # switch off (Volcano's default): claims count in no queue, so the deviceclass/ key is not enforced
    got = warnings({})
    assert any("deviceclass/gpu.nvidia.com, memory.deviceclass/vgpu not enforced" in line for line in got), (
        got
    )


def test_soft_tier_name_naming_no_hypernode_is_named(tmp_path: Path) -> None:
    case = {
        **CASE,
        "jobs": [{"name": "s", "networkTopology": {"mode": "soft", "highestTierName": "rack"}, "pods": [{}]}],
    }
    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump_all(expand(case)))
    result = CliRunner().invoke(app, ["validate", str(snap)])
    assert result.exit_code == 0, result.output
    assert _warnings(result.stderr) == [
        "warning: PodGroup default/s: spec.networkTopology.highestTierName: 'rack' names no HyperNode's "
        "tierName: in soft mode no tier is preferred by it; fix the name"
    ]


# -- one channel (model/notes.py) ----------------------------------------------------------------------


def test_validate_prints_every_configuration_warning_on_stderr_and_counts_it(tmp_path: Path) -> None:
    """KAI's configuration warnings (GPU sharing without gpushare) go the way of every configuration
    warning: one line each on stderr, counted in the ``ok:`` line; the loader's KAI warnings go with the
    reader's, one line per object on stdout."""
    from tests.manifests.test_build import node, podgroup
    from tests.manifests.test_kai import KAI, kai_pod

    objs = [
        node(),
        podgroup("g", api=KAI, phase=None, subGroups=[{"name": "a", "minMember": 1, "minSubGroup": 2}]),
        kai_pod("p", "g", "a", **{"gpu-fraction": "0.5"}),
    ]
    snap = tmp_path / "s.yaml"
    snap.write_text(yaml.safe_dump_all(objs))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(_conf({"name": "predicates"})))
    result = CliRunner().invoke(app, ["validate", str(snap), "-c", str(cfg)])
    assert result.exit_code == 0, result.output
    assert _warnings(result.stderr) == [
        "warning: Pod default/p: its GPU-sharing annotations are held only to the node's GPU total: add the "
        "gpushare plugin to the configuration to hold them to each device"
    ]
    assert _warnings(result.stdout) == [
        "warning: PodGroup default/g: spec.subGroups[0].minSubGroup is not used: 'a' has no sub-groups"
    ]
    assert "; 1 objects with warnings; 1 warnings" in result.stdout
    # corral schedule prints the objects' warnings, the loader's KAI ones among them, before its cycles
    result = CliRunner().invoke(app, ["schedule", str(snap), "-c", str(cfg), "--now", NOW, "-o", "json"])
    assert result.exit_code == 0, result.output
    assert _warnings(result.stderr) == [
        "warning: PodGroup default/g: spec.subGroups[0].minSubGroup is not used: 'a' has no sub-groups"
    ]


def test_warned_tells_each_object_once_and_again_when_its_text_changes() -> None:
    from corral.framework.notices import Warned
    from corral.model.notes import Note

    w = Warned()
    a, b = Note("PodGroup ns/a", "spec.x", "one"), Note("PodGroup ns/b", "", "two")
    assert [obj for obj, _ in w.fresh([a, b])] == ["PodGroup ns/a", "PodGroup ns/b"]
    assert w.fresh([a, b]) == []
    a2 = Note("PodGroup ns/a", "spec.x", "changed")
    assert w.fresh([a2, b]) == [("PodGroup ns/a", [a2])]
    assert w.fresh([b]) == []  # a has no warning now: forgotten
    assert w.fresh([a2, b]) == [("PodGroup ns/a", [a2])]  # so its next warning is told


def test_a_warning_line_escapes_control_characters() -> None:
    from corral.model.notes import Note, Notes

    notes = Notes()
    notes.warn("Queue q", "spec.a", "bad\x1b[31m value")
    assert notes.warning_lines() == ["warning: Queue q: spec.a: bad\\x1b[31m value"]
    assert Note("config", "x", "y\n").line() == "warning: config: x: y\\n"
