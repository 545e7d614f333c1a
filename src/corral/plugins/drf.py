"""``drf``: dominant resource fairness (Volcano ``plugins/drf``).

A job's share is its dominant share: the largest, over resources, of what it holds divided by the
cluster total. JobOrder serves the smaller share first; Preemptable lets a preemptor evict a task of
another job only while the preemptor's share after taking the task stays below the victim's share after
losing it. With ``enableHierarchy`` the queues are ordered by Volcano's hierarchical DRF: each queue's
place in the tree is its ``volcano.sh/hierarchy`` annotation (``root/eng/prod``) with weights from
``volcano.sh/hierarchy-weights`` (``1/2/8``); two queues are compared at the first level where their paths
part, by the dominant share of the subtree divided by its weight; and Reclaimable compares the same two
subtrees — the branches just below the lowest common ancestor of the reclaimer's and the victim's
queues — after the move (see :meth:`DrfPlugin.reclaimable`).
"""

from __future__ import annotations

import numpy as np

from corral.framework.extension import (
    EventHandler,
    KeyedJobOrder,
    Preemptable,
    QueueOrder,
    QueueRule,
    Reclaimable,
)
from corral.framework.plugin import Plugin
from corral.model import Job, Queue, Task
from corral.model.resources import PODS

__all__ = ["DrfPlugin"]

_HIER, _WEIGHTS = "volcano.sh/hierarchy", "volcano.sh/hierarchy-weights"


