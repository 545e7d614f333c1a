"""Why jobs waited, summed up for a report (``corral simulate`` and ``corral compare``): the top reasons
by jobs and by waiting time, overall, per queue and per job size, and the longest waits with their
reasons.

Each job record carries the last reason it waited for (:attr:`corral.sim.result.JobRecord.reason`, in
the scheduler's own words, as ``corral schedule`` reports it and as Volcano writes a podgroup's
Unschedulable condition). Those words name jobs, pods, nodes, queues and counts, so that no two jobs
share one; :func:`reason_kind` replaces the names and the numbers with placeholders, so that jobs
waiting for the same thing fall into one row ("N of N pods placed; pod <pod> needs N nvidia.com/gpu on
one node; largest free is N on <node>"). A job's whole wait — censored at the end of the run when it
never started (:func:`corral.sim.breakdown.waits`) — is counted under its last reason. Jobs that never
waited are left out; jobs that waited without a recorded reason (less than a cycle) count as
``(no reason recorded)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from corral.sim.breakdown import size_label, size_labels
from corral.sim.result import JobRecord, SimResult

__all__ = ["LONGEST", "TOP", "longest_waits", "reason_kind", "reason_rows"]

TOP = 8
LONGEST = 10
NO_REASON = "(no reason recorded)"

_SUBS = (
    (re.compile(r"(?<![\w./])[a-z][a-z0-9-]*/[\w.-]+"), "<job>"),  # namespace/name (not a resource)
    (re.compile(r"\bpods? (?!placed\b)(?!on\b)[\w.-]*\d[\w.-]*"), "pod <pod>"),
    (re.compile(r"\b(on|node|nodes) (?!one\b)(?!<)[\w.-]*\d[\w.-]*"), r"\1 <node>"),
    (re.compile(r"'[^']*'"), "'<name>'"),
    (re.compile(r"(?<![\w.])\d+(\.\d+)?(?![\w])"), "N"),
)


def reason_kind(text: str) -> str:
    """The reason with its names and numbers replaced (see the module docstring)."""
    if not text:
        return NO_REASON
    for pattern, repl in _SUBS:
        text = pattern.sub(repl, text)
    return text


def _waited(result: SimResult, end: float) -> list[tuple[JobRecord, float]]:
    out = []
    for job in result.jobs:
        if job.status == "never_fits":
            continue
        wait = job.wait if job.wait is not None else max(0.0, end - job.submit)
        if wait > 0:
            out.append((job, wait))
    return out


def _top(pairs: Sequence[tuple[JobRecord, float]], by: str, group: str, limit: int) -> list[dict[str, Any]]:
    totals: dict[str, list[float]] = {}
    for job, wait in pairs:
        entry = totals.setdefault(reason_kind(job.reason), [0, 0.0])
        entry[0] += 1
        entry[1] += wait
    all_jobs = sum(n for n, _ in totals.values()) or 1
    all_wait = sum(w for _, w in totals.values()) or 1.0
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))[:limit]
    by_wait = sorted(totals.items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0]))[:limit]
    chosen = dict(ranked) | dict(by_wait)
    return [
        {
            "by": by,
            "group": group,
            "reason": reason,
            "jobs": int(n),
            "jobs_share": n / all_jobs,
            "wait_hours": w / 3600.0,
            "wait_share": w / all_wait,
        }
        for reason, (n, w) in sorted(chosen.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    ]


def reason_rows(result: SimResult, end: float, buckets: Sequence[float]) -> list[dict[str, Any]]:
    """Rows ``by``/``group``/``reason``/``jobs``/``jobs_share``/``wait_hours``/``wait_share``: the
    top :data:`TOP` reasons by jobs and the top by waiting time overall (``by="all"``), and per queue
    and per size bucket the top three of each."""
    pairs = _waited(result, end)
    rows = _top(pairs, "all", "all", TOP)
    labels = size_labels(buckets)
    for by, key in (("queue", lambda j: j.queue), ("size", lambda j: size_label(j.gpus, buckets, labels))):
        groups: dict[str, list[tuple[JobRecord, float]]] = {}
        for job, wait in pairs:
            groups.setdefault(key(job), []).append((job, wait))
        order = (
            sorted(groups) if by == "queue" else [g for g in ["0 GPU", "fractional", *labels] if g in groups]
        )
        for group in order:
            rows += _top(groups[group], by, group, 3)
    return rows


def longest_waits(result: SimResult, end: float, limit: int = LONGEST) -> list[dict[str, Any]]:
    """The :data:`LONGEST` longest waits (censored ones marked ``still waiting``), with their reasons."""
    pairs = sorted(_waited(result, end), key=lambda p: (-p[1], p[0].job))[:limit]
    return [
        {
            "job": job.job,
            "queue": job.queue,
            "gpus": job.gpus,
            "submit": job.submit,
            "wait": wait,
            "still_waiting": job.first_start is None,
            "status": job.status,
            "reason": job.reason or NO_REASON,
        }
        for job, wait in pairs
    ]
