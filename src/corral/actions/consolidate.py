"""``consolidate`` (alias ``consolidation``, KAI-Scheduler's name): move running pods to other nodes so
that a waiting gang fits, losing only what the moves cost (issue 33; KAI's ``consolidation`` action).

For each starving job (QueueOrder, JobOrder; a preemptible one, as KAI consolidates for those only, and
none whose waiting pods have ``preemptionPolicy: Never``) whose waiting pods have free room enough in
the cluster but scattered (KAI's ``IsEnoughGPUsAllocatableForJob`` check first), one search:

1. **candidates** — running or bound pods of other jobs that may move (the walk every gang-level
   eviction search starts with, :func:`~corral.actions.common.victim_walk.victim_walk`): preemptable (KAI's
   ``IsPreemptibleJob``), managed by corral, not sharing a GPU, of a job without a hard topology
   constraint or sub-groups (their own placement rules would have to be planned again), passing the
   VictimFilter (``minruntime``: a protected job does not move), the gang-level victim filter
   (UnifiedEvictable with the action name ``consolidate``: ``conformance`` keeps system pods where they
   are; ``priority`` lets any job move, as KAI's consolidation takes victims of every priority and
   queue) and whose move alone breaks no PodDisruptionBudget (a move goes through the Eviction API,
   which refuses those);
2. **units** and the **plan** (:mod:`corral.actions.common.consolidate_plan`): a pod of a job that
   keeps its minimums without it moves alone; a job that would fall below a minimum moves whole (every running
   pod of it evicted and re-placed in the same decision — those on nodes it need not leave on the node
   they ran on —: the gang restarts together and is never left bound below its minimum); at most
   ``maxMovedJobs`` jobs move (when the greedy finds no plan, the jobs are chosen first and their
   pods packed again: the repack). The cost is the work lost since the last
   checkpoint, by gang eviction's cost model: a pod moved alone loses its own work, a job moved whole
   all of its pods'. The domains are the gang's search space (purpose Evict: the whole cluster, or for
   a topology-bound gang the HyperNodes it may use, so that pods move out of a domain into others and
   the domain holds the gang whole), ranked by the cost of the cheapest one-slot moves they lack (per
   slot, a job moved whole opening every node whose cheapest move it is, and counted once); the first
   ``maxDomains`` are planned (stopping when that estimate reaches the best plan's cost), within
   one search budget of ``maxTrials`` move sets per decision. Plans rank by work lost, pods moved,
   then the domain;
3. **dry run and commit** — through one Statement: the moved pods evicted (``action: consolidate``,
   ``preemptor``: the gang), each nominated on its new node (a nomination of the same pod name, which
   holds that room until the pod is placed there), the gang's pods nominated where the plan put them
   (Allocatable asked for each, as ``allocate`` does); the Statement commits when the gang is
   pipelined (JobPipelined) and no PodDisruptionBudget nor ScenarioValidator refuses the moves, and
   is discarded otherwise — nothing moves unless every moved pod has a node and the gang fits.

In a cycle's decisions a move reads as an eviction by ``consolidate`` and a nomination of the same pod
to its new node. During the session the moved pod's stand-in carries that nomination (no later action
takes the room) and is released when the session closes, so only real pods remain in the cluster.
Beyond the session the nomination stays with the pod until it is placed again: carried out
(:func:`corral.framework.cycle.apply_decisions`), the moved pod is Releasing on its old node and holds
its new one (the node columns charge both), and when it is gone it comes back Pipelined there (the
simulator), so the room the plan found is not given to another job while the pod restarts; a node that
goes down voids the nomination, as any other.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from corral.actions.common.bundles import CostModel, VictimJob
from corral.actions.common.consolidate_plan import Budget, MovePlan, MovePlanner, Pool, Unit
from corral.actions.common.evict import VICTIM_STATES
from corral.actions.common.gang_evict import needed_tasks
from corral.actions.common.jobs import schedulable_jobs
from corral.actions.common.victim_walk import victim_walk
from corral.framework.config import arg
from corral.framework.extension import Domain, Purpose
from corral.framework.plugin import Action
from corral.framework.session import Session
from corral.model import ALLOCATED_STATES, Job, Task, TaskStatus
from corral.model.resources import EPS, PODS
from corral.model.work import checkpoint, run_hours

__all__ = ["MOVED", "ConsolidateAction", "ConsolidateArgs"]

_READY = ALLOCATED_STATES | {TaskStatus.SUCCEEDED}

#: The uid suffix of a moved pod's stand-in (where the plan re-places it), which carries the
#: nomination to its new node during the session.
MOVED = "~moved"


@dataclass(frozen=True)
class ConsolidateArgs:
    max_moved_jobs: int = arg(
        "maxMovedJobs",
        16,
        "most jobs one decision moves (0 turns the action off, -1 no limit; KAI's "
        "--max-consolidation-preemptees defaults to 16 too, counted over the jobs it tries)",
        minimum=-1,
    )
    max_trials: int = arg(
        "maxTrials",
        256,
        "the search budget of one decision: move sets evaluated (their pods landed) over all domains; "
        "a count, so the same input gives the same decisions",
        minimum=1,
    )
    max_domains: int = arg(
        "maxDomains",
        8,
        "domains planned per gang, those whose cheapest one-slot moves cost least first",
        minimum=1,
    )


class ConsolidateAction(Action):
    """See the module docstring."""

    name = "consolidate"
    Args = ConsolidateArgs

    def execute(self, session: Session) -> None:
        if self.args.max_moved_jobs == 0:
            return  # KAI: consolidation is off
        queues = session.cluster.queues
        queue_key, job_key = session.queue_key(), session.job_key()
        jobs = [j for j in schedulable_jobs(session, quiet=True) if session.job_starving(j)]
        jobs.sort(key=lambda j: (queue_key(queues[j.queue]), job_key(j)))
        for job in jobs:
            if not job.preemptable:  # KAI consolidates for preemptible jobs only
                continue
            tasks = needed_tasks(session, job)
            if tasks and not any(t.preempt_never for t in tasks):
                self.serve(session, job, tasks)

    # -- one gang ------------------------------------------------------------------------------------
    def serve(self, session: Session, job: Job, tasks: list[Task]) -> bool:
        """Plan per domain, then dry-run the plans cheapest first; commit the first that passes."""
        nodes = session.cluster.nodes
        free = np.asarray(nodes.future_idle, dtype=float).copy()
        free[nodes.down] = -np.inf
        need = sum((t.request for t in tasks), np.zeros(len(session.cluster.resources)))
        cols = np.flatnonzero(need > 0)
        if (np.clip(free[~nodes.down][:, cols], 0, None).sum(axis=0) < need[cols] - EPS).any():
            return False  # not enough free room in the whole cluster: moving cannot help
        weight = need.copy()
        weight[session.cluster.resources.pos(PODS)] = 0  # the pod slot is no measure of work
        pool = self.candidates(session, job, tasks[0])
        units, victims = self.units(session, CostModel(session.now, weight), pool)
        if not units:
            return False
        gang_ok = ~nodes.down
        for t in {t.klass or id(t): t for t in tasks}.values():
            gang_ok = gang_ok & session.predicate(t)
        dest = self._dest(session)

        def planner(mask: np.ndarray) -> MovePlanner:
            return MovePlanner(
                free,
                tasks,
                gang_ok & mask,
                dest,
                units,
                lambda k, pods: not victims[k].breaks(pods),
                self.args.max_moved_jobs,
                first,
                budget,
                shared,
            )

        first: dict[int, list[Unit] | None] = {}  # the nodes' first steps, shared by the planners
        budget = Budget(self.args.max_trials)
        shared = Pool(units, free)
        plans = self.plans(session.gang_search_space(job, Purpose.EVICT), planner)
        for _, plan, domain in sorted(plans, key=lambda p: p[0]):
            if self.attempt(session, job, plan, domain, dest):
                return True
        return False

    def plans(
        self, domains: list[Domain], planner: Callable[[np.ndarray], MovePlanner]
    ) -> list[tuple[tuple[float, int, int], MovePlan, Domain]]:
        """Each domain's plan with its rank (work, pods moved, domain index): the domains ranked by the
        cost of the cheapest one-slot moves they lack (:meth:`MovePlanner.estimate`; with one domain
        nothing to rank), the first ``maxDomains`` planned, stopping when that estimate reaches the
        best plan's cost or the budget is spent. None at all when the gang fits somewhere unmoved."""
        union = np.zeros(len(domains[0].mask), dtype=bool) if domains else np.zeros(0, dtype=bool)
        for d in domains:
            union |= d.mask
        estimate = planner(union).estimate([d.mask for d in domains]) if len(domains) > 1 else [math.inf]
        if min(estimate, default=1.0) <= 0.0:
            return []  # the gang fits without a move: allocate's business, not a move's
        out: list[tuple[tuple[float, int, int], MovePlan, Domain]] = []
        best = math.inf
        for i in sorted(range(len(domains)), key=lambda i: (estimate[i], i))[: self.args.max_domains]:
            pl = planner(domains[i].mask)
            if pl.budget.spent() or (math.isfinite(estimate[i]) and estimate[i] >= best):
                break  # no better plan expected further down
            plan = pl.plan()
            if plan is not None and plan.units:
                out.append(((plan.cost, plan.pods, i), plan, domains[i]))
                best = min(best, plan.cost)
        return out

    def candidates(self, session: Session, job: Job, task: Task) -> list[Task]:
        """The pods that may move (step 1 of the module docstring), in the cluster's order."""
        pool = victim_walk(session, job, self.name, _may_move)
        ok = {id(t) for t in session.unified_evictable(task, pool, self.name)}
        pool = [t for t in pool if id(t) in ok]
        if pool and any(session.violations(pool)):  # a budget covers some: ask pod by pod
            pool = [t for t in pool if not session.violations([t])[0]]
        return pool

    def units(
        self, session: Session, costs: CostModel, pool: list[Task]
    ) -> tuple[list[Unit], dict[int, VictimJob]]:
        """What may move together (:class:`~corral.actions.common.consolidate_plan.Unit`), numbered in the
        victim order — the newest job first (as gang eviction's bundle order among equals), then the
        uid —, and each unit's job state by job index."""
        by_job: dict[int, list[Task]] = {}
        for t in pool:
            by_job.setdefault(id(t.job), []).append(t)
        ids = {id(t) for t in pool}
        order = sorted(by_job.values(), key=lambda p: (-p[0].job.creation, p[0].job.uid))
        units: list[Unit] = []
        victims: dict[int, VictimJob] = {}
        mine = [[t for t in pods[0].job.tasks if t.status in ALLOCATED_STATES] for pods in order]
        flat = [t for ts in mine for t in ts]
        since = [checkpoint(pods[0].job) for pods in order]
        hours = [run_hours(t, costs.now, since[k]) for k, ts in enumerate(mine) for t in ts]
        sizes = (np.array([t.request for t in flat]) @ costs.inv).tolist() if flat else []
        work = {id(t): a * h for t, a, h in zip(flat, sizes, hours)}
        for k, pods in enumerate(order):
            j = pods[0].job
            vj = victims[k] = _state(j, sum(work[id(t)] for t in mine[k]))
            if not vj.healthy or vj.surplus > 0:
                for t in pods:
                    units.append(Unit([t], work[id(t)], k, False, len(units)))
            held = [t for t in j.tasks if t.status in VICTIM_STATES and t.node >= 0]
            placed_now = any(t.status is TaskStatus.ALLOCATED for t in j.tasks)
            if vj.healthy and not placed_now and all(id(t) in ids for t in held):
                units.append(Unit(held, vj.held, k, True, len(units)))
        return units, victims

    @staticmethod
    def _dest(session: Session) -> Callable[[Task], np.ndarray]:
        """Where a moved pod may go: its predicates on live nodes (cached per equivalence class)."""
        cache: dict[object, np.ndarray] = {}
        down = session.cluster.nodes.down

        def dest(t: Task) -> np.ndarray:
            key = t.klass or id(t)
            got = cache.get(key)
            if got is None:
                got = cache[key] = session.predicate(t) & ~down
            return got

        return dest

    # -- dry run and commit ----------------------------------------------------------------------------
    def attempt(
        self,
        session: Session,
        job: Job,
        plan: MovePlan,
        domain: Domain,
        dest: Callable[[Task], np.ndarray],
    ) -> bool:
        """Evict the moved pods, nominate each on its new node and the gang's pods where the plan puts
        them; commit when every placement fits, the gang is pipelined and no budget or validator
        refuses, otherwise undo everything."""
        moved = [t for t, _ in plan.moves]
        if any(session.violations(moved)) or not self.valid(session, job, moved):
            return False
        queue = session.cluster.queues[job.queue]
        stmt = session.statement()
        for t in moved:
            stmt.evict(t, f"{self.name} for {job.uid}: moved", action=self.name, preemptor=job.uid)
        stand_ins: list[Task] = []
        for t, row in plan.moves:
            s = dataclasses.replace(
                t, uid=t.uid + MOVED, status=TaskStatus.PENDING, node=-1, nominated=-1, start_time=None
            )
            if not (dest(t)[row] and session.capacity.fits(s, future=True)[row]):
                stmt.discard()
                return False
            stmt.pipeline(s, row)
            stand_ins.append(s)
        for t, row in plan.gang:
            ok = session.predicate(t)[row] and session.capacity.fits(t, future=True)[row]
            if not (ok and session.allocatable(queue, t)):
                stmt.discard()
                return False
            stmt.pipeline(t, row)
        if not session.job_pipelined(job):
            stmt.discard()
            return False
        stmt.commit()
        session.ledger.closers.append(lambda: _release(session, stand_ins))
        session.ledger.nominated_domains[job.uid] = domain.name
        jobs = len({id(t.job) for t in moved})
        session.ledger.unschedulable(
            job,
            f"waiting for {len(moved)} pod(s) of {jobs} job(s) to move away: {self.name} nominated it in "
            f"{domain.name}",
        )
        return True

    def valid(self, session: Session, job: Job, moved: list[Task]) -> bool:
        """The ScenarioValidator points on moving ``moved`` for ``job`` (``minruntime``)."""
        if not session.fns("ScenarioValidator"):
            return True
        victim_jobs = list({id(v.job): v.job for v in moved}.values())
        return session.scenario_valid(job, victim_jobs, moved, self.name)


