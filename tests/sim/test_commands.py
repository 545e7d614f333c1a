"""Tests of corral.commands.simulate: ``corral simulate`` and ``corral compare`` on tiny inputs, and one clear
line with exit code 2 (never a traceback, never a half-written report) for each class of bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from corral.commands.simulate import register
from corral.errors import InputError
from corral.registry import default_config
from corral.sim.runs import parse_seconds, prepare, run_config

CLUSTER = "nodes:\n- {name: n, count: 2, gpus: 8}\ntopology: {tiers: [2]}\n"
WORKLOAD = "name,submit,duration,queue,pods,gpu\na,0,100,q1,1,8\nb,0,100,q2,2,8\nc,10,50,q1,1,4\n"


@pytest.fixture()
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


@pytest.fixture()
def files(tmp_path: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "w.csv").write_text(WORKLOAD)
    return tmp_path


def invoke(app: typer.Typer, folder: Path, *args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_simulate_a_tiny_workload(app, files):
    out = files / "report"
    res = invoke(
        app,
        files,
        "simulate",
        "--workload",
        str(files / "w.csv"),
        "--cluster",
        str(files / "cluster.yaml"),
        "--output",
        str(out),
        "--no-progress",
    )
    assert res.exit_code == 0, res.stderr
    assert "JCT mean" in res.stdout and "index.html" in res.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs_total"] == 3 and summary["jobs_completed"] == 3
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config"] == "default" and meta["jobs"] == 3


def test_simulate_the_example_for_a_few_hours(app, tmp_path):
    res = invoke(app, tmp_path, "simulate", "--until", "2h", "--output", str(tmp_path / "r"), "--no-progress")
    assert res.exit_code == 0, res.stderr
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    assert meta["end_time"] == 7200 and "example" in meta["workload"]


def test_compare_two_configs(app, files):
    config = files / "nobinpack.yaml"
    config.write_text(
        'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n'
        "  - name: gang\n- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n"
    )
    out = files / "cmp"
    res = invoke(
        app,
        files,
        "compare",
        "default",
        str(config),
        "--workload",
        str(files / "w.csv"),
        "--cluster",
        str(files / "cluster.yaml"),
        "--output",
        str(out),
        "--no-progress",
    )
    assert res.exit_code == 0, res.stderr
    rows = json.loads((out / "comparison.json").read_text())
    assert [r["config"] for r in rows] == ["default", "nobinpack"]
    assert (out / "default" / "summary.json").exists() and "nobinpack" in res.stdout


def test_synthetic_workload_spec(app, files):
    spec = files / "synthetic.yaml"
    spec.write_text("n_jobs: 20\nqueues: {a: 1, b: 2}\ngang_sizes: {1: 1}\ngpus_per_pod: {1: 1, 2: 1}\n")
    out = files / "syn"
    res = invoke(
        app,
        files,
        "simulate",
        "--workload",
        str(spec),
        "--cluster",
        str(files / "cluster.yaml"),
        "--seed",
        "3",
        "--output",
        str(out),
        "--no-progress",
    )
    assert res.exit_code == 0, res.stderr
    assert json.loads((out / "summary.json").read_text())["jobs_total"] == 20


BAD_ROWS = {
    "negative duration": ("name,submit,duration,gpu\na,0,100,1\nb,5,-3,1\n", "row 2", "duration"),
    "malformed time": ("name,submit,duration,gpu\na,yesterday,100,1\n", "row 1", "submit"),
    "larger than the cluster": (
        "name,submit,duration,pods,gpu\na,0,10,1,1\nbig,0,10,3,8\n",
        "row 2",
        "larger than the cluster",
    ),
    "unknown queue": (
        "name,submit,duration,queue,gpu\na,0,10,default,1\nb,0,10,ghost,1\n",
        "row 2",
        "unknown queue 'ghost'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_bad_input_is_one_line_with_file_and_row(app, files, case):
    text, row, words = BAD_ROWS[case]
    trace = files / "bad.csv"
    trace.write_text(text)
    cluster = files / "cluster.yaml"
    if case == "unknown queue":  # a cluster that lists its queues: others are errors
        cluster.write_text(CLUSTER + "queues:\n- {name: research}\n")
    out = files / "never"
    res = invoke(
        app, files, "simulate", "--workload", str(trace), "--cluster", str(cluster), "--output", str(out)
    )
    assert res.exit_code == 2
    assert res.stdout == "" and "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "bad.csv" in lines[0] and row in lines[0] and words in lines[0]
    assert not out.exists()


@pytest.mark.parametrize(
    "args, words",
    [
        (["--cluster", "missing.yaml"], "no such file"),
        (["--schedule-period", "0"], "--schedule-period"),
        (["--until", "soon"], "--until"),
        (["--config", "nope.yaml"], "nope.yaml"),
        (["--format", "excel", "--workload", "w.csv"], "unknown format"),
    ],
)
def test_bad_options_exit_2(app, files, args, words, monkeypatch):
    monkeypatch.chdir(files)
    res = invoke(app, files, "simulate", *args, "--output", str(files / "never"))
    assert res.exit_code == 2 and words in res.stderr and "Traceback" not in res.stderr
    assert not (files / "never").exists()


def test_bad_cluster_spec_names_the_field(app, files):
    (files / "cluster.yaml").write_text("nodes:\n- {name: n, count: 2, gpus: many}\n")
    res = invoke(
        app, files, "simulate", "--workload", str(files / "w.csv"), "--cluster", str(files / "cluster.yaml")
    )
    assert res.exit_code == 2 and "cluster.yaml" in res.stderr and "nodes[0].gpus" in res.stderr


def test_parse_seconds():
    assert [parse_seconds(t, "x") for t in ("90", "90m", "36h", "7d", "1d12h")] == [
        90,
        5400,
        129600,
        604800,
        129600,
    ]
    assert parse_seconds(None, "x") is None
    with pytest.raises(InputError):
        parse_seconds("-1", "x")


def test_prepare_filters_and_scales(files):
    inputs = prepare(
        cluster=files / "cluster.yaml", workload=files / "w.csv", start="5", queues=["q1"], scale=2.0
    )
    assert [(j.name, j.submit) for j in inputs.jobs] == [("c", 0.0)]
    assert not inputs.template.explicit_queues


def test_progress_bar_runs_on_a_terminal(files):
    inputs = prepare(cluster=files / "cluster.yaml", workload=files / "w.csv")
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    result = run_config(inputs, default_config(), "default", show_progress=True, console=console)
    assert len(result.jobs) == 3 and result.meta["config"] == "default"


RESERVATION_CONFIG = """actions: "elect, enqueue, reserve, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance},
            {name: reservation, arguments: {lockMode: %s, plan: %s}}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
