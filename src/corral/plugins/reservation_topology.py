"""The nodes ``reservation`` locks for a target with topology constraints (split from
:mod:`corral.plugins.reservation`).

A lock is only worth its cost when the target can start on the locked nodes. For a target whose job or
sub-groups carry topology constraints — the podgroup's ``networkTopology`` (or a KAI required level),
Volcano ``subGroupPolicy[].networkTopology``, KAI ``subGroups[].topologyConstraint`` — the most idle
nodes of the cluster are in general spread over domains none of which can hold it. So the lock is
chosen as allocate would place the target: one domain of the job (its search space with purpose
Evict: the plugin's top ``evictDomains``, cheapest to enter first), inside it one domain per
sub-group with its own constraint (Volcano: the sub-group's search space within the job domain; KAI:
a domain of the sub-group's required level within its parent's, widest constraint first), the
sub-group's waiting pods packed whole, first fit, onto the best nodes of that domain (the plugin's
node order: most idle, or with the plan the earliest expected to hold a pod of the target) by their
allocatable capacity less what the target's own placed pods hold. The nodes the pods land on are
the lock. Among the job's domains the lock whose nodes are expected to hold the target earliest (with
the plan), then the most idle, then the first in the search space's order, wins.

Volcano's removed reservation plugin locked nodes with no regard to topology (its
``reservedNodesFn`` takes the most idle node); corral goes further so that a lock never waits on
nodes the target's constraints forbid it to use together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from corral.framework.extension import GangSearchSpace, Purpose
from corral.framework.points import declares
from corral.framework.reservation import waiting
from corral.model import ALLOCATED_STATES, Job, Task
from corral.model.resources import EPS

if TYPE_CHECKING:
    from corral.framework.session import Session

__all__ = ["TopologyLocks", "could_go", "has_topology"]

#: domains tried per scope (the job's, each sub-group's)
MAX_DOMAINS = 16

#: ``domains(within)``: the node masks a scope may use inside ``within``, best first
Domains = Callable[[np.ndarray], list[np.ndarray]]


@dataclass
class _Scope:
    """Pods that must share one domain: its own pods, and child scopes inside the same domain."""

    domains: Domains
    pods: list[Task] = field(default_factory=list)
    children: list[_Scope] = field(default_factory=list)


def has_topology(job: Job) -> tuple[bool, bool]:
    """(any topology constraint, any hard one) over the job and its sub-groups."""
    modes = [job.topology_mode] + [sj.topology_mode for sj in job.subjobs]
    tree = job.subgroup_tree
    if tree is not None:
        modes += [g.constraint.mode for g in tree.groups.values() if g.constraint is not None]
    modes = [m for m in modes if m]
    return bool(modes), "hard" in modes


def could_go(session: Session, task: Task) -> np.ndarray:
    """The live nodes ``task`` could ever go to: every Predicate plugin's mask but the topology
    plugins' (GangSearchSpace: the lock holds their constraints itself, and a KAI sub-group's Predicate
    narrows to the one domain it would start in now), its request within the node's allocatable."""
    nodes = session.cluster.nodes
    out = ~nodes.down
    for p in session.implementers("Predicate"):
        if not declares(p, GangSearchSpace):
            out = out & p.predicate(task)
    cols, amounts = session.capacity.request_cols(task)
    return out & (nodes.allocatable[:, cols] >= amounts - EPS).all(axis=1)


