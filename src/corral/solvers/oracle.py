"""An exact victim-selection oracle for one preemptor gang (seed 000 cost model, SPEC.md §3.3), to
measure ``gangpreempt``/``gangreclaim`` against. OR-Tools CP-SAT.

Given a cluster snapshot and one waiting gang, :func:`solve_gang_eviction` chooses the running pods to
evict so that the gang fits, minimising the **work lost** under the seed's cost model: evicting pods
that leave their job at or above minMember (and, unless the job is elastic, every role at or above its
minTaskMember) costs nothing; a healthy job pushed below a minimum is *broken* and loses the GPU-hours
all its running pods have run since they started, or since the PodGroup's last checkpoint
(``corral.io/last-checkpoint``); a job already below its minimums costs nothing more. Ties go to the
fewest evicted pods. :func:`solve_by_rules` minimises the gang actions' lexicographic rule: no healthy
gang broken if any plan avoids it, then the lowest victim level (job priority for preempt, the victim
queue order for reclaim), then the work, then the pods.

What is modelled
----------------
* **Victims** — running or bound pods (:data:`~corral.actions.common.evict.VICTIM_STATES`) of other jobs,
  managed by corral, preemptable (pod or PodGroup annotation/label), not in ``kube-system`` nor of a
  system-critical priority class (the ``conformance`` plugin), on a node of an allowed domain:

  - ``action="preempt"``: the victim's job is in the preemptor's queue and has *strictly lower* job
    priority (``gangpreempt``, and the ``priority`` plugin's rule);
  - ``action="reclaim"``: the victim's job is in another queue that exists and is reclaimable. With
    ``queue_slack`` (see :func:`queue_slack`) the queue rule of ``proportion``/``capacity`` is modelled
    by a relaxation: for each queue on a victim's queue chain and each shared resource, the victims of
    that queue may free at most ``max(allocated − floor, 0)``, where the floor is the plugin's
    ``reclaim_floor`` — nothing (capacity: the guarantee) for a queue above its share, everything it
    holds for a queue at or below it. The plugin's rule (Volcano's: a victim while the queue is still
    above its share, the pod that crosses the line allowed) allows a subset of those sets, so the
    oracle's answer is a bound. With ``queue_limits`` (see :func:`queue_limits`) the rule itself is
    modelled: the victims of a queue pass when, taken with their largest pod last (the one that
    crosses the line), they leave it above its line in some resource, and within its guarantee —
    exact for flat queues, a relaxation in a queue tree (one order must then suit every queue of a
    side). Without either, reclaim victims are limited only by reclaimability (what the actions do
    when the rule is not configured to apply).

* **Domain** — the gang lands entirely in ONE domain: a HyperNode of tier ≤ ``highestTierAllowed``
  (all tiers when unset) that contains every node the gang already runs on, when the job has
  ``networkTopology`` mode ``hard``; the whole cluster when it has no constraint or mode ``soft`` (soft
  is a preference, the cluster is its last resort). The domain choice is part of the model (one
  boolean per hypernode, exactly one chosen) — the oracle considers *every* allowed hypernode, not the
  top K the eviction actions try.

* **Placement** — the waiting pods of the gang are grouped into classes (same role and request); an
  integer per class and node counts the pods placed there. Enough pods are placed to reach minMember
  (counting pods already running, bound or nominated) and every role's minTaskMember. Per node and per
  resource the gang requests (including the ``pods`` count): placed requests ≤ future idle
  (allocatable − used + releasing − nominated) + what the evicted victims on that node hold. A node is
  eligible when it is not down and not cordoned, and, if given, ``node_mask(task)`` allows it.

* **Work** — a pod's run time is ``now − max(status.startTime, last checkpoint)`` (creation time when
  no start time; never negative); its weight is its GPU count. Only a healthy job that the victims
  break loses work: all its running pods'.

Not modelled: PodDisruptionBudgets, minimum runtime, VictimFilter/ScenarioValidator plugins, inter-pod
affinity, GPU sharing, the preemptor queue's own gates (Overused/Preemptive).

The model is solved with CP-SAT under ``time_limit`` seconds; ``status`` is the solver's answer
(``OPTIMAL``, ``FEASIBLE`` when stopped early with a solution, ``INFEASIBLE`` when no choice of
victims lets the gang fit, ``UNKNOWN`` when stopped early without one), or ``NOTHING_TO_DO`` (the gang
needs no more pods) / ``NO_DOMAIN`` (hard topology and no hypernode can hold it).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.model import ALLOCATED_STATES, Cluster, Job, Task
from corral.model.resources import EPS
from corral.solvers.eviction_model import EvictionModel, queue_rule
from corral.solvers.oracle_work import VICTIM_STATES, _needed, pod_work, waiting_pods, work_lost

if TYPE_CHECKING:
    from corral.framework.session import Session
    from corral.plugins.queues import QueuePlugin

__all__ = [
    "OracleResult",
    "allowed_domains",
    "candidate_victims",
    "pod_work",
    "queue_limits",
    "queue_slack",
    "solve_by_rules",
    "solve_gang_eviction",
    "waiting_pods",
    "work_lost",
]

_CRITICAL = {"system-cluster-critical", "system-node-critical"}


@dataclass
class OracleResult:
    """The oracle's answer for one preemptor gang."""

    status: str  # OPTIMAL | FEASIBLE | INFEASIBLE | UNKNOWN | MODEL_INVALID |
    # NOTHING_TO_DO | NO_DOMAIN
    placed: bool  # a victim set was found with which the gang fits
    victims: list[Task] = field(default_factory=list)
    work_lost: float = 0.0  # GPU-hours, of the returned victims
    broken: list[Job] = field(default_factory=list)  # healthy jobs the victims break
    domain: str | None = None  # hypernode name, or "cluster"
    placement: list[tuple[Task, int]] = field(default_factory=list)  # (waiting pod, node row)
    bound: float = 0.0  # the solver's lower bound on the work lost (GPU-hours)
    candidates: int = 0  # candidate victim pods in the model
    nodes: int = 0  # nodes in the model (the union of the allowed domains)
    wall: float = 0.0  # seconds

    @property
    def proven(self) -> bool:
        """Is the answer proved (optimal victims, or proved impossible)?"""
        return self.status in ("OPTIMAL", "INFEASIBLE", "NOTHING_TO_DO", "NO_DOMAIN")


