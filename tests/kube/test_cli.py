"""``corral run`` as a command: ``--dry-run --cycles`` prints what ``corral schedule -o json`` prints on the
same objects; bad options are one line and exit code 2; an end-to-end run against a real cluster when
``KUBECONFIG`` is set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.kube.test_live import preempt_objects

CONFIG = {
    "actions": "enqueue, allocate, preempt",
    "tiers": [
        {
            "plugins": [
                {"name": "priority"},
                {"name": "gang", "enablePreemptable": False, "enableReclaimable": False},
                {"name": "conformance"},
            ]
        },
        {
            "plugins": [
                {"name": "predicates"},
                {"name": "proportion"},
                {"name": "nodeorder"},
                {"name": "binpack"},
            ]
        },
    ],
}


def _corral(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    code = "from corral.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout
    )


def test_dry_run_prints_what_schedule_prints(server, tmp_path: Path) -> None:
    objs = preempt_objects()
    server.add_all(objs)
    (tmp_path / "snap.yaml").write_text(yaml.safe_dump_all(objs))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    common = [
        "--config",
        str(tmp_path / "config.yaml"),
        "--now",
        "2026-01-01T00:00:00Z",
        "--cycles",
        "2",
        "--period",
        "0.5",
    ]
    live = _corral(
        "run",
        "--server",
        server.url,
        "--dry-run",
        "--metrics-port",
        "-1",
        "--dump",
        str(tmp_path / "dump"),
        *common,
    )
    assert live.returncode == 0, live.stderr
    snap = _corral("schedule", str(tmp_path / "snap.yaml"), "-o", "json", *common)
    assert snap.returncode == 0, snap.stderr
    assert json.loads(live.stdout) == json.loads(snap.stdout)
    assert json.loads(live.stdout)["evictions"]
    logs = [json.loads(line) for line in live.stderr.splitlines()]
    assert any(r["msg"] == "cache dumped" for r in logs) and all("ts" in r and "level" in r for r in logs)
    assert not server.bindings and not server.evictions


def test_bad_options_are_one_line_exit_2(tmp_path: Path) -> None:
    res = _corral("run", "--server", "http://127.0.0.1:9", "--log-format", "xml")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "--log-format" in res.stderr
    (tmp_path / "bad.yaml").write_text("actions: 'allocate, nosuchaction'\n")
    res = _corral("run", "--server", "http://127.0.0.1:9", "--config", str(tmp_path / "bad.yaml"))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not os.environ.get("KUBECONFIG"), reason="no KUBECONFIG: no real cluster to run against")
def test_end_to_end_on_a_real_cluster(tmp_path: Path) -> None:
    """Against the cluster of $KUBECONFIG, read-only: the cache syncs, one dry-run cycle runs, and the dump
    decides the same through ``corral schedule``."""
    res = _corral(
        "run",
        "--dry-run",
        "--cycles",
        "1",
        "--metrics-port",
        "-1",
        "--dump",
        str(tmp_path / "dump"),
        "--now",
        "2026-01-01T00:00:00Z",
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    again = _corral("schedule", str(tmp_path / "dump"), "-o", "json", "--now", "2026-01-01T00:00:00Z")
    assert again.returncode == 0, again.stderr
    assert json.loads(res.stdout) == json.loads(again.stdout)
