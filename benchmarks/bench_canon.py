"""The research canon on the Philly week: FIFO, greedy, SJF, SRTF and Tiresias side by side (issue 29).

The Philly trace's week of 1-8 October 2017 (10,650 jobs, ../shared/traces/philly/philly.csv), all in one
queue, on 40 and 80 nodes x 8 GPUs, under the configurations of ``docs/examples/baselines/`` that place as
the research simulators place (consolidated):

- ``fifo``: ``fifo-consolidated.yaml`` at a 1 s period (strict FIFO);
- ``greedy``: ``greedy-consolidated.yaml`` at 1 s (first fit in submission order);
- ``sjf``: ``sjf-consolidated.yaml`` at 1 s (strict SJF on exact run times);
- ``srtf``: ``srtf.yaml`` at 1 s (Lucid's preemptive SRTF: ``timeslice`` with ``srtf``);
- ``tiresias``: ``tiresias.yaml`` at 60 s (Lucid's Tiresias: ``timeslice`` with ``las``, 2 queues at
  18,000 GPU-seconds).

Prints per cluster and policy: jobs completed, mean and p95 JCT, mean queueing time (every wait counted,
those after a preemption too: ``queue_time`` of the job records), preemptions (stops caused by the
scheduler), GPU-hours spent restoring, simulated cycles, and the CPU and wall seconds of the run.
There is no target for the figures themselves; Lucid's own results on this week are not published, so the
held-out comparison of mean JCT with Lucid (aim: within 5 %) needs a Lucid run on the same week.

    python benchmarks/bench_canon.py [--nodes 40 80] [--policies fifo greedy sjf srtf tiresias]
                                     [--until SECONDS]

Not part of CI: the whole grid takes tens of minutes of CPU. Skips with a message when the trace is absent.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from corral.framework.config import load_config_file  # noqa: E402
from corral.registry import REGISTRY  # noqa: E402
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec  # noqa: E402
from corral.sim.engine import SimOptions  # noqa: E402
from corral.sim.runs import RunInputs, run_config  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_backlog import TRACE, week  # noqa: E402

BASELINES = ROOT / "docs" / "examples" / "baselines"
#: policy -> (configuration file, scheduling period in seconds)
POLICIES = {
    "fifo": ("fifo-consolidated.yaml", 1.0),
    "greedy": ("greedy-consolidated.yaml", 1.0),
    "sjf": ("sjf-consolidated.yaml", 1.0),
    "srtf": ("srtf.yaml", 1.0),
    "tiresias": ("tiresias.yaml", 60.0),
}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else float("nan")


def run(policy: str, jobs: list, nodes: int, until: float | None) -> dict:
    file, period = POLICIES[policy]
    config = load_config_file(BASELINES / file, REGISTRY)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[40, 80])
    parser.add_argument("--policies", nargs="+", choices=sorted(POLICIES), default=list(POLICIES))
    parser.add_argument("--until", type=float, default=None, help="stop at this simulated time (seconds)")
    args = parser.parse_args()
    if not TRACE.exists():
        print(f"skipped: the Philly trace is not at {TRACE}")
        return 0
    jobs = week()
    for nodes in args.nodes:
        print(f"\n== {len(jobs):,} Philly jobs (1-8 Oct 2017, one queue) on {nodes} nodes x 8 GPUs")
        print(
            f"{'policy':9} {'period':>6} {'done':>6} {'JCT mean':>9} {'JCT p95':>9} {'queue mean':>10} "
            f"{'preempt':>8} {'restore':>9} {'cycles':>8} {'cpu':>8} {'wall':>8}"
        )
        for policy in args.policies:
            got = run(policy, jobs, nodes, args.until)
            print(
                f"{policy:9} {POLICIES[policy][1]:5.0f}s {got['done']:6,} {got['jct_mean'] / 3600:8.2f}h "
                f"{got['jct_p95'] / 3600:8.2f}h {got['queue_mean'] / 3600:9.2f}h {got['preemptions']:8,} "
                f"{got['restore_gpu_h']:7.1f}Gh {got['cycles']:8,} {got['cpu']:7.1f}s {got['wall']:7.1f}s",
                flush=True,
            )
    print(
        "\ntarget: none for the figures; held-out check against Lucid's mean JCT (within 5 %) not run: "
        "Lucid's results for this week are not available here"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
