"""Run scheduling cycles, and carry a cycle's decisions out (SPEC.md §2, §4).

Every front end goes through :func:`run_cycle`, so ``corral schedule --cycles N``, the simulator and the
live scheduler can never disagree on what a cycle decides. What the decisions then mean is one interface,
:class:`DecisionSink`, with three implementations kept in step by it: the model
(:class:`ModelSink`, :func:`apply_decisions`: ``corral schedule --cycles``, the simulator, the
forecast, ``corral whatif``), the dry run (:class:`corral.kube.dryrun.DryRun`: ``corral run --dry-run``
assumes the decisions in its cache) and the API server (:class:`corral.kube.apply.Applier`: ``corral
run``). :func:`run_cycles` is the multi-cycle loop of ``corral schedule --cycles N`` (and of the scenario
suite): cycles over one model, each cycle's decisions carried out by a sink before the next opens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from corral.framework.decisions import Decisions, FieldWarning
from corral.framework.memo import ClusterHistory
from corral.framework.notices import cluster_notices
from corral.framework.session import Session
from corral.model import Cluster, PodGroupPhase, Task, TaskStatus

if TYPE_CHECKING:
    from corral.framework.config import Config, Registry

__all__ = ["DecisionSink", "ModelSink", "apply_decisions", "run_cycle", "run_cycles"]


@runtime_checkable
class DecisionSink(Protocol):
    """Where a cycle's decisions are carried out. The contract every sink keeps, in this order: evicted
    pods leave their node (at once, or after a grace period); bound pods run on their node (a gang's binds,
    grouped by :attr:`~corral.framework.decisions.Bind.podgroup`, go out together); a nomination sets the
    pod's nominated node (an empty node clears it) unless the pod is bound; a podgroup update sets its
    phase and merges its annotations; a node lock sets or (empty job) clears the node's lock. What the next
    cycle reads of the world is then what the decisions asked. Kubernetes' own PodGroups' conditions and
    DRA claim allocations are carried out where the world holds them (the API server writes both, the dry
    run assumes the conditions; the model holds neither). The other records (unschedulable reasons,
    warnings) report and change nothing. ``apply`` may return a report of what it did (the applier's
    :class:`~corral.kube.apply_report.ApplyReport`); the model and the dry run return None."""

    def apply(self, decisions: Decisions, cluster: Cluster, now: float) -> Any: ...


class ModelSink:
    """The decisions carried out on the model itself (:func:`apply_decisions`): ``bound`` is the state a
    bound pod takes (Running; the simulator starts it later from Bound), ``remove_evicted`` whether an
    evicted pod leaves at once (else it stays Releasing until its caller removes it)."""

    def __init__(self, *, bound: TaskStatus = TaskStatus.RUNNING, remove_evicted: bool = True) -> None:
        self.bound, self.remove_evicted = bound, remove_evicted

    def apply(self, decisions: Decisions, cluster: Cluster, now: float) -> None:
        apply_decisions(cluster, decisions, now, bound=self.bound, remove_evicted=self.remove_evicted)


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
    # the session, its plugins and ledger refer to each other: dropped here, their objects are freed now
    # instead of waiting, with every per-pod record they hold, for a full pass of the garbage collector
    session.__dict__.clear()
    return decisions


def run_cycles(
    cluster: Cluster,
    config: Config,
    registry: Registry,
    now: float,
    cycles: int = 1,
    period: float = 1.0,
    *,
    history: ClusterHistory | None = None,
    sink: DecisionSink | None = None,
    derive: Callable[[Cluster, Decisions, int], None] | None = None,
    carry_out_last: bool = False,
) -> tuple[Decisions, float]:
    """Run ``cycles`` cycles over ``cluster``, ``period`` seconds apart from ``now``; return every
    cycle's decisions (in cycle order) and the time after the last cycle.

    Between cycles the decisions are carried out by ``sink`` (default :class:`ModelSink`: bound pods run,
    evicted pods are gone, nominations and podgroup updates persist — SPEC.md §4 for ``corral schedule
    --cycles``); the last cycle's only with ``carry_out_last``. ``derive`` is called with each cycle's
    decisions before they are carried out, to add what the front end derives from them (kube-scheduler's
    PodGroup conditions, :func:`corral.kube.native_status.native_conditions`). ``history`` (default: one
    that tracks the jobs' changes when there is more than one cycle, as every change between cycles is
    then the sessions' own; a sink that changes the model otherwise needs a history that does not track)
    is what the cycles remember."""
    sink = ModelSink() if sink is None else sink
    if history is None:
        history = ClusterHistory(tracked=cycles > 1)
    out = Decisions()
    for c in range(1, cycles + 1):
        decisions = run_cycle(cluster, config, registry, now, c, history=history)
        if derive is not None:
            derive(cluster, decisions, c)
        out.extend(decisions)
        if c < cycles or carry_out_last:  # else it is not read again
            sink.apply(decisions, cluster, now)
        now += period
    return out, now


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
    _place_pods(cluster, decisions, by_key, now, bound)
    _evict_pods(cluster, decisions, by_key, remove_evicted)
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


def _place_pods(
    cluster: Cluster, decisions: Decisions, by_key: dict[str, Task], now: float, bound: TaskStatus
) -> None:
    """The binds (the pod on its node in state ``bound``) and the nominations (nominatedNodeName set, or
    cleared by an empty node) of ``decisions``."""
    nodes = cluster.nodes
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


def _evict_pods(
    cluster: Cluster, decisions: Decisions, by_key: dict[str, Task], remove_evicted: bool
) -> None:
    """The evictions of ``decisions``: the pod leaves (``remove_evicted``) or stays Releasing, holding the
    node it was nominated to when it was moved (``consolidate``)."""
    nodes = cluster.nodes
    moved_to = {n.pod: n.node for n in decisions.nominations if n.node}  # a pod evicted and nominated
    for e in decisions.evictions:
        task = by_key[e.pod]
        if remove_evicted:
            del cluster.tasks[task.uid]
            if task.job is not None:
                task.job.tasks.remove(task)
        else:  # a moved pod holds its new node while it leaves and comes back there
            task.status = TaskStatus.RELEASING
            task.nominated = nodes.index[moved_to[e.pod]] if e.pod in moved_to else -1
