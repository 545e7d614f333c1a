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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.model import ALLOCATED_STATES, Cluster, Job, Task, TaskStatus
from corral.model.resources import EPS, GPU
from corral.model.work import checkpoint, run_hours

if TYPE_CHECKING:
    from ortools.sat.python.cp_model import CpModel, IntVar

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

#: Pods that can be victims (as in ``corral.actions.common.evict``): running, or bound by an earlier cycle.
VICTIM_STATES = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})
_READY = ALLOCATED_STATES | {TaskStatus.SUCCEEDED}
_HAVE = _READY | {TaskStatus.PIPELINED}
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


# -- work ------------------------------------------------------------------------------------------
def _gpus(cluster: Cluster, task: Task) -> float:
    col = cluster.resources.get(GPU)
    return 0.0 if col is None else float(task.request[col]) / 1000.0


def pod_work(cluster: Cluster, task: Task, now: float) -> float:
    """GPU-seconds ``task`` has run since it started or its job's last checkpoint (0 without GPUs)."""
    return _gpus(cluster, task) * run_hours(task, now, checkpoint(task.job)) * 3600.0


def _running(job: Job) -> list[Task]:
    return [t for t in job.tasks if t.status in VICTIM_STATES]


def _role_surplus(job: Job) -> dict[str, int] | None:
    """Per role: ready pods above minTaskMember, when role limits bind (None otherwise)."""
    if not job.min_task_member or job.elastic:
        return None
    counts: dict[str, int] = {}
    for t in job.tasks:
        if t.status in _READY:
            counts[t.role] = counts.get(t.role, 0) + 1
    return {r: counts.get(r, 0) - n for r, n in job.min_task_member.items()}


def _healthy(job: Job) -> bool:
    if job.ready_count() < job.min_member:
        return False
    roles = _role_surplus(job)
    return roles is None or all(s >= 0 for s in roles.values())


def work_lost(cluster: Cluster, victims: Iterable[Task], now: float) -> tuple[float, list[Job]]:
    """The work (GPU-hours) destroyed by evicting ``victims`` from the cluster state *before* the
    eviction, and the healthy jobs they break (running pods below minMember or a binding role below its
    minTaskMember): a broken job loses all its running pods' work; any other victim costs nothing."""
    by_job: dict[int, tuple[Job | None, list[Task]]] = {}
    for v in victims:
        by_job.setdefault(id(v.job) if v.job is not None else id(v), (v.job, []))[1].append(v)
    total = 0.0
    broken: list[Job] = []
    for job, pods in by_job.values():
        if job is not None and _healthy(job):
            left = job.ready_count() - len(pods)
            roles = _role_surplus(job)
            gone_roles: dict[str, int] = {}
            for p in pods:
                gone_roles[p.role] = gone_roles.get(p.role, 0) + 1
            if left < job.min_member or (
                roles is not None and any(roles[r] - gone_roles.get(r, 0) < 0 for r in roles)
            ):
                broken.append(job)
                total += sum(pod_work(cluster, t, now) for t in _running(job))
    return total / 3600.0, broken


# -- eligibility -----------------------------------------------------------------------------------
def waiting_pods(job: Job) -> list[Task]:
    return [t for t in job.tasks if t.status is TaskStatus.PENDING and t.managed and not t.best_effort]


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


# -- the model -------------------------------------------------------------------------------------
def _victims_by_queue(cluster: Cluster, victims: list[Task], queues: Mapping) -> dict[str, list[int]]:
    """The indexes of ``victims`` under each queue of ``queues`` (a victim counts for its queue and every
    ancestor the mapping names)."""
    out: dict[str, list[int]] = {}
    for i, v in enumerate(victims):
        for name in cluster.queue_chain(v.job.queue):
            if name in queues:
                out.setdefault(name, []).append(i)
    return out