# -- eligibility -----------------------------------------------------------------------------------
def allowed_domains(cluster: Cluster, job: Job) -> list[tuple[str, np.ndarray]]:
    """The domains the gang may land in, as (name, node mask): the hypernodes of allowed tiers holding
    every node the gang already occupies and enough allocatable capacity (hard topology), else the
    whole cluster."""
    nodes = cluster.nodes
    live = ~nodes.down
    tree = cluster.hypernodes
    if job.topology_mode != "hard" or not tree:
        return [("cluster", live.copy())]
    top = job.topology_tier if job.topology_tier is not None else max(tree.tiers, default=1)
    placed = np.array(
        sorted({t.node for t in job.tasks if t.status in ALLOCATED_STATES and t.node >= 0}), dtype=np.int64
    )
    need = sum((t.request for t in waiting_pods(job)), np.zeros(len(cluster.resources)))
    alloc = nodes.allocatable * live[:, None]
    out = []
    for tier in tree.tiers:
        if tier > top:
            break
        for hn in tree.domains(tier):
            mask = hn.mask & live
            if placed.size and not mask[placed].all():
                continue
            if np.any(alloc[mask].sum(axis=0) < need - EPS):
                continue
            out.append((hn.name, mask))
    return out


def _evictable(t: Task) -> bool:
    return (
        t.managed
        and t.preemptable
        and t.namespace != "kube-system"
        and t.priority_class not in _CRITICAL
        and (t.job is None or t.job.preemptable)
    )


