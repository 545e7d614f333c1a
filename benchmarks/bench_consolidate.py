"""``consolidate`` against the exact move oracle (issue 33): on generated fragmented clusters, how often
the action starts the gang where the oracle can, and the work its moves lose against the oracle's.

Generated scenarios (numpy Generator seeded by (seed, scenario index), so any scenario reruns alone):
64–512 nodes of 8 GPUs in racks of 8 nodes (HyperNodes of tier 1) under spines of 4 racks (tier 2);
the cluster 80–95 % full of running jobs placed at random nodes with room — single pods of 1, 2 or 4
GPUs, and gangs of 2–8 such pods, some with surplus pods above minMember —, started 5 minutes to 3
days ago; so free GPUs are scattered. One waiting gang per scenario: 1–6 pods of 4 or 8 GPUs, about a
third with a hard topology of tier 1 (one rack), which fits nowhere as the cluster stands but within
the free GPUs of the cluster (of some rack, with topology). Pods request GPUs only.

Each scenario runs one cycle ``allocate, consolidate`` on a fresh copy (the fastest of ``--repeat``
runs of the action's ``execute`` counts, in wall and process CPU time). The oracle
(:func:`corral.solvers.move_oracle.solve_moves`) chooses the moves of least work lost over every allowed
domain. Both are priced by :func:`corral.solvers.move_oracle.move_cost` (GPU-hours: a pod moved alone
loses its own work, a job moved whole all of its pods').

Targets: placed wherever the oracle places; cost ≤ oracle + 10 % on ≥ 95 % of the instances the oracle
places; p95 decision time ≤ 50 ms at 512 nodes (process CPU time; wall printed beside). Both keep the
same cap, ``MAX_JOBS`` jobs moved (jobs, not pods, on both sides): each decision is checked against it
and the most jobs one decision moved is printed. Small tight clusters with small caps:
``bench_consolidate_small.py``.

    python benchmarks/bench_consolidate.py [--scenarios N] [--seed S] [--max-nodes M] [--quick] [-v]
        [--oracle-cache FILE]   # keep the oracle's answers: a planner change is then measured in seconds

Results and what they mean: docs/actions.md, "How good are the moves?".
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from corral.framework.config import parse_config
from corral.framework.session import Session
from corral.manifests.build import build_cluster
from corral.model import Cluster
from corral.registry import REGISTRY
from corral.solvers.move_oracle import move_cost, solve_moves
from corral.solvers.oracle import allowed_domains

NOW = 1767225600.0  # 2026-01-01T00:00:00Z
GPU_NODE = {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}
RACK, PER_SPINE = 8, 4

#: consolidate's ``maxMovedJobs`` (its default), given to the oracle too
MAX_JOBS = 16

CONFIG = {
    "actions": "allocate, consolidate",
    "tiers": [
        {
            "plugins": [
                {"name": "priority"},
                {"name": "gang", "enablePreemptable": False},
                {"name": "conformance"},
            ]
        },
        {
            "plugins": [
                {"name": "predicates"},
                {"name": "proportion"},
                # every allowed rack offered for eviction (the plugin's top 8 by default): consolidate ranks
                # them itself and plans the best maxDomains
                {
                    "name": "network-topology-aware",
                    "arguments": {"hypernode.binpack.normal-pod.enable": False, "evictDomains": 1000},
                },
                {"name": "nodeorder"},
                {"name": "binpack"},
            ]
        },
    ],
}


def _ts(seconds_ago: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - seconds_ago))


@dataclass
class Scenario:
    index: int
    nodes: int
    docs: list[dict]
    gang: str
    topology: bool
    need: int  # GPUs the gang asks for
    fill: float


def _node_docs(n: int) -> list[dict]:
    docs: list[dict] = []
    for i in range(n):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{i:04d}", "labels": {"rack": f"rack-{i // RACK:03d}"}},
                "status": {"allocatable": dict(GPU_NODE)},
            }
        )
    racks = (n + RACK - 1) // RACK
    for r in range(racks):
        docs.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": f"rack-{r:03d}"},
                "spec": {
                    "tier": 1,
                    "members": [
                        {
                            "type": "Node",
                            "selector": {"labelMatch": {"matchLabels": {"rack": f"rack-{r:03d}"}}},
                        }
                    ],
                },
            }
        )
    for s in range(0, racks, PER_SPINE):
        docs.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": f"spine-{s // PER_SPINE:02d}"},
                "spec": {
                    "tier": 2,
                    "members": [
                        {"type": "HyperNode", "selector": {"exactMatch": {"name": f"rack-{r:03d}"}}}
                        for r in range(s, min(s + PER_SPINE, racks))
                    ],
                },
            }
        )
    return docs


def _job_docs(
    name: str, pods: list[tuple[int, int]], min_member: int, age: float, gang: dict | None
) -> list[dict]:
    """A PodGroup and its pods: ``pods`` (GPUs, node row; row -1: waiting)."""
    spec: dict = {"minMember": min_member, "queue": "default"}
    if gang:
        spec.update(gang)
    docs: list[dict] = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": _ts(age)},
            "spec": spec,
            "status": {"phase": "Running" if pods[0][1] >= 0 else "Inqueue"},
        }
    ]
    for k, (gpus, row) in enumerate(pods):
        pod: dict = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{k}",
                "namespace": "default",
                "creationTimestamp": _ts(age),
                "annotations": {"scheduling.k8s.io/group-name": name},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
            },
            "status": {"phase": "Pending"},
        }
        if row >= 0:
            pod["spec"]["nodeName"] = f"node-{row:04d}"
            pod["status"] = {"phase": "Running", "startTime": _ts(age)}
        docs.append(pod)
    return docs


def generate(index: int, rng: np.random.Generator, max_nodes: int) -> Scenario | None:
    """One fragmented cluster and a waiting gang that fits nowhere but within the free GPUs (None:
    the draw gave none; the caller draws again)."""
    sizes = [n for n in (64, 128, 256, 512) if n <= max_nodes] or [max_nodes]
    n = int(rng.choice(sizes))
    free = np.full(n, 8)
    target = float(rng.uniform(0.80, 0.95))
    docs = _node_docs(n)
    j = 0
    while 1.0 - free.sum() / (8.0 * n) < target:
        gpus = int(rng.choice([1, 2, 4], p=[0.4, 0.35, 0.25]))
        count = 1 if rng.random() < 0.6 else int(rng.integers(2, 9))
        rows = []
        left = free.copy()
        for _ in range(count):
            ok = np.flatnonzero(left >= gpus)
            if not len(ok):
                break
            r = int(rng.choice(ok))
            rows.append(r)
            left[r] -= gpus
        if len(rows) < count:
            if gpus == 1:
                break
            continue
        free = left
        min_member = count if rng.random() < 0.6 else int(rng.integers(1, count + 1))
        age = float(rng.uniform(300, 3 * 86400))
        docs += _job_docs(f"run-{j:04d}", [(gpus, r) for r in rows], min_member, age, None)
        j += 1
    topology = rng.random() < 0.35
    g = int(rng.choice([4, 8]))
    racks = [free[r : r + RACK] for r in range(0, n, RACK)]
    room = max(int(x.sum()) for x in racks) if topology else int(free.sum())
    most = min(6, room // g)
    if most < 1:
        return None
    k = int(rng.integers(1, most + 1))
    fits_now = int((free // g).max() if topology else (free // g).sum())
    if topology:
        fits_now = max(int((x // g).sum()) for x in racks)
    if fits_now >= k:
        return None  # allocate would place it: not consolidate's
    gang = {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}} if topology else None
    docs += _job_docs("gang", [(g, -1)] * k, k, 60.0, gang)
    return Scenario(index, n, docs, "default/gang", topology, g * k, 1.0 - free.sum() / (8.0 * n))


@dataclass
class Outcome:
    placed: bool = False
    cost: float = 0.0
    moved: int = 0
    jobs: int = 0  # jobs whose pods moved (the cap, ``MAX_JOBS``, counts these)
    ms: float = 0.0
    cpu_ms: float = 0.0
    status: str = ""
    victims: list[str] = field(default_factory=list)


def run_action(sc: Scenario, pristine: Cluster, repeat: int) -> Outcome:
    best: Outcome | None = None
    for _ in range(max(repeat, 1)):
        out = _run_action(sc, pristine)
        if best is not None:
            assert out.victims == best.victims, "decisions differ between runs"
            out.ms, out.cpu_ms = min(out.ms, best.ms), min(out.cpu_ms, best.cpu_ms)
        best = out
    assert best is not None
    return best


def _run_action(sc: Scenario, pristine: Cluster) -> Outcome:
    cluster = build_cluster(("bench", d) for d in sc.docs)
    gc.freeze()  # as ``corral schedule`` keeps the loaded model out of the collector's passes
    try:
        return _cycle(sc, pristine, cluster)
    finally:
        gc.unfreeze()


def _cycle(sc: Scenario, pristine: Cluster, cluster: Cluster) -> Outcome:
    cfg = parse_config(CONFIG, REGISTRY, "bench")
    session = Session(cluster, cfg, REGISTRY, NOW, 1)
    for ac in cfg.actions[:-1]:
        session.action = ac.name
        REGISTRY.action_class(ac.name)(ac.args).execute(session)  # type: ignore[misc]
    ac = cfg.actions[-1]
    act = REGISTRY.action_class(ac.name)(ac.args)  # type: ignore[misc]
    session.action = ac.name
    t, c = time.perf_counter(), time.process_time()
    act.execute(session)
    out = Outcome(ms=(time.perf_counter() - t) * 1000.0, cpu_ms=(time.process_time() - c) * 1000.0)
    decisions = session.close()
    job = pristine.jobs[sc.gang]
    where = {nm.pod: nm.node for nm in decisions.nominations if nm.node}
    where.update({b.pod: b.node for b in decisions.binds})
    mine = [t for t in job.tasks if t.key in where]
    out.placed = len(mine) >= job.min_member
    if out.placed and job.topology_mode == "hard":
        rows = np.array([pristine.nodes.index[where[t.key]] for t in mine])
        out.placed = any(m[rows].all() for _, m in allowed_domains(pristine, job))
    by_key = {t.key: t for t in pristine.tasks.values()}
    moved = [by_key[e.pod] for e in decisions.evictions]
    assert all(t.key in where for t in moved), "a moved pod without a new node"
    out.moved = len(moved)
    out.jobs = len({id(t.job) for t in moved})
    assert out.jobs <= MAX_JOBS, "more jobs moved than maxMovedJobs"
    out.cost = move_cost(pristine, moved, NOW)
    out.victims = sorted(e.pod for e in decisions.evictions)
    return out


def run_oracle(sc: Scenario, pristine: Cluster, time_limit: float, workers: int) -> Outcome:
    res = solve_moves(
        pristine, pristine.jobs[sc.gang], now=NOW, time_limit=time_limit, workers=workers, max_jobs=MAX_JOBS
    )
    return Outcome(
        placed=res.placed,
        cost=res.cost,
        moved=len(res.moved),
        jobs=len({id(t.job) for t in res.moved}),
        ms=res.wall * 1000.0,
        status=res.status,
    )


def _load_cache(path: str | None) -> dict[str, dict]:
    if not path:
        return {}
    try:
        with open(path) as f:
            return dict(json.load(f))
    except FileNotFoundError:
        return {}


def _save_cache(path: str | None, cache: dict[str, dict]) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(cache, f, indent=0, sort_keys=True)


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenarios", type=int, default=100)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--max-nodes", type=int, default=512)
    ap.add_argument("--quick", action="store_true", help="20 scenarios of at most 128 nodes, oracle 2 s")
    ap.add_argument("--oracle-time", type=float, default=10.0, help="CP-SAT time limit per solve, seconds")
    ap.add_argument("--oracle-workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2, help="time the action this many times, keep the fastest")
    ap.add_argument("--only", type=int, nargs="+", help="run only these scenario indices")
    ap.add_argument(
        "--oracle-cache",
        help="a JSON file of the oracle's answers by (seed, scenario, nodes, time limit): read, and written "
        "with what is solved anew (the oracle does not change with the action; its solves dominate the run)",
    )
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.scenarios, args.max_nodes, args.oracle_time = (
            min(args.scenarios, 20),
            min(args.max_nodes, 128),
            2.0,
        )
    t0, c0 = time.perf_counter(), time.process_time()
    cache = _load_cache(args.oracle_cache)
    rows: list[tuple[Scenario, Outcome, Outcome]] = []
    for i in args.only or range(args.scenarios):
        sc = None
        for attempt in range(50):
            sc = generate(i, np.random.default_rng([args.seed, i, attempt]), args.max_nodes)
            if sc is not None:
                break
        if sc is None:
            continue
        pristine = build_cluster(("bench", d) for d in sc.docs)
        act = run_action(sc, pristine, args.repeat)
        key = f"{args.seed}/{i}/{args.max_nodes}/{args.oracle_time:g}"
        if key in cache:
            orc = Outcome(**cache[key])
        else:
            orc = run_oracle(sc, pristine, args.oracle_time, args.oracle_workers)
            cache[key] = {f: getattr(orc, f) for f in ("placed", "cost", "moved", "jobs", "ms", "status")}
            _save_cache(args.oracle_cache, cache)
        rows.append((sc, act, orc))
        if args.verbose:
            print(
                f"#{i:3d} {sc.nodes:4d} nodes fill {sc.fill:.3f} {'rack' if sc.topology else '-':<4} "
                f"need {sc.need:2d} GPU | consolidate {'P' if act.placed else '-'} m{act.moved} j{act.jobs} "
                f"{act.cost:.2f} GPU-h {act.cpu_ms:.1f} ms cpu | oracle {'P' if orc.placed else '-'} "
                f"m{orc.moved} {orc.cost:.2f} GPU-h {orc.status} {orc.ms:.0f} ms",
                flush=True,
            )
    return report(args, rows, time.perf_counter() - t0, time.process_time() - c0)


def report(args, rows, wall: float, cpu: float) -> int:
    print(
        f"{len(rows)} scenarios, seed {args.seed}; nodes "
        + ", ".join(
            f"{s}: {sum(1 for sc, _, _ in rows if sc.nodes == s)}" for s in sorted({r[0].nodes for r in rows})
        )
        + f"; rack-bound gangs {sum(1 for sc, _, _ in rows if sc.topology)}; "
        f"oracle proved optimal {sum(1 for *_, o in rows if o.status == 'OPTIMAL')}, "
        f"impossible {sum(1 for *_, o in rows if o.status == 'INFEASIBLE')}; {wall:.0f} s wall, {cpu:.0f} s CPU"
    )
    can = [(sc, a, o) for sc, a, o in rows if o.placed]
    missed = [sc.index for sc, a, o in can if not a.placed]
    extra = sum(1 for _, a, o in rows if a.placed and not o.placed)
    within = [a.cost <= o.cost * 1.10 + 1e-6 for _, a, o in can if a.placed]
    share = sum(within) / len(can) if can else float("nan")
    ratios = [a.cost / o.cost for _, a, o in can if a.placed and o.cost > 0]
    big = [a for sc, a, _ in rows if sc.nodes == max(sc.nodes for sc, _, _ in rows)]
    top = max((sc.nodes for sc, _, _ in rows), default=0)
    print(
        f"placed: consolidate {sum(a.placed for _, a, _ in rows)}, oracle {len(can)}; "
        f"missed where the oracle places: {len(missed)} {missed[:10]}; placed where the oracle does not: {extra}"
    )
    print(
        f"work lost, GPU-h: consolidate {sum(a.cost for _, a, o in can if a.placed):.1f}, "
        f"oracle {sum(o.cost for _, _, o in can):.1f}; pods moved {sum(a.moved for _, a, _ in can)} vs "
        f"{sum(o.moved for _, _, o in can)}; median cost ratio {np.median(ratios) if ratios else float('nan'):.2f}; "
        f"most jobs one decision moved {max((a.jobs for _, a, _ in rows), default=0)} (cap {MAX_JOBS})"
    )
    cpu95, wall95 = _pct([a.cpu_ms for a in big], 95), _pct([a.ms for a in big], 95)
    print(
        f"decision time at {top} nodes ({len(big)} decisions): CPU median {_pct([a.cpu_ms for a in big], 50):.1f} ms, "
        f"p95 {cpu95:.1f} ms; wall median {_pct([a.ms for a in big], 50):.1f} ms, p95 {wall95:.1f} ms"
    )
    ok_place = not missed
    ok_cost = share >= 0.95
    ok_time = top < 512 or cpu95 <= 50.0
    print("targets:")
    print(
        f"  placed wherever the oracle places: {len(can) - len(missed)} of {len(can)}  {'OK' if ok_place else 'MISS'}"
    )
    print(
        f"  cost <= oracle + 10 % on >= 95 %: {share:.1%} ({sum(within)} of {len(can)})  {'OK' if ok_cost else 'MISS'}"
    )
    print(
        f"  p95 decision time <= 50 ms at 512 nodes: {cpu95:.1f} ms CPU ({wall95:.1f} ms wall)  {'OK' if ok_time else 'MISS'}"
    )
    losses = sorted(
        (
            (a.cost / max(o.cost, 1e-9), sc.index)
            for sc, a, o in can
            if a.placed and a.cost > o.cost * 1.10 + 1e-6
        ),
        reverse=True,
    )[:5]
    if losses:
        print("  dearest against the oracle: " + ", ".join(f"#{i} x{r:.2f}" for r, i in losses))
    return 0 if ok_place and ok_cost and ok_time else 1


if __name__ == "__main__":
    sys.exit(main())
