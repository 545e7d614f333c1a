"""The commands are the top floor (DESIGN.md, "The target plan"): every command lives in ``corral.commands``
and nothing below imports it — only the console script's entry (``corral.cli``) does."""

from __future__ import annotations

from tests.test_imports import ROOT, graph


def test_nothing_below_the_commands_imports_them() -> None:
    arrows, known = graph(ROOT)
    assert "corral.commands.app" in known
    up = sorted(
        f"{name} -> {target}"
        for name, targets in arrows.items()
        if name != "corral.cli" and name != "corral.commands" and not name.startswith("corral.commands.")
        for target in targets
        if target == "corral.commands" or target.startswith("corral.commands.")
    )
    assert up == []


def test_the_command_line_modules_are_gone_from_the_floors_below() -> None:
    """``corral.cli`` is the entry alone; no command is left in the simulator or the live scheduler."""
    arrows, known = graph(ROOT)
    assert not {"corral.cli_errors", "corral.cli_inputs", "corral.tables", "corral.whatif"} & set(known)
    assert not {"corral.sim.commands", "corral.sim.sweep_cli", "corral.sim.command_common"} & set(known)
    assert "corral.kube.command" not in known
    assert set(arrows["corral.cli"]) <= {
        "corral.commands.app",
        "corral.commands.options",
        "corral.commands.schedule",
    }