def candidate_victims(
    cluster: Cluster, job: Job, action: str = "preempt", node_mask: np.ndarray | None = None
) -> list[Task]:
    """Pods the oracle may evict for ``job`` (see the module doc), on nodes of ``node_mask`` if given."""
    if action not in ("preempt", "reclaim"):
        raise ValueError(f"action must be 'preempt' or 'reclaim', not {action!r}")
    out = []
    for t in cluster.tasks.values():
        if t.status not in VICTIM_STATES or t.node < 0 or not _evictable(t):
            continue
        if node_mask is not None and not node_mask[t.node]:
            continue
        v = t.job
        if v is None or v is job:
            continue
        if action == "preempt":
            if v.queue != job.queue or v.priority >= job.priority:
                continue
        else:
            q = cluster.queues.get(v.queue)
            if v.queue == job.queue or q is None or not q.reclaimable:
                continue
        out.append(t)
    out.sort(key=lambda t: (t.node, t.name))
    return out


def _queue_plugin(session: Session) -> QueuePlugin | None:
    """The session's ``proportion`` or ``capacity`` plugin (both are queue plugins), or None."""
    from corral.plugins.queues import QueuePlugin  # here: the solvers load before the plugins

    plugin = session.plugin("proportion") or session.plugin("capacity")
    return plugin if isinstance(plugin, QueuePlugin) else None


def queue_slack(session: Session) -> dict[str, np.ndarray]:
    """Per queue, how much of each resource it may give up in a reclaim: ``allocated − floor`` over
    the shared resources (+inf elsewhere), from the session's ``proportion`` or ``capacity`` plugin —
    the floor is the plugin's ``reclaim_floor`` when it has one (nothing, or the guarantee, for a queue
    above its share; all it holds for one that is not), else its deserved share. Empty when neither
    plugin is configured."""
    plugin = _queue_plugin(session)
    if plugin is None:
        return {}
    floors = getattr(plugin, "reclaim_floor", None) or plugin.deserved
    out = {}
    for name in plugin.queues:
        slack = plugin.allocated[name] - floors[name]
        out[name] = np.where(plugin.cols, slack, np.inf)
    return out


