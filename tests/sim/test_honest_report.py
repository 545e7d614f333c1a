"""The report does not mislead: why jobs waited and the longest waits, what a comparison ran and how its
configs differ, a column that repeats another shown once, plots that say what they show, on a readable
axis, over the submission window, and a comparison page of many configs that fits the window."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from corral.sim import plots
from corral.sim.reasons import longest_waits, reason_kind, reason_rows
from corral.sim.report import write_comparison, write_report
from corral.sim.result import ClusterSample, SimResult
from tests.sim.test_report import job, known_result

BEHIND = "not admitted: waiting behind default/{}, ahead of it in queue 'q1' and not yet admitted (fifo)"
NODES = "1 of 3 pods placed; pod {}-1 needs 5 nvidia.com/gpu on one node; largest free is {} on n-00{}"


def waiting_result() -> SimResult:
    jobs = [
        job("a", wait=100, run=10, reason=BEHIND.format("x")),
        job("b", wait=300, run=10, reason=BEHIND.format("y"), queue="b"),
        job("c", wait=50, run=10, gpus=8, reason=NODES.format("c", 3, 1)),
        job("d", submit=10, wait=None, gpus=16, reason=NODES.format("d", 2, 7)),  # still waiting at 1000
        job("e", wait=0, run=10),  # never waited
        job("f", wait=5, run=10),  # waited under a cycle: no reason
    ]
    cluster = [ClusterSample(0, 0, 8, 0.0, 1, 0)]
    return SimResult(jobs=jobs, cluster=cluster, meta={"end_time": 1000.0})


def test_reasons_are_grouped_by_kind_with_their_waiting_time() -> None:
    assert reason_kind(BEHIND.format("j13")) == reason_kind(BEHIND.format("other-7"))
    assert reason_kind(NODES.format("p", 3, 1)) == (
        "N of N pods placed; pod <pod> needs N nvidia.com/gpu on one node; largest free is N on <node>"
    )
    assert reason_kind("0/80 nodes are available: 80 Insufficient nvidia.com/gpu.") == (
        "N/N nodes are available: N Insufficient nvidia.com/gpu."
    )
    rows = reason_rows(waiting_result(), 1000.0, (1, 8, 32))
    top = {r["reason"]: r for r in rows if r["by"] == "all"}
    behind, nodes = top[reason_kind(BEHIND.format("x"))], top[reason_kind(NODES.format("c", 3, 1))]
    assert (behind["jobs"], behind["wait_hours"] * 3600) == (2, pytest.approx(400))
    # the job still waiting counts its wait up to the end of the run: 1000 - 10
    assert (nodes["jobs"], nodes["wait_hours"] * 3600) == (2, pytest.approx(50 + 990))
    assert top["(no reason recorded)"]["jobs"] == 1 and len(top) == 3  # "e" never waited
    per_queue = {(r["group"], r["reason"]) for r in rows if r["by"] == "queue"}
    assert ("b", behind["reason"]) in per_queue
    assert {r["group"] for r in rows if r["by"] == "size"} == {"1 GPU", "2-8", "9-32"}


def test_the_longest_waits_come_with_their_reasons() -> None:
    longest = longest_waits(waiting_result(), 1000.0)
    assert [r["job"] for r in longest] == ["d", "b", "a", "c", "f"]
    assert longest[0]["still_waiting"] and longest[0]["wait"] == 990.0
    assert longest[0]["reason"].startswith("1 of 3 pods placed")


def _configs(tmp: Path) -> dict[str, str]:
    first, second = tmp / "first.yaml", tmp / "second.yaml"
    first.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins: [{name: priority}]\n')
    second.write_text('actions: "enqueue, allocate, backfill"\ntiers:\n- plugins: [{name: priority}]\n')
    return {"first": str(first), "second": str(second)}


def _results(sources: dict[str, str]) -> dict[str, SimResult]:
    out = {}
    for name, source in sources.items():
        result = known_result()
        result.meta |= {
            "config_source": source,
            "cluster": "generated: 80 x gpu (8 GPU)",
            "workload": "philly.csv",
            "window": {"start": "14d", "end": "21d"},
            "seed": 3,
        }
        out[name] = result
    return out


def test_the_comparison_says_what_ran_and_how_each_config_differs(tmp_path: Path) -> None:
    page = (write_comparison(_results(_configs(tmp_path)), tmp_path / "cmp") / "index.html").read_text()
    what = page.split("<h2>Metrics</h2>")[0]
    for text in ("generated: 80 x gpu (8 GPU)", "philly.csv", "[14d, 21d)", "second.yaml", "first.yaml"):
        assert text in what
    assert "second against first" in what
    assert '-actions: "enqueue, allocate"' in what.replace("&quot;", '"')
    assert '+actions: "enqueue, allocate, backfill"' in what.replace("&quot;", '"')


def test_placement_of_gangs_per_config(tmp_path: Path) -> None:
    results = _results({"a": "built-in default", "b": "built-in default"})
    results["a"].jobs[0].placement = results["a"].jobs[1].placement = "tier 1"
    results["b"].jobs[0].placement, results["b"].jobs[1].placement = "node", "cluster"
    page = (write_comparison(results, tmp_path / "cmp") / "index.html").read_text()
    section = page.split("<h2>Placement of gangs</h2>")[1].split("<h2>")[0]
    assert "<th>node</th><th>tier 1</th><th>cluster</th><th>gangs started</th>" in section
    assert "<td>a</td><td>0</td><td>2</td><td>0</td><td>2</td>" in section
    assert "<td>b</td><td>1</td><td>0</td><td>1</td><td>2</td>" in section


def test_a_column_that_repeats_another_is_shown_once(tmp_path: Path) -> None:
    result = known_result()  # every job ran 10 s or more: slowdown and bounded slowdown agree
    page = (write_report(result, tmp_path / "r") / "index.html").read_text()
    assert "slowdown mean (JCT / run time) = bounded slowdown mean (10 s floor)" in page
    assert page.count("bounded slowdown mean (10 s floor)</td>") == 1
    result.jobs[0].duration, result.jobs[0].jct = 2.0, 4.0  # a job under the floor: they differ now
    page = (write_report(result, tmp_path / "r2") / "index.html").read_text()
    assert "= bounded slowdown" not in page and page.count("bounded slowdown mean (10 s floor)</td>") == 1
    assert page.count("slowdown mean (JCT / run time)</td>") == 1


def test_every_plot_says_what_it_shows(tmp_path: Path) -> None:
    page = (write_report(known_result(), tmp_path / "r") / "index.html").read_text()
    captions = page.split("<figcaption>")[1:]
    assert len(captions) == len(list((tmp_path / "r").glob("*.png")))
    for caption in captions:
        text = caption.split("</figcaption>")[0]
        assert not text.endswith(".png") and len(text) > 40


@pytest.fixture()
def axes(monkeypatch):
    """The axes each plot draws, kept instead of rendered."""
    drawn = []
    monkeypatch.setattr(plots, "_png", lambda fig, ax, empty: drawn.append(ax) or b"")
    return drawn


def test_bars_carry_values_and_counts_and_a_log_axis_across_decades(axes) -> None:
    plots.bar_plot(
        ["1 GPU", "2-8"], {"a": [10.0, 36000.0]}, title="t", ylabel="wait", seconds=True, counts=[5, 7]
    )
    ax = axes[-1]
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1 GPU\n5 jobs", "2-8\n7 jobs"]
    assert [t.get_text() for t in ax.texts] == ["0.00278", "10"]  # hours: the values on the bars
    plots.bar_plot(["x", "y"], {"a": [10.0, 30.0]}, title="t", ylabel="wait")
    assert axes[-1].get_yscale() == "linear"


def test_plots_over_time_stop_at_the_submission_window(axes) -> None:
    series = {"": ([0.0, 3600.0, 20 * 3600.0], [0.5, 1.0, 0.2])}
    plots.step_plot(series, title="t", ylabel="u", end=40 * 3600.0, window=10 * 3600.0)
    assert axes[-1].get_xlim() == (0.0, 10.0)  # hours; the drain to 40 h is not drawn
    plots.step_plot(series, title="t", ylabel="u", end=40 * 3600.0)
    assert axes[-1].get_xlim()[1] >= 39.0


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    _chromium() is None, reason="no Chromium on this machine (.ci/run installs Debian's chromium)"
)
def test_a_comparison_of_many_configs_fits_the_window(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    sources = {f"config-with-a-long-name-{i}": "built-in default" for i in range(9)}
    folder = write_comparison(_results(sources), tmp_path / "cmp")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1024, "height": 800})
            page.goto((folder / "index.html").as_uri())
            assert page.evaluate("document.documentElement.scrollWidth") <= 1024
            assert page.locator("h2", has_text="What ran").count() == 1
            assert page.locator("figcaption").count() >= 5
        finally:
            browser.close()


def test_reports_plot_the_submission_window_unless_asked_for_the_whole_run(tmp_path: Path, axes) -> None:
    write_report(known_result(), tmp_path / "window")  # last submit at 20 s, the run ends at 100 s
    assert axes[0].get_title() == "GPU utilisation" and axes[0].get_xlim() == (0.0, 20.0)
    axes.clear()
    write_report(known_result(), tmp_path / "whole", whole_run=True)
    assert axes[0].get_xlim()[1] >= 100.0
