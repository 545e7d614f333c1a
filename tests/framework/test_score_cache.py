"""Keeping NodeOrder scores per pod signature (``Session.score_key``, CapacityView) is a speed change
only: the decisions of the whole scenario suite are byte-identical with the score cache on and off.
A wrong cache hint (a plugin calling a score ``"row"`` that depends on other nodes or pods, e.g.
nodeorder's inter-pod score, which placed pods' own terms change) shows up here as a difference."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.framework.session import Session
from tests.scenarios.test_scenarios import CASES, suite_decisions


def test_scenario_suite_decisions_identical_with_and_without_the_score_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on = suite_decisions(tmp_path / "on")
    monkeypatch.setattr(Session, "score_key", lambda self, task: None)
    off = suite_decisions(tmp_path / "off")
    assert len(on) == len(CASES) > 100
    different = [name for name in on if on[name] != off[name]]
    assert not different, f"decisions differ with the score cache on/off: {different[:5]}"