simulation: {estimates: {model: noisy, spread: 2, seed: 3}}
"""


def test_compare_reservation_variants_from_config_files(app, files):
    """Reservation on/off, lock modes and the plan (with an estimate model) all come from config files."""
    a, b = files / "cluster-lock.yaml", files / "multi-plan.yaml"
    a.write_text(RESERVATION_CONFIG % ("cluster", "false"))
    b.write_text(RESERVATION_CONFIG % ("multi-node", "true"))
    out = files / "cmp-res"
    res = invoke(
        app,
        files,
        "compare",
        "default",
        str(a),
        str(b),
        "--workload",
        str(files / "w.csv"),
        "--cluster",
        str(files / "cluster.yaml"),
        "--output",
        str(out),
        "--no-progress",
    )
    assert res.exit_code == 0, res.stderr
    rows = json.loads((out / "comparison.json").read_text())
    assert [r["config"] for r in rows] == ["default", "cluster-lock", "multi-plan"]
    meta = json.loads((out / "multi-plan" / "meta.json").read_text())
    assert meta["estimates"].startswith("noisy")


def test_bad_simulation_section_is_exit_2(app, files):
    bad = files / "bad-sim.yaml"
    bad.write_text(RESERVATION_CONFIG.replace("spread: 2", "spread: 0.5") % ("cluster", "true"))
    res = invoke(
        app,
        files,
        "compare",
        str(bad),
        "--workload",
        str(files / "w.csv"),
        "--cluster",
        str(files / "cluster.yaml"),
        "--output",
        str(files / "x"),
        "--no-progress",
    )
    assert res.exit_code == 2 and "simulation.estimates.spread" in res.stderr and "bad-sim.yaml" in res.stderr
