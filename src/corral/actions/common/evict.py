"""Making room for one pod on one node, the careful way (seed 003, SPEC.md §3.2): shared by ``preempt``
and ``reclaim``.

For a preemptor pod the :class:`Evictor` narrows the nodes to those where it could fit once pods are
gone (the plugins' resolvable masks, and enough capacity in future idle plus the allowed victims), and
computes for each a lower bound of the highest victim priority it would need (victims added level by
level, lowest priority first — a few vectorised passes). Nodes are dry-run in that order; the search
stops when no remaining node can beat the best plan on (PDB violations, highest victim priority) — the
best plan violates no budget and the next bound is above its highest victim priority —, after ``ties``
further nodes that could only tie on it (default 16; nodes whose bound is below the best plan's highest
victim priority could beat it and are always dry-run), or at the cap of
``max(minCandidateNodesAbsolute, minCandidateNodesPercentage × nodes)`` — kube-scheduler's
DefaultPreemption dry-runs that many nodes every time; the bound lets corral stop early with the same
best node in the common case. The plans rank as follows:

1. victims in order (PDB-safe first, lowest priority first, latest start first, then the victim's job
   in reverse JobOrder — the most recently created job first where no plugin tells the jobs apart —,
   then the pod's name; when a budget allows only some of the pods it covers, the lower-priority ones
   are the safe ones, as in kube-scheduler) are
   removed through the simulation points (SimulateRemoveTask) until the pod fits — resources,
   SimulatePredicate, SimulateAllocatable — counting the pods already nominated to the node, except
   lower-priority ones of other jobs of the same queue, whose nominations are released;
2. the reprieve adds victims back (SimulateAddTask), PDB-violating first, then in the reverse of the
   victim order (highest priority first), keeping
   each that still lets the pod fit; then the released nominations, highest priority first, keep their
   node while the pod still fits (a nomination is cleared only when the room is needed);
3. the ScenarioValidator points see the plan; the state is restored;
4. a victim that pushes its gang below a minimum takes the gang's other running pods with it, on every
   node (:mod:`corral.actions.common.broken`, SPEC.md §5): they must be allowed victims too (the action's
   rules and the plugins' filters), else the plan is given up;
5. plans rank by fewest PDB violations, lowest highest-victim priority, smallest priority sum, fewest
   victims (the whole broken gangs counted: they are evicted), latest earliest start among the
   victims, then node name.

Dry runs are sequential: plugin state is shared and Python threads would not run them faster; the
capacity pre-filter and the candidate cap keep the number of dry runs small (the benchmark prints it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.actions.common.broken import whole_gangs
from corral.framework.session import Session
from corral.model import Job, Task, TaskStatus
from corral.model.resources import EPS

__all__ = ["VICTIM_STATES", "Evictor", "Plan", "reversed_key"]

#: Pods that can be victims: running, or bound by an earlier cycle. Pods placed in this cycle cannot, nor
#: pods already evicted (Releasing) — by an earlier job, or for an earlier pod of the same job.
VICTIM_STATES = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})


def reversed_key(key: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A sort key that orders the other way round from ``key`` (a ``functools.cmp_to_key`` key)."""

    class Reversed:
        __slots__ = ("k",)

        def __init__(self, obj: Any) -> None:
            self.k = key(obj)

        def __lt__(self, other: Reversed) -> bool:
            return other.k < self.k

        def __gt__(self, other: Reversed) -> bool:
            return self.k < other.k

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Reversed) and self.k == other.k

        __hash__ = None  # type: ignore[assignment]

    return Reversed


@dataclass
class Plan:
    node: int
    victims: list[Task]
    violations: int
    cleared: list[Task] = field(default_factory=list)  # lower-priority nominations on the node

    def rank(self) -> tuple[Any, ...]:
        prios = [v.priority for v in self.victims]
        starts = [v.start_time or 0.0 for v in self.victims]
        return (
            self.violations,
            max(prios, default=-(2**31)),
            sum(prios),
            len(self.victims),
            -min(starts, default=float("inf")),
            self.node,
        )


