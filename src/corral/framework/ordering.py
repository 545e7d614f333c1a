"""The orders of a session (SPEC.md §2): jobs, queues, victim queues and tasks, each the first non-zero
answer of its point's plugins in tier order, then creation time and name (Volcano's ``JobOrderFn`` and
friends fall back the same way).

Job order is also offered as plain keys (:meth:`Ordering.job_sort_key`) when every JobOrder plugin is
keyed (:class:`~corral.framework.extension.JobOrderKey`, one key per plugin; the comparison of
:class:`~corral.framework.extension.KeyedJobOrder` derives from it, so the order is written once): a
tuple per job, kept across cycles by the front end's history while the keys' context is unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral.framework.extension import JobOrderKey, KeyHorizon
from corral.framework.points import declares

if TYPE_CHECKING:
    from corral.framework.ledger import Ledger
    from corral.framework.memo import ClusterHistory
    from corral.model import Cluster, Job, Queue, Task

__all__ = ["Ordering", "cmp"]


def cmp(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


class Ordering:
    """The ordering half of the Session's dispatch (a base of :class:`~corral.framework.session.Session`)."""

    cluster: Cluster
    ledger: Ledger
    history: ClusterHistory
    now: float
    points: dict[str, list[list[Callable[..., Any]]]]
    members: dict[str, list[list[Any]]]

    def fns(self, point: str) -> list[Callable[..., Any]]:
        raise NotImplementedError  # the Session's

    def _compare(self, point: str, a: Any, b: Any) -> int:
        for tier in self.points[point]:
            for fn in tier:
                r = fn(a, b)
                if r:
                    return r
        return 0

    def compare_jobs(self, a: Job, b: Job) -> int:
        """JobOrder over the plugins only (0 when none can tell)."""
        return self._compare("JobOrder", a, b)

    def job_key(self) -> Callable[[Job], Any]:
        def order(a: Job, b: Job) -> int:
            return self._compare("JobOrder", a, b) or cmp((a.creation, a.uid), (b.creation, b.uid))

        return functools.cmp_to_key(order)

    def _keyed(self) -> list[Any] | None:
        """The JobOrder plugins in tier order when every one is keyed, else None."""
        plugins = [p for tier in self.members["JobOrder"] for p in tier]
        if len(plugins) != len(self.fns("JobOrder")) or not all(declares(p, JobOrderKey) for p in plugins):
            return None
        return plugins

    def job_sort_key(self) -> Callable[[Job], Any]:
        """The order of :meth:`job_key` as a plain tuple computed once per job, when every JobOrder
        plugin is keyed; otherwise :meth:`job_key`. For orders taken while the compared jobs do not
        change — enqueue's pending jobs, allocate's jobs waiting their turn (only the job whose turn it
        is gets pods) — where it is the same order at a fraction of the cost (no Python call per
        comparison). The keys are kept across cycles by the history (while the plugins' contexts are
        unchanged and the job was not touched or reported changed; with a plugin whose keys of running
        jobs move with the clock, ``running_keys_move``, the moving keys of a job with a running
        pod are taken again at each use, the other plugins' kept)."""
        plugins = self._keyed()
        if plugins is None:
            return self.job_key()
        keys = [p.job_order_key for p in plugins]
        movers = [(i, p.job_order_key) for i, p in enumerate(plugins) if p.running_keys_move]

        def compute(job: Job) -> tuple[Any, ...]:
            return (tuple([k(job) for k in keys]), job.creation, job.uid)

        def retaken(job: Job, kept: tuple[Any, ...]) -> tuple[Any, ...]:
            """A running job's kept key with the moving plugins' keys taken again."""
            parts = list(kept[0])
            for i, k in movers:
                parts[i] = k(job)
            return (tuple(parts), kept[1], kept[2])

        moved: Callable[[Job, tuple[Any, ...]], tuple[Any, ...]] = retaken
        if movers and all(declares(plugins[i], KeyHorizon) for i, _ in movers):
            moved = self.history.order_keys.until_horizon(
                retaken, [plugins[i].key_until for i, _ in movers], self.now, self.history.check_index
            )

        return self.history.order_keys.keyed(
            self.cluster.jobs,
            tuple(p.job_order_key_context() for p in plugins),
            compute,
            self.ledger.touched_jobs,
            self.history.reported,
            moving=moved if movers else None,
        )

    def job_order_context(self) -> tuple[Any, ...] | None:
        """The context of :meth:`job_sort_key` when its keys are a function of the job and this context
        alone (every JobOrder plugin keyed), else None."""
        plugins = self._keyed()
        return None if plugins is None else tuple(p.job_order_key_context() for p in plugins)

    def queue_key(self) -> Callable[[Queue], Any]:
        def order(a: Queue, b: Queue) -> int:
            return self._compare("QueueOrder", a, b) or cmp((a.creation, a.name), (b.creation, b.name))

        return functools.cmp_to_key(order)

    def victim_queue_key(self) -> Callable[[Queue], Any]:
        """VictimQueueOrder; where no plugin tells two queues apart, the reverse of QueueOrder (Volcano's
        ``VictimQueueOrderFn`` falls back to ``!QueueOrderFn``): the queue served last gives first."""

        def order(a: Queue, b: Queue) -> int:
            return self._compare("VictimQueueOrder", a, b) or -(
                self._compare("QueueOrder", a, b) or cmp((a.creation, a.name), (b.creation, b.name))
            )

        return functools.cmp_to_key(order)

    def task_key(self) -> Callable[[Task], Any]:
        def order(a: Task, b: Task) -> int:
            return self._compare("TaskOrder", a, b) or cmp((a.creation, a.name), (b.creation, b.name))

        return functools.cmp_to_key(order)
