"""``corral run`` at scale (issue 13): 5,000 nodes and 50,000 pods (30,000 running, 20,000 pending in gangs,
a HyperNode tree, three queues) served by the in-process API server of the tests, read through the real
``kubernetes`` client. Prints:

- cache sync: from the start of the watch cache to every resource listed and parsed (target <= 30 s);
- the first cycle (binds the pending gangs that fit): schedule time, apply time, binds per second;
- steady cycles (nothing changes): total cycle time, the scheduling itself (``run_cycle``), and the
  overhead beyond it (building the model from the cache + applying), as a share of the scheduling
  (target <= 20 %).

    .venv/bin/python benchmarks/bench_live.py [--nodes N] [--running R] [--pending P] [--steady K]

The server runs in a child process (as a real API server runs apart from the scheduler); it is a
single-threaded-Python server, so binds per second is a floor. Timings are noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import io
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_allocate import generate  # noqa: E402

from corral.kube.api import KubeAPI, load_client  # noqa: E402
from corral.kube.logs import Log  # noqa: E402
from corral.kube.metrics import Metrics  # noqa: E402
from corral.kube.runner import RunOptions, Runner  # noqa: E402
from corral.manifests.fields import parse_time  # noqa: E402
from corral.registry import default_config  # noqa: E402
from tests.kube.fakeapi import FakeAPI  # noqa: E402

T0 = parse_time("2026-01-01T00:00:00Z")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=5_000)
    ap.add_argument("--running", type=int, default=30_000)
    ap.add_argument("--gangs", type=int, default=2_500)
    ap.add_argument("--pending", type=int, default=20_000)
    ap.add_argument("--steady", type=int, default=3, help="steady cycles to time")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    urls: "mp.Queue[str]" = ctx.Queue()
    stop = ctx.Event()
    proc = ctx.Process(target=_serve, args=(args, urls, stop), daemon=True)
    proc.start()
    url = urls.get(timeout=600)
    log = Log(stream=io.StringIO())
    opts = RunOptions(period=0.0, now=T0, sync_timeout=600.0)
    runner = Runner(KubeAPI(load_client(host=url), timeout=120.0), default_config(), opts, log, Metrics())
    t = time.perf_counter()
    runner.start()
    synced = runner.cache.wait_synced(600)
    sync = time.perf_counter() - t
    pods = len(runner.cache.stores[runner.cache.resources[1]])
    print(f"nodes {args.nodes}, pods {pods} ({args.running} running, {args.pending} pending in {args.gangs} gangs)")
    print(f"cache sync:        {sync:8.2f} s   (target <= 30 s)   {'OK' if synced and sync <= 30 else 'MISSED'}")
    first = runner.cycle(T0)
    assert first is not None, log.stream.getvalue()[-2000:]  # type: ignore[attr-defined]
    binds = len(first.report.get("binds", "done")) if first.report else 0
    apply_s = first.seconds["apply"]
    print(f"first cycle:       {first.seconds['total']:8.2f} s   (build {first.seconds['build']:.2f}, schedule "
          f"{first.seconds['schedule']:.2f}, apply {apply_s:.2f})")
    print(f"binds applied:     {binds:8d}     ({binds / apply_s if apply_s else 0:,.0f} binds/s through the API)")
    # let the watch deliver the binds, then time cycles with nothing new to do
    deadline = time.monotonic() + 60
    while runner.cache.assumed and time.monotonic() < deadline:
        time.sleep(0.1)
    rows = []
    for k in range(args.steady):
        res = runner.cycle(T0 + 1 + k)
        assert res is not None
        s = res.seconds
        if args.verbose:
            d = res.decisions
            print(f"  cycle {res.cycle}: {({k: round(v, 2) for k, v in s.items()})} binds {len(d.binds)} "
                  f"podgroups {len(d.podgroups)} unschedulable {len(d.unschedulable)}")
        assemble = s["build"] - s["view"]
        rows.append((s["total"], s["schedule"], assemble, s["total"] - s["schedule"] - assemble))
    total, sched, assemble, live = (statistics.median(r[i] for r in rows) for i in range(4))
    print(f"steady cycle:      {total:8.2f} s   (median of {args.steady}: run_cycle {sched:.2f} s, model assembly "
          f"{assemble:.2f} s, cache snapshot + apply {live:.2f} s)")
    share = (assemble + live) / sched if sched else float("inf")
    print(f"overhead beyond run_cycle:              {100 * share:7.1f} %  (target <= 20 %)  "
          f"{'OK' if share <= 0.20 else 'MISSED'}")
    share2 = live / (sched + assemble) if sched + assemble else float("inf")
    print(f"overhead beyond corral schedule's work: {100 * share2:7.1f} %  (the model assembly is the snapshot "
          f"loader's, shared with corral schedule)")
    runner.stop()
    stop.set()
    proc.join(timeout=10)
    return 0


def _serve(args: argparse.Namespace, urls: "mp.Queue[str]", stop: "mp.synchronize.Event") -> None:
    """The API server in its own process (a real API server does not share the scheduler's CPU)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    docs = generate(args.nodes, args.running, args.gangs, args.pending, args.seed)
    server = FakeAPI(bookmark_interval=1.0).start()
    t = time.perf_counter()
    server.load(docs)
    print(f"server (own process) loaded with {len(docs)} objects in {time.perf_counter() - t:.1f} s", flush=True)
    del docs
    urls.put(server.url)
    stop.wait()
    server.stop()


if __name__ == "__main__":
    sys.exit(main())
