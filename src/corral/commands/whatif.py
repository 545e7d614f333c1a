"""``corral whatif JOB.yaml [SNAPSHOT...]``: would this job schedule if I submitted it now?

The job's objects (a PodGroup and its pods, or bare pods) are added to the snapshot and one scheduling
cycle runs exactly as ``corral schedule`` would run it — the next cycle after submission. The answer:
whether ``enqueue`` admits it, where its pods would be placed (binds) or nominated, what would be
evicted to make room for it, why it would wait if it does, and its expected start (the forecast of
docs/forecast.md, from the state the cycle leaves). Nothing is written anywhere.

Decision: the podgroups of the job file are the ones the snapshot alone does not hold; a podgroup the
snapshot already holds is an error (the file would not be a new job). A job file with no pod is an error
(nothing would be scheduled).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral.errors import InputError
from corral.framework.config import Config
from corral.framework.cycle import apply_decisions, run_cycle
from corral.manifests.build import build_cluster
from corral.manifests.load import SourcedObject, read_objects
from corral.model import PodGroupPhase
from corral.model.clock import format_time
from corral.registry import REGISTRY
from corral.sim.forecast import Estimate, forecast, forecast_settings

__all__ = ["WhatIf", "what_if"]


@dataclass
class WhatIf:
    """The answer for each podgroup of the job file (by ``namespace/name``)."""

    podgroups: list[str]
    admitted: dict[str, bool] = field(default_factory=dict)
    binds: list[tuple[str, str]] = field(default_factory=list)  # (pod, node)
    nominations: list[tuple[str, str]] = field(default_factory=list)
    evictions: list[tuple[str, str, str]] = field(default_factory=list)  # (victim pod, node, action)
    reasons: dict[str, str] = field(default_factory=dict)
    expected: dict[str, Estimate] = field(default_factory=dict)
    starts: dict[str, bool] = field(default_factory=dict)  # reaches its minimum in this cycle

    @property
    def would_start(self) -> bool:
        return all(self.starts.get(p, False) for p in self.podgroups)

    def to_json(self) -> dict[str, Any]:
        def expected(p: str) -> dict[str, Any] | None:
            e = self.expected.get(p)
            return None if e is None else e.to_json(format_time)

        return {
            "wouldStart": self.would_start,
            "podgroups": [
                {
                    "podgroup": p,
                    "admitted": self.admitted.get(p, False),
                    "startsNow": self.starts.get(p, False),
                    "reason": self.reasons.get(p, ""),
                    "expected": expected(p),
                }
                for p in self.podgroups
            ],
            "binds": [{"pod": p, "node": n} for p, n in self.binds],
            "nominations": [{"pod": p, "node": n} for p, n in self.nominations],
            "evictions": [{"pod": p, "node": n, "action": a} for p, n, a in self.evictions],
        }


def what_if(
    job_file: Path,
    snapshot: list[Path],
    config: Config,
    now: float,
    schedulers: tuple[str, ...],
    base: list[SourcedObject] | None = None,
) -> WhatIf:
    """Run the next cycle with ``job_file``'s objects submitted (module docstring); the cluster is
    ``snapshot``'s files, or ``base`` when given (``--live``: the objects listed from the cluster)."""
    base = read_objects(snapshot) if base is None else base
    extra = read_objects([job_file])
    before = set(build_cluster(base, schedulers).jobs)
    cluster = build_cluster(base + extra, schedulers)
    new = sorted(set(cluster.jobs) - before)
    mine = {uid for uid in new if cluster.jobs[uid].tasks}
    if not mine:
        clash = sorted(_names(extra) & before)
        why = f"podgroup {clash[0]} already exists" if clash else "no pod corral would schedule"
        raise InputError(f"expected a new job with pods: {why}", file=str(job_file))
    pods = {t.key: t.job.uid for uid in mine for t in cluster.jobs[uid].tasks}
    out = WhatIf(podgroups=sorted(mine))
    decisions = run_cycle(cluster, config, REGISTRY, now, 1)
    out.binds = [(b.pod, b.node) for b in decisions.binds if b.pod in pods]
    out.nominations = [(n.pod, n.node) for n in decisions.nominations if n.pod in pods and n.node]
    out.evictions = [(e.pod, e.node, e.action) for e in decisions.evictions if e.preemptor in mine]
    out.reasons = {u.podgroup: u.reason for u in decisions.unschedulable if u.podgroup in mine}
    apply_decisions(cluster, decisions, now)
    for uid in mine:
        job = cluster.jobs[uid]
        out.admitted[uid] = job.phase is not PodGroupPhase.PENDING
        out.starts[uid] = job.ready_count() >= job.min_member
    if not out.would_start:
        settings = forecast_settings(config.forecast, config.source)
        out.expected = {
            e.podgroup: e for e in forecast(cluster, config, now + 1.0, settings) if e.podgroup in mine
        }
    return out


def _names(objects: list[SourcedObject]) -> set[str]:
    """``namespace/name`` of every PodGroup among ``objects`` (to name a clash with the snapshot)."""
    out = set()
    for obj in objects:
        doc = obj[1]
        if isinstance(doc, dict) and doc.get("kind") == "PodGroup":
            meta = doc.get("metadata") or {}
            out.add(f"{meta.get('namespace', 'default')}/{meta.get('name', '')}")
    return out
