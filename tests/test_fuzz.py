"""A seeded fuzz of corral's inputs (SPEC.md §5; the mutator is :mod:`tests.fuzzing`): every run exits 0
or 2, prints no traceback, lets no RuntimeWarning escape and leaves no half-written report. Most cases
run the CLI in this process (fast); a few run ``corral`` as a child process under a time and memory
bound, where a crash or a hang would show. ``benchmarks/fuzz_inputs.py --cases 10000`` is the long run."""

from __future__ import annotations

import pytest

from tests.fuzzing import reproducer, run_in_process, run_subprocess

CHUNK = 20
SCHEDULE_CASES = 160
SIMULATE_CASES = 40


def _check(outcomes: list) -> None:
    bad = [o for o in outcomes if not o.ok]
    assert not bad, "\n".join(
        f"{o.target} seed {o.seed}: {o.problem}\n  {o.stderr[-300:]}\n  {reproducer(o)}" for o in bad
    )
    assert {o.exit_code for o in outcomes} <= {0, 2}


@pytest.mark.parametrize("start", range(0, SCHEDULE_CASES, CHUNK))
def test_fuzz_schedule(start: int) -> None:
    _check([run_in_process("schedule", seed) for seed in range(start, start + CHUNK)])


@pytest.mark.parametrize("start", range(0, SIMULATE_CASES, CHUNK))
def test_fuzz_simulate_trace_readers(start: int) -> None:
    _check([run_in_process("simulate", seed) for seed in range(start, start + CHUNK)])


def test_fuzz_exit_codes_are_both_seen() -> None:
    """The mutator is neither too gentle nor too harsh: some cases are valid, some are refused."""
    codes = {run_in_process("schedule", seed).exit_code for seed in range(12)}
    assert codes == {0, 2}


@pytest.mark.parametrize("target,seed", [("schedule", 1), ("schedule", 2), ("simulate", 3)])
def test_fuzz_in_a_child_process(target: str, seed: int) -> None:
    outcome = run_subprocess(target, seed, timeout=60, memory_mb=6000)
    _check([outcome])


@pytest.mark.parametrize("target,seed", [("simulate", 100)])
def test_fuzz_regressions(target: str, seed: int) -> None:
    """Cases the long run (benchmarks/fuzz_inputs.py) once failed: simulate 100, a queue name too long
    for any plot layout, made matplotlib print a warning. In a child process: only there does a library
    warning reach stderr as a user would see it (pytest captures warnings in-process)."""
    _check([run_subprocess(target, seed, timeout=120, memory_mb=6000)])
