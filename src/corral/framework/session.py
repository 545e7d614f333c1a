"""The Session: one scheduling cycle over a cluster (SPEC.md §2).

Opening a session instantiates the configured plugins tier by tier and builds, per extension point, the
plugins that declare it (:mod:`corral.framework.points`; DESIGN.md convention 1). The Session
dispatches: its answers at each point (:class:`~corral.framework.dispatch.Dispatch`) and its orders
(:class:`~corral.framework.ordering.Ordering`) combine the plugins' answers with the tier semantics
documented on each point in :mod:`corral.framework.extension` (Volcano's
``framework/session_plugins.go``). Actions run through :class:`~corral.framework.statement.Statement`\\ s;
committed operations become decisions, and closing the session adds podgroup updates and the reasons
why the jobs that did not start could not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from corral.errors import PluginError
from corral.framework import closing
from corral.framework.capacity import CapacityView
from corral.framework.closing import PENDING_LIKE
from corral.framework.decisions import Decisions
from corral.framework.dispatch import Dispatch
from corral.framework.extension import POINTS
from corral.framework.hints import ROW, CacheHints
from corral.framework.ledger import Ledger
from corral.framework.memo import ClusterHistory
from corral.framework.ordering import Ordering
from corral.framework.points import declares, layout
from corral.framework.queries import Queries
from corral.framework.statement import Statement
from corral.model import Cluster, Task, TaskStatus

if TYPE_CHECKING:
    from corral.framework.config import Config, Registry

__all__ = ["PENDING_LIKE", "Session"]

_UNSIGNED: Any = object()  # no signature computed yet (None is an answer)


class Session(Dispatch, Ordering, Queries):
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
        self.capacity = CapacityView(cluster, [], self.score_key)
        self.tiers = self._instantiate(config, registry)
        self._implementers: dict[str, list[Any]] = {}
        self._memo: dict[str, Any] = {}  # the queries' answers (framework/queries.py)
        self.members, self.points = self._bind_points()
        self._flat: dict[str, tuple[list[Any], list[Callable[..., Any]]]] = {}  # point -> (tiers, flat)
        self._signatures: dict[tuple[int, str], tuple[Any, ...] | None] = {}
        self._signers: dict[str, tuple[Callable[..., Any], ...] | Literal[False]] = {}
        self._constraints: dict[tuple[Any, ...], int] = {}  # the signatures' fragments, interned
        self.capacity.scorers = self.fns("NodeOrder")
        self._handlers = self.implementers("EventHandler")
        for row in self.tiers:
            for p, _ in row:
                p.on_session_open()

    def _instantiate(self, config: Config, registry: Registry) -> list[list[Any]]:
        """The configured plugins, tier by tier, as ``(plugin, PluginConf)`` pairs."""
        tiers: list[list[Any]] = []
        for tier in config.tiers:
            row = []
            for pc in tier:
                cls = registry.plugin_class(pc.name)
                if cls is None:
                    raise PluginError(f"plugin {pc.name!r} is not registered")
                row.append((cls(self, pc.args, dict(pc.switches)), pc))
            tiers.append(row)
        return tiers

    def _bind_points(self) -> tuple[dict[str, list[list[Any]]], dict[str, list[list[Callable[..., Any]]]]]:
        """Per point, the plugins that extend it tier by tier (``members``) and the bound first method
        of the point's Protocol of each (``points``); a point no plugin extends has none (most of the
        points, in most configurations: the layout is worked out once per configuration shape)."""
        members: dict[str, list[list[Any]]] = {}
        points: dict[str, list[list[Callable[..., Any]]]] = {}
        rows_of = layout(self.tiers)
        for point in POINTS:
            rows = rows_of[point.name]
            if not rows:
                members[point.name], points[point.name] = [], []
                continue
            tiers = [[self.tiers[ti][pi][0] for pi in idx] for ti, idx in rows]
            members[point.name] = tiers
            method = point.methods[0]
            points[point.name] = [[getattr(p, method) for p in tier] for tier in tiers]
        return members, points

    @property
    def decisions(self) -> Decisions:
        return self.ledger.decisions

    def close(self) -> Decisions:
        """Finish the cycle's decisions (:func:`corral.framework.closing.close`)."""
        return closing.close(self)

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

    # -- cache hints (framework/hints.py) ------------------------------------------------------------
    def signature(self, task: Task, point: str = "Predicate") -> tuple[Any, ...] | None:
        """``task``'s signature for reusing the answers of ``point`` (Predicate or NodeOrder):
        ``(request, constraints)`` — its request (``Task.klass.request``) and a number standing for every
        plugin's fragment, in the plugins' order (two pods have one number exactly when their fragments are
        equal, within the session); None when the pod has no class or some plugin of the point does not
        sign it (a plugin without CacheHints signs nothing)."""
        key = (id(task), point)
        sig = self._signatures.get(key, _UNSIGNED)
        if sig is not _UNSIGNED:
            return sig
        signers = self._signers.get(point)
        if signers is None:  # every implementer's sign_pod, or () when one of them gives no hints
            ps = self.implementers(point)
            signers = self._signers[point] = (
                tuple([p.sign_pod for p in ps]) if all(declares(p, CacheHints) for p in ps) else False
            )
        klass = task.klass
        sig = None
        if klass is not None and signers is not False:
            frags = [sign(task) for sign in signers]
            if None not in frags:
                # ``(request, constraints)``: the fragments are interned as a small number once per pod,
                # so the caches keyed by a signature hash two cheap values (bytes keep their hash)
                constraints = self._constraints.setdefault(tuple(frags), len(self._constraints))
                sig = (klass.request, constraints)
        self._signatures[key] = sig
        return sig

    def score_key(self, task: Task) -> tuple[Any, ...] | None:
        """The key NodeOrder scores of ``task`` are kept under (row by row: CapacityView), or None when
        they must be computed afresh: some NodeOrder plugin does not sign the pod, or scores a node
        from more than its own row."""
        key = (id(task), "score")
        if key not in self._signatures:
            sig = self.signature(task, "NodeOrder")
            if sig is not None and any(p.score_scope(task) != ROW for p in self.implementers("NodeOrder")):
                sig = None
            self._signatures[key] = sig
        return self._signatures[key]

    def mask_key(self, task: Task) -> tuple[Any, ...] | None:
        """The key ``task``'s Predicate answers may be shared under: its signature, with its labels when
        it has any (other pods' anti-affinity terms match on them); None when some Predicate plugin
        does not sign it."""
        key = (id(task), "mask")
        if key not in self._signatures:
            sig = self.signature(task)
            if sig is not None and task.labels:
                sig = (sig, tuple(sorted(task.labels.items())))
            self._signatures[key] = sig
        return self._signatures[key]

    def predicates_signed(self) -> bool:
        """Does every Predicate plugin give cache hints (so that some pods may be signed)?"""
        return all(declares(p, CacheHints) for p in self.implementers("Predicate"))