def queue_limits(session: Session, reclaimer_queue: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The queue rules with amounts of the session (``Session.queue_limits``: ``proportion`` and
    ``capacity``, the tighter of the two where both are configured, as the gang actions take them),
    exactly, for a gang of ``reclaimer_queue``: per victim-side queue (not in the reclaimer's queue
    chain) the pair (``above``, ``keep``) — held less the reclaim line over the shared resources (−inf
    elsewhere), held less the guarantee where the plugin keeps it (inf elsewhere). Empty when neither
    plugin is configured. See :func:`solve_gang_eviction`."""
    limits = session.queue_limits()
    if limits is None:
        return {}
    queues = session.cluster.queues
    mine = set(session.cluster.queue_chain(reclaimer_queue)) if reclaimer_queue in queues else set()
    return {
        name: (np.asarray(lim.above, dtype=float), np.asarray(lim.keep, dtype=float))
        for name, lim in limits.items()
        if name not in mine
    }


def solve_by_rules(
    cluster: Cluster, job: Job, *, rank: Callable[[Job], float] | None = None, **kwargs: Any
) -> OracleResult:
    """The oracle under the gang actions' lexicographic rule: break no healthy gang if any plan can
    avoid it; then the lowest victim level — victims whose ``rank`` is at most it (default: job
    priority for preempt, one level for reclaim; the gang actions' own policy is what a benchmark
    passes); then the least work, then the fewest pods. ``wall`` is the total over the solves. Same
    arguments as :func:`solve_gang_eviction`."""
    action = kwargs.get("action", "preempt")
    if rank is None:
        rank = (lambda j: float(j.priority)) if action == "preempt" else (lambda j: 0.0)
    levels = sorted({rank(v.job) for v in candidate_victims(cluster, job, action)}) or [0.0]
    wall = 0.0
    res = None
    for brk in (False, True):
        solve = functools.partial(solve_gang_eviction, cluster, job, rank=rank, break_gangs=brk, **kwargs)
        res = solve(max_rank=levels[-1])  # no lower level places the gang if all levels do not
        wall += res.wall
        if res.status in _STOP:
            break
        if not res.placed:
            continue
        for level in levels[:-1]:
            low = solve(max_rank=level)
            wall += low.wall
            if low.placed:
                res = low
                break
        break
    assert res is not None  # the loop above runs at least once
    res.wall = wall
    return res


_STOP = ("UNKNOWN", "MODEL_INVALID", "NO_DOMAIN", "NOTHING_TO_DO")


# -- the solve -------------------------------------------------------------------------------------
def solve_gang_eviction(
    cluster: Cluster,
    job: Job,
    *,
    action: str = "preempt",
    now: float,
    time_limit: float = 10.0,
    queue_slack: Mapping[str, np.ndarray] | None = None,
    queue_limits: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    node_mask: Callable[[Task], np.ndarray] | None = None,
    workers: int = 1,
    hint: Sequence[Task] | None = None,
    rank: Callable[[Job], float] | None = None,
    max_rank: float | None = None,
    break_gangs: bool = True,
) -> OracleResult:
    """The victim set of least work lost with which ``job`` fits in one allowed domain (module doc;
    the model's steps: :mod:`corral.solvers.eviction_model`).

    ``cluster`` is read only. ``action``: "preempt" or "reclaim". ``now``: seconds since the epoch
    (run times are measured to it). ``queue_slack``: per queue, what it may give up (reclaim; see
    :func:`queue_slack`), or ``queue_limits``: the queue rule itself (see :func:`queue_limits`).
    ``node_mask(task)``: extra node eligibility for a waiting pod. ``hint``: a
    known-feasible victim set to start the search from (e.g. what an action chose).
    ``max_rank``: only victims whose job's ``rank`` (default: its priority) is at most this.
    ``break_gangs`` false: no healthy gang may drop below its minimums (only surplus pods and pods of
    gangs already broken are victims). See :func:`solve_by_rules` for the lexicographic rule.
    """
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    missing, role_missing = _needed(job)
    if missing == 0 and not role_missing:
        return OracleResult("NOTHING_TO_DO", True, wall=time.perf_counter() - t0)
    domains = allowed_domains(cluster, job)
    if not domains:
        return OracleResult("NO_DOMAIN", False, wall=time.perf_counter() - t0)
    union = np.zeros(len(cluster.nodes), dtype=bool)
    for _, m in domains:
        union |= m
    em = EvictionModel(cp_model.CpModel(), cluster, job, union & ~cluster.nodes.unschedulable, node_mask)
    em.take(candidate_victims(cluster, job, action, union), rank, max_rank)
    em.domains(domains)
    em.capacity()
    em.counts(missing, role_missing)
    cost_terms = em.breaks(now, break_gangs)
    if action == "reclaim" and queue_slack:
        em.slack(queue_slack)
    if action == "reclaim" and queue_limits:
        queue_rule(em.model, cluster, em.victims, em.evict, queue_limits)
    weight = em.objective(cost_terms, hint)
    res = _solve(em, domains, now, time_limit, workers, weight)
    res.nodes = int(union.sum())
    res.wall = time.perf_counter() - t0
    return res


def _solve(
    em: EvictionModel,
    domains: list[tuple[str, np.ndarray]],
    now: float,
    time_limit: float,
    workers: int,
    weight: int,
) -> OracleResult:
    """Solve the model built and read its answer (``weight``: the work's, in the objective)."""
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = max(int(workers), 1)
    code = solver.solve(em.model)
    res = OracleResult(solver.status_name(code), False, candidates=len(em.victims))
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        res.placed = True
        res.victims, res.domain, res.placement = em.read(solver, domains)
        res.work_lost, res.broken = work_lost(em.cluster, res.victims, now)
        res.bound = math.floor(solver.best_objective_bound / weight + 1e-9) / 3600.0  # the work part
    elif code == cp_model.INFEASIBLE:
        res.bound = math.inf
    return res