def _queue_rule(
    model: CpModel,
    cluster: Cluster,
    victims: list[Task],
    evict: list[IntVar],
    limits: Mapping[str, tuple[np.ndarray, np.ndarray]],
) -> None:
    """The queue rule of proportion/capacity, exactly for each queue alone: the victims of a queue
    (those of it and its descendants) pass, in their best order (the largest last), when in some
    resource what they free less one of them (the pod that crosses the line) stays below the queue's
    ``above``, and in every resource what they free stays within its ``keep``. (In a queue tree one
    order must suit every queue of a side at once: then this is a relaxation.)"""
    for name, idx in _victims_by_queue(cluster, victims, limits).items():
        above, keep = limits[name]
        cols = [c for c in range(len(above)) if any(victims[i].request[c] > 0 for i in idx)]
        units = {c: _scale(victims[i].request[c] for i in idx) for c in cols}
        amount = {c: [(i, int(round(victims[i].request[c] / units[c]))) for i in idx] for c in cols}
        for c in cols:
            if np.isfinite(keep[c]):
                model.add(
                    sum(q * evict[i] for i, q in amount[c]) <= max(math.floor((keep[c] + EPS) / units[c]), 0)
                )
        if any(a > EPS for c, a in enumerate(above) if c not in units):
            continue  # above its line in a resource no victim frees: the line never binds
        # lim: the most (in units) the victims may free less the crossing pod: k * u < above - EPS
        lims = {c: math.ceil((above[c] - EPS) / units[c]) - 1 for c in cols if np.isfinite(above[c])}
        lims = {c: v for c, v in lims.items() if v >= 0}
        if not lims:
            for i in idx:
                model.add(evict[i] == 0)
            continue
        cross = [model.new_bool_var(f"x_{name}_{i}") for i in idx]
        for z, i in zip(cross, idx):
            model.add_implication(z, evict[i])
        model.add(sum(cross) <= 1)
        which = {c: model.new_bool_var(f"y_{name}_{c}") for c in lims}
        for i in idx:
            model.add(sum(which.values()) >= 1).only_enforce_if(evict[i])
        for c, lim in lims.items():
            model.add(sum(q * (evict[i] - z) for (i, q), z in zip(amount[c], cross)) <= lim).only_enforce_if(
                which[c]
            )


def _needed(job: Job) -> tuple[int, dict[str, int]]:
    have = sum(1 for t in job.tasks if t.status in _HAVE)
    missing = max(job.min_member - have, 0)
    roles: dict[str, int] = {}
    if job.min_task_member:
        counts: dict[str, int] = {}
        for t in job.tasks:
            if t.status in _HAVE:
                counts[t.role] = counts.get(t.role, 0) + 1
        for r, n in job.min_task_member.items():
            if n - counts.get(r, 0) > 0:
                roles[r] = n - counts.get(r, 0)
    return missing, roles


