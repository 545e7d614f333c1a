"""The eviction actions' shared loop (preempt and reclaim, Volcano's ``actions/preempt`` and
``actions/reclaim``): their arguments, the starving jobs in order, one Evictor per preemptor and the
base class both actions derive from."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.actions.common.bundles import CostModel
from corral.actions.common.evict import Evictor
from corral.actions.common.jobs import schedulable_jobs
from corral.actions.common.subgroups import place_subgroup, subgroup_units
from corral.framework.config import arg
from corral.framework.extension import Purpose
from corral.framework.plugin import Action
from corral.framework.session import Session
from corral.framework.statement import Statement
from corral.model import Job, Task, TaskStatus
from corral.model.resources import PODS

__all__ = ["EvictArgs", "EvictionAction", "run_evictions"]


@dataclass(frozen=True)
class EvictArgs:
    min_candidates: int = arg("minCandidateNodesAbsolute", 100, "candidate nodes dry-run per pod, at least")
    min_candidates_pct: float = arg(
        "minCandidateNodesPercentage", 10.0, "candidate nodes dry-run per pod, as a percentage of all nodes"
    )
    ties: int = arg(
        "tieCandidates", 16, "further nodes dry-run once no node can beat the best plan but by a tie"
    )
    max_candidates: int = arg(
        "maxCandidateNodesAbsolute",
        100,
        "candidate nodes dry-run per pod, at most (Volcano's clamp; 0: no upper clamp)",
        minimum=0,
    )


def run_evictions(session: Session, action: EvictionAction) -> Evictor:
    """The shared loop of preempt and reclaim (Volcano ``preempt.go``/``reclaim.go``): each starving job
    (JobStarving, :func:`starving_jobs`) tries its pending pods in TaskOrder while it is still
    starving; a pod that cannot make room (or whose queue may not reclaim for it, or that never
    preempts) is passed over and the next one tried. At the end the job's Statement commits if the job
    is pipelined (JobPipelined), else it is discarded. A pod identical to one that just failed (same
    equivalence class, nothing changed since) is not dry-run again."""
    evictor = Evictor(
        session,
        action.name,
        action.args.min_candidates,
        action.args.min_candidates_pct,
        action.args.ties,
        action.args.max_candidates,
    )
    cache: dict[tuple[Any, ...], np.ndarray] = {}
    for job in starving_jobs(session):
        if action.may_start(session, job):
            _serve(session, action, evictor, job, cache)
    return evictor


def _serve(
    session: Session,
    action: EvictionAction,
    evictor: Evictor,
    job: Job,
    cache: dict[tuple[Any, ...], np.ndarray],
) -> None:
    """One starving job's turn: its pending pods in TaskOrder make room while it starves — inside one
    domain of the job's own ``networkTopology`` at a time (:func:`job_domains`); within it the pods of
    a sub-group with its own topology inside one of the sub-group's domains (purpose Evict, the first
    where the sub-group holds its minimum; :func:`~corral.actions.common.subgroups.place_subgroup`),
    or not at all. With several domains each is dry-run and undone, and the job enters the one where it
    becomes pipelined at the least cost (:func:`cheapest_domain`) — then the Statement commits when the
    job is pipelined."""
    stmt = session.statement()
    evicted: list[Task] = []
    failed: set[tuple[Any, ...]] = set()  # classes that failed since the last plan
    tasks = sorted(
        (t for t in job.tasks if t.status is TaskStatus.PENDING and t.managed), key=session.task_key()
    )

    def undo() -> None:
        stmt.restore(0)  # nothing evicted or nominated in the domain stays
        evictor.back(evicted)
        evicted.clear()
        failed.clear()

    def attempt(within: np.ndarray | None) -> list[Task] | None:
        """Make room in ``within``, then undo it: the victims when the job became pipelined there."""
        _room_in(session, action, evictor, stmt, job, tasks, within, cache, failed, evicted)
        got = list(evicted) if stmt.ops and session.job_pipelined(job) else None
        undo()
        return got

    groups = job_domains(session, job)
    for g, group in enumerate(groups):
        if len(group) > 1:
            best = cheapest_domain(session, job, group, attempt)
            if best is None:
                continue
            group = [group[best]]
        _room_in(session, action, evictor, stmt, job, tasks, group[0], cache, failed, evicted)
        if g == len(groups) - 1 or (stmt.ops and session.job_pipelined(job)):
            break
        undo()
    finish(session, job, stmt, evictor, evicted)


def cheapest_domain(
    session: Session,
    job: Job,
    domains: list[np.ndarray | None],
    attempt: Callable[[np.ndarray | None], list[Task] | None],
) -> int | None:
    """The domain ``job`` should make room in: each is tried (``attempt`` makes room there, undoes it and
    gives the victims, or None when the job did not become pipelined) and the cheapest by the
    gang-eviction cost model wins — first a domain that breaks no healthy gang, then the least work
    lost (:class:`~corral.actions.common.bundles.CostModel`: each broken job's pods, weighted by the
    hours they ran since their checkpoint), then the fewest victims, then the search-space order; a
    domain with no victim at all ends the search. None when the job becomes pipelined nowhere.

    KAI-Scheduler's JobSolver (``actions/common/solvers``) has no per-domain rule: it grows one victim
    set in its victim-queue order until the job fits in some node set of its required level, so the
    domain it enters is the one reached with the cheapest victims; corral's eviction actions make room
    per domain, so the domains' victim sets are compared by the cost model instead."""
    waiting = [t for t in job.tasks if t.status is TaskStatus.PENDING and t.managed]
    need = sum((t.request for t in waiting), np.zeros(len(session.cluster.resources)))
    need[session.cluster.resources.pos(PODS)] = 0  # the pod slot is no measure of work
    model = CostModel(session.now, need)
    best: tuple[tuple[bool, float, int], int] | None = None
    for i, within in enumerate(domains):
        victims = attempt(within)
        if victims is None:
            continue
        if not victims:
            return i
        jobs = {id(v.job): model.victim(v.job, 0.0) for v in victims if v.job is not None}
        breaks, work, _ = CostModel.price(victims, jobs)
        key = (breaks, work, len(victims))
        if best is None or key < best[0]:
            best = (key, i)
    return None if best is None else best[1]


