"""Tests of corral.sim.report and corral.sim.plots: metrics on hand-computed results, report folders."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from corral.errors import InputError
from corral.sim import report
from corral.sim.plots import cdf_plot, share_plot, step_plot
from corral.sim.report import (
    METRICS,
    queue_summary,
    run_end,
    summarize,
    summary_table,
    time_average,
    write_comparison,
    write_report,
)
from corral.sim.result import ClusterSample, JobRecord, QueueSample, SimResult

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def job(
    name: str,
    *,
    queue: str = "a",
    gpus: float = 1,
    submit: float = 0.0,
    wait: float | None = None,
    run: float | None = None,
    status: str | None = None,
    **extra,
) -> JobRecord:
    """A record that started ``wait`` after submit and ran ``run`` seconds (None: not reached)."""
    start = submit + wait if wait is not None else None
    end = start + run if start is not None and run is not None else None
    if status is None:
        status = "completed" if end is not None else "running" if start is not None else "pending"
    return JobRecord(
        job=name,
        queue=queue,
        priority=0,
        pods=1,
        min_member=1,
        gpus=gpus,
        duration=run or 100.0,
        submit=submit,
        first_start=start,
        end=end,
        wait=wait,
        jct=None if end is None else end - submit,
        status=status,
        **extra,
    )


def known_result() -> SimResult:
    """JCTs 10, 20, 30, 40, 100; utilisation 0.5 for 10 s, 1.0 for 30 s, 0 for 60 s (end 100)."""
    jobs = [
        job("j1", wait=0, run=10),
        job("j2", wait=5, run=15, restarts=2, evictions=3, gpu_hours_lost=1.5),
        job("j3", submit=10, wait=10, run=20, queue="b"),
        job("j4", submit=10, wait=20, run=20),
        job("j5", wait=50, run=50, queue="b", evictions=1, gpu_hours_lost=0.25),
        job("j6", submit=5, wait=1),
        job("j7", submit=20),
    ]
    cluster = [
        ClusterSample(0, 4, 8, 0.5, 3, 1),
        ClusterSample(10, 8, 8, 1.0, 2, 2),
        ClusterSample(40, 0, 8, 0.0, 1, 0),
    ]
    queues = [
        QueueSample(0, "a", 0, 0.0, 0.4, 1),
        QueueSample(50, "a", 4, 0.4, 0.4, 0),
        QueueSample(0, "b", 2, 0.3, 0.3, 0),
        QueueSample(0, "c", 0, 0.0, 0.0, 0),
    ]
    return SimResult(jobs=jobs, queues=queues, cluster=cluster, meta={"config": "known", "end_time": 100.0})


# ------------------------------------------------------------------------------------------ metrics


def test_summary_of_known_result():
    s = summarize(known_result())
    assert list(s) == list(METRICS)
    assert (
        s["jobs_total"],
        s["jobs_completed"],
        s["jobs_running"],
        s["jobs_pending"],
        s["jobs_never_fits"],
    ) == (7, 5, 1, 1, 0)
    # JCTs 10, 20, 30, 40, 100: numpy's linear percentiles
    assert (s["jct_mean"], s["jct_p50"], s["jct_p95"], s["jct_p99"]) == (40.0, 30.0, 88.0, 97.6)
    # waits 0, 5, 10, 20, 50, 1, and 80 for the pending j7 (submitted at 20, still waiting at the end,
    # 100: censored, not left out)
    assert s["wait_mean"] == pytest.approx(166 / 7, rel=1e-5) and s["wait_p50"] == 10.0
    assert s["makespan"] == 100.0  # j5 ends at 100, first submit 0
    assert s["submission_window"] == 20.0  # first submit 0, last 20
    assert s["gpu_utilisation"] == pytest.approx(0.35)  # (10*0.5 + 30*1 + 60*0) / 100
    assert s["gpu_utilisation_window"] == pytest.approx(0.75)  # (10*0.5 + 10*1) / 20
    assert (s["broken_gangs"], s["evictions"], s["gpu_hours_lost"]) == (2, 4, 1.75)
    # queue a: allocated 0 for 50 s then 0.4 -> 0.2 of deserved 0.4 (x = 0.5); b: 0.3 of 0.3 (x = 1);
    # c deserves nothing and is left out: J = 1.5^2 / (2 * 1.25) = 0.9
    assert s["jain_fairness"] == pytest.approx(0.9)


def test_time_average():
    assert time_average([0, 10, 40], [0.5, 1.0, 0.0], 100) == pytest.approx(0.35)
    assert time_average([10, 0], [1.0, 0.5], 20) == pytest.approx(0.75)  # unsorted input
    assert time_average([0, 5, 5], [1.0, 0.0, 0.5], 10) == pytest.approx(0.75)  # later of equals wins
    assert time_average([0, 10], [0.2, 0.6], None) == pytest.approx(0.2)  # last sample spans nothing
    assert time_average([3], [0.7], None) == 0.7
    assert time_average([], [], 10) is None


def test_max_wait_of_largest_jobs_counts_pending_until_end():
    jobs = [job(f"small{i}", wait=1000.0 + i, run=10) for i in range(38)]  # long waits, but small
    jobs += [
        job("big-done", gpus=16, wait=50, run=10),
        job("big-pending", gpus=16, submit=10),
        job("huge", gpus=10_000, submit=0, status="never_fits"),
    ]
    result = SimResult(jobs=jobs, meta={"end_time": 1000.0})
    # 40 jobs that can fit, 5% -> the 2 with 16 GPUs; the pending one has waited 1000 - 10
    assert summarize(result)["max_wait_largest_5pct"] == 990.0
    assert summarize(result)["jobs_never_fits"] == 1


def test_ties_at_the_boundary_join_the_largest():
    jobs = [job(f"j{i}", gpus=8, wait=float(i), run=1) for i in range(3)]
    jobs += [job(f"s{i}", gpus=1, wait=500.0, run=1) for i in range(37)]
    assert summarize(SimResult(jobs=jobs))["max_wait_largest_5pct"] == 2.0


def test_empty_result_and_rounding():
    s = summarize(SimResult())
    assert s["jobs_total"] == 0 and s["jct_mean"] is None and s["makespan"] is None
    assert s["gpu_utilisation"] is None and s["jain_fairness"] is None and s["evictions"] == 0
    assert s["max_wait_largest_5pct"] is None
    long = SimResult(jobs=[job("x", wait=0.0, run=1234567.891)])
    assert summarize(long)["jct_mean"] == 1234570.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 1)), min_size=1, max_size=30),
    st.one_of(st.none(), st.floats(0, 2e6)),
)
def test_time_average_stays_within_the_values(samples, end):
    times, values = zip(*samples)
    average = time_average(times, values, end)
    assert min(values) - 1e-9 <= average <= max(values) + 1e-9


def test_run_end_without_meta():
    result = known_result()
    result.meta = {}
    assert run_end(result) == 100.0  # j5's end is the latest time mentioned


def test_queue_summary():
    rows = {r["queue"]: r for r in queue_summary(known_result())}
    assert set(rows) == {"a", "b", "c"}
    assert rows["a"]["jobs"] == 5 and rows["a"]["completed"] == 3 and rows["a"]["pending"] == 1
    assert rows["a"]["allocated_share"] == pytest.approx(0.2) and rows["a"]["share_ratio"] == 0.5
    assert rows["b"]["jct_mean"] == 65.0 and rows["c"]["share_ratio"] is None


# ------------------------------------------------------------------------------------------- files

RUN_FILES = {
    "summary.json",
    "meta.json",
    "jobs.csv",
    "jobs.json",
    "queues.csv",
    "cluster.csv",
    "queue_summary.csv",
    "breakdown.csv",
    "breakdown.json",
    "utilisation.png",
    "demand.png",
    "fragmentation.png",
    "pending.png",
    "shares.png",
    "jct_cdf.png",
    "wait_cdf.png",
    "wait_by_size.png",
    "slowdown_by_size.png",
    "interruptions.png",
    "reasons.csv",
    "longest_waits.csv",
    "index.html",
}


def test_write_report_files(tmp_path):
    result = known_result()
    result.meta["odd"] = {"nan": math.nan, "path": Path("/x"), "set": {2, 1}}
    folder = write_report(result, tmp_path / "out" / "report")
    assert {p.name for p in folder.iterdir()} == RUN_FILES | {".corral-report"}
    assert json.loads((folder / "summary.json").read_text()) == summarize(result)
    assert json.loads((folder / "meta.json").read_text())["odd"] == {"nan": None, "path": "/x", "set": [1, 2]}
    with (folder / "jobs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 7 and rows[6]["job"] == "j7" and rows[6]["wait"] == "" and rows[0]["jct"] == "10.0"
    records = json.loads((folder / "jobs.json").read_text())
    assert records[6]["wait"] is None and records[1]["restarts"] == 2
    assert len((folder / "queues.csv").read_text().splitlines()) == 5
    assert (folder / "utilisation.png").read_bytes().startswith(PNG_MAGIC)
    page = (folder / "index.html").read_text()
    assert page.count("data:image/png;base64,") == 10
    assert "http://" not in page and "https://" not in page and "known" in page
    assert "35.0%" in page  # utilisation in the summary table
    assert sorted(p.name for p in folder.parent.iterdir()) == ["report"]  # no temporary leftovers


def test_reports_are_deterministic(tmp_path):
    first = write_report(known_result(), tmp_path / "one")
    second = write_report(known_result(), tmp_path / "two")
    for name in (
        "summary.json",
        "meta.json",
        "jobs.csv",
        "jobs.json",
        "queues.csv",
        "cluster.csv",
        "queue_summary.csv",
    ):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_report_replaces_existing_folder(tmp_path):
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "stale.txt").write_text("old")
    with pytest.raises(InputError, match="not a corral report"):  # not written by corral: kept
        write_report(known_result(), folder)
    assert (folder / "stale.txt").read_text() == "old"
    write_report(known_result(), folder, force=True)
    assert not (folder / "stale.txt").exists() and (folder / "summary.json").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["report"]


def test_failed_write_keeps_the_previous_report(tmp_path, monkeypatch):
    folder = write_report(known_result(), tmp_path / "report")
    before = (folder / "summary.json").read_bytes()

    def broken(*args, **kwargs):
        raise RuntimeError("plotting failed")

    monkeypatch.setattr(report, "report_plots", broken)
    small = SimResult(jobs=[job("x", wait=0, run=1)])
    with pytest.raises(RuntimeError):
        write_report(small, folder)
    assert (folder / "summary.json").read_bytes() == before
    assert {p.name for p in folder.iterdir()} == RUN_FILES | {".corral-report"}
    with pytest.raises(RuntimeError):
        write_report(small, tmp_path / "fresh")
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # no half report, no temporary folder


def test_report_of_an_empty_run(tmp_path):
    folder = write_report(SimResult(), tmp_path / "empty")
    assert {p.name for p in folder.iterdir()} == RUN_FILES | {".corral-report"}
    assert json.loads((folder / "jobs.json").read_text()) == []
    assert (folder / "jobs.csv").read_text().count("\n") == 1  # the header only


def test_destination_that_is_a_file(tmp_path):
    target = tmp_path / "taken"
    target.write_text("x")
    with pytest.raises(InputError) as info:
        write_report(known_result(), target)
    assert info.value.file == str(target) and info.value.exit_code == 2


def test_write_comparison(tmp_path):
    other = known_result()
    other.cluster = [ClusterSample(0, 8, 8, 1.0, 0, 2)]
    results = {"gang/preempt": known_result(), "legacy preempt": other, "index.html": other}
    folder = write_comparison(results, tmp_path / "cmp")
    names = {p.name for p in folder.iterdir()}
    assert {
        "comparison.json",
        "comparison.csv",
        "breakdown.csv",
        "index.html",
        "utilisation.png",
        "demand.png",
        "fragmentation.png",
        "jct_cdf.png",
        "wait_cdf.png",
        "wait_by_size.png",
        "slowdown_by_size.png",
        "evictions.png",
        "restarts.png",
        "gang_preempt",
        "legacy_preempt",
        "index.html-2",
        ".corral-report",
    } == names
    assert {p.name for p in (folder / "gang_preempt").iterdir()} == RUN_FILES
    rows = json.loads((folder / "comparison.json").read_text())
    assert [r["config"] for r in rows] == list(results) and rows[1]["gpu_utilisation"] == 1.0
    with (folder / "comparison.csv").open() as handle:
        table = list(csv.DictReader(handle))
    assert list(table[0]) == ["config", "report", *METRICS] and table[0]["report"] == "gang_preempt"
    page = (folder / "index.html").read_text()
    assert "gang_preempt/index.html" in page and page.count("data:image/png;base64,") == 9
    with pytest.raises(InputError):
        write_comparison({}, tmp_path / "none")
    with pytest.raises(InputError):
        write_comparison({"x": "not a result"}, tmp_path / "none")
    assert not (tmp_path / "none").exists()


# -------------------------------------------------------------------------------------- terminal


def render(table) -> str:
    console = Console(record=True, width=200)
    console.print(table)
    return console.export_text()


def test_summary_table_single_and_side_by_side():
    one = summarize(known_result())
    text = render(summary_table(one))
    assert "GPU utilisation" in text and "35.0%" in text and "Jain fairness" in text
    table = summary_table({"x": one, "y": {**one, "extra": 3}}, title="compare")
    assert [str(c.header) for c in table.columns] == ["metric", "x", "y"]
    assert table.row_count == len(METRICS) + 1
    assert "—" in render(table)  # x has no "extra"


# ------------------------------------------------------------------------------------------- plots


def test_plots_draw_empty_and_full_data():
    assert step_plot({"": ([], [])}, title="t", ylabel="y").startswith(PNG_MAGIC)
    assert step_plot(
        {"a": ([0, 5], [1, 2]), "b": ([0], [3])}, title="t", ylabel="y", end={"a": 10, "b": 20}
    ).startswith(PNG_MAGIC)
    assert cdf_plot({"x": []}, title="t", xlabel="x").startswith(PNG_MAGIC)
    assert cdf_plot({"x": [0, 1, 100, 1e6]}, title="t", xlabel="x").startswith(PNG_MAGIC)
    assert share_plot({}).startswith(PNG_MAGIC)
    assert share_plot({f"q{i}": ([0, 1], [0.1, 0.2], [0.1, 0.1]) for i in range(12)}, end=5).startswith(
        PNG_MAGIC
    )
