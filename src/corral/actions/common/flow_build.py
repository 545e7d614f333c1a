"""Building the ``flow`` action's network from the session (seed 004, SPEC.md §3.6): equivalence classes,
capacities, aggregators and the integer costs of each cost model. The network itself and its solve live in
:mod:`corral.solvers.flow_network`.

- **Groups**: a job's waiting pods of one equivalence class (``Task.klass``: same request and
  constraints), further split by the node a pod is nominated to and, for ``quincy``, by its preferred
  node set. Supply is the group's pod count.
- **Capacities**: per class, the predicate mask (all Predicate plugins, as allocate asks them) times how
  many pods of the class fit on each node now (``Session.free``, which never hands out capacity promised
  to a nomination); what fits only once releasing pods are gone is a second, dearer arc whose pods are
  pipelined (nominated), as allocate does.
- **Aggregators**: one cluster aggregator per class; for topology, one per (class, HyperNode) that a gang
  uses. A gang goes to one chosen domain and its ancestors, each tier dearer than the one below, then
  the cluster (seed 000's "stay inside one leaf when you can"); a hard ``networkTopology`` never gets an
  arc outside the chosen domain's ancestors of an allowed tier.
- **Costs** (all integers, so OR-Tools' optimum is exact): a placement path costs at most
  ``PLACE_MAX``; leaving a pod waiting costs ``u_j`` = priority rank x ``PRIO_STEP`` + pod size x
  (``PLACE_MAX`` + 1 + wait steps), so placing always beats waiting and a pod of higher priority is
  worth more than any pod of lower priority; among equal priorities each unit of capacity is worth
  the same plus what its job has waited, so the round places as much as it can and, where pods
  compete, the older job's pods first. A gang's bypass costs ``p_j = u_j x k_j`` per missing pod: a pod short of minMember is as bad
  as the whole minimum left waiting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corral.framework.extension import Domain, Purpose
from corral.framework.session import Session
from corral.model import Job, Task, TaskStatus
from corral.model.resources import EPS, PODS
from corral.solvers.flow_network import FlowNetwork

__all__ = ["PLACE_MAX", "PREFERRED_NODES", "Built", "build_network"]

#: Pod annotation naming preferred nodes (comma-separated), used by ``costModel: quincy``.
PREFERRED_NODES = "corral.io/preferred-nodes"
PLACE_MAX = 1000  # the dearest placement path
SCORE = 100  # a cost model's node cost lies in 0..SCORE
PIPE_COST = 300  # placing onto capacity still being released
TIER_STEP = 100  # each tier a gang spans above its chosen domain
QUINCY_AGG = 150  # the cluster aggregator when a pod has preferred nodes
CONTENTION = 50  # the contention term on a class's node arcs (:func:`_contention`)
NOMINATED_ELSEWHERE = 100  # a nominated pod moving off its nominated node
SIZE_MAX = 64  # pod size in units of 1/64 of the largest node
WAIT_CAP = 1000
PRIO_STEP = SIZE_MAX * (PLACE_MAX + 1 + WAIT_CAP) + 1
_I64 = np.int64


@dataclass
class Built:
    """The network and what its indices mean."""

    net: FlowNetwork
    groups: list[list[Task]]  # tasks of each group, in task order
    agg_names: list[tuple[int, str]] = field(default_factory=list)  # (class, domain) per aggregator


class _Classes:
    """Per equivalence class: a representative task, demand and the per-node capacity (now, pipelined)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.index: dict[object, int] = {}
        self.reps: list[Task] = []
        self.demand: list[int] = []
        self._room: dict[tuple[int, int], np.ndarray] = {}
        self._owner: dict[int, np.ndarray] = {}

    def of(self, task: Task, count: int) -> int:
        key = task.klass or ("task", task.uid)
        c = self.index.get(key)
        if c is None:
            c = self.index[key] = len(self.reps)
            self.reps.append(task)
            self.demand.append(0)
        self.demand[c] += count
        return c

    def room(self, c: int, tier: int) -> np.ndarray:
        """Pods of class ``c`` that fit now in each HyperNode of ``tier`` (cached per round)."""
        key = (c, tier)
        got = self._room.get(key)
        if got is None:
            hns = self.session.cluster.hypernodes.domains(tier)
            owner = self._owner.get(tier)
            if owner is None:  # the HyperNode of this tier holding each node (-1: none)
                owner = self._owner[tier] = np.full(len(self.session.cluster.nodes), -1, dtype=_I64)
                for i, hn in enumerate(hns):
                    owner[hn.mask & (owner < 0)] = i
            ok = owner >= 0
            got = self._room[key] = np.bincount(
                owner[ok], weights=self.now[c][ok], minlength=len(hns)
            ).astype(_I64)
        return got

    def capacities(self) -> None:
        session = self.session
        n = len(session.cluster.nodes)
        self.now = np.zeros((len(self.reps), n), _I64)
        self.pipe = np.zeros((len(self.reps), n), _I64)
        for c, rep in enumerate(self.reps):
            mask = session.predicate(rep)
            if not mask.any():
                continue
            need = session.capacity.request_cols(rep)[1]
            cap = self.demand[c]
            now = np.floor((session.capacity.free(rep) + EPS) / need).min(axis=1)
            fut = np.floor((session.capacity.free(rep, future=True) + EPS) / need).min(axis=1)
            now = np.clip(now, 0, cap).astype(_I64) * mask
            fut = np.clip(fut, 0, cap).astype(_I64) * mask
            self.now[c] = now
            self.pipe[c] = np.maximum(fut - now, 0)


