"""``conformance`` (Volcano ``plugins/conformance``): never evict pods in ``kube-system`` or of the
system-critical priority classes; corral also keeps pods marked ``volcano.sh/preemptable: "false"``
(and pods of other schedulers) out of every victim list here, besides the actions' own filter."""

from __future__ import annotations

from corral.framework.extension import Preemptable, Reclaimable, UnifiedEvictable
from corral.framework.plugin import Plugin
from corral.model import Task

__all__ = ["ConformancePlugin", "evictable_at_all"]

_CRITICAL = {"system-cluster-critical", "system-node-critical"}


def evictable_at_all(task: Task) -> bool:
    return (
        task.managed
        and task.preemptable
        and task.namespace != "kube-system"
        and task.priority_class not in _CRITICAL
    )


class ConformancePlugin(Plugin, Preemptable, Reclaimable, UnifiedEvictable):
    name = "conformance"

    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task] | None:
        return [t for t in candidates if evictable_at_all(t)]

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task] | None:
        return [t for t in candidates if evictable_at_all(t)]

    def unified_evictable(self, preemptor: Task, candidates: list[Task], action: str) -> list[Task] | None:
        return [t for t in candidates if evictable_at_all(t)]