def job_domains(session: Session, job: Job) -> list[list[np.ndarray | None]]:
    """Where a starving job makes room, in groups tried one after the other (the cheapest domain of the
    first group where the job can start is taken, :func:`cheapest_domain`): for a job with its own
    ``networkTopology`` (Volcano's, or a KAI required level) the masks of its search space with
    purpose Evict (the plugin's top ``evictDomains``), so that its pods — and its sub-groups' domains
    — lie inside one domain of the job, the same for all of them, as allocate places the job
    (Volcano's allocate: the job's hyperNode from ``HyperNodeGradientForJobFn`` first, each sub-job's
    from ``HyperNodeGradientForSubJobFn`` inside it); for any other job the cluster (None). Domains
    holding every node the job's pods are nominated to come first (allocate's rule), and in hard mode
    only those, when any does: the pods made room for join the nominated ones. Soft mode's last
    resort, the whole cluster, is a group of its own, after every domain."""
    if not job.topology_mode:
        return [[None]]
    masks: list[np.ndarray | None] = [d.mask for d in session.gang_search_space(job, Purpose.EVICT)]
    if not masks:
        return [[None]]
    last: list[np.ndarray | None] = []
    if job.topology_mode == "soft":
        masks, last = masks[:-1], masks[-1:]
    held = [t.nominated for t in job.tasks if t.status is TaskStatus.PIPELINED and t.nominated >= 0]
    holding: list[np.ndarray | None] = [m for m in masks if m is not None and m[held].all()] if held else []
    groups: list[list[np.ndarray | None]] = [holding] if holding else []
    if not holding or job.topology_mode == "soft":
        groups.append([m for m in masks if not any(m is h for h in holding)])
    return [g for g in groups + [last] if g]


def _room_in(
    session: Session,
    action: EvictionAction,
    evictor: Evictor,
    stmt: Statement,
    job: Job,
    tasks: list[Task],
    within: np.ndarray | None,
    cache: dict[tuple[Any, ...], np.ndarray],
    failed: set[tuple[Any, ...]],
    evicted: list[Task],
) -> None:
    """Make room for ``tasks`` inside ``within`` (None: anywhere) while the job starves: pod by pod,
    a sub-group with its own topology inside one of its domains within ``within``."""
    mark = 0

    def make_room(pods: list[Task], mask: np.ndarray | None) -> str:
        for task in pods:
            if not session.job_starving(job):
                break
            _make_room(session, action, evictor, stmt, job, task, mask, cache, failed, evicted)
        return ""

    def undo() -> None:
        evictor.back(evicted[mark:])
        del evicted[mark:]
        failed.clear()  # a class that failed in one domain may fit in another

    if not job.subjobs:
        make_room(tasks, within)
        return
    for sj, unit in subgroup_units(tasks):
        if not session.job_starving(job):
            break
        mark = len(evicted)
        if sj is None:
            make_room(unit, within)
        else:
            place_subgroup(session, job, sj, unit, stmt, within, make_room, Purpose.EVICT, undo)