def _node_costs(session: Session, model: str, rep: Task) -> np.ndarray:
    """Per node cost in 0..SCORE for a pod of ``rep``'s class under ``model`` (before spreading)."""
    nodes = session.cluster.nodes
    n = len(nodes)
    if model == "spread":
        alloc = np.where(nodes.allocatable > 0, nodes.allocatable, 1.0)
        cols = session.capacity.request_cols(rep)[0]
        frac = (nodes.used[:, cols] / alloc[:, cols]).max(axis=1) if cols.size else np.zeros(n)
        return np.clip(np.round(frac * SCORE), 0, SCORE).astype(_I64)
    if model == "quincy":
        aff = rep.affinity
        if aff is None or not aff.node_preferred:
            return np.zeros(n, _I64)
        raw = np.zeros(n)
        for weight, reqs in aff.node_preferred:
            m = np.ones(n, dtype=bool)
            for r in reqs:
                if r.key == "\x00name":
                    hit = np.isin(np.array(nodes.names, dtype=object), list(r.values))
                    m &= hit if r.op == "In" else ~hit
                else:
                    m &= nodes.label_mask(r.key, r.op, r.values)
            raw += weight * m
        total = sum(w for w, _ in aff.node_preferred) or 1
        return (SCORE - np.round(raw * SCORE / total)).astype(_I64)
    return np.zeros(n, _I64)


def _contention(cls: _Classes) -> np.ndarray:
    """Per class and node, a cost in 0..CONTENTION for the demand of the *other* classes that could use
    the node (each class's demand spread evenly over the nodes it may use). Flexible pods then leave
    the few nodes a constrained class can use to that class: several classes share a node's resources,
    which one flow commodity cannot express, and this keeps the pod-by-pod check from finding the only
    node of a constrained pod taken by a pod that had other choices."""
    usable = (cls.now + cls.pipe) > 0
    spread = np.asarray(cls.demand, dtype=float) / np.maximum(usable.sum(axis=1), 1)
    load = usable * spread[:, None]
    total = load.sum(axis=0)
    other = (total[None, :] - load) * usable
    top = float(other.max()) if other.size else 0.0
    if top <= 0:
        return np.zeros(usable.shape, _I64)
    return np.round(other * (CONTENTION / top)).astype(_I64)


class _Arcs:
    """Accumulates arc arrays (lists of numpy chunks) for the network."""

    def __init__(self) -> None:
        self.gn: list[tuple[Any, ...]] = []
        self.an: list[tuple[Any, ...]] = []

    @staticmethod
    def cat(chunks: list[tuple[Any, ...]], width: int) -> list[np.ndarray]:
        if not chunks:
            return [np.zeros(0, _I64) for _ in range(width)]
        return [
            np.concatenate([np.asarray(c[i], dtype=_I64).reshape(-1) for c in chunks]) for i in range(width)
        ]


