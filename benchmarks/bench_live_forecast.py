"""What the live forecast and the live page of ``corral run`` cost on a large cluster (issue 32).

The cluster of ``bench_live.py`` / ``bench_allocate.py`` (5,000 nodes, 30,000 running pods, 20,000 pending
in 2,500 gangs, a 3-tier HyperNode tree), built by the snapshot loader; one cycle of the built-in
configuration runs on it (as the runner's cycle does), then:

- the forecast of :mod:`corral.kube.expected` as the runner runs it every ``--forecast-every`` cycles: a
  copy of the cluster, the cycle's decisions carried out on it, a forward run stopped by the time budget
  (``--forecast-budget``, default 2 s), the gauge set (no API server: no annotation is written). Running
  jobs end after ``forecast.defaultRuntime`` (4 h), spread by their start times;
- the live page of :mod:`corral.kube.livepage`: a copy of the cluster, the queue view, the HTML.

Prints wall and CPU time of each, the estimates found within the budget, and the cost per cycle at the
default of one forecast every 10 cycles. Target: the forecast phase stays within its budget plus the
copy (the budget is what bounds a large backlog), so cycles in between are not slowed at all.

    .venv/bin/python benchmarks/bench_live_forecast.py [--nodes N] [--budget S]
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_allocate import generate  # noqa: E402
from corral.framework.config import parse_config  # noqa: E402
from corral.framework.cycle import run_cycle  # noqa: E402
from corral.kube.expected import ExpectedStarts, LiveForecast  # noqa: E402
from corral.kube.livepage import LivePage  # noqa: E402
from corral.kube.logs import Log  # noqa: E402
from corral.manifests.build import build_cluster  # noqa: E402
from corral.model.clock import parse_time  # noqa: E402
from corral.registry import DEFAULT_CONFIG, REGISTRY  # noqa: E402
from corral.sim.forecast import clone_cluster  # noqa: E402

T0 = parse_time("2026-01-01T00:00:00Z")


def timed(fn):  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=5_000)
    ap.add_argument("--running", type=int, default=30_000)
    ap.add_argument("--gangs", type=int, default=2_500)
    ap.add_argument("--pending", type=int, default=20_000)
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--every", type=int, default=10)
    args = ap.parse_args()
    from prometheus_client import CollectorRegistry

    docs = generate(args.nodes, args.running, args.gangs, args.pending, 7)
    config = parse_config({**DEFAULT_CONFIG, "forecast": {"defaultRuntime": "4h"}}, REGISTRY, "bench")
    cluster = build_cluster([("bench", d) for d in docs], ("corral",))
    decisions, wall, cpu = timed(lambda: run_cycle(cluster, config, REGISTRY, T0, 1))
    print(
        f"nodes {len(cluster.nodes)}, pods {len(cluster.tasks)}, podgroups {len(cluster.jobs)}; "
        f"one cycle: {wall:.2f} s wall, {cpu:.2f} s CPU ({len(decisions.binds)} binds)"
    )
    _, wall, cpu = timed(lambda: clone_cluster(cluster))
    print(f"copy of the cluster:     {wall:6.2f} s wall, {cpu:6.2f} s CPU")
    log = Log(stream=io.StringIO())
    expected = ExpectedStarts(
        LiveForecast(every=args.every, budget=args.budget),
        config,
        CollectorRegistry(),
        log,
        find=lambda kind, key: None,
        patch=None,
        assume=lambda *a: None,
    )
    _, wall, cpu = timed(lambda: expected.run(cluster, decisions, T0 + 1))
    found = sum(1 for e in expected.latest if e.start is not None)
    print(
        f"forecast (copy, decisions, forward run, gauge): {wall:6.2f} s wall, {cpu:6.2f} s CPU; "
        f"{found} of {len(expected.latest)} waiting podgroups estimated within the {args.budget:g} s budget"
    )
    parts = expected.seconds
    print(
        f"  copy and decisions {parts['copy']:.2f} s, forward run {parts['plan']:.2f} s (target: the budget, "
        f"{args.budget:g} s, plus at most one planned cycle); per cycle at one forecast every {args.every} "
        f"cycles: {wall / args.every:.2f} s wall"
    )
    page = LivePage(config, log, estimates=lambda: expected.latest)
    text, wall, cpu = timed(lambda: page.render(cluster, decisions, T0 + 1))
    print(
        f"live page (copy, queue view, HTML): {wall:6.2f} s wall, {cpu:6.2f} s CPU, "
        f"{len(text) / 2**20:.1f} MiB; rendered only while someone looks, at most once per refresh"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