def _make_room(
    session: Session,
    action: EvictionAction,
    evictor: Evictor,
    stmt: Statement,
    job: Job,
    task: Task,
    within: np.ndarray | None,
    cache: dict[tuple[Any, ...], np.ndarray],
    failed: set[tuple[Any, ...]],
    evicted: list[Task],
) -> None:
    """One pending pod of ``job``: the best plan (inside ``within``, a sub-group's domain) evicted and
    the pod nominated, or nothing when it cannot make room (its class remembered in ``failed``)."""
    if (
        task.preempt_never
        or task.status is not TaskStatus.PENDING
        or (task.klass and task.klass in failed)
        or not action.may_take(session, job, task)
    ):
        return
    key = action.allowed_key(job) + (task.best_effort,)
    allowed = cache.get(key)
    if allowed is None:
        allowed = cache[key] = action.allowed(session, evictor, job) & (
            evictor.t_best_effort if task.best_effort else True
        )
    plan = evictor.best(
        task,
        job,
        allowed,
        functools.partial(action.filter, session, task, job),
        evicted,
        within=within,
        order=action.victim_order(session),
    )
    if plan is None:
        if task.klass:
            failed.add(task.klass)
        return
    failed.clear()
    for v in plan.victims:
        stmt.evict(v, f"{action.name} for {job.uid}", action=action.name, preemptor=job.uid)
    evictor.gone(plan.victims)  # the job's later pods must not pick them again
    for t in plan.cleared:
        stmt.clear_nomination(t)
    stmt.pipeline(task, plan.node)
    evictor.nominate(task)
    evicted.extend(plan.victims)


def starving_jobs(session: Session) -> Iterator[Job]:
    """The starving jobs, one at a time: the queue first in QueueOrder — asked again before each job, as
    Volcano's reclaim pushes the queue back after every job (shares change as pods are taken) — gives
    its next job in JobOrder."""
    queues = session.cluster.queues
    queue_key, job_key = session.queue_key(), session.job_key()
    by_queue: dict[str, list[Job]] = {}
    for j in schedulable_jobs(session, quiet=True, best_effort=True):
        if session.job_starving(j):
            by_queue.setdefault(j.queue, []).append(j)
    for jobs in by_queue.values():
        jobs.sort(key=job_key, reverse=True)  # popped from the end
    while by_queue:
        name = min(by_queue, key=lambda n: queue_key(queues[n]))
        jobs = by_queue[name]
        job = jobs.pop()
        if not jobs:
            del by_queue[name]
        yield job


def finish(session: Session, job: Job, stmt: Statement, evictor: Evictor, evicted: list[Task]) -> None:
    if stmt.ops and session.job_pipelined(job):
        cleared = {id(op.task) for op in stmt.ops if op.kind == "clear"}
        stmt.commit()
        if cleared:
            drop_kept_nominations(session, cleared)
    else:
        stmt.discard()
        evictor.back(evicted)


def drop_kept_nominations(session: Session, cleared: set[int]) -> None:
    """Nominations held by statements ``allocate`` kept for pipelined jobs are emitted when the session
    closes; a cleared one must not be (the pod is Pending again and its node went to the preemptor)."""
    for kept in session.ledger.kept:
        kept.ops = [op for op in kept.ops if id(op.task) not in cleared]


class EvictionAction(Action):
    """Hooks that tell preempt and reclaim apart."""

    Args = EvictArgs

    def execute(self, session: Session) -> None:
        run_evictions(session, self)

    def may_start(self, session: Session, job: Job) -> bool:
        return True

    def may_take(self, session: Session, job: Job, task: Task) -> bool:
        return True

    def allowed(self, session: Session, evictor: Evictor, job: Job) -> np.ndarray:
        raise NotImplementedError

    def allowed_key(self, job: Job) -> tuple[Any, ...]:
        """Jobs with the same key may evict the same pods (the ``allowed`` mask is cached by it)."""
        return (job.uid,)

    def filter(self, session: Session, task: Task, job: Job, pods: list[Task]) -> list[Task]:
        raise NotImplementedError

    def victim_order(self, session: Session) -> Callable[[Task], Any] | None:
        """The order victims on a node are taken in (None: the Evictor's, lowest priority, newest first)."""
        return None

    def _job_filter(self, session: Session, job: Job, pods: list[Task]) -> list[Task]:
        verdict: dict[int, bool] = {}
        out = []
        for t in pods:
            v = t.job
            if v is None:
                continue
            if id(v) not in verdict:
                verdict[id(v)] = session.victim_filter(job, v, self.name)
            if verdict[id(v)]:
                out.append(t)
        return out
