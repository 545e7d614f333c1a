"""``network-topology-aware``: HyperNode topology as a plugin (seed 000 §2, SPEC.md §3.3; Volcano's
network-topology-aware plugin and the tier logic it moves out of ``allocate``).

A podgroup's ``networkTopology`` (``mode: hard|soft``, ``highestTierAllowed``) constrains where its pods
may go: with hard mode all of them inside one HyperNode of tier ≤ highestTierAllowed (tier 1 is the leaf
switch); with soft mode that is preferred and the whole cluster is the last resort. The plugin offers:

- **GangSearchSpace** — the hypernodes of allowed tiers that contain every node the job already runs on
  (their lowest common ancestor or above) and whose allocatable capacity could hold what the job's
  pending pods need at least to make the gang ready (all of them unless minMember asks fewer; Volcano's
  ``FilterGradientsByMinResource``). For ALLOCATE those with room by a free-capacity bound, fits now
  first, then lowest tier, then tightest fit (hypernode bin-packing: the largest share of the domain's
  GPU, else CPU, capacity in use once the job's waiting pods are added); see :meth:`_allocate_order`.
  For EVICT the top ``evictDomains`` (8): first those the gang might enter without breaking a healthy
  gang, counted node by node (:meth:`safe_fits`), then by the cost to enter (:meth:`entry_costs`: free
  room first, then the work lost by the jobs that would have to give way, cheapest first), then lowest
  tier, then name.
  Soft mode appends the whole cluster.
- **SubGroupSearchSpace** — the same for a Volcano sub-group with its own ``networkTopology``, by its
  own tier and ``subGroupSize``, inside the job's domain, for both purposes (the Evict order is in
  :class:`~corral.plugins.topology_costs.EvictionOrder`); every action that places pods asks it
  (:mod:`corral.actions.common.subgroups`).
- **GangPredicate** — fast fail, with a reason that names the numbers, when the job's waiting pods need
  (at least, to reach minMember) more than the cluster (any mode) or any allowed hypernode (hard) has in
  total, or when no allowed hypernode holds the nodes the job already runs on (hard).
- **HyperNodeOrder** — the bin-packing score of a domain: the fraction of its GPU (else CPU) capacity in
  use, 0–100, times the argument ``weight`` (default 1). With Volcano's ``hypernode.binpack.cpu``,
  ``.memory``, ``.resources`` and ``.resources.<name>`` arguments, the score is instead the weighted mean
  of those resources' fractions in use (cpu and memory weigh 1 unless given).

Jobs without a topology constraint get no answer (the session's default domain is the whole cluster).

KAI's ``Topology`` levels are domains of their own family (manifests/kai.py): a KAI job is offered only
its Topology's domains, from its preferred level (``topology_low_tier``) up to its required level. The
constraints of KAI sub-groups are kept pod by pod through the Predicate and NodeOrder points
(:mod:`corral.plugins.subgroup_topology`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.framework.config import arg
from corral.framework.extension import (
    Domain,
    GangPredicate,
    GangSearchSpace,
    HyperNodeOrder,
    NodeOrder,
    Predicate,
    PredicateReason,
    Purpose,
    SubGroupSearchSpace,
)
from corral.framework.hints import ALL, ROW, CacheHints, ScoreScope
from corral.framework.plugin import Plugin
from corral.model import ALLOCATED_STATES, Job, Task, TaskStatus
from corral.model.quantity import format_quantity
from corral.model.resources import CPU, EPS, GPU, PODS, ResourceIndex
from corral.model.subjobs import SubJob
from corral.plugins.hypernode_binpack import (
    NormalPodBinpack,
    binpack_weights,
    binpack_weights_default,
    domain_binpack_score,
)
from corral.plugins.subgroup_topology import SubGroupTopology
from corral.plugins.topology_costs import EvictionOrder

__all__ = ["NetworkTopologyPlugin"]

_WAITING = {TaskStatus.PENDING, TaskStatus.PIPELINED}
#: Full domains (no room by the free-capacity bound) still offered to allocate when none has room.
FULL_DOMAINS_TRIED = 2
#: an argument not given (no configuration can give it: numbers are bounded by 1e12 at load)
UNSET = -float(2**60)


@dataclass(frozen=True)
class TopologyArgs:
    evict_domains: int = arg("evictDomains", 8, "domains returned for eviction (top K)")
    weight: float = arg(
        "weight", 1.0, "multiplies the HyperNodeOrder score (Volcano's plugin weight)", kind="float"
    )
    bp_cpu: float = arg(
        "hypernode.binpack.cpu", UNSET, "weight of cpu in the hypernode binpack score (1)", kind="float"
    )
    bp_memory: float = arg(
        "hypernode.binpack.memory", UNSET, "weight of memory in the hypernode binpack score (1)", kind="float"
    )
    bp_resources: str = arg("hypernode.binpack.resources", "", "further resources the hypernode score packs")
    bp_weights: dict[Any, Any] = arg(
        "hypernode.binpack.resources.", {}, "weight of each of those (default 1)", prefix=True, kind="float"
    )
    normal_pod_enable: bool = arg(
        "hypernode.binpack.normal-pod.enable", True, "hypernode bin packing for pods without networkTopology"
    )
    normal_pod_fading: float = arg(
        "hypernode.binpack.normal-pod.fading", 0.8, "weight of tier t is fading**(t-1)", kind="float"
    )

    def given(self, value: float) -> float | None:
        return None if value == UNSET else value


def _amounts(res: ResourceIndex, vec: np.ndarray) -> str:
    """``24 nvidia.com/gpu, 8 cpu`` (the pod count left out)."""
    return ", ".join(
        f"{format_quantity(vec[i], n)} {n}" for i, n in enumerate(res.names) if vec[i] and n != PODS
    )


class NetworkTopologyPlugin(
    EvictionOrder,
    Plugin,
    Predicate,
    PredicateReason,
    NodeOrder,
    HyperNodeOrder,
    GangPredicate,
    GangSearchSpace,
    SubGroupSearchSpace,
    CacheHints,
):
    name = "network-topology-aware"
    Args = TopologyArgs

    def on_session_open(self) -> None:
        cluster = self.session.cluster
        self.tree = cluster.hypernodes
        res = cluster.resources
        self.cols = np.ones(len(res), dtype=bool)
        self.cols[res.pos(PODS)] = False
        self.score_col = res.pos(GPU) if GPU in res else res.pos(CPU)
        self._bp = binpack_weights(self.args, res.names)
        self._normal = None
        if self.args.normal_pod_enable and self.tree:
            fading = self.args.normal_pod_fading
            self._normal = NormalPodBinpack(
                self.session,
                self._bp if self._bp is not None else binpack_weights_default(res.names),
                0.8 if fading < 0 else fading,
                self.args.weight,
            )
        self._cap: np.ndarray | None = None
        self._allowed_cache: dict[tuple[Any, ...], np.ndarray] = {}
        self._subjob_cache: dict[tuple[Any, ...], Job] = {}
        self.subgroups = SubGroupTopology(self.session)

    # -- KAI sub-groups' constraints (plugins/subgroup_topology.py) -------------------------------
    # -- cache hints (framework/hints.py) ---------------------------------------------------------
    def sign_pod(self, task: Task) -> tuple[Any, ...] | None:
        """The mask is a function of the pod's request and KAI sub-group (which it signs) unless a job
        of the session has KAI sub-group constraints: then it depends on the job's placed pods."""
        k = task.klass
        return None if k is None or self.subgroups.active else (k.subgroup,)

    def score_scope(self, task: Task) -> ScoreScope:
        """The normal-pod score of a node moves with what its HyperNodes hold, not only the node: never
        kept per node across placements for the pods it scores; nor are KAI sub-group scores."""
        normal_local = self._normal is None or not _normal_pod(task)
        return ROW if normal_local and (not self.subgroups.active or self.subgroups.local(task)) else ALL

    def predicate(self, task: Task) -> np.ndarray:
        return self.subgroups.mask(task)

    def explain(self, task: Task) -> list[tuple[np.ndarray, str]]:
        if not self.subgroups.active or task.job is None or task.job.subgroup_tree is None:
            return []
        return [
            (~self.subgroups.mask(task), f"node(s) outside the topology domain of sub-group {task.role!r}")
        ]

    # -- helpers ---------------------------------------------------------------------------------
    def _need(self, job: Job) -> np.ndarray:
        vec = np.zeros(len(self.session.cluster.resources))
        for t in job.tasks:
            if t.status in _WAITING and t.managed:
                vec += t.request
        return vec

    def _least_need(self, job: Job) -> np.ndarray:
        """What the job's waiting pods must get at least for the gang to become ready: the pods it lacks
        to reach minMember — all its waiting pods when it needs every one (then this is :meth:`need`),
        none once it is ready — counted per resource at the smallest requests among its waiting pods, a
        lower bound whichever pods go. Volcano judges HyperNodes by the job's minimum too
        (``FilterGradientsByMinResource`` in actions/allocate): an elastic gang starts in a HyperNode
        that holds its minimum although not all its pods."""
        waiting = [t.request for t in job.tasks if t.status in _WAITING and t.managed]
        lack = min(max(job.min_member - job.ready_count(), 0), len(waiting))
        if lack == len(waiting):
            return self._need(job)
        if not lack:
            return np.zeros(len(self.session.cluster.resources))
        return np.sort(np.array(waiting), axis=0)[:lack].sum(axis=0)

    def _placed_rows(self, job: Job) -> np.ndarray:
        return np.array(
            sorted({t.node for t in job.tasks if t.status in ALLOCATED_STATES and t.node >= 0}),
            dtype=np.int64,
        )

    def _allowed(self, job: Job) -> np.ndarray:
        """Indexes (:class:`~corral.model.hypernodes.HyperIndex` order) of the hypernodes of allowed
        tiers that contain every node the job already occupies and whose allocatable capacity could
        hold what its waiting pods need at least (:meth:`least_need`) — all hypernodes judged at once."""
        placed = self._placed_rows(job)
        need = self._least_need(job)
        key = (job.uid, placed.tobytes(), need.tobytes())  # asked by GangPredicate, then the space
        got = self._allowed_cache.get(key)
        if got is not None:
            return got
        hx = self.tree.index()
        ok = self._tier_ok(job)
        if placed.size:
            ok &= hx.containing(placed, len(self.session.cluster.nodes))
        ok &= ~np.any((self._capacity() < need - EPS) & self.cols, axis=1)
        got = self._allowed_cache[key] = np.flatnonzero(ok)
        return got

    def _capacity(self) -> np.ndarray:
        """Allocatable capacity of live nodes, summed per hypernode (once per session)."""
        if self._cap is None:
            nodes = self.session.cluster.nodes
            self._cap = self.tree.index().sums(nodes.allocatable * (~nodes.down)[:, None])
        return self._cap

    def _allowed_domains(self, job: Job) -> list[Domain]:
        """Hypernodes of allowed tiers containing every node the job already occupies (tier, name
        order)."""
        if not job.topology_mode or not self.tree:
            return []
        hx = self.tree.index()
        return [Domain(hx.names[h], hx.nodes[h].mask, int(hx.tier[h])) for h in self._allowed(job)]

    def _fit_class(self, job: Job, cand: np.ndarray, need: np.ndarray) -> np.ndarray:
        """Per candidate hypernode: 0 when the pods the gang needs to become ready (all its waiting
        pods unless minMember asks fewer) fit in its free capacity now, 1 when they fit once releasing
        capacity is free (a pipeline), 2 when only its total capacity could hold them (room must be
        made). A cheap bound, not a placement: when every waiting pod has the same request and
        constraints it counts whole pods per node (predicates included); else the summed free capacity
        must hold ``need`` (:meth:`least_need`) and, when every waiting pod must go, each kind of pod
        (same class, else same request) must find whole pods' room of its own — so that on a
        fragmented cluster domains whose free capacity is only scattered do not take the dry runs."""
        nodes = self.session.cluster.nodes
        hx = self.tree.index()
        waiting = [t for t in job.tasks if t.status in _WAITING and t.managed]
        lack = min(max(job.min_member - job.ready_count(), 0), len(waiting))
        kinds: dict[Any, Any] = {}
        for t in waiting:
            key = t.klass or t.request.tobytes()
            kinds[key] = (kinds[key][0], kinds[key][1] + 1) if key in kinds else (t, 1)
        alike = len(kinds) == 1 and bool(waiting[0].klass)
        live = (~nodes.down)[:, None]
        out = np.full(len(cand), 2, dtype=np.int64)
        for klass, free in ((1, nodes.future_idle), (0, nodes.idle)):
            free = np.clip(free * live, 0, None)
            if alike:
                fits = hx.sums(self._slots(waiting[0], free, len(waiting)))[cand] >= lack
            else:
                fits = ~np.any((hx.sums(free)[cand] < need - EPS) & self.cols, axis=1)
                for task, count in kinds.values() if lack == len(waiting) else ():
                    fits &= hx.sums(self._slots(task, free, count))[cand] >= count
            out[fits] = klass
        return out

    def _slots(self, task: Task, free: np.ndarray, most: int) -> np.ndarray:
        """Per node: whole pods like ``task`` its ``free`` capacity holds, at most ``most``; within the
        task's predicates when it has a class (pods of one class share them)."""
        req = task.request
        cols = np.flatnonzero(req > EPS)
        per_node = (
            np.floor((free[:, cols] + EPS) / req[cols]).min(axis=1)
            if cols.size
            else np.full(len(free), float(most))
        )
        per_node = np.minimum(per_node, most)
        return per_node * self.session.predicate(task) if task.klass else per_node

    def _highest_tier(self, job: Job) -> int:
        """The highest tier the job's domains may have: ``highestTierAllowed``, or every tier when it is
        unset — or 0 in soft mode, where Volcano does not limit the tier (in hard mode 0 allows tier-0
        HyperNodes only). A KAI job's tier is that of its required level (unset: every level of its
        Topology up to the topology's root)."""
        tier = job.topology_tier
        if tier is None or (tier == 0 and job.topology_mode == "soft"):
            return max(self.tree.family_tiers(job.topology_family), default=1)
        return tier

    def _tier_ok(self, job: Job) -> np.ndarray:
        """The hypernodes of the job's family (Volcano's, or its KAI Topology's) whose tier it allows:
        at most :meth:`highest_tier`, at least a KAI preferred level's (``topology_low_tier``; KAI tries
        domains from the preferred level up, ``calculateRelevantDomainLevels``)."""
        hx = self.tree.index()
        ok = (hx.tier <= self._highest_tier(job)) & hx.of_family(job.topology_family)
        if job.topology_low_tier:
            ok &= hx.tier >= job.topology_low_tier
        return ok

    def _score(
        self, mask: np.ndarray, extra: np.ndarray | None = None, request: np.ndarray | None = None
    ) -> float:
        """0-100: how full the domain is. With ``hypernode.binpack.*`` weights, Volcano's HyperNode
        binpack score (:func:`~corral.plugins.hypernode_binpack.domain_binpack_score`) over the
        resources ``request`` (the gang's) asks for, the gang's pods counted in ``extra`` or already
        placed; else the fraction of its GPU, else CPU, capacity in use."""
        nodes = self.session.cluster.nodes
        if self._bp is not None:
            cap = nodes.allocatable[mask].sum(axis=0)
            used = nodes.used[mask].sum(axis=0)
            if extra is not None:
                used = used + extra  # the gang's pods not yet placed (else a dry run placed them)
            asked = np.ones(len(cap), dtype=bool) if request is None else request > 0
            return 100.0 * domain_binpack_score(used, cap, asked, self._bp)
        c = self.score_col
        cap = float(nodes.allocatable[mask, c].sum())
        used = float(nodes.used[mask, c].sum()) + (float(extra[c]) if extra is not None else 0.0)
        return 100.0 * used / cap if cap > 0 else 0.0

    def node_order(self, task: Task, rows: np.ndarray) -> np.ndarray:
        """Volcano's HyperNode bin packing for normal pods (``hypernode.binpack.normal-pod.*``; 0 for
        the pods of a job or sub-group with a networkTopology, and with no HyperNodes), plus, for the
        pods of KAI sub-groups with a preferred level, their domain score (plugins/subgroup_topology.py)."""
        if self._normal is None or not _normal_pod(task):
            out = np.zeros(len(rows))
        else:
            out = self._normal.scores(task, rows)
        if self.subgroups.active:
            out = out + self.args.weight * self.subgroups.scores(task, rows)
        return out

    def _allocate_order(self, job: Job, cand: np.ndarray, need: np.ndarray) -> list[Domain]:
        """The domains allocate can use, ordered by what the job can get there — fits in free capacity
        now, then once releasing capacity is free (a pipeline) — then lowest tier, then tightest fit
        (the bin-packing score once the job's pods are added), then name. A domain where even the
        releasing capacity cannot hold the waiting pods is left out: allocate cannot make room, and a
        capped number of dry runs must not be spent on full domains (the eviction actions ask with
        purpose EVICT and get those). When no domain has room, the :data:`FULL_DOMAINS_TRIED` tightest
        are returned, so that a hard-topology gang keeps its constraint and its reason says where it was
        tried, at the cost of that many dry runs, not of one per domain of the tree."""
        if not cand.size:
            return []
        hx = self.tree.index()
        nodes = self.session.cluster.nodes
        c = self.score_col
        cap = self._capacity()[cand, c]
        used = hx.sums(nodes.used[:, c] * ~nodes.down)[cand] + need[c]
        score = np.where(cap > 0, 100.0 * used / np.where(cap > 0, cap, 1.0), 0.0)
        if self._bp is not None:  # Volcano's weighted hypernode binpack score instead
            loaded = hx.sums(nodes.used * (~nodes.down)[:, None])[cand] + need
            caps = self._capacity()[cand]
            score = np.array(
                [
                    100.0 * domain_binpack_score(loaded[i], caps[i], need > 0, self._bp)
                    for i in range(len(cand))
                ]
            )
        klass = self._fit_class(job, cand, self._least_need(job))
        order = np.lexsort((cand, -score, hx.tier[cand], klass))
        room = order[klass[order] < 2]
        keep = room if room.size else order[:FULL_DOMAINS_TRIED]
        return [
            Domain(hx.names[cand[i]], hx.nodes[cand[i]].mask, int(hx.tier[cand[i]]), float(score[i]))
            for i in keep
        ]

    def _subgroup_job(self, job: Job, sj: SubJob) -> Job:
        """A sub-group as a job of its own for the domain search: its pods, its minimum, its topology."""
        key = (job.uid, sj.name)
        got = self._subjob_cache.get(key)
        if got is None:
            got = self._subjob_cache[key] = Job(
                uid=f"{job.uid}#{sj.name}",
                name=sj.name,
                namespace=job.namespace,
                queue=job.queue,
                min_member=sj.size,
                priority=job.priority,
                tasks=sj.tasks,
                topology_mode=sj.topology_mode,
                topology_tier=sj.topology_tier,
            )
        return got

    def subgroup_search_space(
        self, job: Job, sj: SubJob, within: np.ndarray | None, purpose: Purpose = Purpose.ALLOCATE
    ) -> list[Domain]:
        """The HyperNodes a Volcano sub-group may be placed in (Volcano ``HyperNodeGradientForSubJobFn``,
        which gangpreempt and gangreclaim ask with purpose Evict too): as for a job
        (:meth:`gang_search_space`) by the sub-group's own ``networkTopology`` and minimum
        (``subGroupSize``), keeping only HyperNodes inside ``within`` — the job's own domain. For
        ALLOCATE in allocate's order; for EVICT the top ``evictDomains`` by the cost to enter, the
        victims being those that might give way to the job. Soft mode appends ``within`` itself as the
        last resort; in hard mode with no HyperNode allowed the answer is one empty domain, so that the
        constraint is not lifted."""
        if not sj.topology_mode or not self.tree:
            return []
        sub = self._subgroup_job(job, sj)
        cand = self._allowed(sub)
        if within is not None:
            hx = self.tree.index()
            cand = np.array([h for h in cand if not (hx.nodes[h].mask & ~within).any()], dtype=np.int64)
        if purpose is Purpose.ALLOCATE:
            out = self._allocate_order(sub, cand, self._need(sub))
        else:
            hx = self.tree.index()
            domains = [Domain(hx.names[h], hx.nodes[h].mask, int(hx.tier[h])) for h in cand.tolist()]
            out = self._evict_order(sub, domains, self._victim_pods(job))
        if not out and sj.topology_mode == "hard":
            # nowhere: an empty domain, so that the hard constraint is not lifted by the fallback
            tier = self._highest_tier(sub)
            nowhere = np.zeros(len(self.session.cluster.nodes), dtype=bool)
            return [Domain(f"no HyperNode of tier <= {tier} inside the job's domain", nowhere, tier)]
        if sj.topology_mode == "soft":
            nodes = self.session.cluster.nodes
            out.append(Domain("cluster", (~nodes.down) if within is None else within, None))
        return out

    # -- extension points ------------------------------------------------------------------------
    def gang_search_space(self, job: Job, purpose: Purpose) -> list[Domain]:
        if not job.topology_mode:
            return []
        need = self._need(job)
        nodes = self.session.cluster.nodes
        if not self.tree:
            scored: list[Domain] = []
        elif purpose is Purpose.ALLOCATE:
            scored = self._allocate_order(job, self._allowed(job), need)
        else:
            scored = self._evict_order(job, self._allowed_domains(job), self._victim_pods(job))
        if job.topology_mode == "soft":
            scored.append(Domain("cluster", ~nodes.down, None))
        return scored

    def gang_predicate(self, job: Job) -> str | None:
        if not job.topology_mode:
            return None
        need = self._least_need(job)
        res = self.session.cluster.resources
        total = self.session.cluster.total_allocatable()
        short = (total < need - EPS) & self.cols
        some = not np.array_equal(need, self._need(job))  # minMember asks fewer than all waiting pods
        pods = "the pods the gang needs to reach minMember" if some else "the gang's waiting pods"
        if short.any():
            parts = [
                f"{format_quantity(need[c], res.names[c])} {res.names[c]} but the whole cluster has only "
                f"{format_quantity(total[c], res.names[c])}"
                for c in np.flatnonzero(short)
            ]
            return f"{pods} need " + "; ".join(parts)
        if job.topology_mode == "hard" and self.tree and not self._allowed(job).size:
            tier = self._highest_tier(job)
            hx = self.tree.index()
            allowed = np.flatnonzero(self._tier_ok(job))
            placed = self._placed_rows(job)
            if placed.size and not hx.containing(placed, len(self.session.cluster.nodes))[allowed].any():
                return (
                    f"no HyperNode of tier <= {tier} holds all the nodes the gang already runs on, so "
                    f"its waiting pods ({_amounts(res, self._need(job))}) cannot join them"
                )
            c = self.score_col if need[self.score_col] > 0 else int(np.argmax(need * self.cols))
            cap = self._capacity()[allowed, c]
            largest = ""
            if allowed.size:
                i = int(np.argmax(cap))
                largest = (
                    f"; the largest, {hx.names[allowed[i]]}, has "
                    f"{format_quantity(float(cap[i]), res.names[c])} {res.names[c]} in all"
                )
            return (
                f"no HyperNode of tier <= {tier} can hold {pods} ({_amounts(res, need)})"
                + (" together with the pods already running" if placed.size else "")
                + largest
            )
        return None

    def hypernode_order(self, job: Job, domains: Sequence[Domain]) -> np.ndarray:
        """Asked after a dry run placed the gang in each domain (allocate): its pods are in ``used``."""
        request = None
        if self._bp is not None:
            request = np.zeros(len(self.session.cluster.resources))
            for t in job.tasks:
                request = np.maximum(request, t.request)
        return self.args.weight * np.array([self._score(d.mask, None, request) for d in domains], dtype=float)


def _normal_pod(task: Task) -> bool:
    """A pod without a topology constraint: its job has none, nor its sub-group (Volcano: its SubJob
    has no networkTopology)."""
    job = task.job
    if job is not None and job.topology_mode:
        return False
    return task.subjob is None or not task.subjob.topology_mode
