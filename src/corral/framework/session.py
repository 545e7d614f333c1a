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
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.errors import PluginError
from corral.framework import jobindex
from corral.framework.decisions import (
    Bind,
    Decisions,
    Eviction,
    NodeLock,
    Nomination,
    PodGroupUpdate,
    Unschedulable,
)
from corral.framework.extension import POINTS, Domain, Purpose, Vote
from corral.framework.orderkeys import forget_keys, kept_keys
from corral.framework.statement import Op, Statement
from corral.model import ALLOCATED_STATES, Cluster, Job, PodGroupPhase, Queue, Task, TaskStatus
from corral.model.resources import EPS

if TYPE_CHECKING:
    from corral.framework.config import Config, Registry

__all__ = ["PENDING_LIKE", "Session"]

#: Task states a placement action considers: waiting, or nominated by an earlier cycle.
PENDING_LIKE = frozenset({TaskStatus.PENDING, TaskStatus.PIPELINED})


_LAYOUTS: dict[tuple[Any, ...], list[Any]] = {}
#: A cache refresh reads the rows changed since it was computed from the touch log up to this many
#: entries; past it, one comparison of every row's stamp is cheaper.
_LOGGED_ROWS = 256


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


def _method(point: Any) -> str:
    return next(n for n in point.protocol.__dict__ if not n.startswith("_"))


