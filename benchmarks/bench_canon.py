"""The research canon on the Philly week: FIFO, greedy, SJF, SRTF and Tiresias side by side (issue 29).

The Philly trace's week of 1-8 October 2017 (10,650 jobs, ../shared/traces/philly/philly.csv), all in one
queue, on 40 and 80 nodes x 8 GPUs, under the configurations of ``docs/examples/baselines/`` that place as
the research simulators place (consolidated):

- ``fifo``: ``fifo-consolidated.yaml`` at a 1 s period (strict FIFO);
- ``greedy``: ``greedy-consolidated.yaml`` at 1 s (first fit in submission order);
- ``sjf``: ``sjf-consolidated.yaml`` at 1 s (strict SJF on exact run times);
- ``srtf``: ``srtf.yaml`` at 1 s (Lucid's preemptive SRTF: ``timeslice`` with ``srtf``);
- ``tiresias``: ``tiresias.yaml`` at 60 s (Lucid's Tiresias: ``timeslice`` with ``las``, 2 queues at
  18,000 GPU-seconds);
- ``default``: corral's built-in default configuration at the simulator's default period (10 s), as
  ``bench_backlog.py`` runs it: the yardstick of issue 29's CPU bar (every baseline within 2x its CPU);
- ``default-1s``: the same at the baselines' own 1 s period (Lucid's): the bar read as "the same run"
  at the same period. Both yardsticks are printed. ``--period S`` runs every policy at S seconds in
  place of its own (the bar read with the default and the baselines at the default's 10 s); those runs
  are not Lucid's, so no Lucid figure is printed beside them.

Prints per cluster and policy: jobs completed, mean and p95 JCT, mean queueing time (every wait counted,
those after a preemption too: ``queue_time`` of the job records), preemptions (stops caused by the
scheduler), GPU-hours spent restoring, simulated cycles, the CPU and wall seconds of the run and, when
the default configuration ran too (``default`` and ``default-1s`` run first), each policy's CPU as a
multiple of each default's on the same cluster against the target (<= 2x); the load average beside each run (a loaded machine inflates
CPU time too); and strict FIFO's CPU on 40 nodes against issue 29's target (<= 60 s) when the whole week
ran.
There is no target for the figures themselves; on a whole-week run each row is followed by Lucid's own
figures for the same week (benchmarks/reference/lucid_philly.json, via canon_reference.py) and whether
corral's mean JCT is within the held-out aim of 5 %.

    python benchmarks/bench_canon.py [--nodes 40 80] [--policies default default-1s fifo greedy sjf srtf tiresias]
                                     [--until SECONDS] [--period SECONDS]

Not part of CI: the whole grid takes tens of minutes of CPU. Skips with a message when the trace is absent.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from corral.framework.config import load_config_file  # noqa: E402
from corral.registry import REGISTRY, default_config  # noqa: E402
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec  # noqa: E402
from corral.sim.engine import SimOptions  # noqa: E402
from corral.sim.runs import RunInputs, run_config  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_backlog import TRACE, week  # noqa: E402
from canon_reference import LUCID_POLICIES, beside  # noqa: E402

BASELINES = ROOT / "docs" / "examples" / "baselines"
#: issue 29: strict FIFO at a 1 s period on the 40-node week (916 s of CPU when the issue was filed)
FIFO_CPU_TARGET = 60.0
#: issue 29: every baseline within this multiple of the default configuration's CPU on the same run
RATIO_TARGET = 2.0
#: policy -> (configuration file, scheduling period in seconds); "default": the built-in configuration
POLICIES = {
    "default": ("", 10.0),
    "default-1s": ("", 1.0),
    "fifo": ("fifo-consolidated.yaml", 1.0),
    "greedy": ("greedy-consolidated.yaml", 1.0),
    "sjf": ("sjf-consolidated.yaml", 1.0),
    "srtf": ("srtf.yaml", 1.0),
    "tiresias": ("tiresias.yaml", 60.0),
    **LUCID_POLICIES,
}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else float("nan")


def run(policy: str, jobs: list, nodes: int, until: float | None, period: float | None = None) -> dict:
    """One whole-week (or ``until``) run of ``policy``, at its own period unless ``period`` is given."""
    file, own = POLICIES[policy]
    period = period or own
    config = load_config_file(BASELINES / file, REGISTRY) if file else default_config()
    template = from_spec(
        ClusterSpec(
            (NodeShape("gpu", nodes, gpus=8, cpu=96, memory="768Gi"),), tiers=(32,), name=f"{nodes} x 8 GPUs"
        )
    )
    inputs = RunInputs(template, jobs, SimOptions(schedule_period=period, until=until), {})
    wall, cpu = time.perf_counter(), time.process_time()
    result = run_config(inputs, config, policy)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    done = [r for r in result.jobs if r.end is not None]
    jct = [r.jct for r in done if r.jct is not None]
    queue = [r.queue_time for r in done if r.queue_time is not None]
    return {
        "done": len(done),
        "jct_mean": statistics.fmean(jct) if jct else float("nan"),
        "jct_p95": p95(jct),
        "queue_mean": statistics.fmean(queue) if queue else float("nan"),
        "preemptions": sum(r.preemptions for r in result.jobs),
        "restore_gpu_h": sum(r.restore_gpu_hours for r in result.jobs),
        "cycles": result.meta.get("cycles", 0),
        "cpu": cpu,
        "wall": wall,
    }


#: the yardsticks of the CPU bar: the default configuration at 10 s and at the baselines' 1 s
DEFAULTS = ("default", "default-1s")


def ratio_text(cpu: dict[tuple[str, int], float], policy: str, nodes: int, default: str = "default") -> str:
    base = cpu.get((default, nodes))
    if policy in DEFAULTS or not base:
        return "-"
    return f"{cpu[(policy, nodes)] / base:.2f}x"


def print_ratios(
    cpu: dict[tuple[str, int], float], policies: list[str], nodes: int, override: float | None = None
) -> None:
    """Each baseline's CPU against the default configuration's on the same cluster (issue 29's bar),
    at the default's 10 s period and at the baselines' 1 s."""
    for default in DEFAULTS:
        base = cpu.get((default, nodes))
        period = override or POLICIES[default][1]
        if not base:
            if override is None:
                print(f"CPU against {default} ({period:g} s): not measured (add --policies {default})")
            continue
        for policy in policies:
            if policy in DEFAULTS:
                continue
            ratio = cpu[(policy, nodes)] / base
            print(
                f"CPU {policy:9} {ratio:5.2f}x {default}'s {base:.1f} s (the default at {period:g} s); "
                f"target <= {RATIO_TARGET:g}x: " + ("met" if ratio <= RATIO_TARGET else "NOT met")
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[40, 80])
    parser.add_argument("--policies", nargs="+", choices=sorted(POLICIES), default=list(POLICIES))
    parser.add_argument("--until", type=float, default=None, help="stop at this simulated time (seconds)")
    parser.add_argument(
        "--period",
        type=float,
        default=None,
        help="run every policy at this scheduling period (seconds) in place of its own: the CPU bar read "
        "with the default and the baselines at one period (the 'x dflt 10s' column then compares like runs)",
    )
    args = parser.parse_args()
    if not TRACE.exists():
        print(f"skipped: the Philly trace is not at {TRACE}")
        return 0
    jobs = week()
    cpu: dict[tuple[str, int], float] = {}
    # the defaults first: the others' CPU is shown as a multiple of them
    policies = sorted(
        args.policies, key=lambda p: (p not in DEFAULTS, DEFAULTS.index(p) if p in DEFAULTS else 0)
    )
    for nodes in args.nodes:
        print(f"\n== {len(jobs):,} Philly jobs (1-8 Oct 2017, one queue) on {nodes} nodes x 8 GPUs")
        print(
            f"{'policy':9} {'period':>6} {'done':>6} {'JCT mean':>9} {'JCT p95':>9} {'queue mean':>10} "
            f"{'preempt':>8} {'restore':>9} {'cycles':>8} {'cpu':>8} {'wall':>8} {'x dflt 10s':>10} "
            f"{'x dflt 1s':>9} {'load':>5}"
        )
        for policy in policies:
            got = run(policy, jobs, nodes, args.until, args.period)
            cpu[(policy, nodes)] = got["cpu"]
            print(
                f"{policy:9} {args.period or POLICIES[policy][1]:5.0f}s {got['done']:6,} {got['jct_mean'] / 3600:8.2f}h "
                f"{got['jct_p95'] / 3600:8.2f}h {got['queue_mean'] / 3600:9.2f}h {got['preemptions']:8,} "
                f"{got['restore_gpu_h']:7.1f}Gh {got['cycles']:8,} {got['cpu']:7.1f}s {got['wall']:7.1f}s "
                f"{ratio_text(cpu, policy, nodes):>10} {ratio_text(cpu, policy, nodes, 'default-1s'):>9} "
                f"{os.getloadavg()[0]:5.1f}",
                flush=True,
            )
            if args.until is None and args.period is None and policy not in DEFAULTS:
                print("          " + beside(policy, nodes, got), flush=True)
        print_ratios(cpu, policies, nodes, args.period)
    if ("fifo", 40) in cpu and args.until is None and args.period in (None, 1.0):
        fifo = cpu[("fifo", 40)]
        print(
            f"\nstrict FIFO, 40 nodes, 1 s: {fifo:.1f} s of CPU; target <= {FIFO_CPU_TARGET:.0f} s: "
            + ("met" if fifo <= FIFO_CPU_TARGET else "NOT met")
        )
    print(
        "\ntarget: none for the figures; held-out check against Lucid's mean JCT (aim: within 5 %) on the whole "
        "week, beside each row (benchmarks/reference/lucid_philly.json)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
