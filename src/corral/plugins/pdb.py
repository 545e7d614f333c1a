"""``pdb``: PodDisruptionBudgets (policy/v1) for the eviction actions (seed 003, SPEC.md §3.2).

For a list of victims evicted together, ``violating`` says which evictions would take a budget below
what it allows: a budget allows ``healthy − desired`` disruptions, where healthy counts the matching pods
that run and desired is ``minAvailable`` (a number, or a percentage of the matching pods rounded up) or
the matching pods minus ``maxUnavailable`` (percentage rounded up), as the Kubernetes disruption
controller computes it. Victims that violate are taken last and counted in the node ranking by
``preempt``/``reclaim``; they are not forbidden (Volcano's pdb plugin filters them out entirely; corral,
like kube-scheduler, prefers other victims and evicts a violating one only when nothing else works).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from corral.framework.extension import DisruptionBudget, EventHandler
from corral.framework.plugin import Plugin
from corral.model import PodDisruptionBudget, Task, TaskStatus

__all__ = ["PdbPlugin", "allowed_disruptions"]

_HEALTHY = {TaskStatus.RUNNING}


def _amount(value: int | str, total: int, *, up: bool = True) -> int:
    if isinstance(value, str) and value.endswith("%"):
        pct = float(value[:-1]) / 100.0 * total
        return math.ceil(pct) if up else math.floor(pct)
    return int(value)


def allowed_disruptions(pdb: PodDisruptionBudget, pods: Sequence[Task]) -> int:
    matching = [t for t in pods if t.namespace == pdb.namespace and pdb.selector.matches(t.labels)]
    healthy = sum(1 for t in matching if t.status in _HEALTHY)
    if pdb.min_available is not None:
        desired = _amount(pdb.min_available, len(matching))
    elif pdb.max_unavailable is not None:
        desired = len(matching) - _amount(pdb.max_unavailable, len(matching))
    else:
        return len(matching)
    return healthy - desired


class PdbPlugin(Plugin, EventHandler, DisruptionBudget):
    name = "pdb"

    def on_session_open(self) -> None:
        cluster = self.session.cluster
        pods = list(cluster.tasks.values())
        self.budgets = [(pdb, allowed_disruptions(pdb, pods)) for pdb in cluster.pdbs]
        self.healthy = {id(t) for t in pods if t.status in _HEALTHY}

    def violating(self, tasks: Sequence[Task]) -> list[bool]:
        left = {id(pdb): allowed for pdb, allowed in self.budgets}
        out = []
        for t in tasks:
            bad = False
            for pdb, _ in self.budgets:
                if t.namespace == pdb.namespace and pdb.selector.matches(t.labels) and t.status in _HEALTHY:
                    left[id(pdb)] -= 1
                    bad = bad or left[id(pdb)] < 0
            out.append(bad)
        return out

    def _move(self, task: Task, sign: int) -> None:
        self.budgets = [
            (
                pdb,
                allowed
                + (sign if task.namespace == pdb.namespace and pdb.selector.matches(task.labels) else 0),
            )
            for pdb, allowed in self.budgets
        ]

    def on_deallocate(self, task: Task) -> None:
        """An eviction committed or applied in the session uses up the budgets it matches — only if the
        pod was healthy (running): evicting a pod that is not does not lower what a budget allows."""
        if task.status not in _HEALTHY and id(task) in self.healthy:
            self.healthy.discard(id(task))
            self._move(task, -1)

    def on_allocate(self, task: Task) -> None:
        """A reverted eviction of a healthy pod gives the budget back."""
        if task.status in _HEALTHY and id(task) not in self.healthy:
            self.healthy.add(id(task))
            self._move(task, +1)
