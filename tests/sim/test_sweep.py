"""``corral sweep``: the grid, its tables and intervals, resuming, whole cells, one-line spec errors,
the process pool and Ray giving the same bytes as one process."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from corral.sim import sweep as sweep_module
from corral.sim.progress import CellProgress, LogProgress
from corral.sim.report import METRICS
from corral.sim.sweep import CellStore, run_sweep
from corral.sim.sweep_report import summarize_sweep, t_quantile
from corral.sim.sweep_spec import load_sweep_spec

CLUSTER = "nodes:\n- {name: n, count: 2, gpus: 8}\ntopology: {tiers: [2]}\n"
WORKLOAD = "name,submit,duration,queue,pods,gpu\n" + "".join(
    f"j{i},{i * 40},{300 + (i * 37) % 500},q{i % 2},{1 + i % 2},{1 + i % 8}\n" for i in range(24)
)
SJF_NOISY = """actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: sjf}, {name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
simulation:
  estimates: {model: noisy, spread: 4}
"""
SPEC = """configs:
  default: default
  sjf: sjf.yaml
workloads:
- {name: tiny, file: w.csv, scales: [1, 0.5]}
clusters: [cluster.yaml]
seeds: 3
workers: 1
"""


@pytest.fixture()
def files(tmp_path: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "w.csv").write_text(WORKLOAD)
    (tmp_path / "sjf.yaml").write_text(SJF_NOISY)
    (tmp_path / "sweep.yaml").write_text(SPEC)
    return tmp_path


def _app() -> typer.Typer:
    from corral.commands.simulate import register

    app = typer.Typer()
    register(app)
    return app


def _sweep(folder: Path, *args: str):
    return CliRunner().invoke(
        _app(), ["sweep", str(folder / "sweep.yaml"), "-o", str(folder / "out"), "--no-progress", *args]
    )


def _cells(out: Path) -> dict[str, dict]:
    """Each cell's figures without the timings of its run, and its jobs' bytes."""
    got = {}
    for cell in sorted((out / "cells").iterdir()):
        record = json.loads((cell / "cell.json").read_text())
        record["run"] = {k: record["run"][k] for k in ("events", "cycles", "end_time")}
        got[cell.name] = {"record": record, "jobs": (cell / "jobs.parquet").read_bytes()}
    return got


def test_the_grid_runs_and_every_table_is_written(files: Path) -> None:
    res = _sweep(files)
    assert res.exit_code == 0, res.output
    out = files / "out"
    results = pd.read_parquet(out / "results.parquet")
    assert len(results) == 2 * 2 * 3  # configs x scales x seeds
    assert pd.read_csv(out / "results.csv").shape == results.shape
    assert (results["jobs_total"] == 24).all() and (results["cpu_time"] > 0).all()
    assert (results["events"] > 0).all() and (results["cycles"] > 0).all()
    sizes = pd.read_parquet(out / "results_by_size.parquet")
    assert set(sizes["size"]) == {"1 GPU", "2-8", "9-32"}
    assert sizes.groupby(["config", "scale", "seed"])["jobs"].sum().eq(24).all()
    jobs = pd.read_parquet(out / "jobs.parquet")
    assert len(jobs) == 12 * 24 and {"config", "seed", "wait", "status"} <= set(jobs.columns)
    summary = pd.read_csv(out / "summary.csv")
    row = summary[(summary.config == "sjf") & (summary.metric == "wait_mean") & (summary.scale == 1.0)].iloc[
        0
    ]
    assert row["n"] == 3 and row["baseline"] == "default"
    # noisy estimates differ by seed: the interval is not empty and the baseline column is filled
    assert row["ci95"] > 0 and row["ci95_low"] < row["mean"] < row["ci95_high"]
    assert row["vs_baseline"] == pytest.approx(row["mean"] / row["baseline_mean"] - 1)
    page = (out / "index.html").read_text()
    assert "sjf.yaml" in page and "load scale ×0.5" in page and "vs baseline" in page
    assert "sjf" in res.stdout and "index.html" in res.stdout


SMALL = SPEC.replace("seeds: 3", "seeds: [0, 1]").replace("scales: [1, 0.5]", "scales: [1]")


def test_a_finished_cell_is_not_run_again_and_a_changed_config_is(files: Path, monkeypatch) -> None:
    (files / "sweep.yaml").write_text(SMALL)
    assert _sweep(files).exit_code == 0
    before = _cells(files / "out")
    ran: list = []
    real = sweep_module.run_cell
    monkeypatch.setattr(sweep_module, "run_cell", lambda cell: ran.append(cell) or real(cell))
    assert _sweep(files).exit_code == 0
    assert ran == [] and _cells(files / "out") == before
    (files / "sjf.yaml").write_text(SJF_NOISY.replace("spread: 4", "spread: 3"))
    assert _sweep(files).exit_code == 0
    assert len(ran) == 2 and {c.config for c in ran} == {"sjf"}
    assert len(pd.read_csv(files / "out" / "results.csv")) == 4  # only the spec's cells are tabled


def test_a_crash_while_writing_leaves_no_half_cell(files: Path, monkeypatch) -> None:
    spec = load_sweep_spec(files / "sweep.yaml")
    store = CellStore(files / "out")
    figures = sweep_module.run_cell(spec.cells[0])

    def broken(self, *args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(Path, "write_text", broken)
    with pytest.raises(OSError):
        store.save(spec.cells[0], figures)
    monkeypatch.undo()
    assert not store.done(spec.cells[0]) and list(store.root.iterdir()) == []


def test_a_bad_cell_stops_the_sweep_with_one_line_and_keeps_the_finished(files: Path) -> None:
    (files / "bad.csv").write_text("name,submit,duration,queue,pods,gpu\na,0,100,q,1,8\nb,0,-5,q,1,8\n")
    spec = SPEC.replace("clusters:", "- {name: bad, file: bad.csv}\nclusters:")
    (files / "sweep.yaml").write_text(spec)
    res = _sweep(files)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert "bad.csv" in res.stderr and "row" in res.stderr
    assert len(list((files / "out" / "cells").iterdir())) == 6  # the tiny cells of the first config


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("configs: {a: nope.yaml}\n", ["field configs.a", "no such file"]),
        ("configs: [default]\nworkers: 0\n", ["field workers"]),
        ("configs: [default]\nbaseline: x\n", ["field baseline", "not one of"]),
        ("configs: [default]\nseeds: [1, -1]\n", ["field seeds[1]"]),
        ("configs: [default]\nseed: 3\n", ["field seed", "unknown key"]),
        (
            "configs: [default]\nworkloads: [{file: w.csv, windows: [[0, 9q]]}]\n",
            ["workloads[0].windows[0][1]"],
        ),
        ("configs: [default]\nworkloads: [{file: w.csv, format: nope}]\n", ["workloads[0].format"]),
        ("configs: [default]\nworkloads: [{file: w.csv, scale: 2}]\n", ["workloads[0].scale", "unknown key"]),
        ("configs: [default]\noptions: {until: soon}\n", ["field options.until"]),
        ("configs: [default]\noptions: {schedule_period: 0}\n", ["field options.schedule_period"]),
        ("configs: [default]\nexecutor: dask\n", ["field executor"]),
        ("configs: [default, default]\n", ["used twice"]),
        ("workloads: []\n", ["field configs", "missing"]),
        ("- a\n- b\n", ["one YAML mapping"]),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_key(files: Path, text: str, words: list[str]) -> None:
    (files / "sweep.yaml").write_text(text)
    res = _sweep(files)
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1
    for word in words:
        assert word in res.stderr
    assert not (files / "out").exists()


def test_a_bad_config_or_cluster_is_refused_before_any_cell_runs(files: Path) -> None:
    (files / "sjf.yaml").write_text("actions: allocate\ntiers: [{plugins: [{name: nosuch}]}]\n")
    res = _sweep(files)
    assert res.exit_code == 2 and "sjf.yaml" in res.stderr and "nosuch" in res.stderr
    assert not (files / "out" / "cells").exists()
    (files / "sjf.yaml").write_text(SJF_NOISY)
    (files / "cluster.yaml").write_text("nodes:\n- {name: n, count: 2, gpus: 8, memory: 768}\n")
    res = _sweep(files)
    assert res.exit_code == 2 and "cluster.yaml" in res.stderr and "memory" in res.stderr
    assert not (files / "out" / "cells").exists()


def test_a_folder_that_is_not_a_sweep_is_refused(files: Path) -> None:
    (files / "out").mkdir()
    (files / "out" / "mine.txt").write_text("keep")
    res = _sweep(files)
    assert res.exit_code == 2 and "not a corral sweep" in res.stderr
    assert (files / "out" / "mine.txt").read_text() == "keep"


def test_two_workers_write_the_same_cells_as_one(files: Path) -> None:
    (files / "sweep.yaml").write_text(SMALL)
    spec = load_sweep_spec(files / "sweep.yaml")
    run_sweep(spec, files / "one", workers=1)
    run_sweep(spec, files / "two", workers=2)
    assert _cells(files / "one") == _cells(files / "two")


def test_ray_runs_the_cells_and_writes_the_same_bytes(files: Path) -> None:
    ray = pytest.importorskip("ray")
    (files / "sweep.yaml").write_text(SMALL)
    spec = load_sweep_spec(files / "sweep.yaml")
    run_sweep(spec, files / "one", workers=1)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        run_sweep(spec, files / "ray", executor="ray", workers=1)
    finally:
        ray.shutdown()
    assert _cells(files / "one") == _cells(files / "ray")


def test_without_ray_the_ray_executor_is_one_line(files: Path, monkeypatch) -> None:
    import builtins

    real = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    res = _sweep(files, "--executor", "ray")
    assert res.exit_code == 2 and "corral[ray]" in res.stderr


def test_t_quantiles_and_the_paired_interval() -> None:
    assert t_quantile(1) == 12.706 and t_quantile(30) == 2.042
    assert t_quantile(31) == pytest.approx(2.0395, abs=2e-4) and t_quantile(120) == pytest.approx(
        1.9799, abs=2e-4
    )
    rows = []
    for seed, (a, b) in enumerate([(10.0, 12.0), (20.0, 23.0), (30.0, 31.0)]):
        for config, wait in (("base", a), ("new", b)):
            rows.append(
                {
                    "workload": "w",
                    "window": "all",
                    "scale": 1.0,
                    "cluster": "c",
                    "config": config,
                    "seed": seed,
                    "wait_mean": wait,
                }
            )
    runs = pd.DataFrame(rows)
    for metric in METRICS:
        if metric not in runs:
            runs[metric] = math.nan
    for metric in ("cpu_time", "wall_time", "events", "cycles"):
        runs[metric] = 1.0
    summary = summarize_sweep(runs, "base")
    new = summary[(summary.config == "new") & (summary.metric == "wait_mean")].iloc[0]
    assert new["mean"] == pytest.approx(22.0) and new["std"] == pytest.approx(9.5394, abs=1e-4)
    assert new["ci95"] == pytest.approx(4.303 * 9.5394 / math.sqrt(3), abs=1e-3)
    # paired over the seeds: differences 2, 3, 1 -> mean 2, sd 1
    assert new["diff_mean"] == pytest.approx(2.0) and new["diff_ci95"] == pytest.approx(
        4.303 / math.sqrt(3), abs=1e-4
    )
    assert new["vs_baseline"] == pytest.approx(22.0 / 20.0 - 1)
    empty = summary[(summary.config == "new") & (summary.metric == "jct_mean")].iloc[0]
    assert empty["n"] == 0 and pd.isna(empty["mean"])


def test_progress_lines_when_not_on_a_terminal() -> None:
    stream = io.StringIO()
    log = LogProgress(100, 3600.0, "fifo", every=0.0, stream=stream)
    log.update(1800.0, 40, 100)
    assert stream.getvalue().startswith("fifo: 40/100 jobs done, 0 waiting, simulated 30 min of 60 min")
    quiet = io.StringIO()
    LogProgress(100, None, "x", every=3600.0, stream=quiet).update(1.0, 1, 100)
    assert quiet.getvalue() == ""
    cells = io.StringIO()
    bar = CellProgress(None, every=0.0, stream=cells)
    bar.update(3, 1, 8)
    bar.close()
    assert cells.getvalue().splitlines()[0].startswith("sweep: 3/8 cells done (1 reused)")


class FakeRay:
    """Ray's API as run_on_ray uses it, running each task at once: what ray.init was asked for."""

    class TaskError(Exception):
        def __init__(self, cause: BaseException) -> None:
            super().__init__(str(cause))
            self.cause = cause

    class Ref:
        value = None
        error = None

    def __init__(self) -> None:
        self.inits: list[dict] = []
        self.up = False

    def is_initialized(self) -> bool:
        return self.up

    def init(self, address=None, **kwargs) -> None:
        self.inits.append({"address": address, **kwargs})
        self.up = True

    def shutdown(self) -> None:
        self.up = False

    def remote(self, **options):
        def wrap(fn):
            class Task:
                @staticmethod
                def remote(*args):
                    ref = FakeRay.Ref()
                    try:
                        ref.value = fn(*args)
                    except Exception as exc:
                        ref.error = FakeRay.TaskError(exc)
                    return ref

            return Task

        return wrap

    def wait(self, refs, num_returns=1):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        if ref.error is not None:
            raise ref.error
        return ref.value

    def cancel(self, ref) -> None:
        pass


def test_ray_is_started_locally_or_reached_where_asked(files: Path, monkeypatch) -> None:
    import socket
    import sys

    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (files / "sweep.yaml").write_text(SMALL)
    spec = load_sweep_spec(files / "sweep.yaml")
    run_sweep(spec, files / "a", executor="ray", workers=3)
    assert fake.inits[-1]["address"] is None and fake.inits[-1]["num_cpus"] == 3 and not fake.up
    with socket.create_server(("127.0.0.1", 0)) as head:  # something answers there, as a head does
        port = head.getsockname()[1]
        monkeypatch.setenv("RAY_ADDRESS", f"ray://127.0.0.1:{port}")
        run_sweep(spec, files / "b", executor="ray", workers=3)
        assert fake.inits[-1]["address"] is None and "num_cpus" not in fake.inits[-1]  # ray.init reads it
        run_sweep(spec, files / "c", executor="ray", workers=3, address=f"127.0.0.1:{port}")
        assert fake.inits[-1]["address"] == f"127.0.0.1:{port}" and "num_cpus" not in fake.inits[-1]
    monkeypatch.delenv("RAY_ADDRESS")
    assert _cells(files / "a") == _cells(files / "b") == _cells(files / "c")
    # a task's own error comes back as itself: one line, exit code 2
    (files / "w.csv").write_text("name,submit,duration,queue,pods,gpu\na,0,-5,q,1,8\n")
    res = _sweep(files, "--executor", "ray")
    assert res.exit_code == 2 and "w.csv" in res.stderr and res.stderr.count("\n") == 1, res.output


def _closed_port() -> int:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def test_an_address_where_no_cluster_answers_is_one_line_not_a_hang(files: Path, monkeypatch) -> None:
    """``ray.init`` retries an address where nothing listens for many minutes: the address is probed
    first, and refused in one line naming where it came from."""
    import sys

    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (files / "sweep.yaml").write_text(SMALL)
    res = _sweep(files, "--executor", "ray", "--address", f"127.0.0.1:{_closed_port()}")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    assert "field --address" in res.stderr and "no Ray cluster answers at 127.0.0.1:" in res.stderr
    monkeypatch.setenv("RAY_ADDRESS", f"ray://127.0.0.1:{_closed_port()}")
    res = _sweep(files, "--executor", "ray")
    assert res.exit_code == 2 and "field RAY_ADDRESS" in res.stderr and "ray://127.0.0.1:" in res.stderr
    assert fake.inits == [] and not (files / "out" / "cells").exists()


def test_a_cluster_whose_workers_lack_corral_is_one_line(files: Path, monkeypatch) -> None:
    """Ray reports a worker that cannot import corral as a RayTaskError whose cause is a RaySystemError
    ``System error: No module named 'corral'`` (seen on a head whose workers could not import it): one
    line naming the cell and what the cluster needs, exit code 2, not an internal error."""
    import sys

    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    def no_corral(cell):
        raise RuntimeError(
            "System error: No module named 'corral'\ntraceback: Traceback (most recent call last):"
        )

    from corral.sim import sweep_ray

    monkeypatch.setattr(sweep_ray, "run_cell", no_corral)  # what the Ray executor submits
    (files / "sweep.yaml").write_text(SMALL)
    res = _sweep(files, "--executor", "ray")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    assert (
        "cannot import corral" in res.stderr and "every node" in res.stderr and "default__tiny" in res.stderr
    )


def test_an_address_asks_for_ray_and_is_refused_beside_the_local_executor(files: Path, monkeypatch) -> None:
    """An address only means something to Ray: given without an executor it runs the sweep on Ray; beside
    the local executor it is refused (never silently unused)."""
    import socket
    import sys

    fake = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (files / "sweep.yaml").write_text(SMALL.replace("workers: 1\n", ""))
    with socket.create_server(("127.0.0.1", 0)) as head:
        address = f"127.0.0.1:{head.getsockname()[1]}"
        assert _sweep(files, "--address", address).exit_code == 0
        assert [i["address"] for i in fake.inits] == [address]
        res = _sweep(files, "--address", address, "--executor", "local")
        assert res.exit_code == 2 and "field --address" in res.stderr and "--executor ray" in res.stderr
        (files / "sweep.yaml").write_text(SMALL + f"address: {address}\n")
        assert load_sweep_spec(files / "sweep.yaml").executor == "ray"
        (files / "sweep.yaml").write_text(SMALL + f"address: {address}\nexecutor: local\n")
        res = _sweep(files)
        assert res.exit_code == 2 and "field address" in res.stderr and "executor: ray" in res.stderr
    assert len(fake.inits) == 1
