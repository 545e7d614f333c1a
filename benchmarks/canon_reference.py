"""Lucid's own runs of the research canon beside corral's (issue 29: "a held-out check compares mean JCT
with the peer's own runs on the same week; aim within 5 %").

``reference/lucid_philly.json`` holds the figures of Lucid's simulator (S-Lab-System-Group/Lucid, the
commit its ``source`` names), run on the Philly week of ``bench_backlog.week()`` — one virtual cluster of
40 or 80 nodes x 8 GPUs, its FIFO, SJF, SRTF and Tiresias with the consolidate placer — and on the
first day's jobs on 4 nodes (``day1``, the window the test ``tests/sim/test_canon_reference.py`` runs).
Only results are stored: mean and p95 JCT, mean queueing (every wait, those after a preemption too),
preemptions, per policy; the file says how they were produced.

corral's side: ``fifo-consolidated.yaml``, ``sjf-consolidated.yaml``, ``srtf.yaml`` and ``tiresias.yaml``
(corral's time-slicing, ``timeslice`` mode ``useful``), ``sjf-lucid.yaml`` (strict SJF without ``enqueue``,
as Lucid has no admission step) and ``srtf-lucid.yaml`` and ``tiresias-lucid.yaml`` (Lucid's pass, mode
``quota``), each compared with the Lucid policy it reproduces (``LUCID``).

    python benchmarks/canon_reference.py [--nodes 40 80] [--policies ...] [--window week|day1]

``bench_canon.py`` prints the same comparison line under each of its runs (``beside``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parent / "reference" / "lucid_philly.json"
#: issue 29's aim: corral's mean JCT within 5 % of Lucid's
AIM = 0.05
#: corral's policy (bench_canon's name) -> the Lucid policy it is compared with
LUCID = {
    "fifo": "fifo",
    "sjf": "sjf",
    "srtf": "srtf",
    "tiresias": "tiresias",
    "sjf-lucid": "sjf",
    "srtf-lucid": "srtf",
    "tiresias-lucid": "tiresias",
}
#: the configurations that run as Lucid does (strict SJF without enqueue; timeslice mode quota), as
#: bench_canon's POLICIES entries
LUCID_POLICIES = {
    "sjf-lucid": ("sjf-lucid.yaml", 1.0),
    "srtf-lucid": ("srtf-lucid.yaml", 1.0),
    "tiresias-lucid": ("tiresias-lucid.yaml", 60.0),
}
DAY = 86400.0


def reference() -> dict[str, Any]:
    """The stored Lucid figures (see the module docstring)."""
    data: dict[str, Any] = json.loads(REFERENCE.read_text())
    return data


def lucid(policy: str, nodes: int, window: str = "week") -> dict[str, float] | None:
    """Lucid's figures for corral's ``policy`` on ``nodes`` nodes, or None when Lucid has no such run."""
    name = LUCID.get(policy)
    runs = reference()["runs"].get(window, {}).get(str(nodes), {})
    got = runs.get(name) if name else None
    return dict(got) if got else None


def within(got: dict[str, float], ref: dict[str, float]) -> float:
    """corral's mean JCT relative to Lucid's (0.02: 2 % longer)."""
    return got["jct_mean"] / ref["jct_mean_s"] - 1.0


def beside(policy: str, nodes: int, got: dict[str, float], window: str = "week") -> str:
    """One line: Lucid's figures for the run ``got`` (bench_canon's figures, in seconds) and whether the
    mean JCT is within the aim; a note when Lucid has no counterpart."""
    ref = lucid(policy, nodes, window)
    if ref is None:
        return f"{'':9} Lucid: no counterpart of {policy}"
    rel = within(got, ref)
    verdict = "within" if abs(rel) <= AIM else "NOT within"
    return (
        f"{'':9} Lucid {LUCID[policy]:8} {ref['jct_mean_s'] / 3600:8.2f}h {ref['jct_p95_s'] / 3600:8.2f}h "
        f"{ref['queue_mean_s'] / 3600:9.2f}h {ref['preemptions']:8,}   mean JCT {rel:+.1%}: {verdict} the "
        f"{AIM:.0%} aim"
    )


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_canon
    from bench_backlog import TRACE, week

    bench_canon.POLICIES.update(LUCID_POLICIES)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=None)
    parser.add_argument("--policies", nargs="+", choices=sorted(LUCID), default=list(LUCID))
    parser.add_argument("--window", choices=("week", "day1"), default="week")
    args = parser.parse_args()
    if not TRACE.exists():
        print(f"skipped: the Philly trace is not at {TRACE}")
        return 0
    jobs = week()
    if args.window == "day1":
        jobs = [j for j in jobs if j.submit < DAY]
    nodes_list = args.nodes or ([4] if args.window == "day1" else [40, 80])
    print(f"source: {reference()['source']}")
    for nodes in nodes_list:
        print(f"\n== {len(jobs):,} Philly jobs ({args.window}) on {nodes} nodes x 8 GPUs")
        print(f"{'policy':15} {'JCT mean':>9} {'JCT p95':>9} {'queue mean':>10} {'preempt':>8} {'cpu':>8}")
        for policy in args.policies:
            got = bench_canon.run(policy, jobs, nodes, None)
            print(
                f"{policy:15} {got['jct_mean'] / 3600:8.2f}h {got['jct_p95'] / 3600:8.2f}h "
                f"{got['queue_mean'] / 3600:9.2f}h {got['preemptions']:8,} {got['cpu']:7.1f}s"
            )
            print(beside(policy, nodes, got, args.window), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