def _may_move(t: Task) -> bool:
    """Consolidate's own rule over :func:`victim_walk`'s pods: a preemptible job's pod that holds a whole
    device (a shared GPU moves with its sharers) and whose job has no placement rules of its own to plan
    again (a hard topology constraint, sub-groups)."""
    v = t.job
    assert v is not None
    return (
        v.preemptable
        and t.gpu_share is None
        and v.topology_mode != "hard"
        and not (v.subgroup_policies or v.subgroups is not None)
    )


def _state(job: Job, held: float) -> VictimJob:
    """The job's state as :meth:`CostModel.victim` gives it (its work ``held`` already summed)."""
    ready = 0
    counts: dict[str, int] = {}
    for t in job.tasks:
        if t.status in _READY:
            ready += 1
            counts[t.role] = counts.get(t.role, 0) + 1
    enforce = bool(job.min_task_member) and not job.elastic
    roles = {r: counts.get(r, 0) - n for r, n in job.min_task_member.items()} if enforce else None
    healthy = ready >= job.min_member and (roles is None or min(roles.values(), default=0) >= 0)
    if not healthy:
        return VictimJob(job, False, 1 << 30, None, 0.0, 0.0)
    return VictimJob(job, True, ready - job.min_member, roles, held, 0.0)


def _release(session: Session, stand_ins: list[Task]) -> None:
    """At the session's close: the stand-ins' nominations leave the node columns (the moved pods'
    controllers create the real pods again; the decisions carry the nominations)."""
    cluster = session.cluster
    for s in stand_ins:
        if s.status is TaskStatus.PIPELINED:
            cluster.charge(s, -1)
            s.status, s.nominated = TaskStatus.PENDING, -1