def _agg_arcs(
    arcs: _Arcs,
    agg: int,
    now: np.ndarray,
    pipe: np.ndarray,
    cost: np.ndarray,
    spread: bool,
    mask: np.ndarray | None,
) -> None:
    """Arcs from aggregator ``agg`` to the nodes where the class fits (within ``mask``): one arc for what
    fits now, one dearer arc for capacity being released; ``spread`` splits the first pod on a node
    from the rest, dearer, so the solver spreads (Firmament's load-spreading model)."""
    rows = np.flatnonzero(now if mask is None else now * mask)
    if rows.size:
        cap, c = now[rows], cost[rows]
        if spread:
            arcs.an.append((np.full(rows.size, agg), rows, np.minimum(cap, 1), c, np.zeros(rows.size)))
            more = cap > 1
            arcs.an.append(
                (
                    np.full(int(more.sum()), agg),
                    rows[more],
                    cap[more] - 1,
                    c[more] + SCORE,
                    np.zeros(int(more.sum())),
                )
            )
        else:
            arcs.an.append((np.full(rows.size, agg), rows, cap, c, np.zeros(rows.size)))
    rows = np.flatnonzero(pipe if mask is None else pipe * mask)
    if rows.size:
        arcs.an.append(
            (np.full(rows.size, agg), rows, pipe[rows], cost[rows] + PIPE_COST, np.ones(rows.size))
        )


