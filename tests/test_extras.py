"""The extras of pyproject.toml (src/corral/extras.py): each front end runs with the other front ends'
libraries blocked (``sys.modules`` entries set to None, so any import of them fails), every library it
imports is one its extras declare (directly or through their requirements), and a command whose extra is
missing exits 2 with one line naming the install that adds it."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distributions, requires
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from typer.testing import CliRunner

from corral.cli import app
from corral.extras import EXTRAS
from tests.kube.fakeapi import FakeAPI
from tests.kube.test_live import preempt_objects

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
SIM_LIBRARIES = {"pandas", "pyarrow", "matplotlib", "ortools", "rapidyaml"}


def _modules(*extras: str) -> list[str]:
    return [module for extra in extras for module, _ in EXTRAS[extra]]


def closure(*extras: str) -> set[str]:
    """The distributions ``pip install corral[extras]`` installs: the core's and the extras'
    requirements and theirs, markers evaluated here (from the installed metadata)."""
    todo = [(Requirement(r), ()) for r in PROJECT["dependencies"]]
    for extra in extras:
        todo += [(Requirement(r), ()) for r in PROJECT["optional-dependencies"][extra]]
    seen: set[str] = set()
    while todo:
        req, _ = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            subs = requires(req.name) or []
        except PackageNotFoundError:
            continue
        for text in subs:
            sub = Requirement(text)
            wanted = [""] + sorted(req.extras)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in wanted):
                todo.append((sub, ()))
    return seen


def run_blocked(
    args: list[str], blocked: list[str], tmp_path: Path
) -> tuple[subprocess.CompletedProcess, set]:
    """``corral args`` in a fresh interpreter with ``blocked`` modules unimportable; the distributions
    owning the files of the modules it imported (beyond those the interpreter started with; by file, as
    namespace packages such as ``google`` span distributions)."""
    out = tmp_path / "imported.json"
    code = (
        "import sys, json, atexit\n"
        f"for m in {blocked!r}: sys.modules[m] = None\n"
        "before = set(sys.modules)\n"
        "def dump():\n"
        "    files = [getattr(v, '__file__', None) for m, v in list(sys.modules.items()) if m not in before]\n"
        f"    open({str(out)!r}, 'w').write(json.dumps(sorted({{f for f in files if f}})))\n"
        "atexit.register(dump)\n"
        "from corral.cli import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=180, cwd=tmp_path
    )
    files = {str(Path(f).resolve()) for f in json.loads(out.read_text())}
    owners = set()
    for dist in distributions():
        for f in dist.files or []:
            if str(Path(str(dist.locate_file(f))).resolve()) in files:
                owners.add(canonicalize_name(dist.metadata["Name"]))
                break
    return done, owners - {"corral"}


def test_the_live_extra_leaves_the_simulators_libraries_out() -> None:
    assert not closure("live") & SIM_LIBRARIES, closure("live") & SIM_LIBRARIES
    assert not closure() & (SIM_LIBRARIES | {"kubernetes", "prometheus-client"})
    assert {"kubernetes", "prometheus-client"} <= closure("live")
    assert SIM_LIBRARIES - {"rapidyaml"} <= closure("sim")
    # the tests install every extra
    test_extra = [Requirement(r) for r in PROJECT["optional-dependencies"]["test"]]
    [own] = [r for r in test_extra if r.name == "corral"]
    assert own.extras == set(EXTRAS)


def test_corral_schedule_runs_on_the_core_alone(tmp_path: Path) -> None:
    blocked = _modules("live", "sim", "flow", "fast-yaml")
    done, imported = run_blocked(["schedule", "-o", "json"], blocked, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["binds"]
    assert {"numpy", "pyyaml", "typer"} <= imported
    assert imported <= closure(), imported - closure()


def test_corral_run_runs_on_the_live_extra(tmp_path: Path) -> None:
    server = FakeAPI().start()
    try:
        server.add_all(preempt_objects())
        args = ["run", "--server", server.url, "--dry-run", "--cycles", "1", "--metrics-bind-address", "-1"]
        # kubernetes-validate (a test dependency) is blocked too: the Kubernetes client imports it when
        # it is installed, which a corral[live] install does not do
        blocked = _modules("sim", "flow", "fast-yaml") + ["kubernetes_validate"]
        done, imported = run_blocked(args, blocked, tmp_path)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["binds"]
    assert {"kubernetes", "prometheus-client"} <= imported
    assert imported <= closure("live"), imported - closure("live")


@pytest.mark.parametrize(
    ("args", "blocked", "extra"),
    [
        (["run", "--server", "http://127.0.0.1:9", "--dry-run"], ["kubernetes"], "live"),
        (["run", "--server", "http://127.0.0.1:9", "--dry-run"], ["prometheus_client"], "live"),
        (["simulate", "-o", "OUT"], ["pandas"], "sim"),
        (["compare", "default", "-o", "OUT"], ["ortools"], "sim"),
        (["sweep", "SPEC", "-o", "OUT"], ["pandas"], "sim"),
        (["schedule", "DRA"], ["cel"], "dra"),
    ],
)
def test_a_missing_extra_is_one_line(args, blocked, extra, monkeypatch, tmp_path: Path) -> None:
    for m in blocked:
        monkeypatch.setitem(sys.modules, m, None)
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    args = [str(tmp_path / "sweep.yaml") if a == "SPEC" else a for a in args]  # never read: refused first
    if "DRA" in args:  # a snapshot whose pods have resource claims (CEL selectors)
        from tests.scenarios.expand import expand

        case = yaml.safe_load((ROOT / "tests/scenarios/cases/dra_gang_all_or_nothing.yaml").read_text())
        (tmp_path / "dra.yaml").write_text(yaml.safe_dump_all(expand(case)))
        args = [str(tmp_path / "dra.yaml") if a == "DRA" else a for a in args]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert f"pip install 'corral[{extra}]'" in res.stderr and "Traceback" not in res.output
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_the_flow_action_without_ortools_is_refused(monkeypatch, tmp_path: Path) -> None:
    cfg = tmp_path / "flow.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {"actions": "enqueue, flow", "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}]}]}
        )
    )
    monkeypatch.setitem(sys.modules, "ortools", None)
    res = CliRunner().invoke(app, ["schedule", "--config", str(cfg)])
    assert res.exit_code == 2, res.output
    assert "'flow' action" in res.stderr and "pip install 'corral[flow]'" in res.stderr
    monkeypatch.delitem(sys.modules, "ortools")
    assert CliRunner().invoke(app, ["schedule", "--config", str(cfg)]).exit_code == 0
