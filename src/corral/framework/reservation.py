"""What the reservation of seed 001 writes into the objects it touches, read by the ``reservation``
plugin and by the ``elect`` and ``reserve`` actions alike (they meet here and in the Session, never in
each other's modules).

- PodGroup annotation ``corral.io/target-job: "true"``: set by a user; such a job wins the next election.
- PodGroup annotation ``corral.io/target-since``: written by ``elect`` (RFC 3339 time of the election);
  set to ``""`` when the job stops being the target (it runs, or a newer election replaced a stale one).
  Because it travels as a podgroup update, ``corral schedule --cycles``, the simulator and a restarted
  scheduler all find the same target.
- Node lock: ``Nodes.locked_for`` (set by the ``node_locks`` decisions), or, for a scheduler that starts
  from a snapshot, the node label ``corral.io/locked-for``. Kubernetes label values cannot hold ``/``,
  so the label value is ``<namespace>.<podgroup>`` (a namespace has no dots); ``ns/pg`` is read too.
  A label value holds at most 63 characters: a longer ``<namespace>.<podgroup>`` (Volcano's job
  controller names PodGroups ``<job>-<uid>``) is cut to 50 characters and ends with ``-`` and 12 hex digits
  of its SHA-256, and the node annotation of the same key holds the full name; the reader maps a
  hashed value back through the jobs it knows.
- Pod or PodGroup annotation ``corral.io/expected-runtime``: a duration (``90m``, ``2h``, ``3600``)
  the job is expected to run; the pod's wins. Read by the plan (backfill with a plan).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from corral.model import Cluster, Job, Nodes, Task, TaskStatus
from corral.model.annotations import EXPECTED_RUNTIME
from corral.model.clock import annotated_duration, parse_time

__all__ = [
    "EXPECTED_RUNTIME",
    "LOCK_LABEL",
    "TARGET_JOB",
    "TARGET_SINCE",
    "current_target",
    "elected_at",
    "expected_runtime",
    "lock_label_value",
    "lock_owners",
    "parse_lock_nodes",
    "waiting",
]

TARGET_JOB = "corral.io/target-job"
TARGET_SINCE = "corral.io/target-since"
LOCK_LABEL = "corral.io/locked-for"

_WAITING = frozenset({TaskStatus.PENDING, TaskStatus.PIPELINED})


LABEL_VALUE_MAX = 63  # Kubernetes' limit on a label value


def lock_label_value(job: str) -> str:
    """The value of the ``corral.io/locked-for`` label for ``job`` ("ns/pg" -> "ns.pg"), always a valid
    label value: past 63 characters, the first 50 (trailing ``-_.`` dropped) then ``-`` and 12 hex digits
    of the SHA-256 of the full name."""
    plain = job.replace("/", ".", 1)
    if len(plain) <= LABEL_VALUE_MAX:
        return plain
    digest = hashlib.sha256(job.encode()).hexdigest()[:12]
    return f"{plain[:50].rstrip('-_.')}-{digest}"


def _from_label(value: str | None, hashed: dict[str, str]) -> str:
    if not value:
        return ""
    if value in hashed:
        return hashed[value]
    return value if "/" in value else value.replace(".", "/", 1)


def lock_owners(nodes: Nodes, jobs: Iterable[str] = ()) -> np.ndarray:
    """Per node row, the job it is locked for ("" when none): the lock state the decisions set, else the
    node label read from a snapshot (a release writes "" and so hides a stale label); a hashed label value
    is mapped back to the one of ``jobs`` (uids) it was made from."""
    owners = np.array(nodes.locked_for, dtype=object)
    unset = np.flatnonzero(owners == None)  # noqa: E711 - elementwise comparison
    if unset.size:
        labels = nodes.label_values(LOCK_LABEL)
        hashed = {lock_label_value(j): j for j in jobs if len(j) > LABEL_VALUE_MAX}
        owners[unset] = [_from_label(labels[r], hashed) for r in unset.tolist()]
    return owners


def elected_at(job: Job) -> float | None:
    """When ``job`` was elected target, or None when it is not the target."""
    value = job.annotations.get(TARGET_SINCE, "")
    if not value:
        return None
    try:
        return parse_time(value)
    except Exception:  # a mangled annotation: still the target, elected "long ago"
        return 0.0


def waiting(job: Job) -> list[Task]:
    """The job's pods waiting for a node (pending or nominated), best-effort pods aside."""
    return [t for t in job.tasks if t.status in _WAITING and t.managed and not t.best_effort]


def current_target(cluster: Cluster) -> Job | None:
    """The elected job that has not started yet (earliest election first, then name), if any."""
    best: tuple[Any, ...] | None = None
    for uid, job in cluster.jobs.items():
        since = elected_at(job)
        if since is None or job.ready_count() >= job.min_member or not waiting(job):
            continue
        key = (since, uid)
        if best is None or key < best[0]:
            best = (key, job)
    return None if best is None else best[1]


def expected_runtime(task: Task) -> float | None:
    """Seconds ``task`` is expected to run (pod annotation, else its PodGroup's), None when unknown or
    unreadable (an unreadable estimate is no estimate: the job stays off locked nodes)."""
    return annotated_duration(
        EXPECTED_RUNTIME, task.annotations, task.job.annotations if task.job is not None else None
    )


def parse_lock_nodes(value: str, total: int) -> int:
    """``lockNodes`` as a node count over ``total`` nodes ("" -> 0); ValueError when malformed."""
    s = str(value).strip()
    if not s:
        return 0
    if s.endswith("%"):
        pct = float(s[:-1])
        if not 0 <= pct <= 100:
            raise ValueError(s)
        return int(math.ceil(total * pct / 100.0))
    n = int(s)
    if n < 0:
        raise ValueError(s)
    return n