class _Room:
    """The free capacity of one node during a dry run for one preemptor, and the preemptor's fit in it:
    the node's idle capacity with what releasing pods hold, without what nominations hold, except the
    lower-priority nominations that may give way (``cleared``) and the preemptor's own nomination to
    the node. The preemptor fits when the resources fit and the SimulatePredicate and
    SimulateAllocatable points agree."""

    __slots__ = ("cols", "free", "queue", "row", "session", "task")

    def __init__(self, session: Session, task: Task, job: Job, row: int, cleared: list[Task]) -> None:
        nodes = session.cluster.nodes
        self.session, self.task, self.row = session, task, row
        self.queue = session.cluster.queues[job.queue]
        self.free = nodes.allocatable[row] - nodes.used[row] + nodes.releasing[row] - nodes.pipelined[row]
        for t in cleared:
            self.free += t.request
        if task.status is TaskStatus.PIPELINED and task.nominated == row:
            self.free += task.request
        self.cols = np.flatnonzero(task.request)

    def fits(self) -> bool:
        task, cols = self.task, self.cols
        return (
            bool(np.all(self.free[cols] >= task.request[cols] - EPS))
            and self.session.simulate_predicate(task, self.row)
            and self.session.simulate_allocatable(self.queue, task)
        )

    def spare(self, cleared: list[Task]) -> list[Task]:
        """The nominations that must give way: keep each (highest priority first) that still lets the
        pod fit."""
        out = []
        for t in sorted(cleared, key=lambda t: (-t.priority, t.creation, t.name)):
            self.free[:] -= t.request
            if not self.fits():
                self.free[:] += t.request
                out.append(t)
        return out


