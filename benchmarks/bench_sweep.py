"""``corral sweep`` in parallel: the same grid sequentially, on a process pool and on a local Ray instance.

The grid (issue: the researcher's workflow): 5 configurations — the built-in default and the baselines
of docs/examples/baselines (fifo, greedy, las) plus shortest-job-first on noisy estimates (spread 2, so
that the seeds differ) — × 4 seeds of the Philly trace's week of 1-8 October 2017 (10,650 jobs,
../shared/traces/philly/philly.csv, every virtual cluster in one queue as in bench_backlog.py) on 80
nodes × 8 GPUs. Prints for each executor the wall time, the CPU time of this process and its children,
and the CPU time the runs themselves took (summed over cells), next to the target: with 2 workers the
wall time is about half the sequential one; and checks that every cell's figures and per-job records are
the same bytes whichever executor ran it.

    .venv/bin/python benchmarks/bench_sweep.py [--workers 2] [--seeds 4] [--configs 5] [--nodes 80]
                                               [--no-ray] [--address HOST:PORT] [--keep DIR]

``--address`` adds a run on that Ray cluster (started with ``ray start --head``; its nodes need corral
and the trace at the same paths), checked byte for byte like the others.

Skips with a message when the trace is absent; the Ray run is skipped when Ray is not installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / ".." / "shared" / "traces" / "philly" / "philly.csv"
BASELINES = ROOT / "docs" / "examples" / "baselines"
# the week of 1-8 October 2017 on the trace's clock (its first job, 2017-09-04 10:30:41 UTC, at 0)
WEEK = (2294959, 2899759)
TARGET = 0.5
SJF_NOISY = """# shortest job first on estimates off by up to 2x either way (the seed draws them)
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: sjf}, {name: priority}, {name: gang, enablePreemptable: false}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
simulation:
  estimates: {model: noisy, spread: 2}
"""


def write_spec(folder: Path, nodes: int, seeds: int, configs: int, until: str | None = None) -> Path:
    (folder / "cluster.yaml").write_text(
        f"name: {nodes} x 8 GPUs\nnodes:\n- {{name: gpu, count: {nodes}, gpus: 8, cpu: 96, memory: 768Gi}}\n"
        "topology: {tiers: [32]}\nqueues: [{name: default}]\ndefault_queue: default\n"
    )
    (folder / "sjf-noisy.yaml").write_text(SJF_NOISY)
    names = {
        "default": "default",
        "fifo": str(BASELINES / "fifo.yaml"),
        "greedy": str(BASELINES / "greedy.yaml"),
    }
    names |= {"las": str(BASELINES / "las.yaml"), "sjf-noisy": "sjf-noisy.yaml"}
    chosen = dict(list(names.items())[:configs])
    spec = {
        "name": "philly-week",
        "configs": chosen,
        "workloads": [
            {"name": "philly-week", "file": str(TRACE.resolve()), "format": "philly", "windows": [list(WEEK)]}
        ],
        "clusters": [{"name": f"{nodes}x8", "file": "cluster.yaml"}],
        "seeds": seeds,
        "options": {"until": until},
    }
    path = folder / "sweep.yaml"
    path.write_text(json.dumps(spec, indent=2))  # JSON is YAML
    return path


def cells(out: Path) -> dict[str, tuple[str, bytes]]:
    got = {}
    for cell in sorted((out / "cells").iterdir()):
        record = json.loads((cell / "cell.json").read_text())
        record["run"] = {k: record["run"][k] for k in ("events", "cycles", "end_time")}
        got[cell.name] = (json.dumps(record, sort_keys=True), (cell / "jobs.parquet").read_bytes())
    return got


def timed(label: str, fn) -> dict:
    t0, c0 = time.perf_counter(), os.times()
    fn()
    c1 = os.times()
    wall = time.perf_counter() - t0
    cpu = (c1.user - c0.user) + (c1.system - c0.system) + (c1.children_user - c0.children_user)
    cpu += c1.children_system - c0.children_system
    return {"label": label, "wall": wall, "cpu": cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--configs", type=int, default=5, choices=range(1, 6))
    parser.add_argument("--nodes", type=int, default=80)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--address", help="also run on the Ray cluster at this address")
    parser.add_argument("--until", help="stop each run's clock here (a quick look, e.g. 2d)")
    parser.add_argument("--keep", type=Path, help="write the sweeps here (default: a temporary folder)")
    args = parser.parse_args()
    if not TRACE.exists():
        print(f"skipped: {TRACE} is absent")
        return 0
    from corral.sim.sweep import run_sweep
    from corral.sim.sweep_report import write_sweep_outputs
    from corral.sim.sweep_spec import load_sweep_spec

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    spec = load_sweep_spec(write_spec(work, args.nodes, args.seeds, args.configs, args.until))
    print(
        f"{len(spec.cells)} cells: {len(spec.configs)} configs x {len(spec.seeds)} seeds of the Philly week on {args.nodes} nodes"
    )
    runs: list[tuple[str, str, int, str | None]] = [
        ("sequential", "local", 1, None),
        (f"{args.workers} workers", "local", args.workers, None),
    ]
    try:
        import ray  # noqa: F401

        if not args.no_ray:
            runs.append((f"Ray, {args.workers} CPUs", "ray", args.workers, None))
        if args.address:
            runs.append(("Ray cluster", "ray", args.workers, args.address))
    except ImportError:
        print("Ray is not installed: its runs are skipped (pip install 'corral[ray]')")
    rows, outputs = [], {}
    for label, executor, workers, address in runs:
        out = work / label.split(",")[0].replace(" ", "-").lower()
        shutil.rmtree(out, ignore_errors=True)
        records: list = []

        def go(out=out, executor=executor, workers=workers, address=address, records=records) -> None:
            records.extend(run_sweep(spec, out, executor=executor, workers=workers, address=address))

        row = timed(label, go)
        row["runs_cpu"] = sum(r["run"]["cpu_time"] for r in records)
        described = json.loads((out / "sweep.json").read_text())
        write_sweep_outputs(out, records, described, spec.baseline)
        rows.append(row)
        outputs[label] = cells(out)
        print(
            f"{label:>16}: wall {row['wall']:7.1f} s, CPU {row['cpu']:7.1f} s (this process and its children), "
            f"CPU of the runs {row['runs_cpu']:7.1f} s",
            flush=True,
        )
    first = outputs["sequential"]
    same = all(o == first for o in outputs.values())
    ratio = rows[1]["wall"] / rows[0]["wall"]
    print(
        f"wall time with {args.workers} workers / sequential: {ratio:.2f} (target: about {TARGET}: "
        f"{'met' if ratio <= TARGET * 1.15 else 'not met'})"
    )
    for row in rows[2:]:
        print(f"wall time on {row['label']} / sequential: {row['wall'] / rows[0]['wall']:.2f}")
    print(f"every cell the same bytes under every executor: {'yes' if same else 'NO'}")
    for label, got in outputs.items():
        for name, (record, jobs) in got.items():
            if (record, jobs) != first[name]:
                print(
                    f"  {label} differs from sequential in {name}: figures {'same' if record == first[name][0] else 'differ'}, jobs {'same' if jobs == first[name][1] else 'differ'}"
                )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
