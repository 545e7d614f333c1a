"""Hard-topology gangs on a large HyperNode tree (issue: large clusters). 6,000 nodes of 8 GPUs in a
3-tier tree of 9,600 HyperNodes — a rail-optimised fabric: 9,000 tier-1 HyperNodes of 2 nodes (every
node sits on three rails, so tier 1 overlaps), 500 tier-2 blocks of 12 nodes (labelMatch) and 100 tier-3
pods of 5 blocks (exactMatch of HyperNodes) — about 70 % of the GPUs busy in random places, and 300
pending gangs: hard topology at tier 1 (2 × 8 GPUs or 4 × 4) and tier 2 (4–10 pods of 8 GPUs), plus a
quarter of soft-topology gangs. Prints the snapshot load time (from JSON on disk, and the model build
alone), per-gang allocate time, gangs placed, and how many could have been placed according to an
independent first-fit check over free capacity per HyperNode, next to the targets (every gang that
fits is placed; <= 20 ms per gang; load <= 3 s).

    .venv/bin/python benchmarks/bench_topology.py [--gangs N] [--seed S] [--busy F]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from corral.framework.cycle import run_cycle
from corral.manifests.build import build_cluster, load_snapshot
from corral.framework.config import parse_config
from corral.registry import DEFAULT_CONFIG, REGISTRY

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_allocate import pod  # noqa: E402

T0 = "2026-01-01T00:00:00Z"
NODES, RAILS, BLOCK, POD_BLOCKS = 6000, 3, 12, 5


def _hn(name: str, tier: int, members: list[dict]) -> dict:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": members}}


def _group(name: str, members: int, phase: str, topology: dict | None = None) -> dict:
    spec = {"minMember": members, "queue": "default"}
    if topology:
        spec["networkTopology"] = topology
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench", "creationTimestamp": T0},
            "spec": spec, "status": {"phase": phase}}


def generate(gangs: int, busy: float, seed: int) -> tuple[list[dict], list[tuple[str, int, int, str, int]]]:
    """The objects, and the pending gangs as (name, pods, GPUs per pod, mode, tier)."""
    rng = np.random.default_rng(seed)
    docs: list[dict] = []
    for i in range(NODES):
        docs.append({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": f"node-{i:05d}", "labels": {"block": f"block-{i // BLOCK:04d}"}},
                     "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8",
                                                "pods": "110"}}})
    for rail in range(RAILS):              # each rail pairs nodes differently: tier 1 overlaps
        for k in range(NODES // 2):
            a, b = (2 * k + rail) % NODES, (2 * k + 1 + rail) % NODES
            docs.append(_hn(f"rail{rail}-{k:05d}", 1, [
                {"type": "Node", "selector": {"exactMatch": {"name": f"node-{a:05d}"}}},
                {"type": "Node", "selector": {"exactMatch": {"name": f"node-{b:05d}"}}}]))
    blocks = NODES // BLOCK
    for b in range(blocks):
        docs.append(_hn(f"block-{b:04d}", 2, [{"type": "Node", "selector": {"labelMatch": {
            "matchLabels": {"block": f"block-{b:04d}"}}}}]))
    for p in range(blocks // POD_BLOCKS):
        docs.append(_hn(f"pod-{p:03d}", 3, [{"type": "HyperNode", "selector": {"exactMatch": {
            "name": f"block-{b:04d}"}}} for b in range(p * POD_BLOCKS, (p + 1) * POD_BLOCKS)]))
    docs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
                 "spec": {"weight": 1}})
    # running load: 2- and 4-GPU pods dropped on random nodes until ``busy`` of the GPUs are used
    free = np.full(NODES, 8)
    target, used, g = int(busy * 8 * NODES), 0, 0
    while used < target:
        node, gpu = int(rng.integers(NODES)), int(rng.choice([2, 4]))
        if free[node] < gpu:
            continue
        free[node] -= gpu
        used += gpu
        docs.append(_group(f"run-{g:05d}", 1, "Running"))
        docs.append(pod(f"run-{g:05d}-0", f"run-{g:05d}", gpu, f"node-{node:05d}"))
        g += 1
    pending = []
    for k in range(gangs):
        soft = k % 4 == 3
        if k % 2 == 0:
            pods, gpu, tier = (2, 8, 1) if rng.random() < 0.5 else (4, 4, 1)
        else:
            pods, gpu, tier = int(rng.integers(4, 11)), 8, 2
        mode = "soft" if soft else "hard"
        name = f"gang-{k:04d}"
        docs.append(_group(name, pods, "Inqueue", {"mode": mode, "highestTierAllowed": tier}))
        docs += [pod(f"{name}-{i}", name, gpu, None) for i in range(pods)]
        pending.append((name, pods, gpu, mode, tier))
    return docs, pending


def config():
    """The built-in configuration with ``network-topology-aware`` added to its second tier."""
    raw = {"actions": DEFAULT_CONFIG["actions"],
           "tiers": [DEFAULT_CONFIG["tiers"][0],
                     {"plugins": [*DEFAULT_CONFIG["tiers"][1]["plugins"], {"name": "network-topology-aware"}]}]}
    return parse_config(raw, REGISTRY, "bench_topology")


def first_fit(cluster, pending) -> int:
    """Independent check: gangs placeable one after another by first fit over free GPUs per node, inside
    one HyperNode of an allowed tier (hard) — soft gangs anywhere. Pods are whole GPUs, CPU and memory
    are proportional, so GPUs alone decide here."""
    nodes, tree = cluster.nodes, cluster.hypernodes
    col = cluster.resources.pos("nvidia.com/gpu")
    free = ((nodes.allocatable[:, col] - nodes.used[:, col]) / 1000).astype(int)
    masks = {t: [hn.mask for hn in tree.domains(t)] for t in tree.tiers}
    placed = 0
    for _, pods, gpu, mode, tier in pending:
        domains = [m for t in tree.tiers if t <= tier for m in masks[t]] if mode == "hard" else \
            [np.ones(len(free), dtype=bool)]
        for mask in domains:
            rows = np.flatnonzero(mask)
            slots = free[rows] // gpu
            if slots.sum() >= pods:
                left = pods
                for r, s in zip(rows, slots):
                    take = min(int(s), left)
                    free[r] -= take * gpu
                    left -= take
                    if not left:
                        break
                placed += 1
                break
    return placed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gangs", type=int, default=300)
    ap.add_argument("--busy", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    docs, pending = generate(args.gangs, args.busy, args.seed)
    hypernodes = sum(d["kind"] == "HyperNode" for d in docs)
    print(f"{NODES} nodes, {hypernodes} HyperNodes, {len(docs)} objects, {len(pending)} pending gangs "
          f"({sum(p[3] == 'hard' for p in pending)} hard)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        t = time.perf_counter()
        load_snapshot([path])
        load = time.perf_counter() - t
    t = time.perf_counter()
    cluster = build_cluster(("bench", d) for d in docs)
    build = time.perf_counter() - t
    possible = first_fit(build_cluster(("bench", d) for d in docs), pending)
    t = time.perf_counter()
    decisions = run_cycle(cluster, config(), REGISTRY, 1767225600.0, 1)
    cycle = time.perf_counter() - t
    groups = {b.pod.rsplit("-", 1)[0] for b in decisions.binds}
    placed = sum(1 for p in pending if f"bench/{p[0]}" in groups)
    per_gang = 1000 * cycle / max(len(pending), 1)
    print(f"load (JSON file, {path.stat().st_size / 2**20 if path.exists() else 0:.0f} MiB):"
          f" {load:6.2f} s   (target <= 3 s)   {'OK' if load <= 3 else 'MISSED'}")
    print(f"model build alone:      {build:6.2f} s")
    print(f"one cycle:              {cycle:6.2f} s   ({per_gang:.1f} ms per gang; target <= 20 ms)  "
          f"{'OK' if per_gang <= 20 else 'MISSED'}")
    print(f"gangs placed:           {placed:6d} of {len(pending)}; first-fit check places {possible}  "
          f"{'OK' if placed >= possible else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