class TopologyLocks:
    """Lock choice for one session; ``order(rows)`` returns node rows best first."""

    def __init__(self, session: Session, order: Callable[[np.ndarray], np.ndarray]) -> None:
        self.session = session
        self.order = order
        self._masks: dict[object, np.ndarray] = {}

    # -- the scopes ---------------------------------------------------------------------------------
    def _scopes(self, job: Job, pods: list[Task]) -> _Scope:
        session = self.session
        n = len(session.cluster.nodes)

        def job_domains(within: np.ndarray) -> list[np.ndarray]:
            if not job.topology_mode:
                return [within]
            return [d.mask & within for d in session.gang_search_space(job, Purpose.EVICT)]

        root = _Scope(job_domains)
        if job.subjobs:
            for sj in job.subjobs:
                mine = [t for t in pods if t.subjob is sj]
                if not sj.topology_mode or not mine:
                    continue

                def sub_domains(within: np.ndarray, sj: object = sj) -> list[np.ndarray]:
                    got = session.subgroup_search_space(job, sj, within, Purpose.EVICT)
                    return [d.mask & within for d in got]

                root.children.append(_Scope(sub_domains, mine))
            held = {id(t) for c in root.children for t in c.pods}
            root.pods = [t for t in pods if id(t) not in held]
        elif job.subgroup_tree is not None:
            tree = job.subgroup_tree
            for name in tree.top():
                root.children.append(self._kai_scope(job, name, pods, n))
            root.pods = [t for t in pods if not t.role or t.role not in tree.groups]
        else:
            root.pods = pods
        return root

    def _kai_scope(self, job: Job, name: str, pods: list[Task], n: int) -> _Scope:
        """A KAI sub-group: its leaf's pods, or its children; a domain of its required level."""
        tree = job.subgroup_tree
        assert tree is not None
        g = tree.groups[name]
        c = g.constraint
        hx = self.session.cluster.hypernodes.index() if self.session.cluster.hypernodes else None
        placed = np.zeros(n, dtype=bool)
        leaves = tree.leaves_under(name)
        for t in job.tasks:
            if t.role in leaves and t.status in ALLOCATED_STATES and t.node >= 0:
                placed[t.node] = True

        def domains(within: np.ndarray) -> list[np.ndarray]:
            if c is None or c.mode != "hard" or hx is None:
                return [within]
            level = np.flatnonzero(hx.of_family(c.family) & (hx.tier == c.tier))
            out = []
            for h in level.tolist():
                mask = hx.nodes[h].mask
                if (placed & ~mask).any():
                    continue  # its placed pods pin the domain
                if (mask & within).any():
                    out.append(mask & within)
            return out

        scope = _Scope(domains)
        if g.leaf:
            scope.pods = [t for t in pods if t.role == name]
        else:
            scope.children = [self._kai_scope(job, child, pods, n) for child in g.children]
        return scope

    # -- packing ------------------------------------------------------------------------------------
    def _pod_mask(self, task: Task) -> np.ndarray:
        """Where ``task`` could ever go — the predicates of every plugin but the topology plugins
        (GangSearchSpace: their constraints are what the scopes hold; a KAI sub-group's Predicate
        narrows to the one domain it would start in now), its request within allocatable — inside the
        universe the lock may use."""
        key = ("class", task.klass) if task.klass else ("pod", id(task))
        got = self._masks.get(key)
        if got is None:
            got = self._masks[key] = could_go(self.session, task)
        return got

    def _pack(self, pods: list[Task], within: np.ndarray, cap: np.ndarray) -> np.ndarray | None:
        """Place ``pods`` first fit onto the best nodes of ``within`` (``cap`` is charged); the nodes
        used, or None when one does not fit."""
        used = np.zeros(len(cap), dtype=bool)
        if not pods:
            return used
        rows = self.order(np.flatnonzero(within))
        for t in pods:
            fit = self._pod_mask(t)[rows] & (cap[rows] >= t.request - EPS).all(axis=1)
            if not fit.any():
                return None
            r = int(rows[int(np.argmax(fit))])
            cap[r] -= t.request
            used[r] = True
        return used

    def _place(
        self, scope: _Scope, within: np.ndarray, cap: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The first domain of ``scope`` inside ``within`` where its children and its pods all fit:
        (capacity left, nodes used), or None."""
        for mask in scope.domains(within)[:MAX_DOMAINS]:
            got = self._fill(scope, mask, cap)
            if got is not None:
                return got
        return None

    def _fill(self, scope: _Scope, mask: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        left = cap.copy()
        used = np.zeros(len(cap), dtype=bool)
        for child in scope.children:
            got = self._place(child, mask, left)
            if got is None:
                return None
            left, more = got
            used |= more
        more_pods = self._pack(scope.pods, mask, left)
        if more_pods is None:
            return None
        return left, used | more_pods

    def fit(self, job: Job, pods: list[Task], cap: np.ndarray) -> np.ndarray | None:
        """The capacity ``cap`` (nodes × resources, -inf where the pods may not go) leaves once ``pods``
        of ``job`` are packed as allocate would place them under its constraints — inside the first
        domain of the job (its search space, purpose Evict) where they all fit, each sub-group inside
        one of its domains, first fit onto the nodes in ``order`` — or None when no domain holds them
        (the reservation plan's date, :mod:`corral.plugins.reservation`)."""
        universe = np.isfinite(cap).all(axis=1)
        root = self._scopes(job, pods)
        for mask in root.domains(universe.copy())[:MAX_DOMAINS]:
            got = self._fill(root, mask & universe, cap)
            if got is not None:
                return got[0]
        return None

    # -- the lock -----------------------------------------------------------------------------------
    def eligible(self, job: Job) -> np.ndarray:
        """The nodes where some waiting pod of ``job`` could ever go (:meth:`_pod_mask`)."""
        out = np.zeros(len(self.session.cluster.nodes), dtype=bool)
        for t in waiting(job):
            out |= self._pod_mask(t)
        return out

    def choose(
        self,
        job: Job,
        universe: np.ndarray,
        avail: np.ndarray | None,
        score: np.ndarray,
        pods: list[Task] | None = None,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The nodes to lock among ``universe`` and the job domain they lie in, or None when no domain
        of the job can hold its waiting pods under its constraints."""
        nodes = self.session.cluster.nodes
        cap = nodes.allocatable.copy()
        for t in job.tasks:
            if t.status in ALLOCATED_STATES and t.node >= 0:
                cap[t.node] -= t.request  # the target's own placed pods keep their room
        cap[~universe] = -np.inf
        root = self._scopes(job, waiting(job) if pods is None else pods)
        best: tuple[tuple[float, float, int], np.ndarray, np.ndarray] | None = None
        for i, mask in enumerate(root.domains(universe.copy())[:MAX_DOMAINS]):
            got = self._fill(root, mask & universe, cap)
            if got is None or not got[1].any():
                continue
            used = got[1]
            when = float(avail[used].max()) if avail is not None else 0.0
            key = (when, -float(score[used].sum()), i)
            if best is None or key < best[0]:
                best = (key, used, mask & universe)
        return None if best is None else (best[1], best[2])

    def lock(
        self,
        target: Job,
        locked: np.ndarray,
        score: np.ndarray,
        avail: np.ndarray | None,
        mode: str,
        want: int,
        current_start: Callable[[], float],
        needed: list[Task] | None = None,
    ) -> np.ndarray | None:
        """The ReservedNodes answer for ``target``: ``multi-node`` keeps the ``locked`` nodes while they
        can hold the target under its constraints (and, with the plan, while the chosen nodes are not
        expected to start it before ``current_start()``), else locks the chosen nodes — topped up to
        ``want`` with the best other nodes of the same job domain; ``single-node`` adds the best chosen
        node not yet locked. Room is sought for every waiting pod, else (an elastic gang) for the
        ``needed`` ones it starts with. None when no domain of the job can hold them."""
        eligible = self.eligible(target)
        pods = waiting(target)
        got = self.choose(target, eligible, avail, score, pods)
        if got is None and needed and len(needed) < len(pods):
            pods = needed  # an elastic gang: room for the pods it needs to start
            got = self.choose(target, eligible, avail, score, pods)
        if got is None:
            return None
        fresh, domain = got
        if mode == "single-node":
            rows = np.flatnonzero(fresh & ~locked)
            out = locked.copy()
            if rows.size:
                out[self.order(rows)[0]] = True
            return out
        earlier = avail is not None and bool(avail[fresh].max() < current_start() - 1e-6)
        if (
            not earlier
            and locked.any()
            and self.choose(target, eligible & locked, avail, score, pods) is not None
        ):
            return locked
        short = want - int(np.count_nonzero(fresh))
        if short > 0:
            fresh = fresh.copy()
            fresh[self.order(np.flatnonzero(domain & eligible & ~fresh))[:short]] = True
        return fresh
