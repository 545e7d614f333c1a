"""``corral run`` as a process: no cluster reachable is exit 2 with a hint, a cache that never syncs is a
non-zero exit after ``--sync-timeout`` (no cycle on an incomplete cache), SIGTERM works while the sync
waits, the default scheduler name is ``corral`` alone, and the /metrics server logs a failed request as
one line instead of a traceback."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from corral.kube.logs import Log
from corral.kube.metrics import Metrics, serve
from corral.kube.runner import RunOptions
from tests.kube.fakeapi import FakeAPI
from tests.kube.test_live import NOW, wait_for
from tests.scenarios.expand import expand

RUN = [sys.executable, "-c", "from corral.cli import main; main()", "run"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_cluster_reachable_is_exit_2_with_a_hint() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    done = subprocess.run([*RUN, "--server", url], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: no Kubernetes API server reachable")
    assert "--kubeconfig" in done.stderr and "--server" in done.stderr


def test_no_credentials_is_exit_2_with_a_hint(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env.update(HOME=str(tmp_path), KUBECONFIG=str(tmp_path / "missing"))
    done = subprocess.run(RUN, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2, done.stderr
    assert "no cluster credentials" in done.stderr and "--kubeconfig" in done.stderr


def test_no_cycle_on_an_incomplete_cache_and_a_timeout_exits_non_zero(server: FakeAPI) -> None:
    server.add_all(expand({"nodes": [{"name": "n1"}], "jobs": [{"name": "a", "pods": [{"count": 1}]}]}))
    server.fail("GET", r"^/api/v1/pods\?", 500, count=10**6)  # pods are never listed
    done = subprocess.run(
        [*RUN, "--server", server.url, "--sync-timeout", "2", "--metrics-bind-address", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    logs = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    waiting = [r for r in logs if r["msg"] == "waiting for the cache to sync: no cycle runs until then"]
    assert waiting and "pods" in waiting[0]["missing"]
    assert "error: not listed within 2 s: pods" in done.stderr
    assert not server.bindings and not any(r["msg"] == "cycle" for r in logs)


def test_sigterm_stops_the_wait_for_the_first_sync(server: FakeAPI) -> None:
    server.fail("GET", r"^/api/v1/pods\?", 500, count=10**6)
    proc = subprocess.Popen(
        [*RUN, "--server", server.url, "--metrics-bind-address", "-1"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if "waiting for the cache to sync" in line:
                break
        proc.send_signal(signal.SIGTERM)  # at once: the child is likely still writing that line
        assert proc.wait(timeout=20) == 0
        assert "stop signal: stopping" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_default_scheduler_name_is_corral_alone(server: FakeAPI, runner_factory) -> None:
    assert RunOptions().schedulers == ("corral",)
    server.add_all(
        expand(
            {
                "nodes": [{"name": "n1"}],
                "jobs": [
                    {"name": "mine", "pods": [{"count": 1, "gpu": 1}]},
                    {"name": "volcanos", "pods": [{"count": 1, "gpu": 1, "scheduler": "volcano"}]},
                    {"name": "kais", "pods": [{"count": 1, "gpu": 1, "scheduler": "kai-scheduler"}]},
                ],
            }
        )
    )
    r = runner_factory(now=NOW, schedulers=RunOptions().schedulers)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    assert [p for p, _n in server.bindings] == ["default/mine-0"]
    dockerfile = (Path(__file__).resolve().parents[2] / "deploy" / "Dockerfile").read_text()
    assert "--scheduler-name" not in dockerfile.split("CMD", 1)[1].split("\n", 1)[0]


def test_a_failed_metrics_request_is_one_log_line(capfd) -> None:
    metrics = Metrics()
    log = Log(stream=io.StringIO())

    def broken() -> bytes:
        raise RuntimeError("scrape failed")

    metrics.render = broken  # type: ignore[method-assign]
    http = serve(metrics, 0, lambda: (True, "ok"), host="127.0.0.1", log=log)
    try:
        port = http.server_address[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            s.recv(100)
        assert wait_for(lambda: log.matching("metrics request failed"))
        time.sleep(0.1)
    finally:
        http.shutdown()
    assert "Traceback" not in capfd.readouterr().err
    assert http.server_address[0] == "127.0.0.1"
