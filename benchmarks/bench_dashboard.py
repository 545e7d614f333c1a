"""The operator's page at scale: ``corral schedule --html`` on 5,000 nodes and 50,000 pods, then opened
in headless Chromium.

Prints the time to write the page (the whole command: load, one cycle, queue view, page) and the time
the browser takes to load and lay it out (``page.goto`` until the load event, then a full-page layout),
with CPU time beside wall time, next to the target: the page loads in at most 1 s in the browser.

    .venv/bin/python benchmarks/bench_dashboard.py [--nodes 5000] [--pods 50000]

Skips with a message when Chromium or Playwright is absent.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench_allocate import generate
from corral.cli import main as corral_main

TARGET_LOAD = 1.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=50000)
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if chromium is None:
        print("skipped: Chromium or Playwright is absent")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="bench-dashboard-"))
    snap = tmp / "snap.json"
    running = int(args.pods * 0.8)
    pending = args.pods - running
    docs = generate(args.nodes, running, max(1, pending // 8), pending, 1)
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    wall, cpu = time.perf_counter(), time.process_time()
    sys.argv = ["corral", "schedule", str(snap), "--html", str(tmp / "page"), "-o", "json"]
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the decisions' JSON is not the figure
            corral_main()
    except SystemExit as exc:
        if exc.code not in (0, None):
            print(f"corral schedule failed with {exc.code}")
            return 1
    write_wall, write_cpu = time.perf_counter() - wall, time.process_time() - cpu
    page_file = tmp / "page" / "index.html"
    size = page_file.stat().st_size
    flags = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
    ]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=flags)
        page = browser.new_page()
        t = time.perf_counter()
        page.goto(page_file.as_uri(), wait_until="load")
        page.evaluate("document.body.getBoundingClientRect().height")  # force layout
        load = time.perf_counter() - t
        rows = page.locator("tr").count()
        browser.close()
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.nodes} nodes, {args.pods} pods: page {size / 2**20:.1f} MiB, {rows} table rows")
    print(f"  corral schedule --html: {write_wall:.2f} s wall ({write_cpu:.2f} s CPU)")
    print(
        f"  browser load + layout:  {load:.2f} s wall   target <= {TARGET_LOAD:.1f} s "
        f"{'ok' if load <= TARGET_LOAD else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
