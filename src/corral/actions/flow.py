"""``flow``: place a whole round of pending pods at once by solving a min-cost flow (seed 004
``004_04addbe79614e988.txt``, SPEC.md §3.6; Firmament/Poseidon), in place of ``allocate``
(``actions: "enqueue, flow, backfill"``).

The network (:mod:`corral.actions.common.flow_build`, :mod:`corral.solvers.flow_network`) sends each job's
waiting pods, grouped in equivalence classes, through aggregators to the nodes where they fit, or to the
job's unscheduled aggregator at a cost that grows with the job's priority and wait. Several classes may
share a node and together oversubscribe it (multi-resource fit is not one commodity), so the answer is
checked pod by pod (:mod:`corral.actions.common.flow_check`) through a Statement per job with the same
hard checks allocate makes — the queue's Allocatable (capability, capacity), every Predicate plugin's mask
on the chosen node, the resource fit now or once releasing pods are gone (then the pod is pipelined, as
allocate does). A few pods that fail
(``REPAIR_MAX``) are placed in place, through the same checks, on the best-fitting node; more go back into
a re-solve of the residual network (what still waits, on the capacity left), at most ``maxResolves``
times. Jobs whose classes have no room for their lower bound are left out of each network.

``gangMode`` — the seed's three ways:

- ``lowerbound`` (default): each gang's arc of lower bound k = minMember (less what it already holds) is
  removed by the supply/demand transformation and kept feasible by a penalised bypass; gangs the optimum
  leaves partial are rolled back and the residual network re-solved (at most ``maxResolves`` times), so
  their capacity goes to the rest of the round. The same round is also solved the ``rollback`` way (a
  dry run, discarded; for large rounds the first solve of both, on the same loaded network) and that
  answer kept when it places more pods, so lowerbound never places fewer pods than rollback.
- ``rollback``: solve without lower bounds, then undo the gangs left below k (the seed's "rearrange the
  scheduling round delta after the fact": their capacity stays idle this round).
- ``sequential``: the pods of jobs with minMember 1 in one round, then each gang alone in JobOrder
  (priority, then age); ``sequentialOrder: gangsFirst`` runs the gangs first.

Relaxed k-of-n gangs (minMember < pods) need k; the pods above k are elastic and go only where they fit.
Per-role minimums (minTaskMember) are checked by JobReady after the solve: a gang short of a role is
rolled back like any partial gang. Like allocate, a job's Statement commits when JobReady, is held as
nominations when JobPipelined, and is discarded otherwise, so flow never binds a gang below minMember.

Where flow differs from allocate: queue order and DRF shares do not order the round (the costs do:
priority, then pod size, then wait); Overused queues are skipped at the start of each round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.actions.common.flow_build import Built, build_network
from corral.actions.common.flow_check import FlowRound, check_answer, may_fit, repair
from corral.actions.common.jobs import LAST_START, schedulable_jobs, waiting_tasks
from corral.actions.common.placement import no_fit_reason, overused_reason
from corral.actions.common.subgroups import has_subgroup_topology, place_job
from corral.framework.config import arg
from corral.framework.plugin import Action
from corral.framework.session import Session
from corral.framework.statement import Statement
from corral.model import Job, PodGroupPhase, Task
from corral.model.clock import format_time
from corral.solvers.flow_network import FlowSolution, Solver

__all__ = ["FlowAction", "FlowArgs"]

#: Pods that failed the pod-by-pod check are placed in place
#: (:func:`~corral.actions.common.flow_check.repair`) when there are at most this many; more go to a
#: re-solve of the residual network, cheaper than that many greedy fits.
REPAIR_MAX = 64


@dataclass(frozen=True)
class FlowArgs:
    gang_mode: str = arg(
        "gangMode",
        "lowerbound",
        "how gangs enter the flow (seed 004)",
        choices=("lowerbound", "rollback", "sequential"),
    )
    cost_model: str = arg(
        "costModel", "trivial", "arc costs", choices=("trivial", "quincy", "spread", "topology")
    )
    sequential_order: str = arg(
        "sequentialOrder",
        "nonGangFirst",
        "sequential mode: which round first",
        choices=("nonGangFirst", "gangsFirst"),
    )
    max_resolves: int = arg(
        "maxResolves", 3, "re-solves of the residual network after the pod-by-pod check", minimum=0
    )
    wait_unit: float = arg("waitCostUnit", 60.0, "waiting time worth one unit of cost", kind="duration")
    exact_compare: int = arg(
        "exactCompareLimit",
        2000,
        "lowerbound: rounds up to this many pods compare with "
        "rollback by a full dry run, larger ones by the first solve",
        minimum=0,
    )


class FlowAction(Action):
    name = "flow"
    Args = FlowArgs

    def __init__(self, args: FlowArgs | None = None) -> None:
        super().__init__(args if args is not None else FlowArgs())
        self.stats = {
            "build": 0.0,
            "solve": 0.0,
            "check": 0.0,
            "build_cpu": 0.0,
            "solve_cpu": 0.0,
            "check_cpu": 0.0,
            "solves": 0,
            "resolves": 0,
            "rounds": 0,
            "failed": 0,
            "repaired": 0,
            "first": 0.0,
        }
        self.first_solve = 0.0

    def execute(self, session: Session) -> None:
        jobs = sorted(schedulable_jobs(session), key=lambda j: (-j.priority, j.creation, j.uid))
        if self.args.gang_mode != "sequential":
            self.run_round(session, jobs)
            return
        gangs = [j for j in jobs if j.min_member > 1]
        gangs.sort(key=session.job_key())
        singles = [j for j in jobs if j.min_member <= 1]
        batches = [[g] for g in gangs]
        batches = batches + [singles] if self.args.sequential_order == "gangsFirst" else [singles] + batches
        for batch in batches:
            if batch:
                self.run_round(session, batch)

    # -- one round -------------------------------------------------------------------------------
    def run_round(self, session: Session, jobs: list[Job]) -> None:
        jobs = self._open_queues(session, jobs)
        for job in [j for j in jobs if has_subgroup_topology(j)]:
            self._place_subgroups(session, job)
        jobs = [j for j in jobs if not has_subgroup_topology(j)]
        if not jobs:
            return
        self.stats["rounds"] += 1
        mode = self.args.gang_mode
        gangs = mode == "lowerbound" and any(self._lower(j) > 1 for j in jobs)
        if gangs and sum(len(waiting_tasks(j)) for j in jobs) > self.args.exact_compare:
            best = self.solve_and_check(session, jobs, "lowerbound", compare=True)
        elif gangs:
            trial = self.solve_and_check(session, jobs, "rollback")
            baseline = trial.placed(session)
            trial.discard()
            best = self.solve_and_check(session, jobs, "lowerbound")
            if baseline > best.placed(session):
                best.discard()
                best = self.solve_and_check(session, jobs, "rollback")
        else:
            best = self.solve_and_check(session, jobs, "rollback" if mode == "rollback" else "lowerbound")
        for job in best.jobs:
            self._finish(
                session, job, best.stmts[job.uid], best.was_ready[job.uid], best.reasons.get(job.uid, "")
            )

    def _place_subgroups(self, session: Session, job: Job) -> None:
        """A job whose sub-groups carry their own topology is placed before the round, outside the
        network, as allocate places it (:func:`~corral.actions.common.subgroups.place_job`), with the
        same hard checks as the round's and its commit/hold/discard rule."""
        was_ready = session.job_ready(job)
        stmt = session.statement()
        reason = place_job(session, job, sorted(waiting_tasks(job), key=session.task_key()), stmt)
        self._finish(session, job, stmt, was_ready, reason)

    def _open_queues(self, session: Session, jobs: list[Job]) -> list[Job]:
        """Jobs whose queue is not Overused (allocate's rule, asked once per round)."""
        queues = session.cluster.queues
        verdict: dict[str, bool] = {}
        out = []
        for job in jobs:
            over = verdict.get(job.queue)
            if over is None:
                over = verdict[job.queue] = session.overused(queues[job.queue])
            if over:
                session.ledger.unschedulable(job, overused_reason(session, job))
            else:
                out.append(job)
        return out

    @staticmethod
    def _lower(job: Job) -> int:
        return max(0, job.min_member - job.ready_count())

    def solve_and_check(
        self, session: Session, jobs: list[Job], mode: str, compare: bool = False
    ) -> FlowRound:
        """Solve, check pod by pod (repairing a few failed pods in place), re-solve the residual network
        (what is still waiting, on the capacity left) at most ``maxResolves`` times. ``mode``
        ``lowerbound`` puts the lower bounds in the network, rolls back the gangs the optimum leaves
        partial and re-solves the residual so their capacity goes to the rest; ``rollback`` solves
        without them and drops the gangs the answer leaves partial (their capacity idles)."""
        key = session.task_key()
        rnd = FlowRound(
            jobs,
            {j.uid: session.statement() for j in jobs},
            {},
            {j.uid: session.job_ready(j) for j in jobs},
            need={j.uid: self._lower(j) for j in jobs},
            pending={j.uid: _waiting(j, key) for j in jobs},
        )
        for attempt in range(self.args.max_resolves + 1):
            again, mode = self._attempt(session, rnd, mode, attempt, compare)
            if not again:
                break
        for job in jobs:  # what the round left wholly waiting says why
            if job.uid not in rnd.reasons and rnd.pending[job.uid] and not rnd.stmts[job.uid].ops:
                rnd.reasons[job.uid] = _fit_reason(session, job)
        return rnd

    def _attempt(
        self, session: Session, rnd: FlowRound, mode: str, attempt: int, compare: bool
    ) -> tuple[bool, str]:
        """One solve of the round (``attempt`` 0) or of its residual network, and its check. Return
        whether to solve again and the mode of the answer kept (with ``compare``, the first solve's
        answer without lower bounds when it keeps more pods: then ``rollback``)."""
        t0, c0 = time.perf_counter(), time.process_time()
        room: dict[object, int] = {}
        live = [
            j
            for j in rnd.jobs
            if j.uid not in rnd.out
            and rnd.pending[j.uid]
            and may_fit(session, rnd.pending[j.uid], rnd.need[j.uid] - len(rnd.stmts[j.uid].ops), room)
        ]
        if not live:
            return False, mode
        if attempt:
            self.stats["resolves"] += 1
        lower = [max(0, rnd.need[j.uid] - len(rnd.stmts[j.uid].ops)) for j in live]
        # a lower bound of one pod is no gang: its bypass would cost what waiting costs
        bounds = [k if mode == "lowerbound" and k > 1 else 0 for k in lower]
        built = build_network(
            session,
            live,
            [rnd.pending[j.uid] for j in live],
            bounds,
            model=self.args.cost_model,
            wait_unit=self.args.wait_unit,
        )
        t1, c1 = self._timed("build", t0, c0)
        solver = Solver(built.net)
        sol, dropped, had = self._solve(solver, lower)
        if compare and not attempt:
            plain = self._solve(solver, lower, bounded=False)
            if _kept(plain) > _kept((sol, dropped, had)):
                sol, dropped, had = plain
                mode = "rollback"
        t2, c2 = self._timed("solve", t1, c1)
        self.stats["solves"] += solver.solves
        if not self.stats["first"]:
            self.stats["first"] = t1 - t0 + self.first_solve
        for i in np.flatnonzero(dropped):
            job = live[int(i)]
            rnd.out.add(job.uid)
            rnd.reasons[job.uid] = _gang_reason(session, job, int(had[i]), mode)
        failed = self._check(session, rnd, live, built, sol, dropped)
        # rolled-back gangs free capacity the residual network gives to the rest (lowerbound); in
        # rollback mode it idles for the round, the seed's weakness
        again = failed or (mode == "lowerbound" and bool(dropped.any()))
        if again and attempt < self.args.max_resolves:
            self._release_partial(session, rnd, live)
        self._timed("check", t2, c2)
        return again, mode

    def _timed(self, stage: str, wall: float, cpu: float) -> tuple[float, float]:
        """Add the wall and CPU seconds since ``(wall, cpu)`` to ``stage``'s stats; return the clocks."""
        t, c = time.perf_counter(), time.process_time()
        self.stats[stage] += t - wall
        self.stats[f"{stage}_cpu"] += c - cpu
        return t, c

    @staticmethod
    def _release_partial(session: Session, rnd: FlowRound, live: list[Job]) -> None:
        """Before a re-solve, undo the gangs the check left below their lower bound, so that what they
        hold goes back into the network with them instead of idling until the round's end."""
        key = session.task_key()
        for job in live:
            stmt = rnd.stmts[job.uid]
            if job.uid in rnd.out or not stmt.ops or len(stmt.ops) >= rnd.need[job.uid]:
                continue
            stmt.restore(0)
            rnd.pending[job.uid] = _waiting(job, key)

    def _solve(
        self, solver: Solver, lower: list[int], bounded: bool = True
    ) -> tuple[FlowSolution, np.ndarray, np.ndarray]:
        """Solve once; return the answer, the jobs dropped as partial gangs (placed, but fewer than
        their lower bound: rolled back) and how many pods each had. ``bounded=False`` ignores the
        network's lower bounds. No re-solve here: the capacity of the dropped gangs goes to the residual
        network after the check."""
        k = np.array(lower, dtype=np.int64)
        t0 = time.perf_counter()
        sol = solver.solve(bounded=bounded)
        self.first_solve = self.first_solve or time.perf_counter() - t0
        dropped = (sol.placed > 0) & (sol.placed < k)
        had = np.where(dropped, sol.placed, 0)
        return sol, dropped, had

    def _check(
        self,
        session: Session,
        rnd: FlowRound,
        live: list[Job],
        built: Built,
        sol: FlowSolution,
        dropped: np.ndarray,
    ) -> bool:
        """Apply the answer pod by pod (:func:`~corral.actions.common.flow_check.check_answer`); pods
        that fail are placed elsewhere through the same checks when they are at most ``REPAIR_MAX``
        (:func:`~corral.actions.common.flow_check.repair`). Return True if any pod is still failed (a
        re-solve may place it)."""
        if not sol.unit_group.size:
            return False
        failed = check_answer(session, rnd, live, built, sol, dropped)
        self.stats["failed"] += len(failed)
        if failed and len(failed) <= REPAIR_MAX:
            left = repair(session, rnd, live, failed)
            self.stats["repaired"] += len(failed) - left
            return left > 0
        return bool(failed)

    @staticmethod
    def _finish(
        session: Session, job: Job, stmt: Statement, was_ready: bool, reason: str | Callable[[], str]
    ) -> None:
        """Commit when JobReady, hold as nominations when JobPipelined, else discard (allocate's rule)."""
        if session.job_ready(job):
            stmt.commit()
            if not was_ready:
                session.ledger.set_phase(job, PodGroupPhase.RUNNING)
                session.ledger.annotate(job, LAST_START, format_time(session.now))
            if reason and waiting_tasks(job):
                session.ledger.unschedulable(job, reason)
        elif session.job_pipelined(job) and stmt.ops:
            session.ledger.keep(stmt)
            session.ledger.unschedulable(
                job, "waiting for resources being released; placement held as nominations"
            )
        else:
            stmt.discard()
            session.ledger.unschedulable(job, reason or _fit_reason(session, job))