class Session:
    """One cycle. ``now`` is seconds since the epoch; ``cycle`` numbers the decisions.

    ``explain`` (the default; ``report_reasons`` on the session) reports why each job that did not start
    could not (the ``unschedulable`` decisions). Without it (the simulator's cycles) the cycle leaves out
    jobs known to fail (:mod:`corral.framework.skipcache`) and reports reasons only for the jobs it
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
    ) -> None:
        self.cluster = cluster
        self.report_reasons = explain
        self.config = config
        self.registry = registry
        self.now = now
        self.cycle = cycle
        self.version = 0
        self.decisions = Decisions()
        # job uid -> why it did not start this cycle (a callable is formatted when the session closes)
        self.reasons: dict[str, str | Callable[[], str]] = {}
        self.annotations: dict[str, dict[str, str]] = {}
        self.kept: list[Statement] = []  # pipelined jobs' statements, held to the end
        # pods changed by the session's operations: id -> (task, status, nomination before the first)
        self.first_state: dict[int, tuple[Task, TaskStatus, int]] = {}
        self.touched_jobs: set[str] = set()  # uids of their jobs
        self.moved_jobs: set[str] = set()  # uids of jobs whose phase the session moved
        self.nominated_domains: dict[str, str] = {}  # job uid -> domain name (gang eviction)
        self.lock_version = 0  # bumps whenever node locks change (seed 001)
        self.action = ""
        self.actions = [a.name for a in config.actions]
        # True while a gang eviction action lists its candidate victims: a cumulative victim rule (the
        # queue rule of proportion/capacity) then answers with every candidate, and is asked again over
        # each concrete plan's victims in plan order (SPEC.md §3.3)
        self.listing_victims = False
        # the jobs indexed by what the cycle looks for, kept across cycles where the cluster tracks its
        # jobs' changes (the simulator); None: walk every job
        self.index = jobindex.kept(cluster)
        index = self.index
        self._phase0 = index.phase if index is not None else {uid: j.phase for uid, j in cluster.jobs.items()}
        # Nominations made by earlier cycles reserve node capacity (the ``pipelined`` column) but, as in
        # Volcano where such pods open the session as Pending, they do not count as held by their job or
        # queue until this session places them again.
        self.open_nominations: dict[int, Task] = (
            index.open_nominations(cluster.jobs)
            if index is not None
            else {id(t): t for t in cluster.tasks.values() if t.status is TaskStatus.PIPELINED}
        )
        # per-row change stamps: caches of fits and scores recompute only the rows changed since
        self.row_version = np.zeros(len(cluster.nodes), dtype=np.int64)
        # ...and the log of touches (row, version), so a refresh finds the few rows changed since an
        # entry was computed without comparing every row's stamp
        self._touched_rows: list[int] = []
        self._touched_at: list[int] = []
        self._fit_cache: dict[tuple[Any, ...], list[Any]] = {}
        self._score_cache: dict[tuple[Any, ...], list[Any]] = {}
        self._free_cache: dict[tuple[Any, ...], list[Any]] = {}
        self._need_cache: dict[tuple[Any, ...], tuple[list[int], list[float]]] = {}
        self.no_fit_cache: dict[tuple[Any, ...], str] = {}  # (class, state stamps) -> why it fits nowhere
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
        self._flat: dict[
            str, tuple[list[Any], list[Callable[..., Any]]]
        ] = {}  # point -> (its tiers, flattened)
        self._cols_cache: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._local_cache: dict[tuple[Any, ...], bool] = {}
        self._handlers = [
            p
            for row in self.tiers
            for p, _ in row
            if callable(getattr(p, "on_allocate", None)) and callable(getattr(p, "on_deallocate", None))
        ]
        for row in self.tiers:
            for p, _ in row:
                p.on_session_open()

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

    def request_cols(self, task: Task) -> tuple[np.ndarray, np.ndarray]:
        """``(cols, amounts)``: the resource columns ``task`` requests and how much of each (cached per
        equivalence class: this is on the path of every placement)."""
        key = task.klass
        got = self._cols_cache.get(key) if key else None
        if got is None:
            cols = np.flatnonzero(task.request)
            got = (cols, task.request[cols])
            if key:
                self._cols_cache[key] = got
        return got

    def job_uids(self) -> list[str]:
        """The uids of the cluster's jobs, sorted: the order every action walks them in (sorted once per
        session; no action adds or removes a job; do not modify the returned list)."""
        got = self.__dict__.get("_job_uids")
        if got is None:
            got = self.__dict__["_job_uids"] = (
                self.index.uids if self.index is not None else sorted(self.cluster.jobs)
            )
        return got

    def set_phase(self, job: Job, phase: PodGroupPhase) -> None:
        """Move ``job``'s podgroup to ``phase`` (every phase change in a session goes through here, so
        the session knows which jobs moved without comparing every job's phase when it closes)."""
        job.phase = phase
        self.moved_jobs.add(job.uid)

    def statement(self) -> Statement:
        return Statement(self)

    def touch(self, *rows: int) -> None:
        """Node rows whose state just changed (called by the Statement on every apply and revert)."""
        self.version += 1
        version = self.version
        for r in rows:
            if r >= 0:
                self.row_version[r] = version
                self._touched_rows.append(r)
                self._touched_at.append(version)

    def _refresh(
        self, cache: dict[Any, Any], key: tuple[Any, ...], compute: Callable[[np.ndarray | None], np.ndarray]
    ) -> np.ndarray:
        """A per-node array cached under ``key``; rows touched since it was computed are recomputed
        (found in the touch log when they are few: the cost follows the rows that changed)."""
        entry = cache.get(key)
        if entry is None:
            arr = compute(None)
            cache[key] = [arr, self.version]
            return arr
        arr, at = entry
        if at != self.version:
            start = bisect_right(self._touched_at, at)
            if len(self._touched_at) - start <= _LOGGED_ROWS:
                dirty = np.array(sorted(set(self._touched_rows[start:])), dtype=np.intp)
            else:
                dirty = np.flatnonzero(self.row_version > at)
            if dirty.size:
                arr[dirty] = compute(dirty)
            entry[1] = self.version
        return arr

    def counted(self, task: Task) -> bool:
        """Does ``task`` hold resources for its job and queue (what the events report)?"""
        return task.status in ALLOCATED_STATES or (
            task.status is TaskStatus.PIPELINED and id(task) not in self.open_nominations
        )

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

    def record(self, ops: Sequence[Op]) -> None:
        """Turn committed operations into decisions (called by ``Statement.commit``)."""
        names = self.cluster.nodes.names
        for op in ops:
            t = op.task
            if op.kind == "allocate":
                self.decisions.binds.append(Bind(t.key, names[op.node], self.cycle))
            elif op.kind == "pipeline":
                self.decisions.nominations.append(Nomination(t.key, names[op.node], self.cycle))
            elif op.kind == "clear":
                # a nomination with an empty node clears nominatedNodeName (SPEC.md §4, added meaning)
                self.decisions.nominations.append(Nomination(t.key, "", self.cycle))
            else:
                preemptor = op.preemptor
                self.decisions.evictions.append(
                    Eviction(t.key, names[op.node], op.action, preemptor, self.cycle)
                )

    def keep(self, stmt: Statement) -> None:
        """Hold a pipelined job's placement for the rest of the cycle; it is nominated at close."""
        self.kept.append(stmt)

    def unschedulable(self, job: Job, reason: str | Callable[[], str]) -> None:
        """Why ``job`` did not start; a callable is formatted only when the session closes."""
        self.reasons[job.uid] = reason

    def annotate(self, job: Job, key: str, value: str) -> None:
        job.annotations[key] = value
        self.annotations.setdefault(job.uid, {})[key] = value

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
        return kept_keys(self.cluster, tuple(c() for c in known), compute, self.touched_jobs)

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

    def free(self, task: Task, *, future: bool = False, rows: np.ndarray | None = None) -> np.ndarray:
        """What each node (or each of ``rows``) can give ``task`` now (``future``: once releasing pods
        are gone), over the columns ``task`` requests. Binds never take capacity promised to a
        nomination: "now" is the smaller of idle and future idle (SPEC.md §5, no over-commit by binds and
        nominations)."""
        nodes = self.cluster.nodes
        cols, own = self.request_cols(task)
        if rows is None:
            idle = nodes.allocatable[:, cols] - nodes.used[:, cols]
            fut = idle + nodes.releasing[:, cols] - nodes.pipelined[:, cols]
        else:  # few rows: one (rows x cols) index per column
            at = (rows[:, None], cols)
            idle = nodes.allocatable[at] - nodes.used[at]
            fut = idle + nodes.releasing[at] - nodes.pipelined[at]
        if task.status is TaskStatus.PIPELINED and task.nominated >= 0:
            # its own reservation is its to use
            if rows is None:
                fut[task.nominated] += own
            else:
                fut[rows == task.nominated] += own
        return fut if future else np.minimum(fut, idle)

    def free_all(self, task: Task, *, future: bool = False) -> np.ndarray:
        """:meth:`free` over every node, cached per equivalence class as :meth:`fits` is (do not modify
        the returned array)."""
        if not task.klass or (task.status is TaskStatus.PIPELINED and task.nominated >= 0):
            return self.free(task, future=future)
        return self._refresh(
            self._free_cache, (task.klass, future), lambda rows: self.free(task, future=future, rows=rows)
        )

    def fits(self, task: Task, *, future: bool = False) -> np.ndarray:
        """Boolean mask over nodes: does ``task``'s request fit (cached per equivalence class; do not
        modify the returned array)."""

        def compute(rows: np.ndarray | None) -> np.ndarray:
            if rows is not None and len(rows) == 1:
                return np.array([self._fits_row(task, int(rows[0]), future)])
            fits: np.ndarray = self.free(task, future=future, rows=rows) >= self.request_cols(task)[1] - EPS
            return np.all(fits, axis=1)

        if task.status is TaskStatus.PIPELINED and task.nominated >= 0:
            return compute(None)
        return self._refresh(self._fit_cache, (task.klass, future), compute)

    def _fits_row(self, task: Task, row: int, future: bool) -> bool:
        """:meth:`fits` on one node, in plain floats: the one row a placement changed costs a few
        operations rather than a dozen array calls (the same IEEE arithmetic, in the same order, as
        :meth:`free`; only for a task that holds no nomination of its own)."""
        nodes = self.cluster.nodes
        cols, need = self._need_list(task)
        alloc, used = nodes.allocatable[row].tolist(), nodes.used[row].tolist()
        releasing, pipelined = nodes.releasing[row].tolist(), nodes.pipelined[row].tolist()
        for c, n in zip(cols, need):
            idle = alloc[c] - used[c]
            fut = idle + releasing[c] - pipelined[c]
            if not (fut if future or fut < idle else idle) >= n:
                return False
        return True

    def _need_list(self, task: Task) -> tuple[list[int], list[float]]:
        key = task.klass
        got = self._need_cache.get(key) if key else None
        if got is None:
            cols, own = self.request_cols(task)
            got = (cols.tolist(), (own - EPS).tolist())
            if key:
                self._need_cache[key] = got
        return got

    def _scores_cacheable(self, task: Task) -> bool:
        key = task.klass
        if key:
            got = self._local_cache.get(key)
            if got is not None:
                return got
        ok = True
        for p in self.plugins():
            local = getattr(p, "scores_row_local", None)
            if callable(local) and not local(task):
                ok = False
                break
        if key:
            self._local_cache[key] = ok
        return ok

    def node_scores(self, task: Task, rows: np.ndarray) -> np.ndarray:
        """Summed NodeOrder scores for ``rows``. A plugin whose score for a node depends on other nodes
        says so through ``scores_row_local(task) -> False``; otherwise scores are cached per class."""
        if not self.fns("NodeOrder"):
            return np.zeros(len(rows))
        if not self._scores_cacheable(task):
            return self._sum_scores(task, rows)
        return self._all_scores(task)[rows]

    def _sum_scores(self, task: Task, sub: np.ndarray | None) -> np.ndarray:
        rr = np.arange(len(self.cluster.nodes)) if sub is None else sub
        fns = self.fns("NodeOrder")
        score = np.array(fns[0](task, rr), dtype=float)  # a copy: the caches write into it
        for fn in fns[1:]:
            score = score + fn(task, rr)
        return score

    def _all_scores(self, task: Task) -> np.ndarray:
        """Every node's summed score for ``task``'s class (cached; do not modify)."""
        return self._refresh(self._score_cache, (task.klass,), lambda sub: self._sum_scores(task, sub))

    def best_row(self, task: Task, mask: np.ndarray) -> int:
        """The best node in ``mask`` by summed NodeOrder scores; ties go to the lowest row (name)."""
        if not self.fns("NodeOrder") or not self._scores_cacheable(task):
            rows = np.flatnonzero(mask)
            return int(rows[int(np.argmax(self.node_scores(task, rows)))]) if rows.size else -1
        row = int(np.argmax(np.where(mask, self._all_scores(task), -np.inf)))
        return row if mask[row] else -1  # argmax lands outside the mask only when it is empty

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

    def lock_nodes(self, rows: Sequence[int], job: str) -> None:
        """Lock node ``rows`` for ``job`` ("ns/podgroup"), or release them (``job`` empty): the state
        changes at once and each row becomes a ``node_locks`` decision."""
        nodes = self.cluster.nodes
        for r in rows:
            nodes.locked_for[r] = job
            self.decisions.node_locks.append(NodeLock(nodes.names[r], job, self.cycle))
        if len(rows):
            self.lock_version += 1

    # -- close ---------------------------------------------------------------------------------------
    def close(self) -> Decisions:
        """Nominate held pipelined placements, emit podgroup updates and unschedulable reasons."""
        names = self.cluster.nodes.names
        for stmt in self.kept:
            for op in stmt.ops:
                t = op.task  # still where the held placement put it (a later action may move it)
                if (t.status is TaskStatus.PIPELINED and t.nominated == op.node) or (
                    t.status is TaskStatus.ALLOCATED and t.node == op.node
                ):
                    self.decisions.nominations.append(Nomination(t.key, names[op.node], self.cycle))
            stmt.closed = True
        jobs = self.cluster.jobs
        for uid in self._closing():
            self._close_job(jobs[uid])
        jobindex.note_closed(self.cluster, self.moved_jobs)  # made Running by _close_job
        for p in self.plugins():
            p.on_session_close()
        self.decisions.touched = list(self.first_state.values())
        return self.decisions

    def _closing(self) -> list[str]:
        """The jobs :meth:`_close_job` must look at, sorted. Every job when reasons are reported or
        when the cluster does not track its jobs' changes (``Cluster.changed_jobs`` None); otherwise
        only those that can have something to say: a pod changed by this session, a phase moved, an
        annotation or a reason given, or a change since the last session closed (the simulator's
        events). Any other job was looked at by an earlier close in the same state, which made it
        Running if it was ready (JobReady is a function of the job's pods), so it has nothing new."""
        jobs, changed = self.cluster.jobs, self.cluster.changed_jobs
        if changed is not None:
            forget_keys(self.cluster, changed, self.touched_jobs)
        if changed is None or self.report_reasons:
            if changed is not None:
                jobindex.note_closed(self.cluster, changed | self.touched_jobs | self.moved_jobs)
                changed.clear()
            return self.job_uids()
        if self.index is not None:
            picked = set(self.moved_jobs)
        else:
            phase0 = self._phase0
            picked = {uid for uid, job in jobs.items() if job.phase is not phase0.get(uid)}
        picked.update(changed, self.reasons, self.annotations, self.touched_jobs)
        changed.clear()
        jobindex.note_closed(self.cluster, picked)
        return sorted(uid for uid in picked if uid in jobs)

    def _close_job(self, job: Job) -> None:
        if not job.tasks and not job.invalid_reason:
            return
        if (
            job.phase is not PodGroupPhase.COMPLETED
            and job.phase is not PodGroupPhase.RUNNING
            and job.tasks
            and job.ready_count() >= job.min_member
            and self.job_ready(job)
            and not job.invalid_reason
        ):
            self.set_phase(job, PodGroupPhase.RUNNING)
        notes = self.annotations.get(job.uid, {})
        if not job.synthetic and (job.phase is not self._phase0.get(job.uid) or notes):
            self.decisions.podgroups.append(
                PodGroupUpdate(job.uid, job.phase.value, dict(sorted(notes.items())), self.cycle)
            )
        if not self.report_reasons and job.uid not in self.reasons:
            return  # a job skipped as known to fail keeps the reason it had
        waiting = [t for t in job.tasks if t.status in PENDING_LIKE and t.managed]
        reason = self.reasons.get(job.uid)
        if callable(reason):
            reason = reason()
        nominated = sum(1 for t in waiting if t.status is TaskStatus.PIPELINED)
        if reason and nominated and self.job_pipelined(job) and not reason.startswith("waiting for"):
            reason = (
                f"waiting for resources being released: {nominated} pod(s) nominated, "
                f"{job.ready_count()} of {job.min_member} placed"
            )
        if job.invalid_reason:
            reason = job.invalid_reason
        if waiting and reason:  # a ready job's reason is about its further pods (allocate)
            self.decisions.unschedulable.append(Unschedulable(job.uid, reason, self.cycle))


def _cmp(a: Any, b: Any) -> int:
    return (a > b) - (a < b)
