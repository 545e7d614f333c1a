"""``consolidate`` against the exact move oracle on small, tight clusters with a small job cap (issue 33:
"placed wherever the oracle places"): where ``bench_consolidate`` draws large clusters and the default
cap of 16 jobs, this one draws the shapes where the cap and the landings bind hardest.

Each draw (Python ``random`` seeded by ``--seed``, so a run repeats): 4–8 nodes of 8 GPUs; a waiting
gang of 2 or 3 pods of 8 GPUs that fits nowhere as the cluster stands; running jobs placed at random
nodes with room — single pods of 1, 2 or 4 GPUs and gangs of 2 up to a pod per node (at their
minimum, so they move whole), run for 1 to 48 hours — until the free GPUs are the gang's plus 0–3;
``maxMovedJobs`` 1–4. One cycle ``allocate, consolidate`` (``bench_consolidate``'s configuration with
that cap) against :func:`corral.solvers.move_oracle.solve_moves` with the same cap.

Reported: draws where both place the gang, where only the oracle does (the misses, listed), where only
consolidate does (the oracle out of time), where neither; and the work both lose where both place.
Target: no miss.

    python benchmarks/bench_consolidate_small.py [--draws N] [--seed S] [--oracle-time T] [-v]

Results: docs/actions.md, "How good are the moves?".
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import time

from bench_consolidate import CONFIG, NOW, Scenario, _job_docs, _node_docs
from corral.framework.config import parse_config
from corral.framework.session import Session
from corral.manifests.build import build_cluster
from corral.registry import REGISTRY
from corral.solvers.move_oracle import move_cost, solve_moves


def draw(rng: random.Random, index: int) -> tuple[Scenario, int] | None:
    """One small cluster, its waiting gang and the cap (None: the draw fits the gang already)."""
    n = rng.randint(4, 8)
    cap = rng.randint(1, 4)
    need = rng.choice([2, 3])
    free = [8] * n
    docs = _node_docs(n)
    target = 8 * need + rng.randint(0, 3)
    j = 0
    while sum(free) > target:
        gpus = rng.choice([1, 2, 4])
        count = 1 if rng.random() < 0.55 else rng.randint(2, n)
        rows: list[int] = []
        left = free[:]
        for _ in range(count):
            ok = [r for r in range(n) if left[r] >= gpus]
            if not ok:
                break
            r = rng.choice(ok)
            rows.append(r)
            left[r] -= gpus
        if len(rows) < count:
            if gpus == 1:
                break
            continue
        free = left
        hours = rng.choice([1, 2, 3, 5, 8, 12, 20, 30, 48])
        docs += _job_docs(f"run-{j:04d}", [(gpus, r) for r in rows], count, hours * 3600.0, None)
        j += 1
    if sum(free) < 8 * need or sum(f // 8 for f in free) >= need:
        return None
    docs += _job_docs("gang", [(8, -1)] * need, need, 60.0, None)
    return Scenario(index, n, docs, "default/gang", False, 8 * need, 1.0 - sum(free) / (8.0 * n)), cap


def run_action(sc: Scenario, cap: int) -> tuple[bool, float, int]:
    """One cycle: (placed, GPU-hours its moves lose, jobs moved)."""
    cluster = build_cluster(("bench", d) for d in sc.docs)
    pristine = build_cluster(("bench", d) for d in sc.docs)
    conf = copy.deepcopy(CONFIG)
    conf["configurations"] = [{"name": "consolidate", "arguments": {"maxMovedJobs": cap}}]
    cfg = parse_config(conf, REGISTRY, "bench")
    session = Session(cluster, cfg, REGISTRY, NOW, 1)
    for ac in cfg.actions:
        session.action = ac.name
        REGISTRY.action_class(ac.name)(ac.args).execute(session)  # type: ignore[misc]
    decisions = session.close()
    placed = {nm.pod for nm in decisions.nominations if nm.node} | {b.pod for b in decisions.binds}
    job = pristine.jobs[sc.gang]
    by_key = {t.key: t for t in pristine.tasks.values()}
    moved = [by_key[e.pod] for e in decisions.evictions]
    ok = sum(1 for t in job.tasks if t.key in placed) >= job.min_member
    return ok, move_cost(pristine, moved, NOW), len({id(t.job) for t in moved})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--oracle-time", type=float, default=10.0)
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    t0, c0 = time.perf_counter(), time.process_time()
    counts = {"both": 0, "oracle only": 0, "consolidate only": 0, "neither": 0}
    missed: list[int] = []
    work = [0.0, 0.0]
    for i in range(args.draws):
        got = draw(rng, i)
        if got is None:
            continue
        sc, cap = got
        placed, cost, jobs = run_action(sc, cap)
        assert jobs <= cap, "more jobs moved than maxMovedJobs"
        pristine = build_cluster(("bench", d) for d in sc.docs)
        res = solve_moves(
            pristine, pristine.jobs[sc.gang], now=NOW, time_limit=args.oracle_time, max_jobs=cap
        )
        key = {(True, True): "both", (False, True): "oracle only", (True, False): "consolidate only"}
        counts[key.get((placed, res.placed), "neither")] += 1
        if res.placed and not placed:
            missed.append(i)
        if placed and res.placed:
            work[0] += cost
            work[1] += res.cost
        if args.verbose:
            print(
                f"#{i:3d} {sc.nodes} nodes cap {cap} need {sc.need} GPU | consolidate {'P' if placed else '-'} "
                f"j{jobs} {cost:.1f} GPU-h | oracle {'P' if res.placed else '-'} {res.cost:.1f} GPU-h {res.status}",
                flush=True,
            )
    shown = ", ".join(f"{k} {v}" for k, v in counts.items())
    print(f"{sum(counts.values())} clusters, seed {args.seed}: {shown}")
    print(f"work lost where both place, GPU-h: consolidate {work[0]:.0f}, oracle {work[1]:.0f}")
    print(f"{time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU")
    print(
        f"target: placed wherever the oracle places: missed {len(missed)} {missed[:10]}  {'OK' if not missed else 'MISS'}"
    )
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