def _waiting(job: Job, key: Callable[[Task], Any]) -> list[Task]:
    """The job's waiting pods, in task order (a job of one pod needs no sort)."""
    return sorted(waiting_tasks(job), key=key) if len(job.tasks) > 1 else waiting_tasks(job)


def _kept(answer: tuple[FlowSolution, np.ndarray, np.ndarray]) -> int:
    """Pods an answer places outside the gangs it rolls back."""
    sol, dropped, _ = answer
    return int(sol.placed[~dropped].sum())


def _fit_reason(session: Session, job: Job) -> Callable[[], str]:
    """Allocate's reason for the first waiting pod, worked out when the session closes."""

    def reason() -> str:
        waiting = waiting_tasks(job)
        if not waiting:
            return f"gang not ready: {job.ready_count()} of {job.min_member} pods can be placed"
        task = waiting[0]
        if (session.predicate(task) & session.capacity.fits(task, future=True)).any():
            return (
                f"{job.ready_count()} of {job.min_member} pods placed; the round's min-cost flow left pod "
                f"{task.name} waiting: the capacity it fits went to pods of higher waiting cost"
            )
        return no_fit_reason(session, job, task, job.ready_count())

    return reason


def _gang_reason(session: Session, job: Job, placed: int, mode: str) -> Callable[[], str]:
    """Why a gang the flow left partial was rolled back (lazy, as :func:`_fit_reason`)."""

    def reason() -> str:
        waiting = waiting_tasks(job)
        if (
            waiting
            and not (session.predicate(waiting[0]) & session.capacity.fits(waiting[0], future=True)).any()
        ):
            return no_fit_reason(session, job, waiting[0], job.ready_count())
        how = "with lower bounds" if mode == "lowerbound" else "without lower bounds"
        return (
            f"{job.ready_count()} of {job.min_member} pods placed; the round's min-cost flow ({how}) could "
            f"place only {placed + job.ready_count()} of the gang's {job.min_member}, so it was rolled back"
        )

    return reason
