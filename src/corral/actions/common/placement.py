"""Placing one task: the feasible nodes, the best of them, and a reason a person can act on when there
is none. Shared by allocate, backfill and the eviction actions (vectorised over all nodes, DESIGN.md
convention 5)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from corral.framework.session import PENDING_LIKE, Session
from corral.model import Job, Task
from corral.model.quantity import format_quantity
from corral.model.resources import EPS, PODS

__all__ = ["best_node", "no_fit_reason", "overused_reason", "pick"]


def pick(session: Session, task: Task, mask: np.ndarray) -> int:
    """The best node row in ``mask`` by the summed NodeOrder scores; ties go to the lowest row (name)."""
    return session.capacity.best_row(task, mask)


def best_node(session: Session, task: Task, domain: np.ndarray | None = None) -> tuple[int, bool]:
    """``(row, pipelined)``: where ``task`` goes now, or failing that onto capacity being released;
    ``(-1, False)`` when nowhere. A task nominated by an earlier cycle keeps its node when it fits there."""
    feasible = session.predicate(task)
    if domain is not None:
        feasible = feasible & domain
    now = feasible & session.capacity.fits(task)
    nominated = task.nominated
    if nominated >= 0 and now[nominated]:
        return nominated, False
    row = pick(session, task, now)
    if row >= 0:
        return row, False
    later = feasible & session.capacity.fits(task, future=True)
    if nominated >= 0 and later[nominated]:
        return nominated, True
    row = pick(session, task, later)
    return row, row >= 0


def no_fit_reason(
    session: Session, job: Job, task: Task, placed: int, domain: np.ndarray | None = None
) -> str:
    """Why ``task`` fits nowhere, in words: the predicate that ruled nodes out, or the resource that
    is short, with the largest amount free and where ("needs 8 nvidia.com/gpu on one node; largest free
    is 4 on node-17")."""
    head = f"{placed} of {job.min_member} pods placed; pod {task.name}"
    mask_key = session.mask_key(task) if domain is None else None
    if mask_key is None:
        return head + _why_not(session, task, domain)
    # on an unchanged cluster (no operation, no lock since), a pod of the same class and labels fits
    # nowhere for the same reason when every predicate signs it (framework/hints.py): gangs that fail
    # in a row on a full cluster share one search
    key = (
        mask_key,
        task.status,
        task.nominated,
        session.capacity.version,
        session.ledger.lock_version,
    )
    why = session.capacity.no_fit_cache.get(key)
    if why is None:
        why = session.capacity.no_fit_cache[key] = _why_not(session, task, None)
    return head + why


def overused_reason(session: Session, job: Job) -> Callable[[], str]:
    """Why ``job`` waits in a queue the action skips as Overused, formatted when the session closes:
    the plugin's own reason (``Session.overused_reason``) — unless the plugin says the queue's share is
    not the cause (it deserves all the cluster has of what the pod asks for) and the job's first
    waiting pod fits on no node: then why it fits nowhere, naming the nodes."""

    def why() -> str:
        queue = session.cluster.queues[job.queue]
        waiting = [t for t in job.tasks if t.status in PENDING_LIKE and t.managed and not t.best_effort]
        if not waiting:
            return f"queue {queue.name!r} already holds its deserved share"
        task = min(waiting, key=session.task_key())
        share = session.overused_reason(queue, task)
        if share is None and best_node(session, task)[0] < 0:
            return no_fit_reason(session, job, task, job.ready_count())
        return share or f"queue {queue.name!r} already holds its deserved share"

    return why


def _why_not(session: Session, task: Task, domain: np.ndarray | None) -> str:
    nodes = session.cluster.nodes
    feasible = session.predicate(task)
    if domain is not None:
        feasible = feasible & domain
    if not feasible.any():
        # each node counts once, for the first reason that rules it out (kube-scheduler records one
        # status per node: the first filter that fails), so the counts never add up past the nodes
        counts = []
        left = np.ones(len(nodes), dtype=bool)
        reasons = session.explain(task)
        if domain is not None:
            reasons.append((~domain, "node(s) outside the topology domain"))
        for mask, why in reasons:
            n = int(np.count_nonzero(mask & left))
            if n:
                counts.append(f"{n} {why}")
                left &= ~mask
        return f": 0/{len(nodes)} nodes are available: " + "; ".join(counts)
    res = session.cluster.resources
    cols = np.flatnonzero(task.request)
    free = session.capacity.free_all(task, future=True)
    short_by = ((free < task.request[cols] - EPS) & feasible[:, None]).sum(axis=0)
    worst = int(np.argmax(short_by))
    col = int(cols[worst])
    name = res.names[col]
    others = np.ones(len(cols), dtype=bool)
    others[worst] = False
    rest_fit = (free[:, others] >= task.request[cols][others] - EPS).all(axis=1) & feasible
    rows = np.flatnonzero(rest_fit if rest_fit.any() else feasible)  # prefer nodes short of only this
    best = int(rows[int(np.argmax(free[rows, worst]))])
    amount = max(float(free[best, worst]), 0.0)
    unit = "pod slots" if name == PODS else name
    needs = f" needs {format_quantity(task.request[col], name)} {unit} on one node"
    if amount >= task.request[col] - EPS:  # fits there only once releasing pods are gone
        now = max(float(session.capacity.free(task, rows=np.array([best]))[0, worst]), 0.0)
        return (
            f"{needs}; largest free now is {format_quantity(now, name)} on {nodes.names[best]} "
            f"({format_quantity(amount, name)} once its releasing pods are gone)"
        )
    return f"{needs}; largest free is {format_quantity(amount, name)} on {nodes.names[best]}"
