"""What topology-aware placement is worth once placement changes how fast a job runs: the job-speed model
(``simulation.speed``, docs/simulator.md) on the built-in example (``corral simulate`` with no
arguments: 2,500 jobs, 64 nodes x 8 GPUs, 8 leaf switches of 8 nodes under 2 spines).

Two configurations, ``docs/examples/speed/topology-aware.yaml`` (corral's default configuration, which
includes network-topology-aware) and ``topology-blind.yaml`` (the same without it), each run three
ways: without the speed model (every job at full speed wherever it lands), with the model's built-in
factors (the example files' own ``speed: {}``: measured, 1.29 for a gang on several nodes at any tier),
and with tiered factors (1.29 within a leaf switch, 1.5 across leaves of one spine, 1.8 across spines —
the last two assumptions, to see how the result moves when crossing switches costs more). Prints mean and p95 JCT, mean wait, the GPU-hours lost to spread, how many
gangs spanned each level, and the wall and CPU time of each run.

``--philly`` also runs the Philly week of 1-8 October 2017 (bench_backlog.py's) on 80 nodes x 8 GPUs
under leaf switches of 8 nodes, with the default configuration, the model off and with its built-in
factors: the model's cost in CPU beside its effect.

There is no pass/fail target: the JCT effect is the figure docs/simulator.md records.

    .venv/bin/python benchmarks/bench_speed.py [--seed 0] [--philly]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

from corral.framework.config import load_config_file
from corral.registry import REGISTRY
from corral.sim.engine import Engine, SimOptions
from corral.sim.example import example_cluster, example_workload
from corral.sim.speed import placement_metrics
from corral.sim.speed_config import speed_options

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples" / "speed"
TIERED = {"speed": {"spread": {"default": {1: 1.29, 2: 1.5, 3: 1.8}}}}


def run(name: str, factors: str, seed: int) -> dict:
    path = EXAMPLES / f"{name}.yaml"
    config = load_config_file(path, REGISTRY)
    simulation = {"off": {}, "measured": config.simulation, "tiered": TIERED}[factors]
    speed = speed_options(simulation, str(path)).get("speed")
    config = dataclasses.replace(config, simulation={})
    jobs = example_workload(seed)
    cluster = example_cluster().instantiate(j.queue for j in jobs)
    wall, cpu = time.perf_counter(), time.process_time()
    result = Engine(cluster, jobs, config, options=SimOptions(schedule_period=10.0, speed=speed)).run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    jct = np.array([r.jct for r in result.jobs if r.jct is not None]) / 60
    wait = np.array([r.wait for r in result.jobs if r.wait is not None]) / 60
    return {
        "config": name,
        "factors": factors,
        "jct_mean": float(jct.mean()),
        "jct_p95": float(np.percentile(jct, 95)),
        "wait_mean": float(wait.mean()),
        "placement": placement_metrics(result.jobs),
        "wall": wall,
        "cpu": cpu,
    }


def philly() -> None:
    from bench_backlog import TRACE, week
    from corral.registry import default_config
    from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
    from corral.sim.speed import SpeedModel

    if not TRACE.exists():
        print(f"skipped the Philly week: {TRACE} is absent")
        return
    jobs = week()
    print("Philly week, 80 nodes x 8 GPUs, leaves of 8 nodes, default configuration")
    for speed in (None, SpeedModel()):
        spec = ClusterSpec((NodeShape("n", 80, gpus=8),), tiers=(8,))
        cluster = from_spec(spec).instantiate(j.queue for j in jobs)
        engine = Engine(
            cluster, jobs, default_config(), options=SimOptions(schedule_period=10.0, speed=speed)
        )
        wall, cpu = time.perf_counter(), time.process_time()
        result = engine.run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        jct = np.mean([r.jct for r in result.jobs if r.jct is not None]) / 3600
        lost = placement_metrics(result.jobs).get("spread_gpu_hours", 0.0)
        name = "built-in factors" if speed else "model off"
        print(
            f"  {name:>16}: JCT mean {jct:.3f} h, {engine.cycles:,} cycles, GPU-h lost to spread "
            f"{lost:,.0f}, wall {wall:.1f} s, cpu {cpu:.1f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="seed of the example's jobs")
    parser.add_argument("--philly", action="store_true", help="also run the Philly week (model off / on)")
    args = parser.parse_args()
    if args.philly:
        philly()
    print(f"built-in example (seed {args.seed}): topology-aware vs topology-blind placement")
    head = f"{'factors':>9} {'config':>15} {'JCT mean':>9} {'JCT p95':>8} {'wait':>7} {'spread GPU-h':>13}"
    print(head + f" {'gangs by span (node/tier1/tier2/cluster)':>42} {'wall':>6} {'cpu':>6}")
    for factors in ("off", "measured", "tiered"):
        rows = [run(name, factors, args.seed) for name in ("topology-aware", "topology-blind")]
        for row in rows:
            got = row["placement"]
            spans = "/".join(
                str(got.get(f"gangs_span_{s}", 0)) for s in ("node", "tier1", "tier2", "cluster")
            )
            lost = f"{got['spread_gpu_hours']:,.0f}" if got else "-"
            print(
                f"{factors:>9} {row['config']:>15} {row['jct_mean']:>6.1f}min {row['jct_p95']:>5.0f}min "
                f"{row['wait_mean']:>4.1f}min {lost:>13} {spans if got else '-':>42} "
                f"{row['wall']:>5.1f}s {row['cpu']:>5.1f}s"
            )
        aware, blind = rows
        gain = 1 - aware["jct_mean"] / blind["jct_mean"]
        side = "below" if gain >= 0 else "above"
        print(f"{'':>9} topology-aware: mean JCT {abs(gain):.1%} {side} topology-blind's")


if __name__ == "__main__":
    main()
