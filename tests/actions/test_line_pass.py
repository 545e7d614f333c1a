"""``allocate`` passes over the jobs behind a closed line (the LineRefusal point: strict FIFO's blocked
head) without a turn each: a speed change only. On congested strict FIFO and strict SJF simulations
(two queues, gang restarts, a node failure, injected evictions) every cycle's decisions, reasons
included, and every record are the same with the pass and without it; ``CORRAL_CHECK_INDEX=1``'s check
(each pod of a passed-over job is refused for the promised reason) holds throughout, and catches a
broken promise."""

from __future__ import annotations

import pytest

from corral.actions.allocate import AllocateAction
from corral.plugins.baselines import FifoPlugin
from tests.plugins.test_fifo_line import _run


@pytest.mark.parametrize("order,restart", [(("fifo",), "job"), (("sjf", "fifo"), "pods")])
def test_passing_over_a_closed_line_changes_no_decision(monkeypatch, order, restart):
    passed: list[bool] = []
    real = AllocateAction.pass_over

    def spying(self, session, queue, job, task_key=None):
        got = real(self, session, queue, job, task_key)
        passed.append(got)
        return got

    monkeypatch.setattr(AllocateAction, "pass_over", spying)
    on_cycles, on = _run(monkeypatch, order, restart, skip=True, check_index=True)
    assert sum(passed) > 20, "jobs behind a blocked head should be passed over"
    monkeypatch.setattr(AllocateAction, "pass_over_lines", False)
    passed.clear()
    off_cycles, off = _run(monkeypatch, order, restart, skip=True)
    assert not passed
    assert on_cycles == off_cycles
    assert on == off


def test_the_check_catches_a_broken_promise(monkeypatch):
    monkeypatch.setattr(FifoPlugin, "line_refusal", lambda self, queue, job: "made up")
    with pytest.raises(AssertionError, match="LineRefusal says 'made up'"):
        _run(monkeypatch, ("fifo",), "job", skip=True, check_index=True)
