"""``corral queues --live`` and ``corral whatif --live`` (src/corral/kube/oneshot.py): the cluster read
once from the in-process API server answers exactly what the same objects as a snapshot answer, nothing
is written, and every way of not reaching the cluster is one line and exit code 2."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import yaml
from typer.testing import CliRunner

from corral.kube.api import RESOURCES
from tests.kube.fakeapi import FakeAPI
from tests.scenarios.expand import T0, expand
from tests.test_queueview import CAPACITY
from tests.test_queueview import CASE as QUEUES

from corral.cli import app  # isort: skip


def _snapshot(server: FakeAPI, tmp: Path) -> Path:
    """What the server holds, as a snapshot file (the same objects, server fields included)."""
    docs = []
    for rtype in RESOURCES:
        for obj in server.objects(rtype.kind):
            if obj.get("apiVersion", rtype.api_version) == rtype.api_version:
                docs.append({"kind": rtype.kind, "apiVersion": rtype.api_version, **obj})
    path = tmp / "snap.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _config(tmp: Path) -> str:
    path = tmp / "c.yaml"
    path.write_text(yaml.safe_dump(CAPACITY))
    return str(path)


def test_queues_live_answers_as_the_snapshot(server: FakeAPI, tmp_path: Path) -> None:
    server.add_all(expand(QUEUES))
    cfg = _config(tmp_path)
    live = CliRunner().invoke(
        app, ["queues", "--live", "--server", server.url, "-c", cfg, "--now", T0, "-o", "json"]
    )
    assert live.exit_code == 0, live.output
    snap = CliRunner().invoke(
        app, ["queues", str(_snapshot(server, tmp_path)), "-c", cfg, "--now", T0, "-o", "json"]
    )
    assert json.loads(live.stdout) == json.loads(snap.stdout)
    names = [q["name"] for q in json.loads(live.stdout)["queues"]]
    assert {"eng", "eng-a", "eng-b", "other"} <= set(names)
    assert {m for m, *_ in server.requests} == {"GET"}  # one list of each kind, nothing written


def test_whatif_live_answers_as_the_snapshot(server: FakeAPI, tmp_path: Path) -> None:
    base = {
        "nodes": [{"name": "n1"}, {"name": "n2"}],
        "jobs": [{"name": "run", "priority": 10, "pods": [{"count": 1, "gpu": 8, "nodes": ["n1"]}]}],
    }
    server.add_all(expand(base))
    kept = {json.dumps(d, sort_keys=True) for d in expand(base)}
    job = tmp_path / "job.yaml"
    full = expand({**base, "jobs": [*base["jobs"], {"name": "try", "pods": [{"count": 1, "gpu": 8}]}]})
    job.write_text(yaml.safe_dump_all([d for d in full if json.dumps(d, sort_keys=True) not in kept]))
    live = CliRunner().invoke(
        app, ["whatif", str(job), "--live", "--server", server.url, "--now", T0, "-o", "json"]
    )
    assert live.exit_code == 0, live.output
    snap = CliRunner().invoke(
        app, ["whatif", str(job), str(_snapshot(server, tmp_path)), "--now", T0, "-o", "json"]
    )
    assert json.loads(live.stdout) == json.loads(snap.stdout)
    assert json.loads(live.stdout)["binds"] == [{"pod": "default/try-0", "node": "n2"}]
    assert {m for m, *_ in server.requests} == {"GET"}
    assert server.get("Pod", "try-0", "default") is None  # not submitted
    # a podgroup the cluster already has is not a new job
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump_all([d for d in expand(base) if d["kind"] in ("PodGroup", "Pod")]))
    res = CliRunner().invoke(app, ["whatif", str(again), "--live", "--server", server.url])
    assert res.exit_code == 2 and "PodGroup default/run" in res.stderr and "duplicate" in res.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_cluster_reachable_is_exit_2_with_a_hint(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump_all(expand({"jobs": [{"name": "j", "pods": [{"count": 1}]}]})))
    for args in (["queues", "--live", "--server", url], ["whatif", str(job), "--live", "--server", url]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2, res.output
        assert (
            res.stderr.startswith("error: no Kubernetes API server reachable")
            and "--kubeconfig" in res.stderr
        )
        assert "Traceback" not in res.output


def test_list_refused_and_mixed_sources_are_one_line(server: FakeAPI, tmp_path: Path) -> None:
    server.fail("GET", r"^/api/v1/pods\?", 403, count=10)
    res = CliRunner().invoke(app, ["queues", "--live", "--server", server.url])
    assert res.exit_code == 2 and res.stderr.startswith("error: cannot list pods (GET /api/v1/pods: 403"), (
        res.stderr
    )
    snap = tmp_path / "s.yaml"
    snap.write_text("")
    both = CliRunner().invoke(app, ["queues", str(snap), "--live", "--server", server.url])
    assert both.exit_code == 2 and "snapshot files or --live, not both" in both.stderr
    alone = CliRunner().invoke(app, ["queues", "--server", server.url])
    assert alone.exit_code == 2 and "add --live" in alone.stderr
