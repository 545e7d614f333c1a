"""Why the largest jobs still wait under a reservation: ``bench_starvation.py --explain`` (issue:
reservation and backfill with a plan).

Runs one configuration with the ``reservation`` plugin replaced by a subclass that records, at the end of
every cycle, the target and the plan's start (nothing else changes: same decisions, same records), then
reads the simulator's per-job records and prints:

- the targets elected, by size, and the hours each size held the reservation (election to start);
- the plan's accuracy: how far each target's start fell from the start its first plan gave it;
- the hand-over: time from a target's start to the next election (the cycle trigger);
- for the largest jobs with the worst wait: their wait split into the time before their election (behind
  the targets elected since they were submitted, and how many of those were submitted earlier) and their
  own hold, with the first plan's start.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from corral.framework.reservation import current_target
from corral.plugins.reservation import ReservationPlugin
from corral.registry import REGISTRY, Registry


@dataclass
class Episode:
    uid: str
    gpus: float
    elected: float
    plans: list[float] = field(default_factory=list)
    start: float | None = None


class Recorder:
    """A registry whose ``reservation`` plugin logs (time, target, gpus, plan start) after every cycle."""

    def __init__(self) -> None:
        self.log: list[tuple[float, str, float, float]] = []
        log = self.log

        class RecordingReservation(ReservationPlugin):
            def on_session_close(self) -> None:
                super().on_session_close()
                target = current_target(self.session.cluster)
                if target is None:
                    return
                gpu = self.session.cluster.resources.get("nvidia.com/gpu")
                gpus = sum(float(t.request[gpu]) for t in target.tasks) / 1000.0 if gpu is not None else 0.0
                start = self.plan().start if self.args.plan and self.locked().any() else math.nan
                log.append((self.session.now, target.uid, gpus, start))

        self.registry = Registry(
            REGISTRY.actions, {**REGISTRY.plugins, "reservation": RecordingReservation}, REGISTRY.aliases
        )

    def episodes(self, records) -> list[Episode]:
        started = {r.job: r.first_start for r in records}
        out: list[Episode] = []
        for now, uid, gpus, start in self.log:
            if not out or out[-1].uid != uid:
                out.append(Episode(uid, gpus, now, start=started.get(uid.split("/", 1)[-1])))
            out[-1].plans.append(start)
        return out


def report(recorder: Recorder, records, big, submits: dict[str, float], worst: int = 5) -> None:
    eps = recorder.episodes(records)
    h = 3600.0
    held: dict[float, list[float]] = defaultdict(list)
    for e in eps:
        if e.start is not None:
            held[e.gpus].append(e.start - e.elected)
    print(f"  targets elected: {len(eps)}; by size (GPUs: count, hours held in all, mean):")
    for g in sorted(held):
        print(f"    {g:4g}: {len(held[g]):4d} {sum(held[g]) / h:8.1f} {np.mean(held[g]) / h:6.2f}")
    errs = [e.start - e.plans[0] for e in eps if e.start is not None and e.plans and np.isfinite(e.plans[0])]
    undated = sum(1 for e in eps if e.plans and not np.isfinite(e.plans[0]))
    if errs:
        errs_a = np.array(errs) / h
        print(
            f"  plan accuracy (start - first planned start), h: mean {errs_a.mean():+.2f}, "
            f"min {errs_a.min():+.2f}, max {errs_a.max():+.2f}; {undated} target(s) with no first plan"
        )
    gaps = [
        b.elected - a.start
        for a, b in itertools.pairwise(eps)
        if a.start is not None and b.elected >= a.start
    ]
    if gaps:
        print(
            f"  hand-over (start to next election, spells with no starving job included), s: median "
            f"{np.median(gaps):.0f}, max {max(gaps):.0f}"
        )
    by_wait = sorted(big, key=lambda r: -(r.wait or 0.0))[:worst]
    print(f"  the {worst} largest jobs with the worst wait (h):")
    print(
        f"    {'job':14s} {'GPUs':>4s} {'wait':>6s} {'before':>7s} {'targets':>7s} {'older':>5s} "
        f"{'own':>5s} {'plan':>5s}  sizes ahead"
    )
    index = {e.uid.split("/", 1)[-1]: e for e in eps}
    for r in by_wait:
        own = index.get(r.job)
        if r.first_start is None:
            continue
        elected = own.elected if own is not None else r.first_start
        ahead = [
            e
            for e in eps
            if r.submit <= e.elected < elected
            or (e.elected < r.submit and e.start is not None and e.start > r.submit)
        ]
        ahead = [e for e in ahead if e is not own]
        older = sum(1 for e in ahead if submits.get(e.uid.split("/", 1)[-1], math.inf) < r.submit)
        plan = (own.plans[0] - own.elected) / h if own is not None and np.isfinite(own.plans[0]) else math.nan
        sizes = ",".join(f"{e.gpus:g}" for e in ahead)
        print(
            f"    {r.job:14s} {r.gpus:4g} {r.wait / h:6.2f} {(elected - r.submit) / h:7.2f} {len(ahead):7d} "
            f"{older:5d} {(r.first_start - elected) / h:5.2f} {plan:5.2f}  {sizes}"
        )
