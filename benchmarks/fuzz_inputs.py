"""Fuzz corral's inputs: ``python benchmarks/fuzz_inputs.py --cases 10000``.

Builds each case from its seed with the mutator of ``tests/fuzzing.py`` (a mutated example snapshot and
scheduler configuration for ``corral schedule``; a mutated cluster spec, trace and options for ``corral
simulate``), runs it, and prints the exit-code histogram and every failure with its reproducer. A
failure is a crash, a hang (over ``--timeout`` seconds), a traceback, an exit code other than 0 or 2, an
exit 2 without exactly one ``error:`` line, a RuntimeWarning, or a half-written report.

Most cases run the CLI inside worker processes (fast), each worker bounded by ``--memory-mb`` of address
space and each case by a SIGALRM ``--timeout``; every ``--subprocess-every``-th case runs ``corral`` as
a child process instead (a real exit code, a crash would show as a signal).

Target: 0 failures on 10,000 cases.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import resource
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fuzzing import Outcome, reproducer, run_in_process, run_subprocess  # noqa: E402


class _Timeout(BaseException):
    pass


def _alarm(_signum: int, _frame: object) -> None:
    raise _Timeout()


def _init(memory_mb: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    signal.signal(signal.SIGALRM, _alarm)


def _target(seed: int, simulate_share: float) -> str:
    return "simulate" if (seed * 2654435761 % 1000) / 1000 < simulate_share else "schedule"


def _one(job: tuple[int, float, int, int, int]) -> Outcome:
    seed, share, timeout, every, memory_mb = job
    target = _target(seed, share)
    if every and seed % every == 0:
        return run_subprocess(target, seed, timeout=timeout, memory_mb=memory_mb)
    signal.alarm(timeout)
    start = time.perf_counter()
    try:
        return run_in_process(target, seed)
    except _Timeout:
        return Outcome(seed, target, None, f"hang: more than {timeout} s", time.perf_counter() - start)
    except MemoryError:
        return Outcome(seed, target, None, "memory: more than the bound", time.perf_counter() - start)
    finally:
        signal.alarm(0)


def _histogram_line(histogram: collections.Counter) -> str:
    return ", ".join(
        f"{'none' if code is None else code}: {count}"
        for code, count in sorted(histogram.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--start", type=int, default=100_000, help="first seed (the suite uses 0-199)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--simulate-share", type=float, default=0.2, help="share of simulate cases")
    parser.add_argument("--timeout", type=int, default=60, help="seconds before a case counts as a hang")
    parser.add_argument(
        "--memory-mb",
        type=int,
        default=6000,
        help="address-space bound (virtual: numpy and OR-Tools reserve much more than they touch)",
    )
    parser.add_argument("--subprocess-every", type=int, default=100)
    args = parser.parse_args()

    jobs = [
        (seed, args.simulate_share, args.timeout, args.subprocess_every, args.memory_mb)
        for seed in range(args.start, args.start + args.cases)
    ]
    histogram: collections.Counter = collections.Counter()
    by_target: collections.Counter = collections.Counter()
    failures: list[Outcome] = []
    slowest = (0.0, -1)
    started = time.perf_counter()
    with multiprocessing.Pool(
        args.workers, initializer=_init, initargs=(args.memory_mb,), maxtasksperchild=200
    ) as pool:
        for n, outcome in enumerate(pool.imap_unordered(_one, jobs, chunksize=4), 1):
            histogram[outcome.exit_code] += 1
            by_target[outcome.target] += 1
            slowest = max(slowest, (outcome.seconds, outcome.seed))
            if not outcome.ok:
                failures.append(outcome)
                print(f"FAIL {outcome.target} seed {outcome.seed}: {outcome.problem}", flush=True)
            if n % 500 == 0:
                print(
                    f"... {n} cases, {len(failures)} failures, {time.perf_counter() - started:.0f} s; "
                    f"exit codes so far {_histogram_line(histogram)}",
                    flush=True,
                )
    elapsed = time.perf_counter() - started
    print(
        f"\n{args.cases} cases ({dict(by_target)}) in {elapsed:.0f} s with {args.workers} workers; "
        f"slowest case {slowest[0]:.1f} s (seed {slowest[1]})"
    )
    print("exit-code histogram:")
    for code, count in sorted(histogram.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        label = "none (hang or crash)" if code is None else str(code)
        print(f"  {label:>20}: {count}")
    kinds = collections.Counter(f.problem.split(":")[0] for f in failures)
    print(f"failures: {len(failures)} (target 0) {dict(kinds)}")
    for f in failures[:50]:
        print(
            f"\n{f.target} seed {f.seed}: {f.problem}\n  stderr: {f.stderr[-400:]!r}\n  reproduce: "
            f"{reproducer(f)}"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
