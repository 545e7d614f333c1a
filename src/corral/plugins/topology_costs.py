"""The eviction side of ``network-topology-aware``: the order of the domains offered to the eviction
actions (purpose Evict, for a gang or a Volcano sub-group) and the cost of entering HyperNodes,
vectorised over every domain at once; split from :mod:`network_topology`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.framework.extension import Domain
from corral.model import ALLOCATED_STATES, Cluster, Job, Task, TaskStatus
from corral.model.resources import EPS
from corral.model.work import checkpoint, run_hours

__all__ = ["EvictionOrder", "Victims", "entry_costs"]

_VICTIM = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})
_WAITING = frozenset({TaskStatus.PENDING, TaskStatus.PIPELINED})


@dataclass
class Victims:
    """The pods that might give way, as arrays (:meth:`NetworkTopologyPlugin._victims`)."""

    rows: np.ndarray  # per pod: its node
    owner: np.ndarray  # per pod: its job's index
    req: np.ndarray  # per pod: its request in the columns asked
    work: np.ndarray  # per pod: its work
    held: np.ndarray  # per job: all the work it holds
    surplus: np.ndarray  # per job: ready pods above minMember (negative: broken)


def entry_costs(
    masks: np.ndarray,
    lack: np.ndarray,
    rows: np.ndarray,
    owner: np.ndarray,
    req: np.ndarray,
    work: np.ndarray,
    held: np.ndarray,
    surplus: np.ndarray,
    want: np.ndarray,
) -> list[float]:
    """Every domain's entry cost (:meth:`NetworkTopologyPlugin.entry_costs`) at once. ``masks``: one
    node mask per domain; ``lack``: what each domain lacks; ``rows``/``owner``/``req``/``work``: per
    candidate pod its node, job index, request in the needed columns and work in units of the need;
    ``held``/``surplus``: per job. The pods of each (domain, job) pair are summed; each domain's groups
    are sorted (surplus before core, then the most of the need freed per unit of cost, then the job)
    and taken until they cover what the domain lacks — all domains in one sort, cut per domain."""
    n_jobs, n_cols = len(held), len(want)
    out = np.where(np.all(lack <= EPS, axis=1), 0.0, np.inf)
    short = np.flatnonzero(out > 0)
    if not short.size or not rows.size:
        return out.tolist()
    dom, pod = np.nonzero(masks[short][:, rows])
    if not dom.size:
        return out.tolist()
    keys, slot = np.unique(dom * n_jobs + owner[pod], return_inverse=True)
    g_dom, g_job = keys // n_jobs, keys % n_jobs
    m = len(keys)
    local = np.stack([np.bincount(slot, weights=req[pod, c], minlength=m) for c in range(n_cols)], axis=1)
    count = np.bincount(slot, minlength=m)
    spare = surplus[g_job]
    # as the bundles count (seed 000 cost model): a job's surplus pods (all of them when it is broken)
    # cost nothing, the rest costs everything the job holds
    share = np.where(spare < 0, 1.0, np.minimum(count, np.maximum(spare, 0)) / np.maximum(count, 1))
    frees = np.concatenate([local * share[:, None], local * (1 - share)[:, None]])
    spend = np.concatenate([np.zeros(m), np.where(share < 1, held[g_job], 0.0)])
    kind = np.repeat([0, 1], m)
    dom2, job2 = np.concatenate([g_dom, g_dom]), np.concatenate([g_job, g_job])
    use = np.flatnonzero(np.any(frees > EPS, axis=1))
    gain = (np.minimum(frees[use], want) / want).sum(axis=1)
    roi = np.where(spend[use] > 0, gain / np.where(spend[use] > 0, spend[use], 1.0), np.inf)
    order = use[np.lexsort((job2[use], -roi, kind[use], dom2[use]))]
    seg = dom2[order]
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    # cumulative sums within each domain's run: the running total minus what came before the run
    run = np.cumsum(frees[order], axis=0)
    before = np.vstack([np.zeros((1, n_cols)), run])[starts]
    base = np.repeat(before, np.diff(np.r_[starts, len(order)]), axis=0)
    covered = np.all(run - base >= lack[short][seg] - EPS, axis=1)
    hit = np.flatnonzero(covered)
    first_d, first_at = np.unique(seg[hit], return_index=True)
    cut = dict(zip(first_d.tolist(), hit[first_at].tolist()))
    spent = spend[order]
    for i in starts.tolist():
        end = cut.get(int(seg[i]))
        if end is not None:
            out[short[seg[i]]] = float(np.cumsum(spent[i : end + 1])[-1])
    return out.tolist()


class EvictionOrder:
    """The Evict-purpose order of :class:`~corral.plugins.network_topology.NetworkTopologyPlugin`
    (a mixin: it uses the plugin's session, ``cols``, arguments and ``_need``)."""

    session: Any
    args: Any
    cols: np.ndarray

    def _need(self, job: Job) -> np.ndarray:
        raise NotImplementedError

    def _evict_order(self, job: Job, domains: list[Domain], pods: list[Task]) -> list[Domain]:
        """The top ``evictDomains`` of ``domains`` for the eviction actions: first those ``job`` (a
        gang, or a sub-group as a job) might enter without breaking a healthy gang, then by the cost
        to enter, then lowest tier, then name; ``pods``: those that might give way."""
        cost = self._entry_costs(job, domains, self._need(job), pods)
        fits = self._safe_fits(job, domains, pods)
        order = sorted(
            range(len(domains)), key=lambda i: (not fits[i], cost[i], domains[i].tier, domains[i].name)
        )
        return [
            Domain(domains[i].name, domains[i].mask, domains[i].tier, -cost[i])
            for i in order[: self.args.evict_domains]
        ]

    def _entry_costs(
        self, job: Job, domains: Sequence[Domain], need: np.ndarray, pods: list[Task] | None = None
    ) -> list[float]:
        """The cost to enter each domain, for eviction: what the gang lacks there once the free and
        releasing capacity is used, made up from the running pods that might give way — pods of lower
        priority in the job's queue or pods of other queues (preemptable, of this scheduler) — as the
        bundles do: surplus pods (all of a broken job's) first, costing nothing, then the cores of healthy
        jobs, costing all the job holds; in each group those that free most of the need per
        unit of cost first. The cost is the work that is lost (each pod's request weighted by the hours
        it has run, :func:`~corral.model.work.run_hours`, as the eviction actions count it),
        measured against the need and summed over the requested resources. 0: enough is free already;
        inf: even all of them would not do. An estimate: the eviction action decides (victim rules,
        bundles, dry run)."""
        cols = np.flatnonzero((need > EPS) & self.cols)
        if not cols.size:
            return [0.0] * len(domains)
        if not domains:
            return []
        v = self._victims(job, cols, need[cols], pods)
        fut = self._future_free(cols)
        masks = np.array([d.mask for d in domains])
        lack = need[cols] - masks.astype(float) @ fut
        return entry_costs(masks, lack, v.rows, v.owner, v.req, v.work, v.held, v.surplus, need[cols])

    def _safe_fits(self, job: Job, domains: Sequence[Domain], pods: list[Task] | None = None) -> np.ndarray:
        """Per domain: could the gang's waiting pods fit there, node by node, in the free and releasing
        room plus what the surplus pods of the jobs that might give way (all pods of a broken job)
        free on the same node — that is, without breaking a healthy gang? Each pod is counted at the
        largest request of the waiting pods (and, when they are all alike, within their predicates); a
        job's surplus is counted on every node it runs on (up to its pods there), so this is an upper
        bound: False means some healthy gang must break to enter the domain."""
        waiting = [t for t in job.tasks if t.status in _WAITING and t.managed]
        if not waiting or not domains:
            return np.ones(len(domains), dtype=bool)
        req = np.max([t.request for t in waiting], axis=0)
        cols = np.flatnonzero((req > EPS) & self.cols)
        if not cols.size:
            return np.ones(len(domains), dtype=bool)
        v = self._victims(job, cols, req[cols], pods)
        room = self._future_free(cols)
        if v.rows.size:
            keys, slot = np.unique(v.rows * len(v.surplus) + v.owner, return_inverse=True)
            local = np.bincount(slot, minlength=len(keys))  # its pods on one node
            spare = v.surplus[keys % len(v.surplus)]
            share = np.where(spare < 0, 1.0, np.minimum(local, np.maximum(spare, 0)) / np.maximum(local, 1))
            np.add.at(room, v.rows, v.req * share[slot][:, None])
        slots = np.floor((room + EPS) / req[cols]).min(axis=1)
        if all(t.klass and t.klass == waiting[0].klass for t in waiting):
            slots = slots * self.session.predicate(waiting[0])
        slots = np.minimum(np.maximum(slots, 0), len(waiting))
        return np.array([d.mask for d in domains]).astype(float) @ slots >= len(waiting)

    def _future_free(self, cols: np.ndarray) -> np.ndarray:
        nodes = self.session.cluster.nodes
        return np.clip(nodes.future_idle[:, cols] * (~nodes.down)[:, None], 0, None)

    def _victim_pods(self, job: Job) -> list[Task]:
        """The running pods that might give way to ``job`` — preemptable, of this scheduler: of its
        queue and lower priority for a preempt action, of other reclaimable queues for a reclaim action
        (the session's current action; both for any other)."""
        cluster = self.session.cluster
        asker = self.session.action
        same = not asker.endswith("reclaim")  # preempt: its queue, lower priority
        other = not asker.endswith("preempt")  # reclaim: other, reclaimable queues
        return [
            t
            for t in cluster.tasks.values()
            if t.status in _VICTIM
            and t.managed
            and t.preemptable
            and t.node >= 0
            and t.job is not None
            and t.job is not job
            and (
                (same and t.job.queue == job.queue and t.job.priority < job.priority)
                or (other and t.job.queue != job.queue and _reclaimable(cluster, t.job.queue))
            )
        ]

    def _victims(self, job: Job, cols: np.ndarray, want: np.ndarray, pods: list[Task] | None) -> Victims:
        """The pods that might give way (:meth:`_victim_pods`, unless given) with their requests in
        ``cols``, their work in units of ``want``, and per job what it holds and its surplus above
        minMember (negative: broken)."""
        now = self.session.now
        pods = self._victim_pods(job) if pods is None else pods
        jobs = list({id(t.job): t.job for t in pods}.values())
        index = {id(j): i for i, j in enumerate(jobs)}
        rows = np.array([t.node for t in pods], dtype=np.int64)
        owner = np.array([index[id(t.job)] for t in pods], dtype=np.int64)
        req = (
            np.array([t.request for t in pods]).reshape(len(pods), -1)[:, cols]
            if pods
            else np.zeros((0, len(cols)))
        )
        since = {id(j): checkpoint(j) for j in jobs}
        work = (req / want).sum(axis=1) * np.array([run_hours(t, now, since[id(t.job)]) for t in pods])
        # what each job holds: its candidate pods, and any other pod it has placed
        held = np.bincount(owner, weights=work, minlength=len(jobs)) if pods else np.zeros(len(jobs))
        seen = {id(t) for t in pods}
        ready = np.zeros(len(jobs), dtype=np.int64)
        for j in jobs:
            k = index[id(j)]
            for t in j.tasks:
                if t.status in ALLOCATED_STATES:
                    ready[k] += 1
                    if id(t) not in seen:
                        held[k] += float((t.request[cols] / want).sum()) * run_hours(t, now, since[id(j)])
                elif t.status is TaskStatus.SUCCEEDED:
                    ready[k] += 1
        surplus = ready - np.array([j.min_member for j in jobs], dtype=np.int64)
        return Victims(rows, owner, req, work, held, surplus)


def _reclaimable(cluster: Cluster, queue: str) -> bool:
    q = cluster.queues.get(queue)
    return q is not None and q.reclaimable
