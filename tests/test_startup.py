"""Start-up cost (issue: large clusters): the simulator's libraries are imported only by the commands that
use them. ``import corral.cli`` (what ``corral --help`` pays) loads neither the scheduling core nor pandas
and matplotlib, and ``corral schedule`` loads the core but none of the simulator's report/workload modules.
Each check runs in a fresh interpreter and looks at ``sys.modules``: a behaviour test, not a timing one."""

from __future__ import annotations

import json
import subprocess
import sys

SIMULATOR_ONLY = (
    "pandas",
    "matplotlib",
    "pyarrow",
    "corral.sim.report",
    "corral.sim.workload",
    "corral.sim.engine",
    "kubernetes",
)


def _loaded(code: str) -> set[str]:
    probe = code + "\nimport json, sys\nsys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n"
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert "MODULES " in run.stderr, run.stderr[-2000:]
    return set(json.loads(run.stderr.rsplit("MODULES ", 1)[1]))


def test_import_cli_loads_no_simulator_nor_core() -> None:
    loaded = _loaded("import corral.cli")
    assert not loaded & set(SIMULATOR_ONLY), sorted(loaded & set(SIMULATOR_ONLY))
    assert "numpy" not in loaded and "corral.registry" not in loaded
    assert (
        "corral.commands.simulate" in loaded and "corral.commands.run" in loaded
    )  # the commands are registered


def test_schedule_loads_no_simulator_library() -> None:
    loaded = _loaded(
        "from corral.cli import app\n"
        "try:\n    app(['schedule', '-o', 'json'], standalone_mode=False)\n"
        "except SystemExit:\n    pass\n"
    )
    assert "corral.registry" in loaded  # it did schedule
    assert not loaded & set(SIMULATOR_ONLY), sorted(loaded & set(SIMULATOR_ONLY))
    assert not any(m.startswith("ortools") for m in loaded)  # the flow solver: only when flow runs


def test_help_lists_every_command() -> None:
    run = subprocess.run(
        [sys.executable, "-c", "from corral.cli import main; main()", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    for command in ("schedule", "validate", "simulate", "compare", "run"):
        assert command in run.stdout