def _scale(values: Iterable[float]) -> int:
    """The largest integer unit (gcd, in milli-units) dividing every value: keeps CP-SAT coefficients
    small and, since all sums are sums of these values, keeps capacity checks exact after flooring."""
    g = 0
    for v in values:
        iv = int(round(v))
        if iv:
            g = math.gcd(g, abs(iv))
    return g or 1


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
    """The victim set of least work lost with which ``job`` fits in one allowed domain (module doc).

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
    nodes = cluster.nodes
    n_res = len(cluster.resources)
    missing, role_missing = _needed(job)
    waiting = waiting_pods(job)
    if missing == 0 and not role_missing:
        return OracleResult("NOTHING_TO_DO", True, wall=time.perf_counter() - t0)
    domains = allowed_domains(cluster, job)
    if not domains:
        return OracleResult("NO_DOMAIN", False, wall=time.perf_counter() - t0)
    union = np.zeros(len(nodes), dtype=bool)
    for _, m in domains:
        union |= m
    eligible = union & ~nodes.unschedulable

    # classes of waiting pods: (role, request)
    classes: dict[tuple, list[Task]] = {}
    for t in sorted(waiting, key=lambda t: (-t.priority, t.creation, t.name)):
        classes.setdefault((t.role, tuple(np.round(t.request, 6))), []).append(t)
    klist = list(classes.values())
    cols = np.flatnonzero(np.any([k[0].request for k in klist], axis=0)) if klist else np.zeros(0, int)
    masks = []
    for pods in klist:
        m = eligible.copy()
        if node_mask is not None:
            m &= node_mask(pods[0])
        masks.append(m)
    rows = np.flatnonzero(np.any(masks, axis=0)) if masks else np.zeros(0, int)

    victims = candidate_victims(cluster, job, action, union)
    victims = [
        v
        for v in victims
        if eligible[v.node]
        and any(m[v.node] for m in masks)
        and (max_rank is None or (rank(v.job) if rank else v.job.priority) <= max_rank)
    ]
    by_node: dict[int, list[int]] = {}
    for i, v in enumerate(victims):
        by_node.setdefault(v.node, []).append(i)

    # integer units per requested column
    free = nodes.future_idle
    units = {}
    for c in cols:
        vals = [k[0].request[c] for k in klist] + [v.request[c] for v in victims]
        units[c] = _scale(vals)

    model = cp_model.CpModel()
    count: dict[tuple[int, int], cp_model.IntVar] = {}
    evict = [model.new_bool_var(f"e{i}") for i in range(len(victims))]
    use_dom: list[tuple[str, np.ndarray, cp_model.IntVar]] = []
    if len(domains) > 1:
        for name, m in domains:
            use_dom.append((name, m, model.new_bool_var(f"d_{name}")))
        model.add_exactly_one(d for _, _, d in use_dom)

    for r in rows:
        vic = by_node.get(int(r), [])
        cap_int = {}  # column -> (free now, freed by evicting every victim), in units
        for c in cols:
            u = units[c]
            freed = sum(victims[i].request[c] for i in vic)
            cap_int[c] = (math.floor((free[r, c] + EPS) / u), int(round(freed / u)))
        node_vars = []
        for k, pods in enumerate(klist):
            if not masks[k][r]:
                continue
            req = pods[0].request
            ub = len(pods)
            for c in cols:
                q = int(round(req[c] / units[c]))
                if q > 0:
                    ub = min(ub, max(cap_int[c][0] + cap_int[c][1], 0) // q)
            if ub <= 0:
                continue
            x = model.new_int_var(0, ub, f"x{k}_{r}")
            count[(k, int(r))] = x
            node_vars.append((k, x))
        if not node_vars:
            continue
        for c in cols:
            u = units[c]
            placed = [(x, int(round(klist[k][0].request[c] / u))) for k, x in node_vars]
            placed = [(x, q) for x, q in placed if q > 0]
            if not placed:
                continue
            base, _ = cap_int[c]
            freed_terms = [(evict[i], int(round(victims[i].request[c] / u))) for i in vic]
            model.add(sum(q * x for x, q in placed) <= base + sum(q * e for e, q in freed_terms if q))
        if use_dom:
            doms = [d for _, m, d in use_dom if m[r]]
            for k, x in node_vars:
                model.add(x <= len(klist[k]) * sum(doms))

    # how many pods, per class, overall and per role
    totals = []
    for k, pods in enumerate(klist):
        xs = [x for (kk, _), x in count.items() if kk == k]
        tot = sum(xs) if xs else 0
        if xs:
            model.add(tot <= len(pods))
        totals.append(tot)
    model.add(sum(totals) >= missing)
    for role, n in role_missing.items():
        model.add(sum(tot for k, tot in enumerate(totals) if klist[k][0].role == role) >= n)

    # victims' jobs: broken switches and the cost (seed 000: only a healthy job that is broken loses
    # work — all its running pods'; surplus pods and pods of jobs broken already are free)
    jobs: dict[int, tuple[Job, list[int]]] = {}
    for i, v in enumerate(victims):
        jobs.setdefault(id(v.job), (v.job, []))[1].append(i)
    cost_terms = []
    for vj, idx in jobs.values():
        if not _healthy(vj):
            continue
        whole = int(round(sum(pod_work(cluster, t, now) for t in _running(vj))))
        b = model.new_bool_var(f"b_{vj.uid}")  # the job drops below its minimums: restarts whole
        if not break_gangs:
            model.add(b == 0)
        surplus = vj.ready_count() - vj.min_member
        n = len(idx)
        if surplus < n:
            model.add(sum(evict[i] for i in idx) <= surplus + n * b)
        roles = _role_surplus(vj)
        if roles is not None:
            for role, s in roles.items():
                ri = [i for i in idx if victims[i].role == role]
                if s < len(ri):
                    model.add(sum(evict[i] for i in ri) <= s + len(ri) * b)
        cost_terms.append(whole * b)

    # reclaim: victim queues keep their deserved share
    if action == "reclaim" and queue_slack:
        for name, idx in _victims_by_queue(cluster, victims, queue_slack).items():
            slack = queue_slack[name]
            for c in range(n_res):
                reqs = [victims[i].request[c] for i in idx]
                if not any(r > 0 for r in reqs) or not np.isfinite(slack[c]):
                    continue
                u = _scale(reqs)
                limit = max(math.floor((slack[c] + EPS) / u), 0)
                model.add(
                    sum(
                        int(round(victims[i].request[c] / u)) * evict[i]
                        for i in idx
                        if victims[i].request[c] > 0
                    )
                    <= limit
                )

    if action == "reclaim" and queue_limits:
        _queue_rule(model, cluster, victims, evict, queue_limits)

    weight = len(victims) + 1
    model.minimize(weight * sum(cost_terms) + sum(evict))
    if hint:
        chosen = {id(t) for t in hint}
        for i, v in enumerate(victims):
            model.add_hint(evict[i], id(v) in chosen)

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = max(int(workers), 1)
    code = solver.solve(model)
    status = solver.status_name(code)
    res = OracleResult(status, False, candidates=len(victims), nodes=int(union.sum()))
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        res.placed = True
        res.victims = [v for i, v in enumerate(victims) if solver.value(evict[i])]
        res.work_lost, res.broken = work_lost(cluster, res.victims, now)
        res.bound = math.floor(solver.best_objective_bound / weight + 1e-9) / 3600.0  # the work part
        if use_dom:
            res.domain = next(name for name, _, d in use_dom if solver.value(d))
        else:
            res.domain = domains[0][0]
        for k, pods in enumerate(klist):
            queue = list(pods)
            for (kk, r), x in sorted(count.items(), key=lambda kv: kv[0][1]):
                if kk != k:
                    continue
                for _ in range(solver.value(x)):
                    res.placement.append((queue.pop(0), r))
    elif code == cp_model.INFEASIBLE:
        res.bound = math.inf
    res.wall = time.perf_counter() - t0
    return res
