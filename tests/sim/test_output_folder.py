"""``--output`` never destroys what corral did not write (SPEC.md §5): a folder that is not a previous
report is refused (exit 2, one line) unless ``--force``; a previous report is replaced only once the new
one is complete; the current folder is never replaced."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from corral.commands.simulate import register
from corral.errors import InputError
from corral.files import MARKER, atomic_folder, atomic_write, is_report

CLUSTER = "nodes:\n- {name: n, count: 2, gpus: 8}\n"
WORKLOAD = "name,submit,duration,queue,pods,gpu\na,0,100,q1,1,8\nb,0,100,q2,2,8\n"


@pytest.fixture()
def files(tmp_path: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "w.csv").write_text(WORKLOAD)
    return tmp_path


def simulate(files: Path, out: Path | str, *extra: str):
    app = typer.Typer()
    register(app)
    return CliRunner().invoke(
        app,
        [
            "simulate",
            "--workload",
            str(files / "w.csv"),
            "--cluster",
            str(files / "cluster.yaml"),
            "--output",
            str(out),
            "--no-progress",
            *extra,
        ],
    )


def compare(files: Path, out: Path, *extra: str):
    app = typer.Typer()
    register(app)
    return CliRunner().invoke(
        app,
        [
            "compare",
            "default",
            "--workload",
            str(files / "w.csv"),
            "--cluster",
            str(files / "cluster.yaml"),
            "-o",
            str(out),
            "--no-progress",
            *extra,
        ],
    )


def one_error(res, *parts: str) -> None:
    assert res.exit_code == 2, res.output
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for part in parts:
        assert part in lines[0]


def test_a_folder_of_other_files_is_refused_and_kept(files):
    project = files / "project"
    project.mkdir()
    (project / "main.py").write_text("print('mine')\n")
    for run in (simulate, compare):
        one_error(run(files, project), str(project), "not a corral report", "--force")
        assert sorted(p.name for p in project.iterdir()) == ["main.py"]
    assert not [p for p in files.iterdir() if p.name.startswith(".project")], "no temporary left behind"


def test_force_replaces_the_folder(files):
    project = files / "project"
    project.mkdir()
    (project / "main.py").write_text("x")
    res = simulate(files, project, "--force")
    assert res.exit_code == 0, res.output
    assert not (project / "main.py").exists() and (project / "summary.json").is_file()
    assert (project / MARKER).is_file()


def test_a_previous_report_is_replaced(files):
    out = files / "r"
    assert simulate(files, out).exit_code == 0
    (out / "stale.png").write_bytes(b"old")
    res = simulate(files, out)
    assert res.exit_code == 0, res.output
    assert (
        not (out / "stale.png").exists() and json.loads((out / "summary.json").read_text())["jobs_total"] == 2
    )


def test_a_comparison_is_a_report_too(files):
    out = files / "c"
    assert compare(files, out).exit_code == 0
    assert is_report(out)
    (out / MARKER).unlink()  # a comparison written before the marker existed
    assert is_report(out)
    assert compare(files, out).exit_code == 0


def test_an_empty_folder_is_used(files):
    out = files / "empty"
    out.mkdir()
    assert simulate(files, out).exit_code == 0
    assert (out / "index.html").is_file()


def test_the_current_folder_is_never_replaced(files, monkeypatch):
    monkeypatch.chdir(files)
    before = sorted(p.name for p in files.iterdir())
    one_error(simulate(files, ".", "--force"), "current folder")
    one_error(simulate(files, files.parent, "--force"), "current folder")
    assert sorted(p.name for p in files.iterdir()) == before


def test_a_file_in_the_way_is_refused(files):
    target = files / "report"
    target.write_text("mine")
    one_error(simulate(files, target, "--force"), "not a folder")
    assert target.read_text() == "mine"


def test_a_failing_fill_keeps_the_previous_report(tmp_path):
    out = tmp_path / "r"
    atomic_folder(out, lambda tmp: (tmp / "index.html").write_text("old"))

    def broken(tmp: Path) -> None:
        (tmp / "index.html").write_text("half")
        raise InputError("boom")

    with pytest.raises(InputError):
        atomic_folder(out, broken)
    assert (out / "index.html").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path, monkeypatch):
    path = tmp_path / "f.json"
    atomic_write(path, "old")

    def fail(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        atomic_write(path, "new")
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]
