"""Configuration loading and validation (corral.framework.config), against a test-only registry and
against the real one (the built-in default and Volcano's documented example must load)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.errors import ConfigError
from corral.framework.config import SWITCHES, load_config_file, parse_config
from corral.registry import DEFAULT_CONFIG, REGISTRY, default_config
from tests.framework.fakes import KnobArgs, NoopAction, WaitAction, registry

REG = registry()


def parse(raw: object, file: str = "sched.yaml"):
    return parse_config(raw, REG, file)


def err(raw: object) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        parse(raw)
    assert e.value.file == "sched.yaml" and e.value.exit_code == 2
    return e.value


def test_minimal_and_shapes() -> None:
    cfg = parse({"actions": "noop", "tiers": [{"plugins": ["knob"]}]})
    assert [a.name for a in cfg.actions] == ["noop"]
    (tier,) = cfg.tiers
    assert tier[0].name == "knob" and tier[0].args == KnobArgs() and cfg.source == "sched.yaml"
    assert cfg.plugin("knob") is tier[0] and cfg.plugin("nope") is None
    assert parse({"actions": "noop"}).tiers == ()


def test_action_names_are_case_insensitive_and_aliased() -> None:
    cfg = parse({"actions": " NoOp , WAIT ", "tiers": []})
    assert [a.name for a in cfg.actions] == ["noop", "wait"]
    assert [a.name for a in parse({"actions": "no-op", "tiers": []}).actions] == ["noop"]


def test_plugin_names_are_case_insensitive() -> None:
    assert parse({"actions": "noop", "tiers": [{"plugins": [{"name": "KNOB"}]}]}).tiers[0][0].name == "KNOB"


def test_arguments_are_typed() -> None:
    cfg = parse(
        {
            "actions": "noop",
            "tiers": [
                {
                    "plugins": [
                        {
                            "name": "knob",
                            "arguments": {
                                "knob.flag": "true",
                                "knob.count": "3",
                                "knob.weight": 2,
                                "knob.mode": "slow",
                                "knob.grace": "1m30s",
                                "knob.per.nvidia.com/gpu": 4,
                                "knob.per.cpu": "0.5",
                            },
                        }
                    ]
                }
            ],
        }
    )
    a = cfg.tiers[0][0].args
    assert (a.flag, a.count, a.weight, a.mode, a.grace) == (True, 3, 2.0, "slow", 90.0)
    assert a.per == {"nvidia.com/gpu": 4.0, "cpu": 0.5}


def test_action_arguments_from_configurations() -> None:
    cfg = parse({"actions": "noop, wait", "configurations": [{"name": "WAIT", "arguments": {"rounds": 4}}]})
    assert cfg.actions[1].args.rounds == 4
    assert parse({"actions": "wait"}).actions[0].args.rounds == 1


def test_switches() -> None:
    cfg = parse(
        {
            "actions": "noop",
            "tiers": [{"plugins": [{"name": "knob", "enableJobOrder": False, "enableHierarchy": True}]}],
        }
    )
    pc = cfg.tiers[0][0]
    assert not pc.enabled("enableJobOrder") and pc.enabled("enableQueueOrder") and pc.enabled(None)
    assert pc.switches == {"enableJobOrder": False, "enableHierarchy": True}
    assert "enablePreemptable" in SWITCHES and "enableHierarchy" in SWITCHES


@pytest.mark.parametrize(
    "raw, field, words",
    [
        ({"actions": "noop, teleport"}, "actions", ["'teleport'", "allowed: noop, wait"]),
        ({"actions": "noop, noop"}, "actions", ["twice"]),
        ({"actions": ""}, "actions", []),
        ({"actions": ["noop"]}, "actions", []),
        ({"tiers": []}, "actions", []),
        ({"actions": "noop", "tires": []}, "tires", ["unknown key"]),
        ({"actions": "noop", "tiers": {"plugins": []}}, "tiers", []),
        ({"actions": "noop", "tiers": [{"plugin": []}]}, "tiers[0]", []),
        (
            {"actions": "noop", "tiers": [{"plugins": [{"name": "magic"}]}]},
            "tiers[0].plugins[0].name",
            ["'magic'", "allowed: knob"],
        ),
        ({"actions": "noop", "tiers": [{"plugins": [{"arguments": {}}]}]}, "tiers[0].plugins[0]", []),
        (
            {"actions": "noop", "tiers": [{"plugins": ["knob"]}, {"plugins": ["knob"]}]},
            "tiers[1].plugins[0].name",
            ["twice"],
        ),
        (
            {"actions": "noop", "tiers": [{"plugins": [{"name": "knob", "enableMagic": True}]}]},
            "tiers[0].plugins[0].enableMagic",
            ["unknown switch", "allowed: arguments", "enableJobOrder"],
        ),
        (
            {"actions": "noop", "tiers": [{"plugins": [{"name": "knob", "enableJobOrder": "no"}]}]},
            "tiers[0].plugins[0].enableJobOrder",
            ["true or false"],
        ),
        (
            {"actions": "noop", "tiers": [{"plugins": [{"name": "knob", "arguments": {"knob.flg": True}}]}]},
            "tiers[0].plugins[0].arguments.knob.flg",
            ["unknown argument", "knob.flag", "knob.per.<name>"],
        ),
        (
            {"actions": "noop", "tiers": [{"plugins": [{"name": "knob", "arguments": ["knob.flag"]}]}]},
            "tiers[0].plugins[0].arguments",
            ["mapping"],
        ),
        (
            {
                "actions": "noop",
                "tiers": [{"plugins": [{"name": "knob", "arguments": {"knob.flag": "maybe"}}]}],
            },
            "tiers[0].plugins[0].arguments.knob.flag",
            ["true or false"],
        ),
        (
            {"actions": "noop", "tiers": [{"plugins": [{"name": "knob", "arguments": {"knob.count": 1.5}}]}]},
            "tiers[0].plugins[0].arguments.knob.count",
            ["integer"],
        ),
        (
            {
                "actions": "noop",
                "tiers": [{"plugins": [{"name": "knob", "arguments": {"knob.count": True}}]}],
            },
            "tiers[0].plugins[0].arguments.knob.count",
            ["integer"],
        ),
        (
            {
                "actions": "noop",
                "tiers": [{"plugins": [{"name": "knob", "arguments": {"knob.weight": "heavy"}}]}],
            },
            "tiers[0].plugins[0].arguments.knob.weight",
            ["number"],
        ),
        (
            {
                "actions": "noop",
                "tiers": [{"plugins": [{"name": "knob", "arguments": {"knob.weight": False}}]}],
            },
            "tiers[0].plugins[0].arguments.knob.weight",
            ["number"],
        ),
        (
            {
                "actions": "noop",
                "tiers": [{"plugins": [{"name": "knob", "arguments": {"knob.mode": "medium"}}]}],
            },
            "tiers[0].plugins[0].arguments.knob.mode",
            ["allowed: fast, slow"],
        ),
        (
            {
                "actions": "noop",
                "tiers": [{"plugins": [{"name": "knob", "arguments": {"knob.mode": ["fast"]}}]}],
            },
            "tiers[0].plugins[0].arguments.knob.mode",
            ["string"],
        ),
        (
            {
                "actions": "noop",
                "tiers": [{"plugins": [{"name": "knob", "arguments": {"knob.grace": "soon"}}]}],
            },
            "tiers[0].plugins[0].arguments.knob.grace",
            ["duration"],
        ),
        (
            {
                "actions": "noop",
                "tiers": [{"plugins": [{"name": "knob", "arguments": {"knob.per.gpu": "x"}}]}],
            },
            "tiers[0].plugins[0].arguments.knob.per.gpu",
            ["number"],
        ),
        (
            {"actions": "wait", "configurations": [{"name": "teleport"}]},
            "configurations[0].name",
            ["'teleport'"],
        ),
        ({"actions": "wait", "configurations": ["wait"]}, "configurations[0]", []),
        (
            {"actions": "wait", "configurations": [{"name": "wait", "arguments": {"round": 2}}]},
            "configurations[0].arguments.round",
            ["allowed: rounds"],
        ),
        (
            {"actions": "wait", "configurations": [{"name": "wait", "arguments": {"rounds": "two"}}]},
            "configurations[0].arguments.rounds",
            ["integer"],
        ),
    ],
)
def test_errors_name_the_path_and_the_allowed_values(raw: dict, field: str, words: list[str]) -> None:
    e = err(raw)
    assert e.field == field, e.describe()
    for w in words:
        assert w in e.message, e.message


def test_not_a_mapping() -> None:
    with pytest.raises(ConfigError):
        parse(["actions"])


def test_load_config_file(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text('actions: "noop"\ntiers:\n- plugins:\n  - name: knob\n    arguments: {knob.count: 2}\n')
    cfg = load_config_file(f, REG)
    assert cfg.source == str(f) and cfg.tiers[0][0].args.count == 2
    f.write_text("actions: [noop\n")
    with pytest.raises(ConfigError, match="malformed YAML") as e:
        load_config_file(f, REG)
    assert e.value.file == str(f)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config_file(tmp_path / "missing.yaml", REG)


def test_real_registry_default_and_volcano_example_load() -> None:
    cfg = default_config()
    assert [a.name for a in cfg.actions][:3] == ["enqueue", "allocate", "backfill"]
    assert parse_config(DEFAULT_CONFIG, REGISTRY).tiers == cfg.tiers
    volcano = {
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
                    {"name": "drf", "enablePreemptable": False},
                    {"name": "predicates"},
                    {"name": "proportion"},
                    {"name": "nodeorder"},
                    {"name": "binpack", "arguments": {"binpack.weight": 10}},
                ]
            },
        ],
        "configurations": [{"name": "enqueue", "arguments": {"overcommit-factor": 1.5}}],
    }
    real = parse_config(volcano, REGISTRY, "volcano.yaml")
    assert real.plugin("binpack").args.weight == 10 and real.actions[0].args.overcommit_factor == 1.5
    assert not real.plugin("gang").enabled("enablePreemptable")


def test_fake_actions_are_registered() -> None:
    assert REG.action_class("NOOP") is NoopAction and REG.action_class("wait") is WaitAction
