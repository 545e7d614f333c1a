"""The state of the kept model as built, put back before every cycle (:class:`BuiltState`, held by
:class:`~corral.kube.model.LiveModel`).

A cycle changes the cluster it runs on: pods' states, nodes and nominations (and a GPU-sharing pod's
device annotation), podgroups' phases and annotations, the node columns and locks, DRA allocations. The
next cycle must start from the cache's state, as a freshly assembled cluster would, so what each task,
job and node held when built is kept and put back.

What is put back costs what the last cycle changed, not the cluster: a session changes pods only through
its operations and lists them (``Decisions.touched``), and names the jobs it changed (a pod operated
on, a phase moved, an annotation written: ``Decisions.changed_jobs``). The runner hands those over
(:meth:`BuiltState.changed`) after the cycle; only those tasks and jobs are put back. When nothing was
handed over for the cluster last given out (a cycle that failed, a caller that does not tell), every
task and job is put back, as before. The node columns, locks and DRA allocations are arrays and one
dict, copied whole.

``CORRAL_CHECK_INDEX=1`` checks after each partial put-back that every task and job is as built
(:class:`~corral.kube.jobfacts.IndexMismatch` otherwise).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.kube.jobfacts import IndexMismatch, check_enabled
from corral.model import Job, Nodes, Task

__all__ = ["BuiltState"]


def _task_state(t: Task) -> tuple:
    return (t, t.status, t.node, t.nominated, t.annotations)


def _job_state(j: Job) -> tuple:
    return (j, j.phase, dict(j.annotations))


class BuiltState:
    """What each task, job and node held when built; :meth:`restore` puts it back."""

    def __init__(self) -> None:
        self.tasks: dict[str, tuple] = {}  # pod key -> (task, status, node, nominated, annotations)
        self.jobs: dict[str, tuple] = {}  # job uid -> (job, phase, annotations)
        self.columns: tuple[np.ndarray, ...] = ()  # used, releasing, pipelined
        self.locks: list[str | None] = []
        self.down: np.ndarray = np.zeros(0, dtype=bool)
        self.dra_built: dict[str, Any] = {}
        #: what the cycles since the last restore changed: (tasks, job uids); None: unknown (all)
        self.since: tuple[list[Task], set[str]] | None = None
        self.restored = 0  # tasks and jobs put back by the last restore
        self.check = check_enabled()

    # -- keeping --------------------------------------------------------------------------------------
    def keep_task(self, t: Task) -> None:
        self.tasks[t.key] = _task_state(t)

    def drop_task(self, key: str) -> None:
        del self.tasks[key]

    def keep_job(self, j: Job) -> None:
        j.annotations = dict(j.annotations)  # a record's dict never reaches a cycle
        self.jobs[j.uid] = _job_state(j)

    def drop_job(self, uid: str) -> None:
        del self.jobs[uid]

    def keep_nodes(self, nodes: Nodes) -> None:
        self.columns = (nodes.used.copy(), nodes.releasing.copy(), nodes.pipelined.copy())
        self.locks = list(nodes.locked_for)
        self.down = nodes.down.copy()

    def keep_columns(self, nodes: Nodes) -> None:
        """The node columns as they are now are the ones built (tasks were charged or taken off)."""
        for built, now in zip(self.columns, (nodes.used, nodes.releasing, nodes.pipelined)):
            np.copyto(built, now)

    # -- a cycle's changes ----------------------------------------------------------------------------
    def handed_out(self) -> None:
        """A cluster of the model was given out: what happens to it is unknown until :meth:`changed`."""
        self.since = None

    def changed(self, touched: list[Any] | None, jobs: set[str] | None) -> None:
        """The one cycle run on the cluster last given out changed the pods of ``touched`` (``(task,
        status, nominated)`` as ``Decisions.touched`` lists them) and the jobs ``jobs``; None: unknown."""
        if touched is None or jobs is None:
            self.since = None
            return
        self.since = ([t for t, _s, _n in touched], set(jobs))

    def untouched(self) -> None:
        """Nothing changed the cluster last given out (a standby's build, discarded)."""
        self.since = ([], set())

    # -- putting back ---------------------------------------------------------------------------------
    def restore(self, nodes: Nodes, dra: Any) -> None:
        """Put back the state as built of what the cycles since the last restore changed (of every task
        and job when that is unknown), and the node columns, locks and DRA allocations."""
        since = self.since
        if since is None:
            self.restored = len(self.tasks) + len(self.jobs)
            for t, status, node, nominated, notes in self.tasks.values():
                t.status, t.node, t.nominated, t.annotations = status, node, nominated, notes
            for job, phase, notes in self.jobs.values():
                job.phase = phase
                job.annotations = dict(notes)
        else:
            tasks, uids = since
            self.restored = len(tasks) + len(uids)
            for task in tasks:
                kept = self.tasks.get(task.key)
                if kept is not None and kept[0] is task:
                    task.status, task.node, task.nominated, task.annotations = kept[1:]
            for uid in uids:
                got = self.jobs.get(uid)
                if got is not None:
                    got[0].phase = got[1]
                    got[0].annotations = dict(got[2])
        self.since = None
        for target, built in zip((nodes.used, nodes.releasing, nodes.pipelined), self.columns):
            np.copyto(target, built)
        nodes.locked_for[:] = self.locks
        np.copyto(nodes.down, self.down)
        if dra is not None:  # the claims allocated as built (a cycle's allocations undone)
            dra.allocations = dict(self.dra_built)
        if self.check and since is not None:
            wrong = self.differences()
            if wrong:
                raise IndexMismatch(
                    f"the model is not as built after its cycle was put back: {'; '.join(wrong)}"
                )

    def differences(self) -> list[str]:
        """The tasks and jobs not in their state as built (at most five named)."""
        wrong = [
            f"pod {key}"
            for key, (t, status, node, nominated, notes) in self.tasks.items()
            if t.status is not status or t.node != node or t.nominated != nominated or t.annotations != notes
        ]
        wrong += [
            f"job {uid}"
            for uid, (j, phase, notes) in self.jobs.items()
            if j.phase is not phase or j.annotations != notes
        ]
        return wrong[:5]
