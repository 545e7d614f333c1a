"""``corral run`` at scale (issue 13): 5,000 nodes and 50,000 pods (30,000 running, 20,000 pending in gangs,
a HyperNode tree, three queues) served by the in-process API server of the tests, read through the real
``kubernetes`` client. Prints:

- cache sync: from the start of the watch cache to every resource listed and parsed (target <= 30 s);
- the first cycle (a full assembly of the model; binds the pending gangs that fit): model, schedule and
  apply times, binds per second;
- the cycle after it, once the watch has delivered the binds and podgroup updates (thousands of changed
  pods: the incremental model rebuilds their jobs);
- steady cycles (no object changes; the apply phase still writes the conventions' backlog — a
  FailedScheduling Event and a ``PodScheduled=False`` condition for each of the 13,500 pods the first
  cycle could not place — as far as the token buckets of :mod:`corral.kube.ratelimit` allow, 50 a second
  each as kube-scheduler's client): their median time, the writes per cycle, and the overhead beyond the
  scheduling itself (target <= 20 %);
- the same once that backlog is written (the buckets opened until a cycle writes nothing, then back to
  their pace): what a steady cycle costs when nothing changed and nothing is left to tell.

**Overhead beyond the scheduling itself** = (steady cycle time - time of ``run_cycle`` in that cycle) /
time of ``run_cycle``. The steady cycle time is everything :meth:`corral.kube.runner.Runner.cycle` does:
the cache's changes taken and the model brought up to date (:mod:`corral.kube.model`), ``run_cycle`` (the
function ``corral schedule`` runs, on the same snapshot), and applying the decisions. Shown for wall
time and for the process's CPU time (on a shared machine wall time is inflated by other work; the ratio
within one run is the honest comparison). For reference, ``run_cycle`` is also timed on a full assembly
of the same snapshot, as ``corral schedule`` runs it.

    .venv/bin/python benchmarks/bench_live.py [--nodes N] [--running R] [--pending P] [--steady K]

The server runs in a child process (as a real API server runs apart from the scheduler); it is a
single-threaded-Python server, so binds per second is a floor. Timings are noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import multiprocessing as mp
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tests.kube.fakeapi import FakeAPI  # noqa: E402

from bench_allocate import generate  # noqa: E402
from corral.framework.cycle import run_cycle  # noqa: E402
from corral.kube.api import APIError, KubeAPI, load_client  # noqa: E402
from corral.kube.logs import Log  # noqa: E402
from corral.kube.metrics import Metrics  # noqa: E402
from corral.kube.ratelimit import TokenBucket  # noqa: E402
from corral.kube.runner import CycleResult, Runner, RunOptions  # noqa: E402
from corral.model.clock import parse_time  # noqa: E402
from corral.registry import REGISTRY, default_config  # noqa: E402

T0 = parse_time("2026-01-01T00:00:00Z")


def main() -> int:
    args = _args()
    ctx = mp.get_context("spawn")
    urls: mp.Queue[str] = ctx.Queue()
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
    print(
        f"nodes {args.nodes}, pods {pods} ({args.running} running, {args.pending} pending in {args.gangs} gangs)"
    )
    print(
        f"cache sync:        {sync:8.2f} s   (target <= 30 s)   {'OK' if synced and sync <= 30 else 'MISSED'}"
    )
    _first_cycles(runner, log)
    rows, writes = _steady(runner, args.steady, args.verbose)
    _report(rows, writes, args.steady)
    _reference(runner, T0 + 2 + args.steady)
    _drained(runner, args.steady, T0 + 3 + args.steady, args.profile)
    print(f"watch restarts over the run (410: relisted): {_restarts(runner) or 'none'}")
    runner.stop()
    stop.set()
    proc.join(timeout=10)
    return 0


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=5_000)
    ap.add_argument("--running", type=int, default=30_000)
    ap.add_argument("--gangs", type=int, default=2_500)
    ap.add_argument("--pending", type=int, default=20_000)
    ap.add_argument("--steady", type=int, default=7, help="steady cycles to time")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="write a cProfile of the steady cycles once the backlog is written (the scheduler's main "
        "thread) to this file, and print what they spend besides run_cycle",
    )
    return ap.parse_args()


def _first_cycles(runner: Runner, log: Log) -> None:
    """The first cycle (a full assembly, the binds), and the cycle after the watch delivered them."""
    first = runner.cycle(T0)
    assert first is not None, log.stream.getvalue()[-2000:]  # type: ignore[attr-defined]
    binds = len(first.report.get("binds", "done")) if first.report else 0
    apply_s = first.seconds["apply"]
    print(
        f"first cycle:       {first.seconds['total']:8.2f} s   (model {first.seconds['build']:.2f}, schedule "
        f"{first.seconds['schedule']:.2f}, apply {apply_s:.2f})"
    )
    print(
        f"binds applied:     {binds:8d}     ({binds / apply_s if apply_s else 0:,.0f} binds/s through the API)"
    )
    # let the watch deliver the binds, then time cycles with nothing new to do
    deadline = time.monotonic() + 60
    while runner.cache.assumed and time.monotonic() < deadline:
        time.sleep(0.1)
    after = runner.cycle(T0 + 1)
    assert after is not None
    m = runner.cache.model
    print(
        f"cycle after binds: {after.seconds['total']:8.3f} s   (model {after.seconds['build']:.3f} s: {m.last}, "
        f"{m.rebuilt} jobs rebuilt; run_cycle {after.seconds['schedule']:.3f} s, apply {after.seconds['apply']:.3f} s)"
    )


def _steady(
    runner: Runner, steady: int, verbose: bool
) -> tuple[list[dict[str, float]], list[tuple[int, int]]]:
    """``steady`` cycles with no object changed: their times, and the Events and conditions each wrote."""
    rows = []
    writes: list[tuple[int, int]] = []
    for k in range(steady):
        res = runner.cycle(T0 + 2 + k)
        assert res is not None
        s = res.seconds
        m = runner.cache.model
        if verbose:
            d = res.decisions
            print(
                f"  cycle {res.cycle}: { ({k: round(v, 3) for k, v in s.items()}) } binds {len(d.binds)} "
                f"podgroups {len(d.podgroups)} (written: "
                f"{ {o: len(v) for o, v in (res.report.outcomes.get('podgroups') or {}).items()} if res.report else {} }) "
                f"unschedulable {len(d.unschedulable)} model {m.last}"
                f"{' (' + m.reason + ')' if m.last == 'full' else ''}"
            )
        if res.decisions.podgroups:
            print(_why_podgroups(runner, res))
        rows.append(s)
        writes.append(
            (len(res.report.get("events", "done")), len(res.report.get("conditions", "done")))
            if res.report
            else (0, 0)
        )
    return rows, writes


def _why_podgroups(runner: Runner, res: CycleResult) -> str:
    """A steady cycle decided podgroup updates (none is expected: nothing changed): the first one, the
    fields it changes from the watch's copy of the PodGroup (what the cache holds without the scheduler's
    own assumptions), what the API server holds of them (a copy behind the server: a watch gap), and the
    watches restarted so far."""
    update = res.decisions.podgroups[0]
    ns, _, name = update.podgroup.partition("/")
    found = runner.cache.find("PodGroup", update.podgroup)
    with runner.cache.lock:
        entry = runner.cache.stores[found[0]].get(update.podgroup) if found is not None else None
        watched = entry.raw if entry is not None else {}
    try:
        served = runner.api.get(found[0].item(name, ns)) if found is not None else {}
    except APIError as exc:
        served = {"error": f"{exc.status} {exc.message}"}
    wanted = {"status.phase": update.phase} | {
        f"metadata.annotations[{k}]": v for k, v in (update.annotations or {}).items()
    }

    def field(obj: dict, path: str) -> object:
        if path == "status.phase":
            return (obj.get("status") or {}).get("phase")
        key = path[len("metadata.annotations[") : -1]
        return ((obj.get("metadata") or {}).get("annotations") or {}).get(key)

    changed = [
        f"{p}: watched {field(watched, p)!r} -> {v!r} (server {field(served, p)!r})"
        for p, v in wanted.items()
        if field(watched, p) != v
    ]
    return (
        f"  ! cycle {res.cycle} decided {len(res.decisions.podgroups)} podgroup updates with nothing changed; "
        f"first {update.podgroup}: {'; '.join(changed) or 'no field differs from the watched copy'}; "
        f"resourceVersion watched {(watched.get('metadata') or {}).get('resourceVersion')}, server "
        f"{(served.get('metadata') or {}).get('resourceVersion')}; watch restarts {_restarts(runner) or 'none'}"
    )


def _restarts(runner: Runner) -> dict[str, int]:
    """The watches restarted so far, by resource and reason (``gone``: a 410, relisted)."""
    return {
        f"{s.labels['resource']}/{s.labels['reason']}": int(s.value)
        for metric in runner.metrics.registry.collect()
        if metric.name == "corral_watch_restarts"
        for s in metric.samples
        if s.name.endswith("_total") and s.value
    }


def _report(rows: list[dict[str, float]], writes: list[tuple[int, int]], steady: int) -> None:
    """The steady cycles' medians, writes and overhead beyond the scheduling, with its parts."""
    med = {
        k: statistics.median(r[k] for r in rows)
        for k in ("total", "schedule", "build", "apply", "total_cpu", "schedule_cpu")
    }
    print(
        f"steady cycle:      {med['total']:8.3f} s wall, {med['total_cpu']:.3f} s CPU   (medians of {steady}: "
        f"model {med['build']:.3f} s, run_cycle {med['schedule']:.3f} s ({med['schedule_cpu']:.3f} s CPU), "
        f"apply {med['apply']:.3f} s)"
    )
    print(
        f"  conventions' writes per steady cycle (medians): {statistics.median(w[0] for w in writes):.0f} Events, "
        f"{statistics.median(w[1] for w in writes):.0f} pod conditions (token buckets of 50/s, burst 100)"
    )
    print(f"  load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    # per cycle: (cycle - run_cycle) / run_cycle; the median over the steady cycles
    share, share_cpu = _overhead(rows)
    model = statistics.median(r["build"] / r["schedule"] for r in rows)
    apply_share = statistics.median(r["apply"] / r["schedule"] for r in rows)
    queues = statistics.median(r["queues"] / r["schedule"] for r in rows)
    collect = statistics.median(r.get("gc", 0.0) / r["schedule"] for r in rows)
    print(
        f"overhead beyond the scheduling itself: {100 * share:6.1f} % wall, {100 * share_cpu:6.1f} % CPU   "
        f"(target <= 20 %)   wall {'OK' if share <= 0.20 else 'MISSED'}, CPU {'OK' if share_cpu <= 0.20 else 'MISSED'}"
    )
    print(
        f"  of which (wall):  model {100 * model:5.1f} % (the garbage collection of the last cycle's objects "
        f"{100 * collect:4.1f} % of it), apply {100 * apply_share:5.1f} %, queue metrics "
        f"{100 * queues:5.1f} %, the rest (cycle bookkeeping, other metrics) "
        f"{100 * max(share - model - apply_share - queues, 0.0):5.1f} %"
    )


def _reference(runner: Runner, now: float) -> None:
    """The scheduling itself as ``corral schedule`` does it: run_cycle on a full assembly of the same
    snapshot."""
    cluster, _ = runner.cache.build(runner.opts.schedulers, with_objects=True)
    gc.collect()  # the fresh objects' first collection is not the scheduling's cost
    t, cpu = time.perf_counter(), time.process_time()
    run_cycle(cluster, runner.config, REGISTRY, now, 99)
    fresh, fresh_cpu = time.perf_counter() - t, time.process_time() - cpu
    print(
        f"reference:         run_cycle on a full assembly of the same snapshot (as corral schedule runs it) "
        f"{fresh:.3f} s wall, {fresh_cpu:.3f} s CPU"
    )


def _overhead(rows: list[dict[str, float]]) -> tuple[float, float]:
    """The medians of (cycle - run_cycle) / run_cycle, wall and CPU."""
    return (
        statistics.median((r["total"] - r["schedule"]) / r["schedule"] for r in rows),
        statistics.median((r["total_cpu"] - r["schedule_cpu"]) / r["schedule_cpu"] for r in rows),
    )


def _drained(runner: Runner, steady: int, now: float, profile: Path | None = None) -> None:
    """The steady cycle once the conventions' backlog is written: the buckets opened until a cycle writes
    nothing, the watch let catch up, the buckets back to kube-scheduler's pace, then ``steady`` cycles."""
    rec = runner.applier.recorder
    paced = rec.events_limit, rec.conditions_limit
    rec.events_limit, rec.conditions_limit = TokenBucket(1e9, 10**9), TokenBucket(1e9, 10**9)
    t = time.perf_counter()
    for k in range(200):
        res = runner.cycle(now + k)
        if (
            res is None
            or not res.report
            or not (res.report.get("events", "done") or res.report.get("conditions", "done"))
        ):
            break
    deadline = time.monotonic() + 120
    while runner.cache.assumed and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2.0)  # the watch delivers the last conditions
    rec.events_limit, rec.conditions_limit = paced
    drained = time.perf_counter() - t
    rows = []
    prof = cProfile.Profile() if profile is not None else None
    for k in range(steady):
        if prof is not None:
            prof.enable()
        res = runner.cycle(now + 200 + k)
        if prof is not None:
            prof.disable()
        assert res is not None
        if res.decisions.podgroups:
            print(_why_podgroups(runner, res))
        rows.append(res.seconds)
    if prof is not None and profile is not None:
        prof.dump_stats(str(profile))
        _print_profile(profile)
    wall, cpu = _overhead(rows)
    parts = {
        k: statistics.median(r.get(k, 0.0) / r["schedule"] for r in rows) for k in ("build", "gc", "apply")
    }
    print(
        f"  of which (wall): model {100 * parts['build']:.1f} % (the garbage collection of the last cycle's "
        f"objects {100 * parts['gc']:.1f} % of it), apply {100 * parts['apply']:.1f} %; "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print(
        f"backlog written at once ({drained:.0f} s); then the steady cycle: "
        f"{statistics.median(r['total'] for r in rows):.3f} s wall, "
        f"{statistics.median(r['total_cpu'] for r in rows):.3f} s CPU, run_cycle "
        f"{statistics.median(r['schedule_cpu'] for r in rows):.3f} s CPU; overhead {100 * wall:.1f} % wall, "
        f"{100 * cpu:.1f} % CPU (target <= 20 %) {'OK' if cpu <= 0.20 else 'MISSED'}"
    )


def _print_profile(path: Path) -> None:
    """What the profiled cycles spent besides ``run_cycle``: the callees of ``Runner.cycle`` and the
    functions with the most time of their own outside ``run_cycle``."""
    stats = pstats.Stats(str(path), stream=sys.stdout)
    stats.sort_stats("cumulative")
    print(f"profile written to {path}; the callees of Runner.cycle (cumulative seconds over the cycles):")
    stats.print_callees("runner.py.*\\(cycle\\)")


def _serve(args: argparse.Namespace, urls: mp.Queue[str], stop: mp.synchronize.Event) -> None:
    """The API server in its own process (a real API server does not share the scheduler's CPU)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    docs = generate(args.nodes, args.running, args.gangs, args.pending, args.seed)
    server = FakeAPI(bookmark_interval=1.0).start()
    t = time.perf_counter()
    server.load(docs)
    print(
        f"server (own process) loaded with {len(docs)} objects in {time.perf_counter() - t:.1f} s", flush=True
    )
    del docs
    urls.put(server.url)
    stop.wait()
    server.stop()


if __name__ == "__main__":
    sys.exit(main())
