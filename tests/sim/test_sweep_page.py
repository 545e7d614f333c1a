"""The sweep's page as a person sees it, in a real browser (headless Chromium driven by Playwright;
skipped with a reason where there is none): every config of a wide sweep in its table, the plots
drawn, and the page as wide as the window whatever the number of configs."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from corral.sim.report import METRICS
from corral.sim.sweep_page import sweep_page
from corral.sim.sweep_report import summarize_sweep

CONFIGS = [f"reservation-with-a-long-name-{i}" for i in range(9)]


def _page(tmp: Path) -> Path:
    rng = np.random.default_rng(0)
    runs = []
    for c, config in enumerate(CONFIGS):
        for seed in range(3):
            row = {"config": config, "workload": "week", "window": "all", "scale": 1.0, "cluster": "c80"}
            row |= {"seed": seed, "cell": f"{config}-{seed}"}
            row |= {m: float(rng.uniform(1, 10) * (c + 1)) for m in METRICS}
            row |= {
                "gpu_utilisation": 0.5 + 0.04 * c,
                "cpu_time": 1.0,
                "wall_time": 1.0,
                "events": 5,
                "cycles": 3,
            }
            runs.append(row)
    frame = pd.DataFrame(runs)
    sizes = pd.DataFrame(
        [
            {**r, "size": s, "jobs": 10, "wait_mean": 60.0 * (i + 1)}
            for r in runs
            for i, s in enumerate(["1 GPU", "2-8"])
        ]
    )
    described = {
        "spec": "sweep.yaml",
        "name": "wide",
        "baseline": CONFIGS[0],
        "configs": {c: f"{c}.yaml" for c in CONFIGS},
        "workloads": [
            {
                "name": "week",
                "file": "philly.csv",
                "format": "philly",
                "windows": [[None, None]],
                "scales": [1.0],
                "queues": [],
            }
        ],
        "clusters": {"c80": "c80.yaml"},
        "seeds": [0, 1, 2],
        "options": {"until": None},
        "executor": "local",
        "workers": 2,
    }
    path = tmp / "index.html"
    path.write_text(sweep_page(described, frame, sizes, summarize_sweep(frame, CONFIGS[0]), CONFIGS[0]))
    return path


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    _chromium() is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)"
)
def test_a_wide_sweep_fits_the_window(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    page_file = _page(tmp_path)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1024, "height": 800})
            page.goto(page_file.as_uri())
            assert page.title() == "corral sweep: wide"
            # the document never scrolls sideways: a wide table scrolls inside its own box
            assert page.evaluate("document.documentElement.scrollWidth") <= 1024
            rows = page.locator("h2 + .scroll tbody tr")
            assert rows.count() == len(CONFIGS)
            assert "vs baseline" in rows.nth(1).inner_text() and "vs baseline" not in rows.nth(0).inner_text()
            assert "±" in rows.nth(1).inner_text()
            image = page.locator("figure img").first
            assert page.evaluate(
                "(img) => img.naturalWidth > 0 && img.getBoundingClientRect().width <= 1024",
                image.element_handle(),
            )
            assert "95 % confidence" in page.locator("figcaption").first.inner_text()
        finally:
            browser.close()
