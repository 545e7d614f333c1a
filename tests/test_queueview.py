"""``corral queues``: the queue tree with what the fair-share plugin computes (src/corral/queueview.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from corral.cli import app
from tests.scenarios.expand import expand

NOW = "2026-01-01T02:00:00Z"
CAPACITY = {
    "actions": "enqueue, allocate, backfill",
    "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
        {"plugins": [{"name": "drf"}, {"name": "predicates"}, {"name": "capacity"}, {"name": "nodeorder"}]},
    ],
}
CASE = {
    "nodes": [{"name": "n1"}, {"name": "n2"}, {"name": "n3"}],
    "queues": [
        {"name": "eng", "capability": {"nvidia.com/gpu": 8}},
        {"name": "eng-a", "parent": "eng", "deserved": {"nvidia.com/gpu": 8}},
        {"name": "eng-b", "parent": "eng", "guarantee": {"resource": {"nvidia.com/gpu": 2}}},
        {"name": "other"},
    ],
    "jobs": [
        {
            "name": "ra",
            "queue": "eng-a",
            "phase": "Running",
            "pods": [{"count": 1, "gpu": 8, "nodes": ["n1"]}],
        },
        {"name": "b", "queue": "eng-b", "pods": [{"count": 2, "gpu": 4}]},
        {"name": "o", "queue": "other", "pods": [{"count": 1, "gpu": 8}]},
    ],
}


def _files(tmp: Path, config: dict[str, Any] | None = CAPACITY) -> list[str]:
    snap = tmp / "snap.yaml"
    snap.write_text(yaml.safe_dump_all(expand(CASE)))
    args = [str(snap), "--now", NOW]
    if config is not None:
        cfg = tmp / "c.yaml"
        cfg.write_text(yaml.safe_dump(config))
        args += ["--config", str(cfg)]
    return args


def _json(tmp: Path, config: dict[str, Any] | None = CAPACITY) -> dict[str, Any]:
    res = CliRunner().invoke(app, ["queues", *_files(tmp, config), "-o", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_the_tree_with_capacitys_numbers(tmp_path: Path) -> None:
    got = _json(tmp_path)
    assert got["deservedFrom"] == "capacity"
    rows = {q["name"]: q for q in got["queues"]}
    names = [q["name"] for q in got["queues"]]
    assert names.index("eng") + 1 == names.index("eng-a") and names.index("eng-a") + 1 == names.index("eng-b")
    assert rows["eng-a"]["parent"] == "eng" and rows["eng"]["parent"] is None
    assert (
        rows["eng-a"]["allocated"]["nvidia.com/gpu"] == "8"
        and rows["eng-a"]["deserved"]["nvidia.com/gpu"] == "8"
    )
    assert rows["eng-a"]["share"] == 1.0
    assert rows["eng"]["allocated"]["nvidia.com/gpu"] == "8"  # its children's use, summed up
    assert rows["eng"]["capability"] == {"nvidia.com/gpu": "8"} and rows["other"]["capability"] == {}
    assert rows["eng-b"]["guarantee"] == {"nvidia.com/gpu": "2"}
    assert rows["eng-b"]["pending"]["nvidia.com/gpu"] == "8" and rows["eng-b"]["waitingPodgroups"] == 1
    assert rows["eng"]["pending"]["nvidia.com/gpu"] == "8" and rows["eng"]["runningPodgroups"] == 1
    assert rows["other"]["waitingPodgroups"] == 1 and rows["other"]["runningPodgroups"] == 0


def test_without_a_fair_share_plugin_deserved_is_empty_and_says_why(tmp_path: Path) -> None:
    config = {
        "actions": "enqueue, allocate",
        "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}]}],
    }
    got = _json(tmp_path, config)
    assert got["deservedFrom"].startswith("no deserved shares")
    rows = {q["name"]: q for q in got["queues"]}
    assert rows["eng-a"]["deserved"] is None and rows["eng-a"]["share"] is None
    assert rows["eng"]["allocated"]["nvidia.com/gpu"] == "8"


def test_the_table_indents_children(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["queues", *_files(tmp_path)])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert "; deserved: capacity)" in res.stdout
    assert any("│   eng-a" in line for line in lines) and any("│ eng " in line for line in lines)


def test_bad_output_is_a_clear_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["queues", *_files(tmp_path), "-o", "yaml"])
    assert res.exit_code == 2 and "--output" in res.stderr and "Traceback" not in res.output


def test_the_built_in_example() -> None:
    res = CliRunner().invoke(app, ["queues", "-o", "json"])
    assert res.exit_code == 0, res.output
    assert {q["name"] for q in json.loads(res.stdout)["queues"]} >= {"default"}


def test_the_views_session_computes_what_the_cycles_session_does(tmp_path: Path) -> None:
    """The view opens a session with only the plugins it reads (queueview.view_config): over every
    fourth scenario configured with proportion or capacity (all of them take 14 s), its allocated, deserved, share and overused equal
    those of a session opened with the whole configuration, as the cycle opens it."""
    import numpy as np

    from corral.framework.config import parse_config
    from corral.framework.session import Session
    from corral.manifests.build import load_snapshot
    from corral.model.clock import parse_time
    from corral.plugins.queues import QueuePlugin
    from corral.queueview import queue_rows
    from corral.registry import REGISTRY
    from tests.scenarios.expand import T0
    from tests.scenarios.test_scenarios import CASES

    checked = 0
    for path in CASES[::4]:
        case = yaml.safe_load(path.read_text())
        text = yaml.safe_dump(case.get("config"))
        if not case.get("config") or ("proportion" not in text and "capacity" not in text):
            continue
        snap = tmp_path / f"{path.stem}.yaml"
        snap.write_text(yaml.safe_dump_all(expand(case)))
        try:
            config = parse_config(case["config"], REGISTRY, "scenario")
            cluster = load_snapshot([snap])
        except Exception:  # noqa: BLE001 - cases of refused input are not this test's
            continue
        now = parse_time(str(case.get("now", T0)))
        rows, _ = queue_rows(cluster, config, now)
        full = Session(cluster, config, REGISTRY, now, 1, explain=False)
        plugin = next(p for p in full.plugins() if isinstance(p, QueuePlugin))
        for row in rows:
            if row.deserved is None:
                continue
            assert np.array_equal(row.deserved, plugin.deserved[row.name]), (path.stem, row.name)
            assert np.array_equal(row.allocated, plugin.allocated[row.name]), (path.stem, row.name)
            assert row.share == plugin._share(row.name), (path.stem, row.name)
            if full.fns("Overused"):
                assert row.overused == full.overused(cluster.queues[row.name]), (path.stem, row.name)
        checked += 1
    assert checked >= 40, checked
