"""Allocate at scale (issue: scheduling core). A generated cluster of 10,000 nodes (8 GPUs, 96 CPUs,
1 TiB each) in a 3-tier HyperNode tree, 30,000 running pods and 20,000 pending pods in 2,500 gangs of
1–64 pods over three queues. Prints the time to build the model from the objects, one full cycle's time
(enqueue, allocate, backfill with the default config), peak memory and pods placed per second, next to
the targets (cycle <= 5 s, 4,000 pods/s; peak memory <= 2 GiB). It then writes the snapshot to disk as
JSON (one ``kind: List``) and as multi-document YAML and times the whole ``corral schedule -o json``
command on each, start-up and load included, in a fresh process (target <= 5 s), with the CPU time it
used (user + sys: on a shared machine wall time includes waiting for a core). Both formats are timed
against the target. Then the YAML loader alone, in this process: the rapidyaml fast path
(``corral.inputs.fast_yaml``), its screen alone, and the PyYAML loader, on the ``yaml.dump_all`` stream
and on the same objects as ``kubectl get -o yaml`` writes them (plain counts, ports and quantities).

    .venv/bin/python benchmarks/bench_allocate.py [--nodes N] [--seed S] [--no-cli] [--profile]

``--profile`` prints the top functions of the load path (read -> parse_objects -> assemble) and of the
cycle under cProfile.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from corral.framework.cycle import run_cycle
from corral.manifests.build import assemble_cluster, build_cluster, parse_objects
from corral.manifests.load import read_objects
from corral.registry import REGISTRY, default_config

T0 = "2026-01-01T00:00:00Z"


def pod(name: str, group: str, gpu: int, node: str | None) -> dict:
    """A pod of ``group`` asking for ``gpu`` GPUs (4 CPUs and 32 GiB each), running on ``node`` if given."""
    p = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": name,
            "creationTimestamp": T0,
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": "corral",
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "requests": {
                            "cpu": str(4 * gpu),
                            "memory": f"{32 * gpu}Gi",
                            "nvidia.com/gpu": str(gpu),
                        }
                    },
                }
            ],
        },
        "status": {"phase": "Pending"},
    }
    if node:
        p["spec"]["nodeName"] = node
        p["status"] = {"phase": "Running", "startTime": T0}
    return p


def generate(nodes: int, running: int, gangs: int, pending: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    docs: list[dict] = []
    per_rack, per_spine = 16, 32  # tier 1: 16 nodes; tier 2: 32 racks; tier 3: all
    for i in range(nodes):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{i:05d}", "labels": {"rack": f"rack-{i // per_rack:04d}"}},
                "status": {
                    "allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}
                },
            }
        )
    racks = (nodes + per_rack - 1) // per_rack
    for r in range(racks):
        docs.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": f"rack-{r:04d}"},
                "spec": {
                    "tier": 1,
                    "members": [
                        {
                            "type": "Node",
                            "selector": {"labelMatch": {"matchLabels": {"rack": f"rack-{r:04d}"}}},
                        }
                    ],
                },
            }
        )
    spines = (racks + per_spine - 1) // per_spine
    for s in range(spines):
        docs.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": f"spine-{s:03d}"},
                "spec": {
                    "tier": 2,
                    "members": [
                        {"type": "HyperNode", "selector": {"exactMatch": {"name": f"rack-{r:04d}"}}}
                        for r in range(s * per_spine, min(racks, (s + 1) * per_spine))
                    ],
                },
            }
        )
    docs.append(
        {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": "core"},
            "spec": {
                "tier": 3,
                "members": [
                    {"type": "HyperNode", "selector": {"exactMatch": {"name": f"spine-{s:03d}"}}}
                    for s in range(spines)
                ],
            },
        }
    )
    queues = ["research", "production", "batch"]
    for q, w in zip(queues, (2, 3, 1)):
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": q},
                "spec": {"weight": w},
            }
        )

    # running: 30,000 one-GPU pods, three per node on the first 10,000 nodes, in groups of 10
    for g in range(running // 10):
        name = f"run-{g:05d}"
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "bench", "creationTimestamp": T0},
                "spec": {"minMember": 10, "queue": queues[g % 3]},
                "status": {"phase": "Running"},
            }
        )
        for k in range(10):
            idx = g * 10 + k
            docs.append(pod(f"{name}-{k}", name, 1, f"node-{(idx // 3) % nodes:05d}"))
    # pending: 2,500 gangs, sizes 1-64 summing to `pending` pods
    sizes = rng.integers(1, 65, size=gangs)
    sizes = np.clip(np.round(sizes * pending / sizes.sum()).astype(int), 1, 64)
    i = 0
    while sizes.sum() != pending:  # nudge to the exact total, staying in 1..64
        step = 1 if sizes.sum() < pending else -1
        if 1 <= sizes[i % gangs] + step <= 64:
            sizes[i % gangs] += step
        i += 1
    for g, size in enumerate(sizes):
        name = f"gang-{g:04d}"
        gpu = int(rng.choice([1, 2, 4, 8], p=[0.2, 0.2, 0.2, 0.4]))
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "bench", "creationTimestamp": T0},
                "spec": {"minMember": int(size), "queue": queues[g % 3]},
                "status": {"phase": "Inqueue"},
            }
        )
        docs += [pod(f"{name}-{k}", name, gpu, None) for k in range(int(size))]
    return docs


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def time_cli(path: Path) -> tuple[float, float, int]:
    """Wall and CPU (user + sys of the child) seconds of ``corral schedule PATH -o json`` in a fresh
    process, output to /dev/null; and its exit code."""
    corral = Path(sys.executable).with_name("corral")
    argv = [str(corral)] if corral.exists() else [sys.executable, "-c", "from corral.cli import main; main()"]
    before = os.times()
    t = time.perf_counter()
    with open(os.devnull, "w") as sink:
        code = subprocess.run(
            argv + ["schedule", str(path), "-o", "json", "--now", T0], stdout=sink
        ).returncode
    wall = time.perf_counter() - t
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu, code


def cli_runs(docs: list[dict], generator_args: list[str]) -> None:
    """The whole command on the snapshot as JSON and as YAML files."""
    with tempfile.TemporaryDirectory() as tmp:
        files = {"JSON": Path(tmp) / "snapshot.json", "YAML": Path(tmp) / "snapshot.yaml"}
        files["JSON"].write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        files["YAML"].write_text(yaml.dump_all(docs, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper)))
        for name, path in files.items():
            wall, cpu, code = time_cli(path)
            ok = "OK" if code == 0 and wall <= 5 else "MISSED"
            print(
                f"corral schedule, {name} ({path.stat().st_size / 2**20:.0f} MiB): {wall:6.2f} s wall, "
                f"{cpu:6.2f} s CPU   (target <= 5 s)  {ok}" + ("" if code == 0 else f"  exit {code}")
            )
    # in a child process (which generates the objects again): the loaders' documents must not count in
    # this process's peak memory
    for style in ("dump_all", "kubectl"):
        subprocess.run([sys.executable, __file__, "--yaml-loaders", style] + generator_args, check=True)


def kubectl_style(docs: list[dict]) -> str:
    """The snapshot as ``kubectl get -o yaml`` writes it: one ``kind: List``, counts and ports as plain
    integers, quantities and pod IPs as plain scalars (``500m``, ``10Gi``, ``10.0.1.7``), timestamps
    quoted."""

    def plain(value):
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return int(value) if isinstance(value, str) and value.isdigit() else value

    items = []
    for doc in docs:
        doc = plain(doc)
        if doc["kind"] == "Pod":
            container = doc["spec"]["containers"][0]
            container["ports"] = [{"containerPort": 8080, "protocol": "TCP"}]
            container["resources"]["limits"] = {"cpu": "500m", "memory": "10Gi"}
            doc["spec"]["terminationGracePeriodSeconds"] = 30
            if doc["status"]["phase"] == "Running":  # a distinct IP per pod, plain as kubectl writes it
                n = len(items)
                doc["status"].update(podIP=f"10.{n >> 16}.{(n >> 8) & 255}.{n & 255}", hostIP="192.168.0.1")
        items.append(doc)
    return yaml.dump(
        {"apiVersion": "v1", "kind": "List", "items": items},
        Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
    )


def yaml_loaders(style: str, docs: list[dict]) -> None:
    """The YAML loader alone, in this process with the collector paused (as ``corral schedule`` runs it):
    the rapidyaml fast path, its screen alone (refusals, candidate scalars, libyaml's grammar check), and
    the PyYAML loader (``CORRAL_FAST_YAML=0``)."""
    import gc

    from corral.inputs import fast_yaml, load_yaml_all
    from corral.inputs.construction import c_documents

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    name = "yaml.dump_all" if style == "dump_all" else "kubectl style"
    text = yaml.dump_all(docs, Dumper=dumper) if style == "dump_all" else kubectl_style(docs)
    del docs
    times = {}
    paused = gc.isenabled()
    gc.disable()
    try:
        for what, switch, fn in (
            ("fast path", "1", lambda: load_yaml_all(text, name)),
            ("its screen", "1", lambda: fast_yaml.accepts(text, c_documents)),
            ("PyYAML", "0", lambda: load_yaml_all(text, name)),
        ):
            os.environ["CORRAL_FAST_YAML"] = switch
            c = time.process_time()
            result = fn()
            times[what] = (time.process_time() - c, result)
    finally:
        os.environ.pop("CORRAL_FAST_YAML", None)
        if paused:
            gc.enable()
    taken = times["its screen"][1] and repr(times["fast path"][1]) == repr(times["PyYAML"][1])
    print(
        f"YAML loader, {name} ({len(text) / 2**20:.0f} MiB): fast path {times['fast path'][0]:.2f} s CPU "
        f"(its screen {times['its screen'][0]:.2f} s), PyYAML {times['PyYAML'][0]:.2f} s CPU   "
        + ("fast path taken, same documents" if taken else "FAST PATH NOT TAKEN")
    )


def profiled(what: str, fn, top: int = 12):
    prof = cProfile.Profile()
    result = prof.runcall(fn)
    print(f"--- profile: {what}")
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(top)
    return result


def profile_load(docs: list[dict]) -> None:
    """cProfile of reading (JSON file), parse_objects and assemble_cluster."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        objects = profiled("read_objects", lambda: read_objects([path]))
        records = profiled("parse_objects", lambda: parse_objects(objects))
        profiled("assemble_cluster", lambda: assemble_cluster(records))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--running", type=int, default=30_000)
    ap.add_argument("--gangs", type=int, default=2_500)
    ap.add_argument("--pending", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-cli", action="store_true", help="skip timing the corral schedule command")
    ap.add_argument("--profile", action="store_true", help="profile the load path and the cycle")
    ap.add_argument("--yaml-loaders", choices=("dump_all", "kubectl"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    generator_args = [f"--{k}={getattr(args, k)}" for k in ("nodes", "running", "gangs", "pending", "seed")]
    t = time.perf_counter()
    docs = generate(args.nodes, args.running, args.gangs, args.pending, args.seed)
    if args.yaml_loaders:
        yaml_loaders(args.yaml_loaders, docs)
        return 0
    print(f"generated {len(docs)} objects in {time.perf_counter() - t:.1f} s")
    if not args.no_cli:
        cli_runs(docs, generator_args)
    if args.profile:
        profile_load(docs)
    t, c = time.perf_counter(), time.process_time()
    cluster = build_cluster(("bench", d) for d in docs)
    load, load_cpu = time.perf_counter() - t, time.process_time() - c
    del docs
    config = default_config()
    t, c = time.perf_counter(), time.process_time()
    cycle_run = lambda: run_cycle(cluster, config, REGISTRY, 1767225600.0, 1)  # noqa: E731
    decisions = profiled("one cycle", cycle_run) if args.profile else cycle_run()
    cycle, cycle_cpu = time.perf_counter() - t, time.process_time() - c
    binds = len(decisions.binds)
    rate = binds / cycle if cycle > 0 else float("inf")
    peak = peak_mib()
    print(
        f"nodes {args.nodes}, running pods {args.running}, pending pods {args.pending} in {args.gangs} gangs"
    )
    print(f"model build:   {load:8.2f} s wall, {load_cpu:6.2f} s CPU")
    print(
        f"one cycle:     {cycle:8.2f} s wall, {cycle_cpu:6.2f} s CPU   (target <= 5 s)  "
        f"{'OK' if cycle <= 5 else 'MISSED'}"
    )
    handled = args.pending / cycle if cycle > 0 else float("inf")
    # the 4,000 pods/s is its 20,000 pending pods over the 5 s budget: pods decided per second
    print(f"pods placed:   {binds:8d}     ({rate:,.0f} pods placed/s)")
    print(
        f"pods handled:  {args.pending:8d}     ({handled:,.0f} pending pods decided/s; target >= 4,000)"
        f"  {'OK' if handled >= 4000 else 'MISSED'}"
    )
    print(f"unschedulable: {len(decisions.unschedulable):8d} gangs")
    print(f"peak memory:   {peak:8.0f} MiB (target <= 2048 MiB)  {'OK' if peak <= 2048 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
