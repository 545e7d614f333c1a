"""The ``flow`` action at scale (seed 004, SPEC.md §3.6). Rounds of 1k / 10k / 50k pending pods (gangs of
1–64 pods of 1, 2, 4 or 8 GPUs) on clusters of 1k / 10k nodes (8 GPUs each, 3-tier HyperNode tree, two
one-GPU pods running per node), the cluster generator of ``bench_allocate.py``.

For each size it prints, median of ``--repeat`` runs (3), wall time with CPU time beside it (the two
differ on a shared machine): the first solve of the round (graph build + one OR-Tools solve), the round
(every graph build and every solve: the first, the comparison with rollback, the residual re-solves),
the pod-by-pod check through the Statements, the whole action; the number of rounds (1, or one per
gang and one for the rest with ``--mode sequential``) and of solves in them,
re-solves, pods that failed the check and pods repaired in place; pods placed and GPU share placed
(GPUs placed / GPUs the pending pods ask for); and for the same input ``allocate``'s time and GPU
share. The garbage collector runs before each timed action (flow and allocate alike), so the cluster
build's garbage is not charged to the round. Targets: 50k pods x 10k nodes in <= 0.5 s per round
including graph building, and a GPU share at least allocate's minus 1 point.

    .venv/bin/python benchmarks/bench_flow.py [--sizes 1000x1000,10000x1000,...] [--mode lowerbound]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_allocate import generate  # noqa: E402
from corral.actions.allocate import AllocateAction  # noqa: E402
from corral.actions.flow import FlowAction, FlowArgs  # noqa: E402
from corral.framework.config import parse_config  # noqa: E402
from corral.framework.session import Session  # noqa: E402
from corral.manifests.build import build_cluster  # noqa: E402
from corral.model import TaskStatus  # noqa: E402
from corral.model.resources import GPU  # noqa: E402
from corral.registry import DEFAULT_CONFIG, REGISTRY  # noqa: E402

NOW = 1767225600.0
SIZES = "1000x1000,10000x1000,10000x10000,50000x10000"


def gpu_share(cluster) -> tuple[int, float]:
    col = cluster.resources.pos(GPU)
    pending = [
        t for t in cluster.tasks.values() if (t.managed and t.node < 0) or t.status is TaskStatus.ALLOCATED
    ]
    asked = sum(float(t.request[col]) for t in pending)
    placed = [t for t in pending if t.status is TaskStatus.ALLOCATED]
    got = sum(float(t.request[col]) for t in placed)
    return len(placed), 100.0 * got / asked if asked else 0.0


def run_once(docs: list[dict], action: str, mode: str, model: str) -> dict:
    cluster = build_cluster(("bench", d) for d in docs)
    config = parse_config({**DEFAULT_CONFIG, "actions": f"enqueue, {action}"}, REGISTRY, "bench")
    session = Session(cluster, config, REGISTRY, NOW, 1)
    REGISTRY.action_class("enqueue")(config.actions[0].args).execute(session)
    act = FlowAction(FlowArgs(gang_mode=mode, cost_model=model)) if action == "flow" else AllocateAction(None)
    gc.collect()  # the cluster build's garbage is the build's, not the round's (same for allocate)
    t, c = time.perf_counter(), time.process_time()
    act.execute(session)
    total, cpu = time.perf_counter() - t, time.process_time() - c
    placed, share = gpu_share(cluster)
    out = {"total": total, "cpu": cpu, "placed": placed, "share": share}
    if action == "flow":
        out.update(act.stats)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=SIZES, help="pending x nodes, comma-separated")
    ap.add_argument("--mode", default="lowerbound", choices=("lowerbound", "rollback", "sequential"))
    ap.add_argument("--model", default="trivial", choices=("trivial", "quincy", "spread", "topology"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    print(f"flow gangMode={args.mode} costModel={args.model}; median of {args.repeat}; seconds, wall (CPU)")
    print(
        f"{'pods x nodes':>14} {'first':>6} {'round':>13} {'check':>13} {'action':>13} {'rounds':>6} {'solves':>6} "
        f"{'resolv':>6} {'failed':>6} {'repair':>6} {'placed':>7} {'GPU%':>5} | {'allocate':>13} {'GPU%':>5}"
    )
    verdicts = []
    for size in args.sizes.split(","):
        pending, nodes = (int(x) for x in size.split("x"))
        docs = generate(nodes, 2 * nodes, max(1, pending // 8), pending, args.seed)
        runs = [run_once(docs, "flow", args.mode, args.model) for _ in range(args.repeat)]
        alloc = run_once(docs, "allocate", args.mode, args.model)

        def med(k: str, runs: list = runs) -> float:
            return statistics.median(r[k] for r in runs)

        def pair(wall: float, cpu: float) -> str:
            return f"{wall:6.3f} ({cpu:.3f})".rjust(13)

        rnd = statistics.median(r["build"] + r["solve"] for r in runs)
        rnd_cpu = statistics.median(r["build_cpu"] + r["solve_cpu"] for r in runs)
        print(
            f"{pending:>6} x {nodes:<6} {med('first'):6.3f} {pair(rnd, rnd_cpu)} {pair(med('check'), med('check_cpu'))} "
            f"{pair(med('total'), med('cpu'))} {int(med('rounds')):6d} {int(med('solves')):6d} {int(med('resolves')):6d} "
            f"{int(med('failed')):6d} {int(med('repaired')):6d} {int(med('placed')):7d} {med('share'):5.1f} | "
            f"{pair(alloc['total'], alloc['cpu'])} {alloc['share']:5.1f}",
            flush=True,
        )
        if (pending, nodes) == (50000, 10000):
            verdicts.append(
                f"50000 x 10000 round (graph build + all {int(med('solves'))} solves) {rnd:.3f} s wall, "
                f"{rnd_cpu:.3f} s CPU, target <= 0.5 s: {'OK' if rnd <= 0.5 else 'MISSED'} (wall), "
                f"{'OK' if rnd_cpu <= 0.5 else 'MISSED'} (CPU)"
            )
        gap = med("share") - alloc["share"]
        verdicts.append(
            f"{pending} x {nodes}: GPU share {med('share'):.1f}% vs allocate {alloc['share']:.1f}% "
            f"(target >= allocate - 1 point): {'OK' if gap >= -1 else 'MISSED'}"
        )
    for v in verdicts:
        print(v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
