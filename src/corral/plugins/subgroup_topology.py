"""The topology constraints of KAI sub-groups, for ``network-topology-aware`` (its Predicate and NodeOrder).

KAI (``pkg/scheduler/plugins/topology``, ``subSetNodesFn`` per sub-group; docs/topology/multilevel.md):
each sub-group's ``topologyConstraint`` holds for the pods of the leaves under it, independently of the
other sub-groups' — sub-group a in one rack, sub-group b in one rack, possibly another.

corral places a gang pod by pod, so the constraint is kept as pods are placed:

- **required level** (Predicate): once pods of the sub-group hold nodes (placed, bound, allocated this
  cycle or nominated), its other pods may go only to the domain of that level holding all of them (none
  when they already span two: a required level KAI never breaks either). Before any is placed, the
  tightest domain of that level that holds the sub-group's pods its minimums need, counted node by node
  (KAI's ``checkJobDomainFit`` on the sub-group, and its packing order): a choice made once, so that a
  sibling sub-group keeps the room it needs. Constraints are applied from the widest (the podgroup's
  own required level, then outer sub-groups') to the leaf's, each choice inside the ones before.
- **preferred level** (NodeOrder): nodes of the preferred-level domain that holds most of the
  sub-group's placed pods score 100 (times the plugin's ``weight``), so its pods stay together when they
  can; KAI orders nodes by the preferred level the same way (``calculateNodeScores``).

The mask depends on the job's own placed pods, so ``predicate_by_class`` is off for sessions that hold
such a job (actions/common/skipping.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from corral.model import ALLOCATED_STATES, Job, Task, TaskStatus
from corral.model.resources import EPS, PODS

if TYPE_CHECKING:
    from corral.framework.session import Session
    from corral.model.subgroups import SubGroupConstraint

__all__ = ["SubGroupTopology"]

_WAITING = frozenset({TaskStatus.PENDING, TaskStatus.PIPELINED})


def _rows(job: Job, leaves: set[str]) -> np.ndarray:
    rows = set()
    for t in job.tasks:
        if t.role not in leaves:
            continue
        if t.status in ALLOCATED_STATES and t.node >= 0:
            rows.add(t.node)
        elif t.status is TaskStatus.PIPELINED and t.nominated >= 0:
            rows.add(t.nominated)
    return np.array(sorted(rows), dtype=np.int64)


def _held_by(job: Job, n_nodes: int, n_res: int) -> np.ndarray:
    """Per node, the requests of ``job``'s pods that hold it: placed there, or nominated to it."""
    out = np.zeros((n_nodes, n_res))
    for t in job.tasks:
        if t.status in ALLOCATED_STATES and t.node >= 0:
            out[t.node] += t.request
        elif t.status is TaskStatus.PIPELINED and t.nominated >= 0:
            out[t.nominated] += t.request
    return out


