"""Starvation of big jobs and what the reservation (seed 001) costs (issue: reservation and backfill with a
plan). Two workloads through the simulator, each under seventeen configurations:

- ``none``: no reservation (Volcano's default actions);
- each lock mode (``cluster``, ``multi-node``, ``single-node``) with strict locks (``plan: false``);
- each lock mode with the plan and exact run-time estimates, and with estimates off by up to 2x
  (log-uniform factor in [1/2, 2], seeded);
- the same in custom mode: only jobs of at least the size of the largest 5 % are elected
  (``targetJob.resources.nvidia.com/gpu``), as an operator who knows the workload would set it;

and prints, per configuration: mean JCT, p99 and max wait of the largest 5 % of the jobs (the
ceil(5 %) jobs with the most GPUs, ties to the earlier submission), and GPU utilisation (time-weighted
over the arrival window, first to last submission, so a long drain does not flatter anyone).

Workloads:

- **Philly**: the Microsoft Philly trace (../shared/traces/philly/philly.csv), one virtual cluster (one
  queue), one month of submissions. The default is VC ``ee9e8c``, days 30-60 of the trace: the busiest VC
  month in which big jobs (16-32 GPUs) are common (the trace's busiest VC, 6214e9, never asks for more
  than 8 GPUs, so nothing starves there). The cluster is sized so that the month's GPU demand (GPU x
  run time) is 90 % of its capacity over the month (8-GPU nodes).
- **synthetic**: a seeded mix of 1,000 jobs where 5 % of the jobs are gangs of 32 or 64 GPUs (4 or 8 pods of 8) and
  the rest single pods of 1-8 GPUs, lognormal run times (median 1 h), Poisson arrivals scaled so that
  demand is 90 % of a 32-node cluster (256 GPUs).

Target (the issue): with the plan, the max wait of the largest 5 % of jobs at most half of no
reservation's, at a cost of at most 3 points of GPU utilisation; the cluster lock without a plan is
printed alongside (expected to cost far more). Timings are wall-clock seconds on a shared machine.

    .venv/bin/python benchmarks/bench_starvation.py [--vc ee9e8c] [--day 30] [--days 30] [--jobs 1000]
        [--seed 7] [--only philly|synthetic] [--period 30] [--threshold 16 --custom-only]
        [--explain 'cluster + plan (exact)']

``--explain NAME`` runs ``none`` and the variants whose name contains NAME, and after each prints why
its largest jobs waited (``starvation_explain.py``: targets and hours held by size, the plan's accuracy,
the hand-over between targets, and the worst largest jobs' wait split into the time spent behind earlier
targets and their own drain). ``--seed`` draws another synthetic mix.

Skips the Philly part with a message when the trace is absent.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from corral.framework.config import parse_config
from corral.registry import REGISTRY
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.engine import Engine, SimOptions
from corral.sim.estimates import EstimateModel
from corral.sim.jobspec import JobSpec, RoleSpec
from corral.sim.report import time_average
from corral.sim.workload import filter_jobs, load_philly
from starvation_explain import Recorder, report

TRACE = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces" / "philly" / "philly.csv"
DEMAND = 0.9
MODES = ("cluster", "multi-node", "single-node")
EXACT, NOISY = EstimateModel("exact"), EstimateModel("noisy", 2.0, 11)


def config(lock: str | None, plan: bool, threshold: float | None = None, registry=REGISTRY):
    first = [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]
    if lock is not None:
        args: dict = {"lockMode": lock, "plan": plan}
        if threshold is not None:
            args["targetJob.resources.nvidia.com/gpu"] = threshold
        first.append({"name": "reservation", "arguments": args})
    actions = "elect, enqueue, reserve, allocate, backfill" if lock else "enqueue, allocate, backfill"
    return parse_config(
        {
            "actions": actions,
            "tiers": [
                {"plugins": first},
                {
                    "plugins": [
                        {"name": "drf"},
                        {"name": "predicates"},
                        {"name": "proportion"},
                        {"name": "nodeorder"},
                        {
                            "name": "binpack",
                            "arguments": {
                                "binpack.resources": "nvidia.com/gpu",
                                "binpack.resources.nvidia.com/gpu": 4,
                            },
                        },
                    ]
                },
            ],
        },
        registry,
        f"bench {lock or 'none'}{' + plan' if plan else ''}",
    )


def variants(threshold: float, custom_only: bool = False) -> list[tuple[str, object, EstimateModel | None]]:
    out = [("none", config(None, False), None)]
    if custom_only:
        return out + [
            (f"{m} + plan + >={threshold:g} ({e})", config(m, True, threshold), model)
            for e, model in (("exact", EXACT), ("2x off", NOISY))
            for m in MODES
        ]
    out += [(f"{m}, no plan", config(m, False), None) for m in MODES]
    out += [(f"{m} + plan (exact)", config(m, True), EXACT) for m in MODES]
    out += [(f"{m} + plan (2x off)", config(m, True), NOISY) for m in MODES]
    out += [(f"{m} + plan + >={threshold:g} (exact)", config(m, True, threshold), EXACT) for m in MODES]
    out += [(f"{m} + plan + >={threshold:g} (2x off)", config(m, True, threshold), NOISY) for m in MODES]
    return out


def _with_registry(name: str, threshold: float, registry):
    """The configuration of variant ``name`` parsed against ``registry`` (the recording one)."""
    mode = next(m for m in MODES if name.startswith(m))
    return config(mode, "+ plan" in name, threshold if ">=" in name else None, registry)


def largest_size(jobs: list[JobSpec]) -> float:
    """GPUs of the smallest of the largest 5 % of jobs: the custom-mode threshold an operator who knows
    the workload would set (``targetJob.resources.nvidia.com/gpu``)."""
    sizes = sorted((j.gpus for j in jobs), reverse=True)
    return sizes[max(1, math.ceil(0.05 * len(sizes))) - 1]


def philly_month(vc: str, day: float, days: float) -> tuple[list[JobSpec], int]:
    jobs = load_philly(TRACE)
    start = min(j.submit for j in jobs)
    month = list(filter_jobs(jobs, start + day * 86400, start + (day + days) * 86400, [vc]))
    t0 = min(j.submit for j in month)
    month = [JobSpec(j.name, j.submit - t0, j.duration, j.queue, j.roles, source=j.source) for j in month]
    demand = sum(j.gpus * j.duration for j in month)
    nodes = max(int(math.ceil(demand / (DEMAND * 8 * days * 86400))), int(max(j.gpus for j in month) // 8))
    return month, nodes


def synthetic_mix(n: int, seed: int, nodes: int) -> list[JobSpec]:
    rng = np.random.default_rng(seed)
    raw = []
    for _i in range(n):
        if rng.random() < 0.05:
            pods, per = int(rng.choice([4, 8])), 8
        else:
            pods, per = 1, int(rng.choice([1, 2, 4, 8], p=[0.4, 0.2, 0.2, 0.2]))
        duration = float(np.clip(round(rng.lognormal(math.log(3600), 1.0)), 120, 86400))
        raw.append((pods, per, duration, rng.exponential(1.0)))
    demand = sum(p * g * d for p, g, d, _ in raw)
    span = demand / (DEMAND * nodes * 8)
    gaps = np.array([g for *_, g in raw])
    times = np.cumsum(gaps) * span / gaps.sum()
    return [
        JobSpec(
            f"mix-{i:05d}",
            float(t),
            d,
            "default",
            (RoleSpec("", p, {"nvidia.com/gpu": g, "cpu": 4 * g, "memory": 32 * 2**30 * g}),),
        )
        for i, ((p, g, d, _), t) in enumerate(zip(raw, times))
    ]


def measure(jobs: list[JobSpec], nodes: int, cfg, estimates, period: float, recorder=None) -> dict:
    tpl = from_spec(
        ClusterSpec((NodeShape("gpu", nodes, gpus=8, cpu=96, memory="768Gi"),), name=f"{nodes} x 8 GPUs")
    )
    started = time.perf_counter()
    result = Engine(
        tpl.instantiate(sorted({j.queue for j in jobs})),
        jobs,
        cfg,
        recorder.registry if recorder is not None else None,
        options=SimOptions(schedule_period=period, estimates=estimates),
    ).run()
    wall = time.perf_counter() - started
    recs = [r for r in result.jobs if r.status != "never_fits"]
    end = float(result.meta.get("end_time", 0.0))
    k = max(1, math.ceil(0.05 * len(recs)))
    big = sorted(recs, key=lambda r: (-r.gpus, r.submit, r.job))[:k]
    waits = np.array([r.wait if r.wait is not None else end - r.submit for r in big])
    jct = [r.jct for r in recs if r.jct is not None]
    lo, hi = min(j.submit for j in jobs), max(j.submit for j in jobs)
    samples = sorted((s for s in result.cluster), key=lambda s: s.time)
    times = [lo] + [s.time for s in samples if lo < s.time < hi]
    before = [s.utilisation for s in samples if s.time <= lo]
    values = [before[-1] if before else 0.0] + [s.utilisation for s in samples if lo < s.time < hi]
    util = time_average(times, values, hi)
    return {
        "jct": float(np.mean(jct)) / 3600 if jct else math.nan,
        "p99": float(np.percentile(waits, 99)) / 3600,
        "max": float(waits.max()) / 3600,
        "util": 100.0 * (util or 0.0),
        "wall": wall,
        "unfinished": sum(1 for r in recs if r.status != "completed"),
        "big": k,
        "records": recs,
        "largest": big,
    }


def run(
    title: str,
    jobs: list[JobSpec],
    nodes: int,
    period: float,
    threshold: float | None = None,
    custom_only: bool = False,
    explain: str | None = None,
) -> None:
    print(f"\n== {title}: {len(jobs)} jobs, {nodes} nodes x 8 GPUs, schedule period {period:g} s")
    threshold = largest_size(jobs) if threshold is None else threshold
    print(
        f"{'configuration':34s} {'mean JCT h':>10s} {'p99 wait big h':>14s} {'max wait big h':>14s} "
        f"{'GPU util %':>10s} {'unfinished':>10s} {'wall s':>7s}"
    )
    rows = {}
    for name, cfg, est in variants(threshold, custom_only):
        recorder = None
        if explain is not None:
            if name != "none" and explain not in name:
                continue
            if name != "none":
                recorder = Recorder()
                cfg = _with_registry(name, threshold, recorder.registry)
        m = rows[name] = measure(jobs, nodes, cfg, est, period, recorder)
        print(
            f"{name:34s} {m['jct']:10.2f} {m['p99']:14.2f} {m['max']:14.2f} {m['util']:10.1f} "
            f"{m['unfinished']:10d} {m['wall']:7.1f}",
            flush=True,
        )
        if recorder is not None:
            report(recorder, m["records"], m["largest"], {j.name: j.submit for j in jobs})
    base = rows["none"]
    print(
        f"target: with the plan, max wait of the largest 5 % ({base['big']} jobs) <= half of none's "
        f"({base['max'] / 2:.2f} h) at <= 3 points of utilisation (>= {base['util'] - 3:.1f} %)"
    )
    for name, m in rows.items():
        if "+ plan" not in name and name != "cluster, no plan":
            continue
        ok = m["max"] <= base["max"] / 2 + 1e-9 and m["util"] >= base["util"] - 3.0
        print(
            f"  {name:34s} max wait {m['max']:7.2f} h ({m['max'] / base['max']:5.0%} of none), "
            f"utilisation {m['util'] - base['util']:+5.1f} points: {'MET' if ok else 'not met'}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vc", default="ee9e8c")
    parser.add_argument("--day", type=float, default=30.0, help="first day of the Philly window")
    parser.add_argument("--days", type=float, default=30.0, help="length of the Philly window in days")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs of the synthetic mix")
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic mix")
    parser.add_argument("--period", type=float, default=30.0, help="simulated seconds between cycles")
    parser.add_argument("--only", choices=("philly", "synthetic"), default=None)
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="custom-mode GPU threshold (default: the size of the largest 5 %% of jobs)",
    )
    parser.add_argument("--custom-only", action="store_true", help="only none and the custom-mode variants")
    parser.add_argument(
        "--explain",
        default=None,
        metavar="NAME",
        help="only none and the variants whose name contains NAME (e.g. 'cluster + plan "
        "(exact)'), each followed by why its largest jobs waited (starvation_explain.py)",
    )
    args = parser.parse_args()
    if args.only in (None, "philly"):
        if not TRACE.exists():
            print(f"skipped Philly: the trace is absent ({TRACE})")
        else:
            jobs, nodes = philly_month(args.vc, args.day, args.days)
            run(
                f"Philly VC {args.vc}, days {args.day:g}-{args.day + args.days:g}",
                jobs,
                nodes,
                args.period,
                args.threshold,
                args.custom_only,
                args.explain,
            )
    if args.only in (None, "synthetic"):
        nodes = 32
        run(
            "synthetic mix (5 % of jobs >= 32 GPUs)",
            synthetic_mix(args.jobs, args.seed, nodes),
            nodes,
            args.period,
            args.threshold,
            args.custom_only,
            args.explain,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
