"""Run one scheduling cycle, and apply a cycle's decisions to the cluster (SPEC.md §2, §4).

Every front end goes through these two functions, so ``corral schedule --cycles N``, the simulator and
the live scheduler can never disagree on what a decision means.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from corral.framework.decisions import Decisions, FieldWarning
from corral.framework.memo import ClusterHistory
from corral.framework.notices import cluster_notices
from corral.framework.session import Session
from corral.model import Cluster, PodGroupPhase, Task, TaskStatus

if TYPE_CHECKING:
    from corral.framework.config import Config, Registry

__all__ = ["apply_decisions", "run_cycle"]


def run_cycle(
    cluster: Cluster,
    config: Config,
    registry: Registry,
    now: float,
    cycle: int = 1,
    *,
    explain: bool = True,
    history: ClusterHistory | None = None,
) -> Decisions:
    """Open a session, run the configured actions in order, close it; return the decisions.

    ``history`` is what earlier cycles learned, held by the front end across its cycles
    (:class:`~corral.framework.memo.history.ClusterHistory`); None: this cycle remembers nothing.

    The first cycle (``cycle`` 1) with ``explain`` lists the podgroups' fields the configuration will
    not act on (``warnings``, :mod:`corral.framework.notices`).

    ``explain=False`` leaves the ``unschedulable`` reasons out (and lets the cycle skip jobs known to
    fail, :mod:`corral.actions.common.skipping`); every other decision is the same.

    The cluster is left in the session's end state (placements applied as Allocated/Pipelined, evicted
    pods Releasing); call :func:`apply_decisions` to move it to what the world looks like once the
    decisions are carried out.
    """
    session = Session(cluster, config, registry, now, cycle, explain=explain, history=history)
    for ac in config.actions:
        action_class = registry.action_class(ac.name)
        assert action_class is not None, ac.name  # the config loader checked every name
        action = action_class(ac.args)
        session.action = ac.name
        action.execute(session)
    decisions = session.close()
    if cycle == 1 and explain:
        # what the podgroups ask that this configuration will not act on, once (framework/notices.py)
        decisions.warnings = [
            FieldWarning(n.obj.removeprefix("PodGroup "), n.field, n.message, cycle)
            for n in cluster_notices(cluster, config, registry)
        ]
    return decisions


def apply_decisions(
    cluster: Cluster,
    decisions: Decisions,
    now: float,
    *,
    bound: TaskStatus = TaskStatus.RUNNING,
    remove_evicted: bool = True,
) -> None:
    """Carry ``decisions`` out on ``cluster``.

    Binds put the pod on its node in state ``bound`` (``corral schedule``: Running at once; the simulator
    passes Bound and starts the pod later). Evicted pods leave (``remove_evicted``) or stay Releasing
    until the caller removes them after a grace period. Nominations set nominatedNodeName (state
    Pipelined), podgroup updates set phase and annotations, node locks set the lock. Allocations of this
    cycle that were not decided go back to Pending; a nomination from an earlier cycle persists.
    """
    touched = decisions.touched
    candidates: Iterable[Task]
    if touched is None:
        candidates = cluster.tasks.values()
    else:
        # only the pods the cycle's operations changed can be Allocated or named by a decision; node
        # columns then follow those pods' changes instead of being recounted over every pod
        candidates = [t for t, _, _ in touched if t.uid in cluster.tasks]
        for task in candidates:
            cluster.charge(task, -1)
    by_key = {t.key: t for t in candidates if t.managed}
    nodes = cluster.nodes
    for task in by_key.values():
        if task.status is TaskStatus.ALLOCATED:
            task.status, task.node = TaskStatus.PENDING, -1
    for b in decisions.binds:
        task = by_key[b.pod]
        task.status, task.node, task.nominated = bound, nodes.index[b.node], -1
        task.start_time = now
    for n in decisions.nominations:
        nominee = by_key.get(n.pod)
        if nominee is None or nominee.status not in (TaskStatus.PENDING, TaskStatus.PIPELINED):
            continue
        if n.node:
            nominee.status, nominee.nominated = TaskStatus.PIPELINED, nodes.index[n.node]
        else:  # an empty node clears the nomination
            nominee.status, nominee.nominated = TaskStatus.PENDING, -1
    moved_to = {n.pod: n.node for n in decisions.nominations if n.node}  # a pod evicted and nominated
    for e in decisions.evictions:
        task = by_key[e.pod]
        if remove_evicted:
            del cluster.tasks[task.uid]
            if task.job is not None:
                task.job.tasks.remove(task)
        else:  # a moved pod (``consolidate``) holds its new node while it leaves and comes back there
            task.status = TaskStatus.RELEASING
            task.nominated = nodes.index[moved_to[e.pod]] if e.pod in moved_to else -1
    for u in decisions.podgroups:
        job = cluster.jobs.get(u.podgroup)
        if job is not None:
            job.phase = PodGroupPhase(u.phase)
            job.annotations.update(u.annotations)
    for lock in decisions.node_locks:
        nodes.locked_for[nodes.index[lock.node]] = lock.job
    if touched is None:
        cluster.account()
    else:
        for task in candidates:
            if task.uid in cluster.tasks:
                cluster.charge(task, +1)
