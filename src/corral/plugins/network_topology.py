"""``network-topology-aware``: HyperNode topology as a plugin (seed 000 §2, SPEC.md §3.3; Volcano's
network-topology-aware plugin and the tier logic it moves out of ``allocate``).

A podgroup's ``networkTopology`` (``mode: hard|soft``, ``highestTierAllowed``) constrains where its pods
may go: with hard mode all of them inside one HyperNode of tier ≤ highestTierAllowed (tier 1 is the leaf
switch); with soft mode that is preferred and the whole cluster is the last resort. The plugin offers:

- **GangSearchSpace** — the hypernodes of allowed tiers that contain every node the job already runs on
  (their lowest common ancestor or above) and whose allocatable capacity could hold the job's pending
  pods; for ALLOCATE all of them, lowest tier first, then tightest fit (hypernode bin-packing: least
  idle capacity left after the job); for EVICT the top ``evictDomains`` (8) by the cost to enter —
  most capacity already free or releasing first, then lowest tier. Soft mode appends the whole cluster.
- **GangPredicate** — fast fail when the job's pending pods need more than the largest allowed domain
  (hard) or the cluster (any mode) has in total.
- **HyperNodeOrder** — the bin-packing score of a domain: the fraction of its GPU (else CPU) capacity in
  use, 0–100.

Jobs without a topology constraint get no answer (the session's default domain is the whole cluster).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from corral.framework.config import arg
from corral.framework.extension import Domain, Purpose
from corral.framework.plugin import Plugin
from corral.model import ALLOCATED_STATES, Job, TaskStatus
from corral.model.resources import CPU, EPS, GPU, PODS

__all__ = ["NetworkTopologyPlugin"]

_WAITING = {TaskStatus.PENDING, TaskStatus.PIPELINED}


@dataclass(frozen=True)
class TopologyArgs:
    evict_domains: int = arg("evictDomains", 8, "domains returned for eviction (top K)")


class NetworkTopologyPlugin(Plugin):
    name = "network-topology-aware"
    Args = TopologyArgs

    def on_session_open(self) -> None:
        cluster = self.session.cluster
        self.tree = cluster.hypernodes
        res = cluster.resources
        self.cols = np.ones(len(res), dtype=bool)
        self.cols[res.pos(PODS)] = False
        self.score_col = res.pos(GPU) if GPU in res else res.pos(CPU)

    # -- helpers ---------------------------------------------------------------------------------
    def need(self, job: Job) -> np.ndarray:
        vec = np.zeros(len(self.session.cluster.resources))
        for t in job.tasks:
            if t.status in _WAITING and t.managed:
                vec += t.request
        return vec

    def _placed_rows(self, job: Job) -> np.ndarray:
        return np.array(sorted({t.node for t in job.tasks if t.status in ALLOCATED_STATES and t.node >= 0}),
                         dtype=np.int64)

    def allowed_domains(self, job: Job) -> list[Domain]:
        """Hypernodes of allowed tiers containing every node the job already occupies."""
        if not job.topology_mode or not self.tree:
            return []
        top = job.topology_tier if job.topology_tier is not None else max(self.tree.tiers, default=1)
        placed = self._placed_rows(job)
        nodes = self.session.cluster.nodes
        alloc = nodes.allocatable * (~nodes.down)[:, None]
        need = self.need(job)
        out = []
        for tier in self.tree.tiers:
            if tier > top:
                break
            for hn in self.tree.domains(tier):
                mask = hn.mask
                if placed.size and not mask[placed].all():
                    continue
                cap = alloc[mask].sum(axis=0)
                if np.any((cap < need - EPS) & self.cols):
                    continue
                out.append(Domain(hn.name, mask, tier))
        return out

    def _score(self, mask: np.ndarray, extra: np.ndarray | None = None) -> float:
        nodes = self.session.cluster.nodes
        c = self.score_col
        cap = float(nodes.allocatable[mask, c].sum())
        used = float(nodes.used[mask, c].sum()) + (float(extra[c]) if extra is not None else 0.0)
        return 100.0 * used / cap if cap > 0 else 0.0

    # -- extension points ------------------------------------------------------------------------
    def gang_search_space(self, job: Job, purpose: Purpose) -> list[Domain]:
        domains = self.allowed_domains(job)
        if not job.topology_mode:
            return []
        need = self.need(job)
        nodes = self.session.cluster.nodes
        if purpose is Purpose.ALLOCATE:
            scored = [Domain(d.name, d.mask, d.tier, self._score(d.mask, need)) for d in domains]
            scored.sort(key=lambda d: (d.tier, -d.score, d.name))
        else:
            fut = np.clip(nodes.future_idle, 0, None)
            def free_share(d: Domain) -> float:
                c = self.score_col
                return float(fut[d.mask, c].sum()) / max(float(need[c]), EPS)
            scored = sorted(domains, key=lambda d: (-min(free_share(d), 1.0), d.tier, d.name))
            scored = scored[: self.args.evict_domains]
        if job.topology_mode == "soft":
            scored.append(Domain("cluster", ~nodes.down, None))
        return scored

    def gang_predicate(self, job: Job) -> str | None:
        if not job.topology_mode:
            return None
        need = self.need(job)
        res = self.session.cluster.resources
        total = self.session.cluster.total_allocatable()
        short = (total < need - EPS) & self.cols
        if short.any():
            col = int(np.argmax(short))
            return (f"the gang needs {res.describe(need)}; the whole cluster has only "
                    f"{res.describe(total * short)} of {res.names[col]}")
        if job.topology_mode == "hard" and self.tree and not self.allowed_domains(job):
            tier = job.topology_tier if job.topology_tier is not None else "any"
            return (f"no HyperNode of tier <= {tier} can hold the gang ({res.describe(need)})"
                    + (" together with the pods already running" if self._placed_rows(job).size else ""))
        return None

    def hypernode_order(self, job: Job, domains: Sequence[Domain]) -> np.ndarray:
        return np.array([self._score(d.mask) for d in domains], dtype=float)
