"""The operator's page (src/corral/dashboard.py): ``corral schedule --html DIR`` rendered, escaped, and
looked at in a real browser (headless Chromium driven by Playwright; skipped with a reason where the
machine has no Chromium — .ci/run installs it)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from corral.cli import app
from corral.framework.decisions import Decisions, Eviction, Unschedulable
from corral.model import Cluster
from corral.queueview import queue_rows
from corral.registry import default_config
from tests.scenarios.expand import expand

NOW = "2026-01-01T02:00:00Z"
CONFIG: dict[str, Any] = {
    "actions": "enqueue, allocate, preempt",
    "tiers": [
        {
            "plugins": [
                {"name": "priority"},
                {"name": "gang", "enablePreemptable": False},
                {"name": "conformance"},
            ]
        },
        {"plugins": [{"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}]},
    ],
    "forecast": {"defaultRuntime": "2h"},
}
CASE = {
    "nodes": [{"name": "n1"}, {"name": "n2"}, {"name": "n3"}],
    "hypernodes": [
        {"name": "rack-a", "tier": 1, "nodes": ["n1", "n2"]},
        {"name": "rack-b", "tier": 1, "nodes": ["n3"]},
    ],
    "queues": [{"name": "research", "weight": 2}],
    "jobs": [
        {
            "name": "low",
            "priority": 10,
            "pods": [{"count": 2, "gpu": 4, "nodes": ["n1", "n1"], "started": "2026-01-01T01:00:00Z"}],
        },
        {
            "name": "mid",
            "priority": 50,
            "pods": [{"count": 1, "gpu": 8, "nodes": ["n2"], "started": "2026-01-01T01:30:00Z"}],
        },
        {
            "name": "busy",
            "priority": 50,
            "pods": [{"count": 1, "gpu": 8, "nodes": ["n3"], "started": "2026-01-01T01:30:00Z"}],
        },
        {"name": "high", "priority": 100, "pods": [{"count": 1, "gpu": 8}]},
        {"name": "wide", "queue": "research", "pods": [{"count": 3, "gpu": 8}]},
    ],
}


def _write_page(tmp: Path) -> Path:
    snap, cfg, out = tmp / "snap.yaml", tmp / "c.yaml", tmp / "page"
    snap.write_text(yaml.safe_dump_all(expand(CASE)))
    cfg.write_text(yaml.safe_dump(CONFIG))
    res = CliRunner().invoke(
        app,
        ["schedule", str(snap), "-c", str(cfg), "--now", NOW, "--forecast", "--html", str(out), "-o", "json"],
    )
    assert res.exit_code == 0, res.output
    return out / "index.html"


def test_the_page_holds_every_section(tmp_path: Path) -> None:
    text = _write_page(tmp_path).read_text()
    for part in ('id="queues"', 'id="waiting"', 'id="evictions"', 'id="topology"', "rack-a", "default/wide"):
        assert part in text, part
    assert "default/low-0" in text and "preempt" in text and "default/high" in text


def test_every_name_is_escaped() -> None:
    cluster: Cluster = __import__("corral.manifests.build", fromlist=["load_snapshot"]).load_snapshot(
        [Path(__file__).resolve().parents[1] / "src" / "corral" / "examples" / "snapshot.yaml"], ("corral",)
    )
    hostile = "<img src=x onerror=alert(1)>"
    decisions = Decisions(
        evictions=[Eviction(hostile, "n1", "preempt", "ns/<b>boss</b>", 1)],
        unschedulable=[Unschedulable("ns/" + hostile, "needs <script>alert(1)</script>", 1)],
    )
    rows, source = queue_rows(cluster, default_config(), 0.0)
    from corral.dashboard import render_page

    page = render_page(cluster, decisions, rows, source, 0.0, title="<i>t</i>")
    assert "<img" not in page and "<script>" not in page and "<b>boss" not in page and "<i>t</i>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_an_existing_folder_corral_did_not_write_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "page"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    res = CliRunner().invoke(app, ["schedule", "--html", str(out)])
    assert res.exit_code == 2 and (out / "mine.txt").read_text() == "keep"
    assert CliRunner().invoke(app, ["schedule", "--html", str(out), "--force"]).exit_code == 0


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    _chromium() is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)"
)
def test_what_an_operator_sees_in_a_browser(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    page_file = _write_page(tmp_path)
    flags = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
    ]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=flags)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(page_file.as_uri())
            assert page.title() == "corral"
            queues = page.locator("#queues tbody tr")
            assert queues.count() >= 2
            assert page.locator("#queues tbody tr", has_text="research").count() == 1
            waiting = page.locator("#waiting tbody tr", has_text="default/wide")
            assert waiting.count() == 1
            cells = waiting.locator("td").all_inner_texts()
            assert "3 pods" in cells[1] or "pods placed" in cells[1]  # why it waits, in the reason's words
            assert cells[2] != "-" and cells[3]  # an expected start and its basis
            victim = page.locator("#evictions tbody tr").first.locator("td").all_inner_texts()
            assert (
                victim[0].startswith("default/low-")
                and victim[2] == "preempt"
                and victim[3] == "default/high"
            )
            topo = {r.split("\t")[0]: r for r in page.locator("#topology tbody tr").all_inner_texts()}
            assert set(topo) == {"rack-a", "rack-b"}
            # nothing on the page runs: no script element, every cell is text
            assert page.locator("script").count() == 0
            shot = page.screenshot(full_page=True)
            assert len(shot) > 10_000
        finally:
            browser.close()
