"""The live operator's page of ``corral run --dashboard-port`` (src/corral/kube/livepage.py): a real
``corral run --dry-run`` process against the in-process API server, its page driven in headless Chromium
(Playwright; skipped with a reason where the machine has no Chromium), refreshing itself as the cluster
changes; and the server's read-only rules."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from corral.framework.decisions import Decisions, Eviction
from corral.kube.livepage import LivePage, serve_page
from corral.kube.logs import Log
from corral.manifests.build import load_snapshot
from corral.registry import default_config
from tests.kube.fakeapi import FakeAPI
from tests.scenarios.expand import expand
from tests.test_dashboard import CONFIG, _chromium

RUN = [sys.executable, "-c", "from corral.cli import main; main()", "run"]
EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "corral" / "examples" / "snapshot.yaml"


def _objects() -> list[dict]:
    return expand(
        {
            "nodes": [{"name": "n1"}, {"name": "n2"}],
            "queues": [{"name": "research", "weight": 2}],
            "jobs": [
                {"name": "busy", "pods": [{"count": 2, "gpu": 8, "nodes": ["n1", "n2"]}]},
                {"name": "wide", "queue": "research", "pods": [{"count": 2, "gpu": 8}]},
            ],
        }
    )


def _start(server: FakeAPI, tmp: Path) -> tuple[subprocess.Popen, str]:
    cfg = tmp / "c.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    proc = subprocess.Popen(
        [
            *RUN,
            "--server",
            server.url,
            "--dry-run",
            "-c",
            str(cfg),
            "--period",
            "0.2",
            "--forecast-every",
            "1",
            "--metrics-bind-address",
            "-1",
            "--dashboard-port",
            "0",
            "--dashboard-refresh",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    address = ""
    for line in proc.stderr:
        if '"serving the dashboard"' in line:
            address = json.loads(line)["address"]
            break
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
    assert address.startswith("127.0.0.1:"), "the page listens on this machine only by default"
    return proc, f"http://{address}/"


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(
    _chromium() is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)"
)
def test_the_live_page_in_a_browser_shows_the_cluster_and_refreshes(server: FakeAPI, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    server.add_all(_objects())
    proc, url = _start(server, tmp_path)
    flags = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=_chromium(), args=flags)
            try:
                page = browser.new_page()
                answer = page.goto(url)
                assert answer is not None and answer.ok
                assert "script-src" not in answer.headers["content-security-policy"]
                page.wait_for_selector("#queues", timeout=20_000)  # the first cycle's page
                assert page.locator("#queues tbody tr", has_text="research").count() == 1
                wide = page.locator("#waiting tbody tr", has_text="default/wide")
                page.wait_for_function(
                    "() => [...document.querySelectorAll('#waiting tbody tr')].some("
                    "r => r.innerText.includes('default/wide') && r.cells[2].innerText !== '-')",
                    timeout=20_000,
                )  # the live forecast's expected start and basis
                cells = wide.first.locator("td").all_inner_texts()
                assert cells[1] and cells[3].startswith("after default/busy finishes")
                assert page.locator("script").count() == 0
                # a job submitted now shows up without the test reloading: the page refreshes itself
                server.add_all(
                    expand(
                        {"jobs": [{"name": "late", "queue": "research", "pods": [{"count": 1, "gpu": 8}]}]}
                    )[-2:]
                )
                page.wait_for_selector("#waiting tbody tr:has-text('default/late')", timeout=20_000)
                # the shares over time: one line per queue once two renders were sampled
                line = page.locator("#shares polyline.share[data-queue='research']")
                assert line.count() == 1 and len(line.get_attribute("points").split()) >= 2
                assert page.locator("#shares polyline.share").count() == len(
                    page.locator("#queues tbody tr").all()
                )
            finally:
                browser.close()
    finally:
        _stop(proc)


def _get(url: str, method: str = "GET") -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


class _Clock:
    """A monotonic clock that moves only when read (a tick per reading) or set: the page's timing rules
    are tested without depending on how loaded the machine is."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        self.now += 0.01
        return self.now


def test_read_only_rendered_only_while_looked_at(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr("corral.kube.livepage.time", clock)
    cluster = load_snapshot([EXAMPLE], ("corral",))
    live = LivePage(default_config(), Log(stream=io.StringIO()), refresh=0.0, idle=0.5)
    http = serve_page(live, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{http.server_address[1]}"
        code, headers, body = _get(url + "/")
        assert code == 200 and b"waiting for the first cycle" in body
        assert headers["Content-Security-Policy"].startswith("default-src 'none'")
        decisions = Decisions(evictions=[Eviction("ns/<b>v</b>", "n1", "preempt", "ns/boss", 1)])
        live.after_cycle(cluster, decisions, 0.0)
        assert live.renders == 1
        code, _, body = _get(url + "/index.html")
        assert code == 200 and b"&lt;b&gt;v&lt;/b&gt;" in body and b"<b>v" not in body
        live.after_cycle(cluster, Decisions(), 1.0)  # too soon: ten times the last render's cost
        assert live.renders == 1 and live.due > clock.now
        clock.now = live.due
        _get(url)
        live.after_cycle(cluster, Decisions(), 1.0)  # asked a moment ago and due: rendered again
        assert live.renders == 2
        assert b"ns/boss" in _get(url)[2]  # recent evictions outlive the cycle that made them
        clock.now += 0.6
        live.after_cycle(cluster, Decisions(), 2.0)  # nobody looked for longer than idle: not rendered
        assert live.renders == 2
        assert _get(url, "POST")[0] == 405 and _get(url, "DELETE")[0] == 405
        assert _get(url + "/metrics")[0] == 404
    finally:
        http.shutdown()


def test_the_shares_chart_escapes_queue_names() -> None:
    from corral.dashboard import _shares_over_time

    svg = _shares_over_time([(0.0, {'<q">': 0.5}), (60.0, {'<q">': 2.5})])
    assert "<q" not in svg.replace("<polyline", "").replace("<line", "") and "&lt;q&quot;&gt;" in svg
    assert _shares_over_time([(0.0, {"a": 1.0})]).startswith('<p class="muted" id="shares-empty">')
