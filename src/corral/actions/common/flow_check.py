"""Checking the ``flow`` action's answer pod by pod (seed 004, SPEC.md §3.6): the min-cost flow places
classes of pods on nodes as one commodity, so several classes may together oversubscribe a node; each
placement is checked through its job's Statement with the hard checks allocate makes — the queue's
Allocatable (capability, capacity), every Predicate plugin's mask on the chosen node, the resource fit
now or once releasing pods are gone (then the pod is pipelined, as allocate does). The few pods that
fail may be repaired in place (:func:`repair`) on the best-fitting node through the same checks.

:class:`FlowRound` is the state of one solve-and-check pass of :class:`corral.actions.flow.FlowAction`;
:func:`may_fit` tells which jobs enter a network at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from corral.actions.common.flow_build import Built
from corral.framework.session import PENDING_LIKE, Session
from corral.framework.statement import Statement
from corral.model import Job, Task, TaskStatus
from corral.model.resources import EPS
from corral.solvers.flow_network import FlowSolution

__all__ = ["FlowRound", "GroupFit", "check_answer", "fits_at", "may_fit", "repair"]


@dataclass
class FlowRound:
    """One solve-and-check pass over a set of jobs: per job its Statement, the reason it stopped and
    what it held when the pass began; its lower bound (pods short of minMember when the pass began),
    its pods still waiting (task order) and the jobs out of the pass (stopped or rolled back)."""

    jobs: list[Job]
    stmts: dict[str, Statement]
    reasons: dict[str, str | Callable[[], str]]
    was_ready: dict[str, bool]
    need: dict[str, int] = field(default_factory=dict)
    pending: dict[str, list[Task]] = field(default_factory=dict)
    out: set[str] = field(default_factory=set)

    def placed(self, session: Session) -> int:
        """Pods that would stay placed: those of jobs that are ready or pipelined."""
        return sum(
            len(s.ops)
            for j in self.jobs
            for s in [self.stmts[j.uid]]
            if s.ops and (session.job_ready(j) or session.job_pipelined(j))
        )

    def discard(self) -> None:
        for j in reversed(self.jobs):
            self.stmts[j.uid].discard()


def check_answer(
    session: Session, rnd: FlowRound, live: list[Job], built: Built, sol: FlowSolution, dropped: np.ndarray
) -> list[tuple[int, Task]]:
    """Apply the answer pod by pod through each job's Statement (jobs in the order of their waiting
    cost, dearest first; the jobs ``dropped`` as partial gangs left out). A job whose queue refuses a pod
    stops there (it is out of the pass, with that reason). Return the pods that failed the predicates
    or the fit, with the index of their job in ``live``."""
    groups, group_job = built.groups, built.net.group_job
    order = np.lexsort((sol.unit_node, sol.unit_group))
    ug, un, uk = sol.unit_group[order], sol.unit_node[order], sol.unit_kind[order]
    starts = np.searchsorted(ug, np.arange(len(groups) + 1))
    by_job: dict[int, list[int]] = {}
    for g in np.unique(ug).tolist():
        by_job.setdefault(int(group_job[g]), []).append(g)
    failed: list[tuple[int, Task]] = []
    dear = built.net.job_wait_cost
    for j in sorted(by_job, key=lambda i: (-int(dear[i]), i)):
        job = live[j]
        if dropped[j]:
            continue
        units = [(groups[g], un[starts[g] : starts[g + 1]], uk[starts[g] : starts[g + 1]]) for g in by_job[j]]
        done, stop, missed = _check_job(session, job, rnd.stmts[job.uid], units)
        failed.extend((j, task) for task in missed)
        rnd.pending[job.uid] = [
            t for t in rnd.pending[job.uid] if id(t) not in done and t.status in PENDING_LIKE
        ]
        if stop:
            rnd.out.add(job.uid)
            rnd.reasons[job.uid] = stop
    return failed


def _check_job(
    session: Session, job: Job, stmt: Statement, units: list[tuple[list[Task], np.ndarray, np.ndarray]]
) -> tuple[set[int], str, list[Task]]:
    """One job's placements — per group its pods, their nodes and kinds (0 now, 1 pipelined) — bound or
    nominated through ``stmt``. Return the pods placed (by ``id``), the reason the job stopped ("" when
    it did not) and the pods that failed."""
    queue = session.cluster.queues[job.queue]
    done: set[int] = set()
    missed: list[Task] = []
    for tasks, rows, kinds in units:
        fit = GroupFit(session, tasks[0], rows)
        for row, kind, task in zip(rows.tolist(), kinds.tolist(), tasks):
            how = fit.peek(task, row, kind)
            if how == 2:
                missed.append(task)
                continue
            refused = session.allocatable_refusal(queue, task)
            if refused:
                return done, f"{job.ready_count()} of {job.min_member} pods placed; {refused}", missed
            if not session.predicate(task)[row]:
                missed.append(task)
                continue
            if how == 0:
                stmt.allocate(task, row)
            else:
                stmt.pipeline(task, row)
            fit.take(row, how)
            done.add(id(task))
    return done, "", missed


def repair(session: Session, rnd: FlowRound, live: list[Job], failed: list[tuple[int, Task]]) -> int:
    """Place the few pods that failed the check without a re-solve: each goes, through the same hard
    checks (queue Allocatable, every predicate, the resource fit now or once releasing pods are
    gone), to the fitting node with the least free of its dominant resource (its largest request as
    a share of the largest node; best fit, so large holes stay for large pods). Return how many are still
    failed."""
    left = 0
    queues = session.cluster.queues
    for j, task in failed:
        job = live[j]
        if job.uid in rnd.out or task.status not in PENDING_LIKE:
            continue
        if not session.allocatable(queues[job.queue], task):
            left += 1
            continue
        ok = session.predicate(task)
        for future in (False, True):
            rows = np.flatnonzero(ok & session.capacity.fits(task, future=future))
            if rows.size:
                break
        if not rows.size:
            left += 1
            continue
        free = session.capacity.free(task, future=future, rows=rows)
        cols, need = session.capacity.request_cols(task)
        largest = session.cluster.nodes.allocatable[:, cols].max(axis=0)
        dominant = int(np.argmax(need / np.where(largest > 0, largest, 1.0)))  # by share, not amount
        row = int(rows[np.argmin(free[:, dominant])])
        stmt = rnd.stmts[job.uid]
        if future:
            stmt.pipeline(task, row)
        else:
            stmt.allocate(task, row)
        rnd.pending[job.uid] = [t for t in rnd.pending[job.uid] if t is not task]
    return left


def may_fit(session: Session, tasks: list[Task], lower: int, room: dict[object, int]) -> bool:
    """Can the job place anything this solve? Its classes must offer room for at least its lower bound
    (at least one pod), each class counted alone: pods of the class that fit in the future on the nodes
    its predicates allow (``room`` caches it per class for one solve). A job that cannot is left out of
    the network (it keeps waiting with allocate's reason), so the networks of a full cluster stay small.
    A pod nominated to a node holds capacity of its own: such a job always enters."""
    total = 0
    for t in {t.klass or ("task", t.uid): t for t in tasks}.values():
        if t.status is TaskStatus.PIPELINED and t.nominated >= 0:
            return True
        key = t.klass or ("task", t.uid)
        got = room.get(key)
        if got is None:
            need = session.capacity.request_cols(t)[1]
            per = (
                np.floor((session.capacity.free(t, future=True) + EPS) / need).min(axis=1)
                if need.size
                else None
            )
            got = room[key] = (
                len(tasks) if per is None else int(np.clip(per, 0, None)[session.predicate(t)].sum())
            )
        total += got
        if total >= max(1, lower):
            return True
    return False


class GroupFit:
    """The resource fit of one group's pods on the nodes the flow gave them, exact and without a
    ``Session.free`` call per pod: free now and free in the future are read once per group, for all
    its nodes at once; a bind takes the request from both, a nomination from the future only, and
    "now" is the smaller of what is idle and the future (``Session.free``), so after ``a`` binds and
    ``p`` nominations on a node a pod fits there now iff ``a + 1 <= Qnow`` and ``a + p + 1 <= Qfuture``
    (Q: pods of the request each amount holds, by every resource at once) and in the future iff
    ``a + p + 1 <= Qfuture``. Nothing else changes those nodes while the group is checked. A pod
    nominated to the node holds a reservation of its own and is checked against ``Session.free``
    alone (its group's pods all share that nomination)."""

    def __init__(self, session: Session, task: Task, rows: np.ndarray) -> None:
        self.session = session
        rows = np.unique(rows)
        need = session.capacity.request_cols(task)[1]
        q = [
            np.floor((session.capacity.free(task, future=f, rows=rows) + EPS) / need)
            .min(axis=1)
            .astype(np.int64)
            .tolist()
            for f in (False, True)
        ]
        self.room = {r: [qn, qf, 0, 0] for r, qn, qf in zip(rows.tolist(), q[0], q[1])}  # Qnow, Qfut, a, p

    def peek(self, task: Task, row: int, kind: int) -> int:
        """0: bind now, 1: nominate (fits once releasing pods are gone), 2: does not fit."""
        session = self.session
        if task.status is TaskStatus.PIPELINED and task.nominated >= 0 and task.nominated != row:
            # a nominated pod stays on its node within a round: moving it frees its reservation for the
            # jobs checked after it, and if its own job is then rolled back the restored nomination
            # would find its room taken (bound + nominated beyond the node, SPEC.md §5)
            return 2
        if task.status is TaskStatus.PIPELINED and task.nominated == row:
            self.room.pop(row, None)  # its reservation is its own: read the node again
            if kind == 0 and fits_at(session, task, row, False):
                return 0
            return 1 if fits_at(session, task, row, True) else 2
        got = self.room.get(row)
        if got is None:
            need = session.capacity.request_cols(task)[1]
            one = np.array([row])
            got = self.room[row] = [
                int(np.floor((session.capacity.free(task, future=f, rows=one)[0] + EPS) / need).min())
                for f in (False, True)
            ] + [0, 0]
        q_now, q_fut, binds, noms = got
        if binds + noms + 1 > q_fut:
            return 2
        return 0 if kind == 0 and binds + 1 <= q_now else 1

    def take(self, row: int, how: int) -> None:
        """Record a bind (0) or a nomination (1) made on node ``row``."""
        got = self.room.get(row)
        if got is not None:
            got[2 if how == 0 else 3] += 1


def fits_at(session: Session, task: Task, row: int, future: bool) -> bool:
    """Does ``task`` fit on node ``row`` now (or once releasing pods are gone)? ``Session.free`` for one
    row, without refreshing the whole per-class mask."""
    free = session.capacity.free(task, future=future, rows=np.array([row]))
    return bool((free[0] >= session.capacity.request_cols(task)[1] - EPS).all())
