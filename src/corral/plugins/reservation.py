"""``reservation``: a target job for starving big jobs, nodes locked for it, and a backfill with a plan
(seed 001 "Volcano Resource Reservation For Target Jobs", SPEC.md §3.5; Volcano's removed
``plugins/reservation`` with ``actions/elect`` and ``actions/reserve``).

Extension points (Volcano switches ``enableTargetJob``, ``enableReservedNodes``):

- **TargetJob** (seed "Target Job Recognition"). A job annotated ``corral.io/target-job: "true"`` wins
  (highest priority, then longest wait among such jobs). Custom mode, when ``targetJob.resources.<name>``
  or ``targetJob.waitingTime`` is set: only jobs at or above a threshold are candidates; priority first,
  then the job furthest above a threshold (its largest ratio request/threshold or wait/threshold), then
  longest wait. Automatic mode otherwise: highest priority, then longest wait (Volcano's
  ``targetJobFn``). Wait counts from the podgroup's creation.
- **ReservedNodes** (seed "Locked Nodes"), argument ``lockMode``:
  ``cluster`` locks every live node; ``multi-node`` (the default, as in Volcano v1.2.1) locks the nodes
  with the most idle resources (over what the target requests), at least ``lockNodes`` of them (``N`` or
  ``N%`` of the nodes; unset: as few as possible) and enough that their allocatable capacity holds the
  target; it keeps them while they do and adds more when they no longer do (a node went down).
  ``single-node`` adds the most idle unlocked node every cycle (Volcano v1.1's ``reservedNodesFn``).
  With the plan on, "best" means the node expected to hold a pod of the target earliest (from the
  expected ends of its occupants), then the most idle; and a multi-node lock moves to other nodes when
  they are expected to start the target earlier than the current plan.
  Only nodes where a pod of the target could ever go (its predicates, its pod request below the node's
  allocatable) are chosen. ``timeout`` (a duration): once the target has waited that long since its
  election, the lock becomes a cluster lock.
- **Predicate**: no pod of another job goes onto a node locked for the target — not allocated,
  pipelined, backfilled, nor nominated by preemption (every action asks the predicates) — while the
  target's own pods may use them, victims included. The one exception is the plan below.
- **JobOrder**: the target goes before any job the plugins ahead of this one cannot tell apart from it
  (after ``priority`` in the recommended tiers), so enqueue admits it and allocate tries it first.

**Backfill with a plan** (argument ``plan``, default true; beyond the seed, after Slurm's backfill):
the target's *planned start* is the first instant at which its waiting pods (as many as it needs to
start) fit on the locked nodes — with a hard topology constraint, inside one domain of the job and each
sub-group inside one of its own, as allocate places it (:meth:`TopologyLocks.fit`) — once the pods
running there end at their expected ends (start time plus
``corral.io/expected-runtime``; a pod past its estimate is expected to end now; a pod without an estimate
never ends in the plan). Another job may then use a locked node only if it has an estimate and either
ends (now + its estimate) no later than the planned start, or fits in what the target will leave free on
that node at its planned start (capacity the target will not need). A job without an estimate never uses
a locked node, and neither does any job while the plan cannot date the start (an occupant without an
estimate stands in the way). Nothing is ever evicted for being late: the plan is recomputed every cycle
from what is running. The target's pods are placed in the plan first fit in node order (stable from cycle
to cycle), except that nodes whose capacity counts on an overrunning pod leaving come last: an overrun's
true end is unknown, so an idle node is the surer start and is not lent away meanwhile. With
``plan: false`` the locks are strict, as in the seed.

Reasons: a job held back by a lock (it would fit on a locked node) gets "node n-7 is locked for ns/big,
target since ...; the plan starts it at ..." appended to its unschedulable reason, and the target's own
reason says it is the target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.framework.config import arg
from corral.framework.extension import (
    EventHandler,
    JobOrder,
    Predicate,
    PredicateReason,
    ReasonNote,
    ReservedNodes,
    TargetJob,
)
from corral.framework.plugin import Plugin
from corral.framework.reservation import (
    TARGET_JOB,
    current_target,
    elected_at,
    expected_runtime,
    lock_owners,
    parse_lock_nodes,
    waiting,
)
from corral.model import OCCUPYING_STATES, Job, Task, TaskStatus
from corral.model.clock import format_time
from corral.model.quantity import MILLI
from corral.model.resources import EPS, PODS
from corral.plugins.reservation_plan import Plan, occupant_end, occupants, packer
from corral.plugins.reservation_topology import TopologyLocks, could_go, has_topology

__all__ = ["LOCK_MODES", "Plan", "ReservationArgs", "ReservationPlugin", "parse_lock_nodes"]

LOCK_MODES = ("multi-node", "single-node", "cluster")


@dataclass(frozen=True)
class ReservationArgs:
    lock_mode: str = arg("lockMode", "multi-node", "cluster, multi-node or single-node", choices=LOCK_MODES)
    lock_nodes: str = arg("lockNodes", "", "multi-node: at least N nodes, or N% of the nodes")
    timeout: float = arg(
        "timeout", 0.0, "escalate to a cluster lock after this long (0: never)", kind="duration"
    )
    waiting_time: float = arg("targetJob.waitingTime", 0.0, "custom mode: wait threshold", kind="duration")
    resources: dict[Any, Any] = arg(
        "targetJob.resources.", {}, "custom mode: request thresholds (plain units)", prefix=True
    )
    plan: bool = arg("plan", True, "backfill with a plan (needs expected runtimes)")


class ReservationPlugin(
    Plugin, JobOrder, Predicate, PredicateReason, EventHandler, TargetJob, ReservedNodes, ReasonNote
):
    name = "reservation"
    Args = ReservationArgs

    def on_session_open(self) -> None:
        nodes = self.session.cluster.nodes
        self._version = -1
        self._locked = np.zeros(len(nodes), dtype=bool)
        self._target: Job | None = None
        self._all = np.ones(len(nodes), dtype=bool)
        self._plan: Plan | None = None
        self._charged: dict[int, tuple[int, np.ndarray]] = {}
        self._ends: dict[int, float | None] = {}
        self._held: dict[tuple[Any, ...], np.ndarray] = {}

    # -- state -------------------------------------------------------------------------------------
    def _refresh(self) -> None:
        """Locks and target as they are now (recomputed only when ``elect`` or ``reserve`` changed them:
        both bump ``session.ledger.lock_version``)."""
        session = self.session
        if self._version == session.ledger.lock_version:
            return
        self._version = session.ledger.lock_version
        self._target = current_target(session.cluster)
        if self._target is None:
            self._locked = np.zeros(len(session.cluster.nodes), dtype=bool)
        else:
            self._locked = lock_owners(session.cluster.nodes, session.cluster.jobs) == self._target.uid
        self._plan = None
        self._charged.clear()

    def _target_job(self) -> Job | None:
        self._refresh()
        return self._target

    def _locked_mask(self) -> np.ndarray:
        self._refresh()
        return self._locked

    # -- TargetJob ---------------------------------------------------------------------------------
    def target_job(self, jobs: Sequence[Job]) -> Job | None:
        if not jobs:
            return None
        now = self.session.now
        marked = [j for j in jobs if str(j.annotations.get(TARGET_JOB, "")).lower() == "true"]
        if marked:
            return min(marked, key=lambda j: (-j.priority, j.creation, j.uid))
        if not self.args.resources and not self.args.waiting_time:
            return min(jobs, key=lambda j: (-j.priority, j.creation, j.uid))
        best, best_key = None, None
        for job in jobs:
            excess = self._excess(job, now)
            if excess is None:
                continue
            key = (-job.priority, -excess, job.creation, job.uid)
            if best_key is None or key < best_key:
                best, best_key = job, key
        return best

    def _excess(self, job: Job, now: float) -> float | None:
        """How far ``job`` is above the custom thresholds (largest ratio), None when below all."""
        ratios = []
        res = self.session.cluster.resources
        if self.args.resources:
            total = sum((t.request for t in job.tasks if t.managed), res.zeros())
            for name, amount in self.args.resources.items():
                col = res.get(name)
                if col is None or amount <= 0:
                    continue
                have = float(total[col]) / MILLI
                if have + 1e-9 >= amount:
                    ratios.append(have / amount)
        if self.args.waiting_time > 0 and now - job.creation >= self.args.waiting_time:
            ratios.append((now - job.creation) / self.args.waiting_time)
        return max(ratios) if ratios else None

    # -- ReservedNodes -----------------------------------------------------------------------------
    def reserved_nodes(self, target: Job, locked: np.ndarray) -> np.ndarray | None:
        nodes = self.session.cluster.nodes
        live = ~nodes.down
        mode = self.args.lock_mode
        since = elected_at(target)
        if self.args.timeout > 0 and since is not None and self.session.now - since >= self.args.timeout:
            mode = "cluster"
        if mode == "cluster":
            return locked | live
        tasks = waiting(target)
        if not tasks:
            return locked
        score = self._idle_score(tasks)
        avail = self._availability(tasks) if self.args.plan else None
        constrained, hard = has_topology(target)
        if constrained:
            topo = TopologyLocks(self.session, lambda rows: self._order(rows, score, avail))
            want = parse_lock_nodes(self.args.lock_nodes, len(nodes))
            got = topo.lock(
                target, locked, score, avail, mode, want, self._current_start, self._needed(target)
            )
            if got is not None or hard:
                return locked if got is None else got
        eligible = self._eligible(tasks) & live
        if not (eligible & ~locked).any():
            return locked
        if mode == "single-node":
            rows = np.flatnonzero(eligible & ~locked)
            out = locked.copy()
            out[self._order(rows, score, avail)[0]] = True
            return out
        return self._multi_node(target, locked, eligible, score, avail)

    def _current_start(self) -> float:
        """The planned start of the target on the nodes locked now (-inf: no plan, or nothing locked)."""
        return self._plan_of().start if self.args.plan and self._locked_mask().any() else -math.inf

    def _order(self, rows: np.ndarray, score: np.ndarray, avail: np.ndarray | None) -> np.ndarray:
        """``rows`` best first: most idle (seed 001), or, with the plan, earliest expected to hold a pod
        of the target, then most idle."""
        if avail is None:
            return rows[np.argsort(-score[rows], kind="stable")]
        return rows[np.lexsort((-score[rows], avail[rows]))]

    def _multi_node(
        self,
        target: Job,
        locked: np.ndarray,
        eligible: np.ndarray,
        score: np.ndarray,
        avail: np.ndarray | None,
    ) -> np.ndarray:
        """Keep the locked nodes while they can hold the target and at least ``lockNodes`` are locked;
        otherwise add the best nodes until both hold. With the plan, move the lock to the nodes where the
        target is expected to start earlier when they beat the current plan (Slurm recomputes its
        reservation every backfill cycle the same way)."""
        nodes = self.session.cluster.nodes
        live = ~nodes.down
        need = sum(
            (t.request for t in target.tasks if t.managed and not t.best_effort),
            self.session.cluster.resources.zeros(),
        )
        want = parse_lock_nodes(self.args.lock_nodes, len(nodes))

        def fill(base: np.ndarray, rows: np.ndarray) -> np.ndarray:
            have = nodes.allocatable[base & live].sum(axis=0)
            count = int(np.count_nonzero(base & live))
            out = base.copy()
            if count >= want and (have >= need - EPS).all():
                return out
            order = self._order(rows, score, avail)
            cum = np.cumsum(nodes.allocatable[order], axis=0) + have
            enough = (cum >= need - EPS).all(axis=1) & (count + np.arange(1, len(order) + 1) >= want)
            k = int(np.argmax(enough)) + 1 if enough.any() else len(order)
            out[order[:k]] = True
            return out

        kept = fill(locked, np.flatnonzero(eligible & ~locked))
        if avail is None or not locked.any():
            return kept
        fresh = fill(np.zeros_like(locked), np.flatnonzero(eligible))
        current = self._plan_of().start if self._locked_mask().any() else math.inf
        if np.isfinite(avail[fresh]).all() and avail[fresh].max() < current - 1e-6:
            return fresh
        return kept

    def _availability(self, tasks: list[Task]) -> np.ndarray:
        """Per node, when it is expected to hold the target's largest pod (now, the expected end of the
        occupant whose departure makes room, or inf when an occupant without an estimate is in the way)."""
        session = self.session
        nodes, now = session.cluster.nodes, session.now
        big = max(tasks, key=lambda t: (float(t.request.sum()), t.name))
        gap = np.maximum(big.request - (nodes.allocatable - nodes.used - nodes.pipelined), 0.0)
        avail = np.where((gap <= EPS).all(axis=1), now, math.inf)
        occupants = []
        for t in list(session.cluster.tasks.values()) + list(session.cluster.foreign):
            if t.status in OCCUPYING_STATES and t.node >= 0 and not np.isfinite(avail[t.node]):
                end = occupant_end(t, now)
                if end is not None:
                    occupants.append((end, t.node, t.request))
        occupants.sort(key=lambda o: (o[0], o[1]))
        for end, row, request in occupants:
            if np.isfinite(avail[row]):
                continue
            gap[row] = gap[row] - request
            if (gap[row] <= EPS).all():
                avail[row] = end
        return avail

    def _eligible(self, tasks: list[Task]) -> np.ndarray:
        """Nodes where some pod of the target could ever go (predicates but the topology plugins', whose
        constraints the lock holds itself; request within allocatable: ``could_go``)."""
        out = np.zeros(len(self.session.cluster.nodes), dtype=bool)
        seen: set[Any] = set()
        for t in tasks:
            key = t.klass or id(t)
            if key in seen:
                continue
            seen.add(key)
            out |= could_go(self.session, t)
        return out

    def _idle_score(self, tasks: list[Task]) -> np.ndarray:
        """Idle amount of what the target asks for, each resource scaled by the largest node's."""
        nodes = self.session.cluster.nodes
        res = self.session.cluster.resources
        want = np.zeros(len(res), dtype=bool)
        for t in tasks:
            want |= t.request > 0
        pods = res.get(PODS)
        if pods is not None and want.sum() > 1:
            want[pods] = False
        cols = np.flatnonzero(want)
        scale = np.maximum(nodes.allocatable[:, cols].max(axis=0), EPS)
        idle = nodes.allocatable[:, cols] - nodes.used[:, cols] - nodes.pipelined[:, cols]
        return (idle / scale).sum(axis=1)

    # -- JobOrder ----------------------------------------------------------------------------------
    def job_order(self, a: Job, b: Job) -> int:
        target = self._target_job()
        if target is None or a is b:
            return 0
        return -1 if a is target else 1 if b is target else 0

    # -- Predicate ---------------------------------------------------------------------------------
    def predicate(self, task: Task) -> np.ndarray:
        locked = self._locked_mask()
        if self._target is None or task.job is self._target or not locked.any():
            return self._all
        return ~locked | self._lendable(task)

    def _lendable(self, task: Task) -> np.ndarray:
        """The locked nodes ``task`` may use under the plan (all False without one)."""
        if not self.args.plan:
            return np.zeros_like(self._locked)
        end = self._end(task)
        plan = self._plan_of()
        if end is None or not math.isfinite(plan.start):
            return np.zeros_like(self._locked)
        if end <= plan.start + 1e-6:
            return self._locked
        cols, amounts = self.session.capacity.request_cols(task)
        return self._locked & (plan.spare[:, cols] >= amounts - EPS).all(axis=1)

    def _end(self, task: Task) -> float | None:
        """When ``task`` would end if it started now (None: no estimate)."""
        got = self._ends.get(id(task), False)
        if got is False:
            est = expected_runtime(task)
            got = self._ends[id(task)] = None if est is None else self.session.now + est
        return got

    def explain(self, task: Task) -> list[tuple[np.ndarray, str]]:
        locked = self._locked_mask()
        if self._target is None or task.job is self._target or not locked.any():
            return []
        return [
            (
                locked & ~self._lendable(task),
                f"node(s) locked for {self._target.uid} ({self._plan_words()}{self._clause(task)})",
            )
        ]

    def _clause(self, task: Task) -> str:
        """Why the plan does not lend the locked nodes to ``task`` ("" when there is nothing to add)."""
        if not self.args.plan:
            return ""
        end = self._end(task)
        if end is None:
            return f"; pod {task.name} has no expected runtime"
        start = self._plan_of().start
        if math.isfinite(start) and end > start:
            return f"; pod {task.name} would end at {format_time(end)}, after that"
        return ""

    # -- the plan ----------------------------------------------------------------------------------
    def _plan_of(self) -> Plan:
        """The target's planned start and what it leaves free then (computed once per lock state)."""
        self._refresh()
        if self._plan is None:
            self._plan = self._compute_plan()
        return self._plan

    def _compute_plan(self) -> Plan:
        """The first instant (now, or an occupant's expected end) at which the target's needed pods fit
        on the locked nodes, bisected: free capacity only grows with time."""
        session, target = self.session, self._target
        assert target is not None  # a plan is asked for only while there is a target
        nodes, now = session.cluster.nodes, session.now
        rows = np.flatnonzero(self._locked)
        occ = occupants(session, target, rows)
        pack = packer(session, target, rows, self._needed(target), lambda t: self._eligible([t]))
        times = np.unique(np.concatenate([[now], occ.ends[occ.ends > now]]))
        lo, hi, found = 0, len(times) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            use = pack(*occ.free_at(times[mid]))
            if use is not None:
                found, hi = (mid, use), mid - 1
            else:
                lo = mid + 1
        spare = np.zeros_like(nodes.allocatable)
        if found is None:
            return Plan(math.inf, spare, occ.blocked)
        start = float(times[found[0]])
        spare[rows] = occ.free_at(start)[0] - found[1]
        return Plan(start, spare, occ.blocked)

    def _needed(self, target: Job) -> list[Task]:
        """The target's waiting pods it needs to start (all of them when it needs them all)."""
        tasks = sorted(waiting(target), key=self.session.task_key())
        short = max(target.min_member - target.ready_count(), 0)
        return tasks[:short] if 0 < short < len(tasks) else tasks

    # -- keeping the spare capacity honest within a cycle --------------------------------------------
    def on_allocate(self, task: Task) -> None:
        if self._plan is None or task.job is self._target or not math.isfinite(self._plan.start):
            return
        row = task.node if task.status is not TaskStatus.PIPELINED else task.nominated
        if row < 0 or not self._locked[row]:
            return
        end = self._end(task)
        if end is not None and end <= self._plan.start + 1e-6:
            return
        self._plan.spare[row] -= task.request
        self._charged[id(task)] = (row, task.request)

    def on_deallocate(self, task: Task) -> None:
        got = self._charged.pop(id(task), None)
        if got is not None and self._plan is not None:
            self._plan.spare[got[0]] += got[1]

    # -- reasons -----------------------------------------------------------------------------------
    def _plan_words(self) -> str:
        target = self._target
        since = elected_at(target) if target is not None else None
        words = f"target since {format_time(since)}" if since else "target"
        if not self.args.plan:
            return words + "; backfill with a plan is off"
        plan = self._plan_of()
        if math.isfinite(plan.start):
            return words + f"; the plan starts it at {format_time(plan.start)}"
        if plan.blocked:
            return words + (
                f"; no planned start: {plan.blocked} pod(s) on the locked nodes have no expected runtime"
            )
        return words + "; no planned start: the locked nodes cannot hold it"

    def reason_note(self, job: Job, reason: str) -> str | None:
        """What the reservation adds to the reason of a job that did not start: for the target, that it
        is the target, how many nodes are locked for it and the plan; for a job a locked node held
        back, which node and the plan — unless its reason names the lock already (the no-fit reason
        does, from :meth:`explain`)."""
        locked = self._locked_mask()
        target = self._target
        if target is None or not locked.any():
            return None
        if job is target:
            return (
                f"target job of the reservation, {int(locked.sum())} node(s) locked for it "
                f"({self._plan_words()})"
            )
        if f"locked for {target.uid}" in reason:
            return None
        held = self._held_on(job)
        if held is None:
            return None
        rows, t = held
        names = self.session.cluster.nodes.names
        more = f" (and {len(rows) - 1} more)" if len(rows) > 1 else ""
        return (
            f"node {names[rows[0]]}{more} is locked for {target.uid}, {self._plan_words()}{self._clause(t)}"
        )

    def _held_on(self, job: Job) -> Any:
        """Locked rows where ``job``'s first waiting pod would fit but the lock keeps it off, or None."""
        tasks = waiting(job)
        if not tasks:
            return None
        t = tasks[0]
        end = self._end(t)
        start = self._plan_of().start if self.args.plan else math.inf
        key = (t.klass or id(t), end is None, end is not None and end <= start + 1e-6)
        rows = self._held.get(key)  # one answer per pod class and plan verdict per close
        if rows is None:
            rows = self._held[key] = np.flatnonzero(
                self._locked & ~self._lendable(t) & self.session.capacity.fits(t, future=True)
            )
        return (rows, t) if rows.size else None