class DrfPlugin(Plugin, KeyedJobOrder, QueueOrder, Preemptable, Reclaimable, EventHandler, QueueRule):
    name = "drf"

    def on_session_open(self) -> None:
        cluster = self.session.cluster
        total = cluster.total_allocatable().astype(float)
        total[cluster.resources.pos(PODS)] = 0.0  # pods count is not a resource to share fairly
        self.inv = np.divide(1.0, total, out=np.zeros_like(total), where=total > 0)
        self.usage = dict(self.session.job_usage())
        self._shares: dict[str, float] = {}  # cache, dropped for a job when its usage changes
        self.hierarchy = self.switch("enableHierarchy", False)
        if self.hierarchy:
            self._build_hierarchy()

    # -- shares ----------------------------------------------------------------------------------
    def _share(self, vec: np.ndarray) -> float:
        return float((vec * self.inv).max(initial=0.0))

    def _job_share(self, job: Job) -> float:
        share = self._shares.get(job.uid)
        if share is None:
            share = self._shares[job.uid] = self._share(self.usage.get(job.uid, 0.0 * self.inv))
        return share

    def job_order_key(self, job: Job) -> float:
        """A sort key giving the order of ``job_order`` (Session.job_sort_key): smaller share first."""
        return self._job_share(job)

    def job_order_key_context(self) -> bytes:
        """The key is a function of the job's own pods (what they hold) and of the cluster's total, the
        context (Session.job_sort_key may keep it across cycles while both stay the same)."""
        return self.inv.tobytes()

    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task] | None:
        pj = preemptor.job
        if pj is None:
            return None
        mine = self._share(self.usage.get(pj.uid, 0.0) + preemptor.request)
        out: list[Task] = []
        left: dict[str, np.ndarray] = {}
        for t in candidates:
            if t.job is None or t.job is pj:
                out.append(t)
                continue
            vec = left.get(t.job.uid)
            if vec is None:
                vec = self.usage.get(t.job.uid, np.zeros_like(self.inv)).copy()
            vec = vec - t.request
            if mine < self._share(vec) or np.isclose(mine, self._share(vec)):
                out.append(t)
                left[t.job.uid] = vec
        return out

    # -- events ----------------------------------------------------------------------------------
    def on_allocate(self, task: Task) -> None:
        if task.job is not None:
            self.usage[task.job.uid] = self.usage.get(task.job.uid, 0.0) + task.request
            self._shares.pop(task.job.uid, None)
            if self.hierarchy:
                self._charge(task, +1)

    def on_deallocate(self, task: Task) -> None:
        if task.job is not None:
            left = self.usage.get(task.job.uid, 0.0) - task.request
            if left.any():
                self.usage[task.job.uid] = left
            else:  # holds nothing: no entry, as when the session opened (shares.job_usage)
                self.usage.pop(task.job.uid, None)
            self._shares.pop(task.job.uid, None)
            if self.hierarchy:
                self._charge(task, -1)

    # -- hierarchy -------------------------------------------------------------------------------
    def _path(self, queue: Queue) -> list[tuple[str, float]]:
        names = [p for p in queue.annotations.get(_HIER, f"root/{queue.name}").split("/") if p]
        raw = [w for w in queue.annotations.get(_WEIGHTS, "").split("/") if w]
        weights = []
        for i in range(len(names)):
            try:
                weights.append(max(float(raw[i]), 1e-9))
            except (IndexError, ValueError):
                weights.append(1.0)
        prefix = []
        out = []
        for name, w in zip(names, weights):
            prefix.append(name)
            out.append(("/".join(prefix), w))
        return out

    def _build_hierarchy(self) -> None:
        cluster = self.session.cluster
        self.paths = {q.name: self._path(q) for q in cluster.queues.values()}
        self.node_usage: dict[str, np.ndarray] = {}
        for job in cluster.jobs.values():
            vec = self.usage.get(job.uid)
            if vec is None or job.queue not in self.paths:
                continue
            for key, _ in self.paths[job.queue]:
                self.node_usage[key] = self.node_usage.get(key, 0.0) + vec

    def _charge(self, task: Task, sign: int) -> None:
        for key, _ in self.paths.get(task.job.queue, ()):
            self.node_usage[key] = self.node_usage.get(key, 0.0) + sign * task.request

    def queue_rule_enabled(self) -> bool:
        """With ``enableHierarchy`` this plugin's Reclaimable is a queue rule: reclaim applies it whatever
        tier it sits in, as it does proportion's and capacity's."""
        return self.hierarchy

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        """Hierarchical DRF's reclaim rule (Volcano ``plugins/drf`` ReclaimableFn with hierarchy): a victim
        is allowed while, at the first level where the two queues' paths part — just below their lowest
        common ancestor, the only level a move between them changes — the reclaimer's branch holding the
        reclaimer's task still has a smaller weighted dominant share than the victim's branch without the
        victim (victims allowed before it counted). Abstains without ``enableHierarchy``."""
        if not self.hierarchy or reclaimer.job is None or reclaimer.job.queue not in self.paths:
            return None
        mine = self.paths[reclaimer.job.queue]
        given: dict[str, np.ndarray] = {}  # path key -> what victims allowed so far free there
        out = []
        for t in candidates:
            if t.job is None or t.job.queue not in self.paths:
                continue
            theirs = self.paths[t.job.queue]
            level = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a[0] != b[0]), None)
            if level is None:
                continue
            (ka, wa), (kb, wb) = mine[level], theirs[level]
            zero = 0.0 * self.inv
            sa = self._share(self.node_usage.get(ka, zero) + reclaimer.request) / wa
            after = self.node_usage.get(kb, zero) - given.get(kb, zero) - t.request
            if sa < self._share(after) / wb - 1e-12:
                for key, _ in theirs[level:]:
                    given[key] = given.get(key, zero) + t.request
                out.append(t)
        return out

    def queue_order(self, a: Queue, b: Queue) -> int:
        if not self.hierarchy:
            return 0
        pa, pb = self.paths.get(a.name, []), self.paths.get(b.name, [])
        for (ka, wa), (kb, wb) in zip(pa, pb):
            if ka == kb:
                continue
            sa = self._share(self.node_usage.get(ka, 0.0 * self.inv)) / wa
            sb = self._share(self.node_usage.get(kb, 0.0 * self.inv)) / wb
            return (sa > sb) - (sa < sb)
        return 0
