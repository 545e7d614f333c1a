"""The Session: one scheduling cycle over a cluster (SPEC.md §2).

Opening a session instantiates the configured plugins tier by tier and builds one list per extension
point (DESIGN.md convention 1); the dispatch methods below combine the plugins' answers with the tier
semantics documented on each point in :mod:`corral.framework.extension` (Volcano's
``framework/session_plugins.go``). Actions run through :class:`~corral.framework.statement.Statement`\\ s;
committed operations become decisions, and closing the session adds podgroup updates and the reasons
why the jobs that did not start could not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.errors import PluginError
from corral.framework import closing
from corral.framework.capacity import CapacityView
from corral.framework.closing import PENDING_LIKE
from corral.framework.decisions import Decisions
from corral.framework.extension import POINTS, Domain, Purpose, Vote
from corral.framework.ledger import Ledger
from corral.framework.memo import ClusterHistory
from corral.framework.statement import Statement
from corral.model import Cluster, Job, Queue, Task, TaskStatus

if TYPE_CHECKING:
    from corral.framework.config import Config, Registry

__all__ = ["PENDING_LIKE", "Session"]


_LAYOUTS: dict[tuple[Any, ...], list[Any]] = {}


def _point_layout(tiers: list[list[Any]]) -> list[tuple[str, str, list[tuple[int, list[int]]]]]:
    """Per extension point, which plugins (tier, index) implement it: worked out once per configuration
    shape (plugin classes and switches), not in every session."""
    key = tuple(tuple((type(p), tuple(sorted(pc.switches.items()))) for p, pc in row) for row in tiers)
    got = _LAYOUTS.get(key)
    if got is None:
        got = []
        for point in POINTS:
            methods = [m for m in point.protocol.__dict__ if not m.startswith("_")]
            layout = []
            for ti, row in enumerate(tiers):
                idx = [
                    pi
                    for pi, (p, pc) in enumerate(row)
                    if all(callable(getattr(p, m, None)) for m in methods) and pc.enabled(point.switch)
                ]
                if idx:
                    layout.append((ti, idx))
            got.append((point.name, methods[0], layout))
        _LAYOUTS[key] = got
    return got


class Session:
    """One cycle. ``now`` is seconds since the epoch; ``cycle`` numbers the decisions.

    The session dispatches: it asks the plugins at each extension point and combines their answers.
    What the cycle changed is in its :attr:`ledger` (:class:`~corral.framework.ledger.Ledger`), what the
    nodes can give in its :attr:`capacity` (:class:`~corral.framework.capacity.CapacityView`), and what
    earlier cycles learned in the front end's :attr:`history`
    (:class:`~corral.framework.memo.history.ClusterHistory`; a fresh one when none is given).

    ``explain`` (the default; ``report_reasons`` on the session) reports why each job that did not start
    could not (the ``unschedulable`` decisions). Without it (the simulator's cycles) the cycle leaves out
    jobs known to fail (:mod:`corral.actions.common.skipping`) and reports reasons only for the jobs it
    tried: a skipped job keeps the reason of its last attempt; every other decision is the same.
    """

    def __init__(
        self,
        cluster: Cluster,
        config: Config,
        registry: Registry,
        now: float,
        cycle: int = 1,
        *,
        explain: bool = True,
        history: ClusterHistory | None = None,
    ) -> None:
        self.cluster = cluster
        self.report_reasons = explain
        self.config = config
        self.registry = registry
        self.now = now
        self.cycle = cycle
        self.action = ""
        self.actions = [a.name for a in config.actions]
        # True while a gang eviction action lists its candidate victims: a cumulative victim rule (the
        # queue rule of proportion/capacity) then answers with every candidate, and is asked again over
        # each concrete plan's victims in plan order (SPEC.md §3.3)
        self.listing_victims = False
        self.history = history if history is not None else ClusterHistory()
        # the jobs indexed by what the cycle looks for, kept across cycles where the front end tracks
        # its jobs' changes (the simulator); None: walk every job
        self.index = index = self.history.open(cluster)
        self.phase0 = index.phase if index is not None else {uid: j.phase for uid, j in cluster.jobs.items()}
        self._job_uids: list[str] | None = None
        self.ledger = Ledger(
            cluster,
            cycle,
            index.open_nominations(cluster.jobs)
            if index is not None
            else {id(t): t for t in cluster.tasks.values() if t.status is TaskStatus.PIPELINED},
        )
        self.capacity = CapacityView(cluster, [], self._scores_row_local)
        self.tiers: list[list[Any]] = []
        for tier in config.tiers:
            row = []
            for pc in tier:
                cls = registry.plugin_class(pc.name)
                if cls is None:
                    raise PluginError(f"plugin {pc.name!r} is not registered")
                row.append((cls(self, pc.args, dict(pc.switches)), pc))
            self.tiers.append(row)
        self.points: dict[str, list[list[Callable[..., Any]]]] = {}
        for point, method, layout in _point_layout(self.tiers):
            self.points[point] = [
                [getattr(self.tiers[ti][pi][0], method) for pi in tier] for ti, tier in layout
            ]
        self._flat: dict[str, tuple[list[Any], list[Callable[..., Any]]]] = {}  # point -> (tiers, flat)
        self.capacity.scorers = self.fns("NodeOrder")
        self._handlers = [
            p
            for row in self.tiers
            for p, _ in row
            if callable(getattr(p, "on_allocate", None)) and callable(getattr(p, "on_deallocate", None))
        ]
        for row in self.tiers:
            for p, _ in row:
                p.on_session_open()

    @property
    def decisions(self) -> Decisions:
        return self.ledger.decisions

    def close(self) -> Decisions:
        """Finish the cycle's decisions (:func:`corral.framework.closing.close`)."""
        return closing.close(self)

    def _scores_row_local(self, task: Task) -> bool:
        for p in self.plugins():
            local = getattr(p, "scores_row_local", None)
            if callable(local) and not local(task):
                return False
        return True

    # -- plumbing ------------------------------------------------------------------------------------
    def plugins(self) -> list[Any]:
        return [p for row in self.tiers for p, _ in row]

    def plugin(self, name: str) -> Any | None:
        for row in self.tiers:
            for p, pc in row:
                if pc.name == name:
                    return p
        return None

    def fns(self, point: str) -> list[Callable[..., Any]]:
        """The functions of ``point`` across all tiers, in order (do not modify the returned list; it is
        cached until ``points[point]`` is replaced)."""
        tiers = self.points[point]
        got = self._flat.get(point)
        if got is None or got[0] is not tiers:
            got = self._flat[point] = (tiers, [f for tier in tiers for f in tier])
        return got[1]

    def job_uids(self) -> list[str]:
        """The uids of the cluster's jobs, sorted: the order every action walks them in (sorted once per
        session; no action adds or removes a job; do not modify the returned list)."""
        got = self._job_uids
        if got is None:
            got = self._job_uids = self.index.uids if self.index is not None else sorted(self.cluster.jobs)
        return got

    def statement(self) -> Statement:
        return Statement(self)

    def fire_allocate(self, task: Task) -> None:
        for h in self._handlers:
            h.on_allocate(task)

    def fire_deallocate(self, task: Task) -> None:
        for h in self._handlers:
            h.on_deallocate(task)

    def job_enqueued(self, job: Job) -> None:
        """Tell plugins that keep admission state (``on_job_enqueued``) that enqueue admitted ``job``."""
        for p in self.plugins():
            hook = getattr(p, "on_job_enqueued", None)
            if callable(hook):
                hook(job)

    # -- ordering ------------------------------------------------------------------------------------
    def _compare(self, point: str, a: Any, b: Any) -> int:
        for tier in self.points[point]:
            for fn in tier:
                r = fn(a, b)
                if r:
                    return r
        return 0

    def compare_jobs(self, a: Job, b: Job) -> int:
        """JobOrder over the plugins only (0 when none can tell)."""
        return self._compare("JobOrder", a, b)

    def job_key(self) -> Callable[[Job], Any]:
        def cmp(a: Job, b: Job) -> int:
            return self._compare("JobOrder", a, b) or _cmp((a.creation, a.uid), (b.creation, b.uid))

        return functools.cmp_to_key(cmp)

    def job_sort_key(self) -> Callable[[Job], Any]:
        """The order of :meth:`job_key` as a plain tuple computed once per job, when every JobOrder
        plugin offers ``job_order_key(job)`` (a key whose comparison is its ``job_order``); otherwise
        :meth:`job_key`. For orders taken while the compared jobs do not change — enqueue's pending
        jobs, allocate's jobs waiting their turn (only the job whose turn it is gets pods) — where it is
        the same order at a fraction of the cost (no Python call per comparison)."""
        keys, contexts = [], []
        for fn in self.fns("JobOrder"):
            plugin = getattr(fn, "__self__", None)
            key = getattr(plugin, "job_order_key", None)
            if not callable(key):
                return self.job_key()
            keys.append(key)
            contexts.append(getattr(plugin, "job_order_key_context", None))

        def compute(job: Job) -> tuple[Any, ...]:
            return (tuple([k(job) for k in keys]), job.creation, job.uid)

        known = [c for c in contexts if callable(c)]
        if len(known) < len(contexts):
            return compute
        return self.history.order_keys.keyed(
            self.cluster.jobs,
            tuple(c() for c in known),
            compute,
            self.ledger.touched_jobs,
            self.history.reported,
        )

    def job_order_context(self) -> tuple[Any, ...] | None:
        """The context of :meth:`job_sort_key` when its keys are a function of the job and this context
        alone (every JobOrder plugin offers ``job_order_key`` and ``job_order_key_context``), else None."""
        out = []
        for fn in self.fns("JobOrder"):
            plugin = getattr(fn, "__self__", None)
            context = getattr(plugin, "job_order_key_context", None)
            if not callable(getattr(plugin, "job_order_key", None)) or not callable(context):
                return None
            out.append(context())
        return tuple(out)

    def queue_key(self) -> Callable[[Queue], Any]:
        def cmp(a: Queue, b: Queue) -> int:
            return self._compare("QueueOrder", a, b) or _cmp((a.creation, a.name), (b.creation, b.name))

        return functools.cmp_to_key(cmp)

    def victim_queue_key(self) -> Callable[[Queue], Any]:
        """VictimQueueOrder; where no plugin tells two queues apart, the reverse of QueueOrder (Volcano's
        ``VictimQueueOrderFn`` falls back to ``!QueueOrderFn``): the queue served last gives first."""

        def cmp(a: Queue, b: Queue) -> int:
            return self._compare("VictimQueueOrder", a, b) or -(
                self._compare("QueueOrder", a, b) or _cmp((a.creation, a.name), (b.creation, b.name))
            )

        return functools.cmp_to_key(cmp)

    def task_key(self) -> Callable[[Task], Any]:
        def cmp(a: Task, b: Task) -> int:
            return self._compare("TaskOrder", a, b) or _cmp((a.creation, a.name), (b.creation, b.name))

        return functools.cmp_to_key(cmp)

    # -- gates ---------------------------------------------------------------------------------------
    def job_valid(self, job: Job) -> str | None:
        if job.invalid_reason:
            return job.invalid_reason
        for fn in self.fns("JobValid"):
            reason = fn(job)
            if reason:
                return reason
        return None

    def job_enqueueable(self, job: Job) -> bool:
        for tier in self.points["JobEnqueueable"]:
            permit = False
            for fn in tier:
                vote = fn(job)
                if vote is Vote.REJECT:
                    return False
                permit = permit or vote is Vote.PERMIT
            if permit:
                return True
        return True

    def job_ready(self, job: Job) -> bool:
        return all(fn(job) for fn in self.fns("JobReady"))

    def job_pipelined(self, job: Job) -> bool:
        return all(fn(job) for fn in self.fns("JobPipelined"))

    def job_starving(self, job: Job) -> bool:
        """Volcano's ``Session.JobStarving``: the first tier with a plugin that answers decides (AND
        inside it); no plugin means not starving."""
        for tier in self.points["JobStarving"]:
            if tier:
                return all(fn(job) for fn in tier)
        return False

    def allocatable(self, queue: Queue, task: Task) -> bool:
        return all(fn(queue, task) for fn in self.fns("Allocatable"))

    def allocatable_refusal(self, queue: Queue, task: Task) -> str | None:
        """None when Allocatable lets ``queue`` take ``task``; else the reason of the first plugin that
        refuses, in its own words (its ``allocatable_refusal(queue, task)``; a plugin without one is
        named), so a reason points at the real cause — a FIFO line, a capability — not at a guess."""
        for fn in self.fns("Allocatable"):
            if fn(queue, task):
                continue
            plugin = getattr(fn, "__self__", None)
            explain = getattr(plugin, "allocatable_refusal", None)
            why = explain(queue, task) if callable(explain) else None
            return (
                why or f"queue {queue.name!r} may not take pod {task.name} ({getattr(plugin, 'name', '?')})"
            )
        return None

    def overused(self, queue: Queue) -> bool:
        return any(fn(queue) for fn in self.fns("Overused"))

    def overused_reason(self, queue: Queue, task: Task) -> str | None:
        """Why an Overused ``queue`` holds ``task`` back, in the words of the first plugin that finds it
        Overused (its ``overused_reason(queue, task)``); None when that plugin says its share is not
        the cause (the queue deserves all the cluster has of what the pod asks for: the nodes are
        full) or no plugin finds the queue Overused."""
        for fn in self.fns("Overused"):
            if not fn(queue):
                continue
            explain = getattr(getattr(fn, "__self__", None), "overused_reason", None)
            if callable(explain):
                return explain(queue, task)
            return f"queue {queue.name!r} already holds its deserved share"
        return None

    def preemptive(self, queue: Queue, task: Task) -> bool:
        return all(fn(queue, task) for fn in self.fns("Preemptive"))

    # -- placement -----------------------------------------------------------------------------------
    def predicate(self, task: Task) -> np.ndarray:
        """Nodes ``task`` may go to, resources aside: AND of the plugins' masks, never a down node."""
        mask = ~self.cluster.nodes.down
        for fn in self.fns("Predicate"):
            mask = mask & fn(task)
        return mask

    def explain(self, task: Task) -> list[tuple[np.ndarray, str]]:
        out = [(self.cluster.nodes.down, "node is down")]
        for row in self.tiers:
            for p, pc in row:
                if callable(getattr(p, "explain", None)) and pc.enabled("enablePredicate"):
                    out.extend(p.explain(task))
        return out

    def hypernode_scores(self, job: Job, domains: Sequence[Domain]) -> np.ndarray:
        score = np.zeros(len(domains))
        for fn in self.fns("HyperNodeOrder"):
            score = score + fn(job, domains)
        return score

    # -- victims -------------------------------------------------------------------------------------
    def _victims(
        self, points: Sequence[str], preemptor: Task, candidates: list[Task], *extra: Any
    ) -> list[Task]:
        """Within a tier the answers intersect; the first tier with an answer decides. No answer at all
        (no plugin implements the point, or every one is switched off) allows no victim: Volcano's
        ``Preemptable``/``Reclaimable`` return nil then, and the action evicts nothing."""
        for name in points:
            for tier in self.points[name]:
                answered: set[int] | None = None
                for fn in tier:
                    got = fn(preemptor, candidates, *extra)
                    if got is None:
                        continue
                    ids = {id(t) for t in got}
                    answered = ids if answered is None else answered & ids
                if answered is not None:
                    return [t for t in candidates if id(t) in answered]
        return []

    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task]:
        return self._victims(["Preemptable"], preemptor, candidates)

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task]:
        return self._victims(["Reclaimable"], reclaimer, candidates)

    def unified_evictable(self, preemptor: Task, candidates: list[Task], action: str) -> list[Task]:
        """The gang-level victim filter (Volcano's UnifiedEvictable, asked by ``gangpreempt`` and
        ``gangreclaim`` only; ``action`` names the asking action); the legacy actions keep to
        Preemptable/Reclaimable."""
        return self._victims(["UnifiedEvictable"], preemptor, candidates, action)

    def victim_filter(self, preemptor: Job, victim: Job, action: str) -> bool:
        return all(fn(preemptor, victim, action) for fn in self.fns("VictimFilter"))

    def scenario_valid(
        self, preemptor: Job, victims: Sequence[Job], tasks: Sequence[Task], action: str
    ) -> bool:
        return all(fn(preemptor, victims, tasks, action) for fn in self.fns("ScenarioValidator"))

    def violations(self, tasks: Sequence[Task]) -> list[bool]:
        """For each of ``tasks`` (evicted together, in order): would its eviction break a disruption
        budget? OR over plugins that implement ``violating(tasks) -> list[bool]`` (the ``pdb`` plugin)."""
        out = [False] * len(tasks)
        for p in self.plugins():
            fn = getattr(p, "violating", None)
            if callable(fn):
                out = [a or b for a, b in zip(out, fn(tasks))]
        return out

    def resolvable(self, task: Task) -> np.ndarray:
        """Nodes where ``task`` could go once pods are evicted: AND over Predicate plugins of their
        ``resolvable(task)`` mask when they have one; a plugin that simulates (SimulatePredicate) is
        otherwise left to the dry run; any other plugin's predicate mask applies as is."""
        mask = ~self.cluster.nodes.down
        for row in self.tiers:
            for p, pc in row:
                if not pc.enabled("enablePredicate") or not callable(getattr(p, "predicate", None)):
                    continue
                if callable(getattr(p, "resolvable", None)):
                    mask = mask & p.resolvable(task)
                elif not callable(getattr(p, "simulate_predicate", None)):
                    mask = mask & p.predicate(task)
        return mask

    def victim_tasks(self) -> list[Task]:
        seen: dict[int, Task] = {}
        for fn in self.fns("VictimTasks"):
            for t in fn():
                seen.setdefault(id(t), t)
        return list(seen.values())

    # -- gang level (seed 000) -----------------------------------------------------------------------
    def gang_predicate(self, job: Job) -> str | None:
        for fn in self.fns("GangPredicate"):
            reason = fn(job)
            if reason:
                return reason
        return None

    def gang_search_space(self, job: Job, purpose: Purpose) -> list[Domain]:
        """The first plugin (config order) with a non-empty answer defines the space; with none, the
        whole cluster is the one domain."""
        for fn in self.fns("GangSearchSpace"):
            got = fn(job, purpose)
            if got:
                return list(got)
        return [Domain("cluster", np.ones(len(self.cluster.nodes), dtype=bool), None)]

    def subgroup_search_space(self, job: Job, subjob: Any, within: np.ndarray | None) -> list[Domain]:
        """The domains a Volcano sub-group (:class:`~corral.model.subjobs.SubJob`) of ``job`` may be
        placed in, inside ``within`` (the job's own domain; None: the cluster): the first plugin of the
        GangSearchSpace point that also answers ``subgroup_search_space`` with a non-empty list defines
        them (Volcano ``HyperNodeGradientForSubJobFn``); with none, ``within`` is the one domain."""
        for fn in self.fns("GangSearchSpace"):
            sub = getattr(getattr(fn, "__self__", None), "subgroup_search_space", None)
            if sub is not None:
                got = sub(job, subjob, within)
                if got:
                    return list(got)
        mask = np.ones(len(self.cluster.nodes), dtype=bool) if within is None else within
        return [Domain("cluster", mask, None)]

    def gang_victims(
        self, preemptor: Job, domain: Domain, candidates: list[Task], need: np.ndarray, action: str
    ) -> list[Task] | None:
        for fn in self.fns("GangVictimSelector"):
            got = fn(preemptor, domain, candidates, need, action)
            if got is not None:
                return got
        return None

    # -- simulation (seed 003) -----------------------------------------------------------------------
    def simulate_add(self, task: Task, node: int) -> None:
        for fn in self.fns("SimulateAddTask"):
            fn(task, node)

    def simulate_remove(self, task: Task, node: int) -> None:
        for fn in self.fns("SimulateRemoveTask"):
            fn(task, node)

    def simulate_predicate(self, task: Task, node: int) -> bool:
        return all(fn(task, node) for fn in self.fns("SimulatePredicate"))

    def simulate_allocatable(self, queue: Queue, task: Task) -> bool:
        return all(fn(queue, task) for fn in self.fns("SimulateAllocatable"))

    # -- reservation (seed 001) ----------------------------------------------------------------------
    def target_job(self, jobs: Sequence[Job]) -> Job | None:
        for fn in self.fns("TargetJob"):
            got = fn(jobs)
            if got is not None:
                return got
        return None

    def reserved_nodes(self, target: Job, locked: np.ndarray) -> np.ndarray | None:
        for fn in self.fns("ReservedNodes"):
            got = fn(target, locked)
            if got is not None:
                return got
        return None


def _cmp(a: Any, b: Any) -> int:
    return (a > b) - (a < b)
