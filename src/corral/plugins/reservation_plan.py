"""The reservation's plan (split from :mod:`corral.plugins.reservation`): when the target is expected to
start on the locked nodes, from the expected ends of the pods that hold them (``corral.io/expected-runtime``),
and what it leaves free then.

The occupants of the locked rows become arrays (:func:`occupants`); the plugin bisects the instants at
which one of them ends (free capacity only grows with time) with a packer (:func:`packer`): first fit
over every locked row, or — for a target with a hard topology constraint, its own or a sub-group's — as
allocate would place it, inside one domain of the job and each sub-group inside one of its own
(:meth:`~corral.plugins.reservation_topology.TopologyLocks.fit`), so that the date is that of the
earliest domain that can hold the target.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.framework.reservation import expected_runtime
from corral.model import OCCUPYING_STATES, Job, Task, TaskStatus
from corral.model.resources import EPS
from corral.plugins.reservation_topology import TopologyLocks, has_topology

if TYPE_CHECKING:
    from corral.framework.session import Session

__all__ = ["Occupants", "Plan", "occupant_end", "occupants", "overran", "pack", "packer"]

#: ``pack(free, order)``: what the target's needed pods use per locked row, or None when they do not fit
Packer = Callable[[np.ndarray, np.ndarray], "np.ndarray | None"]


@dataclass
class Plan:
    """The target's planned start (``math.inf``: cannot be dated) and, per node row, what it leaves free
    at that start (``spare``, meaningful on locked rows); ``blocked``: occupants without an estimate."""

    start: float
    spare: np.ndarray
    blocked: int = 0


@dataclass
class Occupants:
    """The occupants of the locked rows, as arrays: when each is expected to leave, whether it overran
    its estimate, its row (position among the locked rows) and request; ``free0``: free room now."""

    free0: np.ndarray
    ends: np.ndarray
    late: np.ndarray
    where: np.ndarray
    reqs: np.ndarray
    blocked: int

    def free_at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Free capacity per locked row at ``t``, and the order the target takes the rows in: node
        order, except that rows counting on an overrunning pod to leave come last (its true end is
        unknown, so an idle node is the surer start, and it is not lent away for the overrun's sake).
        Node order otherwise keeps the plan's nodes the same from cycle to cycle."""
        free = self.free0.copy()
        done = self.ends <= t
        overrun = np.zeros(len(free), dtype=bool)
        if done.any():
            np.add.at(free, self.where[done], self.reqs[done])
            overrun[self.where[done & self.late]] = True
        return free, np.lexsort((np.arange(len(free)), overrun))


def overran(t: Task, now: float) -> bool:
    """Has running pod ``t`` passed its estimate (so the plan expects it to end now, not knowing when)?"""
    if t.status is TaskStatus.RELEASING or not t.managed or t.start_time is None:
        return False
    est = expected_runtime(t)
    return est is not None and t.start_time + est < now - 1e-6


def occupant_end(t: Task, now: float) -> float | None:
    """When occupant ``t`` is expected to leave: now when it is leaving or overran, None without an
    estimate (a pod of another scheduler has none)."""
    if t.status is TaskStatus.RELEASING:
        return now
    est = expected_runtime(t) if t.managed else None
    if est is None:
        return None
    started = t.start_time if t.start_time is not None else now
    return max(started + est, now)  # an overrun is expected to end now, never evicted


def occupants(session: Session, target: Job, rows: np.ndarray) -> Occupants:
    """What holds the locked ``rows`` now and when it is expected to leave (the target's own
    nominations there count as its free room; occupants without an estimate are only counted)."""
    now, nodes = session.now, session.cluster.nodes
    pos = np.full(len(nodes), -1)
    pos[rows] = np.arange(len(rows))
    free0 = nodes.allocatable[rows] - nodes.used[rows] - nodes.pipelined[rows]
    ends, late, where, reqs, blocked = [], [], [], [], 0
    for t in list(session.cluster.tasks.values()) + list(session.cluster.foreign):
        if t.job is target:
            if t.status is TaskStatus.PIPELINED and t.nominated >= 0 and pos[t.nominated] >= 0:
                free0[pos[t.nominated]] += t.request  # the target's own nominations are its own
            continue
        if t.status not in OCCUPYING_STATES or t.node < 0 or pos[t.node] < 0:
            continue
        end = occupant_end(t, now)
        if end is None:
            blocked += 1
            continue
        ends.append(end)
        late.append(overran(t, now))
        where.append(pos[t.node])
        reqs.append(t.request)
    return Occupants(
        free0,
        np.array(ends, dtype=float),
        np.array(late, dtype=bool),
        np.array(where, dtype=np.int64),
        np.array(reqs, dtype=float).reshape(len(reqs), free0.shape[1]),
        blocked,
    )


def packer(
    session: Session, target: Job, rows: np.ndarray, need: list[Task], eligible: Callable[[Task], np.ndarray]
) -> Packer:
    """``pack(free, order)`` for the target's ``need`` pods on the locked ``rows`` (module docstring);
    ``eligible(task)``: the nodes a pod could ever go to (first fit only)."""
    if has_topology(target)[1]:
        n = len(session.cluster.nodes)

        def in_domain(free: np.ndarray, order: np.ndarray) -> np.ndarray | None:
            cap = np.full((n, free.shape[1]), -np.inf)
            cap[rows] = free
            rank = np.zeros(n, dtype=np.int64)
            rank[rows[order]] = np.arange(len(rows))
            topo = TopologyLocks(session, lambda r: r[np.argsort(rank[r], kind="stable")])
            left = topo.fit(target, need, cap)
            return None if left is None else free - left[rows]

        return in_domain
    masks: dict[Any, Any] = {}
    allowed = [masks.setdefault(t.klass or id(t), eligible(t)[rows]) for t in need]
    return lambda free, order: pack(free, order, need, allowed)


def pack(
    free: np.ndarray, order: np.ndarray, tasks: list[Task], allowed: list[np.ndarray]
) -> np.ndarray | None:
    """Place ``tasks`` greedily (first fit, in order, over the rows in ``order``) into ``free`` (rows ×
    resources); the resources they use per row, or None when one does not fit."""
    free = free.copy()
    use = np.zeros_like(free)
    for t, ok in zip(tasks, allowed):
        fit = (ok & (free >= t.request - EPS).all(axis=1))[order]
        if not fit.any():
            return None
        r = int(order[np.argmax(fit)])
        free[r] -= t.request
        use[r] += t.request
    return use