class Evictor:
    """Per-action index of the pods that hold nodes, and the per-node dry run."""

    def __init__(
        self,
        session: Session,
        action: str,
        min_candidates: int = 100,
        min_candidates_pct: float = 10.0,
        ties: int = 16,
        max_candidates: int = 0,
    ):
        self.session = session
        self.action = action
        cluster = session.cluster
        self.n = len(cluster.nodes)
        self.limit = max(min_candidates, int(np.ceil(self.n * min_candidates_pct / 100.0)))
        if max_candidates > 0:  # Volcano calculateNumCandidates: the max clamp wins
            self.limit = min(self.limit, max_candidates)
        occupants = sorted(
            (t for t in cluster.tasks.values() if t.managed and t.status in VICTIM_STATES and t.node >= 0),
            key=lambda t: (t.node, t.creation, t.name),
        )
        self.tasks = occupants
        self.t_node = np.array([t.node for t in occupants], dtype=np.int64)
        self.t_prio = np.array([t.priority for t in occupants], dtype=np.int64)
        self.t_req = np.array([t.request for t in occupants]).reshape(len(occupants), len(cluster.resources))
        self.t_best_effort = np.array([t.best_effort for t in occupants], dtype=bool)
        self.alive = np.ones(len(occupants), dtype=bool)
        self.by_node: dict[int, list[int]] = {}
        for i, t in enumerate(occupants):
            self.by_node.setdefault(t.node, []).append(i)
        self.index = {id(t): i for i, t in enumerate(occupants)}
        self.dry_runs = 0
        self.ties = ties
        self.nominated = [t for t in cluster.tasks.values() if t.status is TaskStatus.PIPELINED]
        self._listed = {id(t) for t in self.nominated}

    def nominate(self, task: Task) -> None:
        """``task`` was nominated (listed once: a job that tries several domains nominates it in each)."""
        if id(task) not in self._listed:
            self._listed.add(id(task))
            self.nominated.append(task)

    def _nominations(self, task: Task, row: int | None = None) -> list[Task]:
        """Lower-priority pods of other jobs of the same queue nominated (to ``row``, or anywhere) that
        would give way to ``task``. A job never clears its own nominations, and a nomination of another
        queue is that queue's reservation: capacity moves between queues by reclaim's fairness rules,
        not by priority (else a preemptor of queue A could take the node that queue B's preemptor just
        had cleared by evicting B's own pods)."""
        job = task.job
        return [
            t
            for t in self.nominated
            if t.status is TaskStatus.PIPELINED
            and t.nominated >= 0
            and t.priority < task.priority
            and t is not task
            and t.job is not None
            and job is not None
            and t.job is not job
            and t.job.queue == job.queue
            and (row is None or t.nominated == row)
        ]

    def gone(self, victims: list[Task]) -> None:
        """``victims`` were evicted (their Statement may still be discarded: see :meth:`back`)."""
        self._mark(victims, False)

    def back(self, victims: list[Task]) -> None:
        """The evictions of ``victims`` were undone: they hold their nodes again."""
        self._mark(victims, True)

    def _mark(self, victims: list[Task], alive: bool) -> None:
        for v in victims:
            i = self.index.get(id(v))
            if i is not None:
                self.alive[i] = alive

    # -- candidates ------------------------------------------------------------------------------
    def candidates(
        self, task: Task, allowed: np.ndarray, within: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Node rows worth a dry run, best first, with a lower bound of the highest victim priority each
        would need. ``allowed`` marks occupant pods this preemptor could evict at all (action rules);
        ``within``, if given, the node rows it may go to (a topology domain)."""
        session, nodes = self.session, self.session.cluster.nodes
        cols = np.flatnonzero(task.request)
        need = task.request[cols] - EPS
        sel = np.flatnonzero(allowed & self.alive)
        room = nodes.future_idle[:, cols] + self._lower_nominated(task)[:, cols]
        lower = np.full(self.n, np.inf)
        lower[(room >= need).all(axis=1)] = -np.inf  # fits without evicting anyone
        prios = self.t_prio[sel]
        for level in np.unique(prios):  # add victims level by level, lowest first
            at = sel[prios == level]
            for j, c in enumerate(cols):
                room[:, j] += np.bincount(self.t_node[at], weights=self.t_req[at, c], minlength=self.n)
            hit = np.isinf(lower) & (lower > 0) & (room >= need).all(axis=1)
            lower[hit] = level
        mask = np.isfinite(lower) | (lower < 0)
        mask &= session.resolvable(task)
        if within is not None:
            mask &= within
        rows = np.flatnonzero(mask)
        order = np.lexsort((rows, lower[rows]))
        rows = rows[order][: self.limit]
        return rows, lower[rows]

    def _lower_nominated(self, task: Task) -> np.ndarray:
        """Resources held by nominations of lower-priority pods, per node (they give way)."""
        out = np.zeros((self.n, len(self.session.cluster.resources)))
        for t in self._nominations(task):
            out[t.nominated] += t.request
        return out

    # -- the dry run -----------------------------------------------------------------------------
    def plan(
        self,
        task: Task,
        job: Job,
        row: int,
        allowed: np.ndarray,
        victim_ok: Callable[[list[Task]], list[Task]],
        evicted: list[Task],
        order: Callable[[Task], Any] | None = None,
    ) -> Plan | None:
        """A plan for ``task`` on node ``row``, or None. ``victim_ok`` applies the plugins' filters to
        the node's candidates; ``evicted`` are the victims already chosen for this job (for the
        ScenarioValidator). ``order``: the action's victim order (PDB-safe pods still come first, the
        reprieve goes the other way); by default :meth:`_victim_order`. Steps 1 and 2 of the module
        docstring on this node (the simulated state restored after), then :meth:`_settle`: steps 4
        and 3."""
        self.dry_runs += 1
        cleared = self._nominations(task, row)
        room = _Room(self.session, task, job, row, cleared)
        if room.fits():
            return Plan(row, [], 0, room.spare(cleared))
        pods, bad = self._node_victims(row, allowed, victim_ok, order)
        if not pods:
            return None
        removed = self._remove_until_fit(room, pods)
        if removed is None:
            return None
        victims = self._reprieve(room, removed, bad)
        cleared = room.spare(cleared)  # with the victims still gone
        self._restore(victims, row)
        return self._settle(job, row, victims, cleared, allowed, victim_ok, evicted)

    def _node_victims(
        self,
        row: int,
        allowed: np.ndarray,
        victim_ok: Callable[[list[Task]], list[Task]],
        order: Callable[[Task], Any] | None,
    ) -> tuple[list[Task], dict[int, bool]]:
        """The pods on node ``row`` this preemptor may evict (alive, allowed by the action, in a victim
        state, passed by the plugins' filters) in victim order — PDB-safe first, then ``order`` (by
        default :meth:`_victim_order`) — and whether each (by ``id``) violates a budget."""
        idx = [
            i
            for i in self.by_node.get(row, [])
            if self.alive[i] and allowed[i] and self.tasks[i].status in VICTIM_STATES
        ]
        pods = victim_ok([self.tasks[i] for i in idx])
        if not pods:
            return pods, {}
        pods.sort(key=order or self._victim_order())
        bad = dict(zip(map(id, pods), self.session.violations(pods)))
        pods.sort(key=lambda t: bad[id(t)])  # stable: PDB-safe first, then as above
        return pods, bad

    def _remove_until_fit(self, room: _Room, pods: list[Task]) -> list[Task] | None:
        """Remove ``pods`` in order through SimulateRemoveTask until the preemptor fits; the pods
        removed (they stay removed), or None when it never fits (the node is restored)."""
        removed: list[Task] = []
        for v in pods:
            self.session.simulate_remove(v, room.row)
            room.free += v.request
            removed.append(v)
            if room.fits():
                return removed
        self._restore(removed, room.row)
        return None

    def _reprieve(self, room: _Room, removed: list[Task], bad: dict[int, bool]) -> list[Task]:
        """Add the removed pods back (SimulateAddTask), PDB-violating first, then in the reverse of the
        victim order, keeping each that still lets the preemptor fit; the victims left (still removed)."""
        session, row = self.session, room.row
        rank = {id(t): i for i, t in enumerate(removed)}
        victims: list[Task] = []
        for v in sorted(removed, key=lambda t: (not bad[id(t)], -rank[id(t)])):
            session.simulate_add(v, row)
            room.free -= v.request
            if room.fits():
                continue  # reprieved
            session.simulate_remove(v, row)
            room.free += v.request
            victims.append(v)
        return victims

    def _settle(
        self,
        job: Job,
        row: int,
        victims: list[Task],
        cleared: list[Task],
        allowed: np.ndarray,
        victim_ok: Callable[[list[Task]], list[Task]],
        evicted: list[Task],
    ) -> Plan | None:
        """The plan of ``victims`` on ``row``: with the rest of every gang they break (:meth:`_whole`)
        and seen by the ScenarioValidator points, or None when either refuses it."""
        session = self.session
        if victims:
            whole = self._whole(victims, allowed, victim_ok)
            if whole is None:
                return None
            victims = whole
            victim_jobs = list({id(v.job): v.job for v in victims if v.job is not None}.values())
            if not session.scenario_valid(job, victim_jobs, evicted + victims, self.action):
                return None
        violations = sum(1 for ok in session.violations(victims) if ok)
        return Plan(row, victims, violations, cleared)

    def _victim_order(self) -> Callable[[Task], Any]:
        """The default victim order (preempt): lowest priority first, then the latest start, then the
        victim's job in reverse JobOrder — where no plugin tells two jobs apart, the most recently
        created job first (Volcano's ``BuildVictimsPriorityQueue`` takes victims of one queue by
        ``!JobOrderFn``) —, then the pod's name."""
        jobs = reversed_key(self.session.job_key())
        return lambda t: (t.priority, -(t.start_time or 0.0), jobs(t.job), t.name)

    def _whole(
        self, victims: list[Task], allowed: np.ndarray, victim_ok: Callable[[list[Task]], list[Task]]
    ) -> list[Task] | None:
        """``victims`` with the other running pods of every gang they break, wherever they run
        (:mod:`corral.actions.common.broken`); None when one of those pods may not be evicted (not an allowed
        victim of the action, refused by the plugins' filters, or placed in this cycle)."""
        extra, _, stuck = whole_gangs(victims)
        if stuck:
            return None
        for t in extra:
            i = self.index.get(id(t))
            if i is None or not self.alive[i] or not allowed[i]:
                return None
        if extra and len(victim_ok(victims + extra)) < len(victims) + len(extra):
            return None  # asked together: a cumulative rule (a queue's share) counts them all
        return victims + extra

    def _restore(self, removed: list[Task], row: int) -> None:
        for v in reversed(removed):
            self.session.simulate_add(v, row)

    def best(
        self,
        task: Task,
        job: Job,
        allowed: np.ndarray,
        victim_ok: Callable[[list[Task]], list[Task]],
        evicted: list[Task],
        within: np.ndarray | None = None,
        order: Callable[[Task], Any] | None = None,
    ) -> Plan | None:
        """Dry-run candidates in order of their lower bound; stop when no remaining node can beat the
        best plan on (violations, highest victim priority), or after ``ties`` more nodes that could only
        tie on it, or at the candidate cap. A node whose bound is below the best plan's highest victim
        priority, or any node while the best plan violates a budget, could beat it and is dry-run."""
        best: Plan | None = None
        extra = 0
        rows, lower = self.candidates(task, allowed, within)
        for row, bound in zip(rows, lower):
            if best is not None:
                violations, top = best.rank()[:2]
                if violations == 0 and bound > top:
                    break  # rows are sorted by bound: none can beat it
                if violations == 0 and bound >= top:  # could at best tie on (violations, top)
                    extra += 1
                    if extra > self.ties:
                        break
            plan = self.plan(task, job, int(row), allowed, victim_ok, evicted, order)
            if plan is not None and (best is None or plan.rank() < best.rank()):
                best = plan
                if not plan.victims:
                    break
        return best