class SubGroupTopology:
    """The sub-group constraints of one session's jobs over its topology domains."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.tree = session.cluster.hypernodes
        self.active = any(
            j.subgroup_tree is not None and any(g.constraint for g in j.subgroup_tree.groups.values())
            for j in session.cluster.jobs.values()
        )
        self._everywhere = np.ones(len(session.cluster.nodes), dtype=bool)

    def _constraints(self, task: Task, mode: str) -> list[SubGroupConstraint]:
        job = task.job
        if not self.active or job is None or job.subgroup_tree is None or not task.role:
            return []
        if task.role not in job.subgroup_tree.groups:
            return []
        return [c for c in job.subgroup_tree.constraints_of(task.role) if c.mode == mode]

    def _level(self, c: SubGroupConstraint, tier: int) -> np.ndarray:
        hx = self.tree.index()
        return np.flatnonzero(hx.of_family(c.family) & (hx.tier == tier))

    def mask(self, task: Task) -> np.ndarray:
        """Where ``task`` may go under its sub-groups' required levels (every node when none), the
        widest constraint first (the podgroup's own, then the outer sub-groups', then its leaf's)."""
        hard = self._constraints(task, "hard")
        if not hard:
            return self._everywhere
        job = task.job
        assert job is not None and job.subgroup_tree is not None
        tree = job.subgroup_tree
        chain: list[tuple[set[str], str, int]] = [
            (tree.leaves_under(c.subgroup), c.family, c.tier) for c in reversed(hard)
        ]
        if job.topology_mode == "hard" and job.topology_family and job.topology_tier:
            chain.insert(0, (set(tree.leaves()), job.topology_family, job.topology_tier))
        nodes = self.session.cluster.nodes
        hx = self.tree.index()
        out = self._everywhere.copy()
        for leaves, family, tier in chain:
            level = np.flatnonzero(hx.of_family(family) & (hx.tier == tier))
            placed = _rows(job, leaves)
            if placed.size:
                ok = level[hx.containing(placed, len(nodes))[level]]
            else:
                ok = self._tightest(job, leaves, level, out)
            allowed = np.zeros(len(nodes), dtype=bool)
            for h in ok.tolist():
                allowed |= hx.nodes[h].mask
            out &= allowed
        return out

    def _tightest(self, job: Job, leaves: set[str], level: np.ndarray, within: np.ndarray) -> np.ndarray:
        """The domain of ``level`` (inside ``within``) a sub-group none of whose pods is placed yet
        starts in: the one with the fewest free pod slots that still holds the pods its minimums need
        — the tightest, as KAI sorts domains for packing (``sortTreeFromRoot``) — counted node by node
        at the largest request among its waiting pods; failing that, the tightest whose capacity could
        hold them once freed — less what the job's own pods hold there (placed or nominated: a
        sibling sub-group's pods never give way to it, as pods of the preemptor's job are never
        victims); none when no domain could."""
        tree = job.subgroup_tree
        waiting = [t for t in job.tasks if t.role in leaves and t.status in _WAITING and t.managed]
        count = sum(tree.groups[leaf].min_member or 0 for leaf in leaves)
        if not waiting or not count or not level.size:
            return level
        nodes = self.session.cluster.nodes
        res = self.session.cluster.resources
        req = np.max(np.array([t.request for t in waiting]), axis=0)
        cols = np.flatnonzero(req > EPS)
        cols = cols[cols != res.pos(PODS)]
        hx = self.tree.index()
        live = (within & ~nodes.down).astype(float)
        for have in (nodes.future_idle, nodes.allocatable - _held_by(job, len(nodes), req.shape[0])):
            if cols.size:
                per = np.floor((np.clip(have[:, cols], 0, None) + EPS) / req[cols]).min(axis=1)
            else:
                per = np.full(len(nodes), float(count))
            slots = hx.sums(np.minimum(per, count) * live)[level]
            fit = np.flatnonzero(slots >= count)
            if fit.size:
                best = fit[np.lexsort((level[fit], slots[fit]))][0]
                return level[[best]]
        return level[:0]

    def scores(self, task: Task, rows: np.ndarray) -> np.ndarray:
        """100 for the rows in the preferred-level domain holding most of the sub-group's placed pods."""
        soft = [c for c in self._constraints(task, "soft") if c.preferred_tier]
        hard = [c for c in self._constraints(task, "hard") if c.preferred_tier and c.preferred_tier < c.tier]
        out = np.zeros(len(rows))
        job = task.job
        if job is None or job.subgroup_tree is None:
            return out
        hx = self.tree.index()
        for c in soft + hard:
            placed = _rows(job, job.subgroup_tree.leaves_under(c.subgroup))
            if not placed.size:
                continue
            level = self._level(c, c.preferred_tier or 0)
            if not level.size:
                continue
            counts = np.array([int(hx.nodes[h].mask[placed].sum()) for h in level.tolist()])
            best = hx.nodes[int(level[int(np.argmax(counts))])].mask
            out += np.where(best[rows], 100.0, 0.0)
        return out

    def local(self, task: Task) -> bool:
        """Is ``task``'s score for a node independent of the placement (no preferred sub-group level)?"""
        return not (self._constraints(task, "soft") or self._constraints(task, "hard"))