def _job_costs(
    session: Session, jobs: list[Job], tasks: list[list[Task]], wait_unit: float, lower: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """``(u, p)`` per job: the cost of each pod left waiting and of each pod missing below the lower
    bound (module docstring)."""
    nodes = session.cluster.nodes
    ref = np.where(nodes.allocatable.max(axis=0) > 0, nodes.allocatable.max(axis=0), 1.0)
    ref_pods = session.cluster.resources.pos(PODS)
    prios = sorted({j.priority for j in jobs})
    rank = {p: i for i, p in enumerate(prios)}
    share = np.array([ts[0].request for ts in tasks], dtype=float).reshape(len(jobs), -1) / ref
    share[:, ref_pods] = 0.0
    size = np.clip(np.round(share.max(axis=1) * SIZE_MAX), 1, SIZE_MAX).astype(_I64)
    age = np.maximum(session.now - np.array([j.creation for j in jobs], dtype=float), 0.0)
    wait = np.minimum(WAIT_CAP, age // max(wait_unit, 1e-9)).astype(_I64)
    prio = np.array([rank[j.priority] for j in jobs], dtype=_I64)
    u = prio * PRIO_STEP + size * (PLACE_MAX + 1 + wait)
    return u, u * np.maximum(1, np.asarray(lower, dtype=_I64))


def _chain(
    session: Session, job: Job, classes: list[int], cls: _Classes, need: int, topology_costs: bool
) -> list[tuple[str, np.ndarray | None, int]] | None:
    """``[(domain name, mask or None for the cluster, cost)]`` the job's groups may use, or None for
    the class's cluster aggregator alone. Jobs with ``networkTopology`` take the session's gang search
    space (the network-topology-aware plugin) and its first domain that can hold the pods; other gangs,
    under ``costModel: topology``, the tightest HyperNode of the lowest tier that can."""
    tree = session.cluster.hypernodes
    chosen: Domain | None = None
    if job.topology_mode:
        domains = [d for d in session.gang_search_space(job, Purpose.ALLOCATE) if d.tier is not None]
        if not domains:
            return None
        room = [
            min(int(cls.now[c][d.mask].sum() + cls.pipe[c][d.mask].sum()) for c in classes) for d in domains
        ]
        pick = next((i for i, r in enumerate(room) if r >= need), 0)
        chosen = domains[pick]
        top = job.topology_tier if job.topology_mode == "hard" and job.topology_tier is not None else None
        hard = job.topology_mode == "hard"
    elif topology_costs and tree and need > 1:
        for tier in tree.tiers:
            hns = tree.domains(tier)
            room = np.min([cls.room(c, tier) for c in classes], axis=0)
            ok = np.flatnonzero(room >= need)
            if ok.size:
                hn = hns[int(ok[np.argmin(room[ok])])]
                chosen = Domain(hn.name, hn.mask, tier)
                break
        if chosen is None:
            return None
        top, hard = None, False
    else:
        return None
    assert chosen is not None
    base = chosen.tier
    assert base is not None  # a domain of a tier: the gang search space's cluster domain is left out
    out: list[tuple[str, np.ndarray | None, int]] = [(chosen.name, chosen.mask, 0)]
    parent = tree.hypernodes[chosen.name].parent if chosen.name in tree.hypernodes else None
    max_tier = max(tree.tiers) if tree else base
    while parent is not None:
        hn = tree.hypernodes[parent]
        if hard and hn.tier > (top if top is not None else max_tier):
            break
        out.append((hn.name, hn.mask, TIER_STEP * (hn.tier - base)))
        parent = hn.parent
    if not hard:
        out.append(("", None, TIER_STEP * (max_tier + 1 - base)))
    return out


def _group_tasks(
    tasks: list[list[Task]], model: str
) -> tuple[list[list[Task]], list[int], list[tuple[int, str]]]:
    """``(groups, job of each group, (nominated row, preferred nodes) of each group)``: each job's
    waiting pods split by equivalence class, nominated node and (``quincy``) preferred node set."""
    groups: list[list[Task]] = []
    group_job: list[int] = []
    group_key: list[tuple[int, str]] = []
    for j, ts in enumerate(tasks):
        index: dict[tuple[Any, ...], int] = {}
        for t in ts:
            nominated = t.nominated if t.status is TaskStatus.PIPELINED and t.nominated >= 0 else -1
            pref = t.annotations.get(PREFERRED_NODES, "") if model == "quincy" else ""
            key = (t.klass or ("task", t.uid), nominated, pref)
            g = index.get(key)
            if g is None:
                g = index[key] = len(groups)
                groups.append([])
                group_job.append(j)
                group_key.append((nominated, pref))
            groups[g].append(t)
    return groups, group_job, group_key


class _Builder:
    """Arcs of one network: aggregators made on demand, group arcs per group."""

    def __init__(self, session: Session, cls: _Classes, model: str) -> None:
        self.session, self.cls, self.model = session, cls, model
        self.arcs = _Arcs()
        self.aggs: dict[tuple[int, str], int] = {}
        self.node_cost = [
            _node_costs(session, model, rep) + extra for rep, extra in zip(cls.reps, _contention(cls))
        ]
        self.ga: tuple[list[int], list[int], list[int]] = ([], [], [])
        self.aa: tuple[list[int], list[int]] = ([], [])
        self.trees: set[int] = set()  # classes some gang reaches through the HyperNode tree

    def agg(self, c: int, name: str) -> int:
        """The aggregator of class ``c`` for HyperNode ``name`` ("": the cluster). For a class in
        ``trees`` the class's aggregators form the HyperNode tree (cluster -> top tier -> ... -> leaves
        -> nodes), so a node is reached by one arc per class whichever aggregator a gang enters by, and
        the class's capacity on a node is never offered twice."""
        if (c, "") not in self.aggs:
            top = self.aggs[(c, "")] = len(self.aggs)
            if c in self.trees:
                self._tree(c, top)
            else:
                self._nodes(c, top, None)
        return self.aggs[(c, name)]

    def _nodes(self, c: int, a: int, mask: np.ndarray | None) -> None:
        _agg_arcs(
            self.arcs, a, self.cls.now[c], self.cls.pipe[c], self.node_cost[c], self.model == "spread", mask
        )

    def _tree(self, c: int, top: int) -> None:
        tree = self.session.cluster.hypernodes
        covered = np.zeros(len(self.session.cluster.nodes), dtype=bool)
        for tier in sorted(tree.tiers, reverse=True):  # parents before children
            for hn in tree.domains(tier):
                a = self.aggs[(c, hn.name)] = len(self.aggs)
                parent = self.aggs.get((c, hn.parent), top) if hn.parent else top
                self.aa[0].append(parent)
                self.aa[1].append(a)
                own = hn.mask.copy()
                for child in hn.children:
                    if child in tree.hypernodes:
                        own &= ~tree.hypernodes[child].mask
                self._nodes(c, a, own)
                covered |= hn.mask
        self._nodes(c, top, ~covered)

    def to_agg(self, g: int, a: int, cost: int) -> None:
        self.ga[0].append(g)
        self.ga[1].append(a)
        self.ga[2].append(cost)

    def group(
        self, g: int, c: int, ts: list[Task], nominated: int, pref: str, chain: list[Any] | None, hard: bool
    ) -> None:
        """The arcs of group ``g`` (class ``c``): its nominated node, its preferred nodes, then the
        aggregators of its chain of domains, or the class's cluster aggregator."""
        arcs, cls = self.arcs, self.cls
        to_cluster = 0
        if nominated >= 0:
            fits_now = bool(self.session.capacity.fits(ts[0])[nominated])
            arcs.gn.append(([g], [nominated], [len(ts)], [0], [0 if fits_now else 1]))
            to_cluster = NOMINATED_ELSEWHERE
        if pref:
            index = self.session.cluster.nodes.index
            rows = np.array(
                sorted({index[n.strip()] for n in pref.split(",") if n.strip() in index}), dtype=_I64
            )
            now, pipe = cls.now[c][rows], cls.pipe[c][rows]
            ok, okp = now > 0, pipe > 0
            arcs.gn.append(
                (
                    np.full(int(ok.sum()), g),
                    rows[ok],
                    np.minimum(now[ok], len(ts)),
                    np.zeros(int(ok.sum())),
                    np.zeros(int(ok.sum())),
                )
            )
            arcs.gn.append(
                (
                    np.full(int(okp.sum()), g),
                    rows[okp],
                    np.minimum(pipe[okp], len(ts)),
                    np.full(int(okp.sum()), PIPE_COST),
                    np.ones(int(okp.sum())),
                )
            )
            to_cluster = max(to_cluster, QUINCY_AGG)
        if chain is None:
            if not (hard and nominated < 0):
                self.to_agg(g, self.agg(c, ""), to_cluster)
            return
        for name, _mask, cost in chain:
            self.to_agg(g, self.agg(c, name), cost + to_cluster)


def build_network(
    session: Session,
    jobs: list[Job],
    tasks: list[list[Task]],
    lower: list[int],
    *,
    model: str,
    wait_unit: float,
) -> Built:
    """The network of one solve: ``jobs`` with their waiting ``tasks`` (task order) and the lower bound
    of each (0: none)."""
    cls = _Classes(session)
    groups, group_job, group_key = _group_tasks(tasks, model)
    group_class = [cls.of(ts[0], len(ts)) for ts in groups]
    cls.capacities()
    b = _Builder(session, cls, model)
    chains = _chains(session, jobs, tasks, cls, group_job, group_class, model)
    b.trees = {group_class[g] for g, j in enumerate(group_job) if chains.get(j)}
    for g, ts in enumerate(groups):
        j = group_job[g]
        b.group(g, group_class[g], ts, *group_key[g], chains.get(j), jobs[j].topology_mode == "hard")
    u, p = _job_costs(session, jobs, tasks, wait_unit, lower)
    net = _network(session, b, tasks, lower, u, p, group_job, groups)
    return Built(net, groups, sorted(b.aggs, key=b.aggs.__getitem__))


def _chains(
    session: Session,
    jobs: list[Job],
    tasks: list[list[Task]],
    cls: _Classes,
    group_job: list[int],
    group_class: list[int],
    model: str,
) -> dict[int, list[tuple[str, np.ndarray | None, int]] | None]:
    """Per job that has one — a ``networkTopology``, or more than one pod under ``costModel:
    topology`` — its chain of domains (:func:`_chain`)."""
    job_classes: dict[int, list[int]] = {}
    for g, j in enumerate(group_job):
        job_classes.setdefault(j, []).append(group_class[g])
    return {
        j: _chain(session, jobs[j], sorted(set(cs)), cls, len(tasks[j]), model == "topology")
        for j, cs in job_classes.items()
        if jobs[j].topology_mode or (model == "topology" and len(tasks[j]) > 1)
    }


def _network(
    session: Session,
    b: _Builder,
    tasks: list[list[Task]],
    lower: list[int],
    u: np.ndarray,
    p: np.ndarray,
    group_job: list[int],
    groups: list[list[Task]],
) -> FlowNetwork:
    """The arrays of the network: the jobs' supplies, lower bounds and costs, the groups, the arcs
    ``b`` gathered and each node's free pod slots (none on a node that is down)."""
    nodes = session.cluster.nodes
    ga_group, ga_agg, ga_cost = (np.array(x, dtype=_I64) for x in b.ga)
    gn_group, gn_node, gn_cap, gn_cost, gn_kind = _Arcs.cat(b.arcs.gn, 5)
    an_agg, an_node, an_cap, an_cost, an_kind = _Arcs.cat(b.arcs.an, 5)
    pods = session.cluster.resources.pos(PODS)
    slots = np.floor((nodes.future_idle[:, pods] + EPS) / 1000.0)  # a pod takes 1000 milli-pods
    node_cap = np.where(nodes.down, 0, np.clip(slots, 0, None)).astype(_I64)
    return FlowNetwork(
        len(nodes),
        np.array([len(ts) for ts in tasks], _I64),
        np.array(lower, _I64),
        u,
        p,
        np.array(group_job, _I64),
        np.array([len(ts) for ts in groups], _I64),
        len(b.aggs),
        ga_group,
        ga_agg,
        ga_cost,
        gn_group,
        gn_node,
        gn_cap,
        gn_cost,
        gn_kind,
        an_agg,
        an_node,
        an_cap,
        an_cost,
        an_kind,
        node_cap,
        np.array(b.aa[0], _I64),
        np.array(b.aa[1], _I64),
    )
