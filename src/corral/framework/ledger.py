"""The ledger of one session: what the cycle changed, and what it will say (DESIGN.md, the target plan).

Actions and plugins write here — through the Statement (operations, recorded as decisions when committed),
or directly for what is not an operation on a pod (a reason a job did not start, an annotation, a phase,
a node lock). The session's closing (:mod:`corral.framework.closing`) reads it to finish the decisions.
Nominations made by earlier cycles are part of it: they reserve node capacity but do not count for their
job or queue until this session places them again (:meth:`Ledger.counted`), as in Volcano where such pods
open the session as Pending.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from corral.framework.decisions import Bind, Decisions, Eviction, NodeLock, Nomination
from corral.model import ALLOCATED_STATES, Cluster, Job, PodGroupPhase, Task, TaskStatus

__all__ = ["Ledger"]


class _Op(Protocol):
    kind: str
    task: Task
    node: int
    action: str
    preemptor: str


class Ledger:
    """What one session changed (see the module docstring)."""

    def __init__(self, cluster: Cluster, cycle: int, open_nominations: dict[int, Task]) -> None:
        self.cluster = cluster
        self.cycle = cycle
        self.decisions = Decisions()
        # job uid -> why it did not start this cycle (a callable is formatted when the session closes)
        self.reasons: dict[str, str | Callable[[], str]] = {}
        self.annotations: dict[str, dict[str, str]] = {}
        self.kept: list[Any] = []  # pipelined jobs' statements, held to the end
        # pods changed by the session's operations: id -> (task, status, nomination before the first)
        self.first_state: dict[int, tuple[Task, TaskStatus, int]] = {}
        self.touched_jobs: set[str] = set()  # uids of their jobs
        self.moved_jobs: set[str] = set()  # uids of jobs whose phase the session moved
        self.nominated_domains: dict[str, str] = {}  # job uid -> domain name (gang eviction)
        self.lock_version = 0  # bumps whenever node locks change (seed 001)
        #: nominations of earlier cycles this session has not placed again: id(task) -> task
        self.open_nominations = open_nominations
        #: called first when the session closes (``consolidate`` releases its moved pods' stand-ins)
        self.closers: list[Callable[[], None]] = []

    def counted(self, task: Task) -> bool:
        """Does ``task`` hold resources for its job and queue (what the events report)?"""
        return task.status in ALLOCATED_STATES or (
            task.status is TaskStatus.PIPELINED and id(task) not in self.open_nominations
        )

    def operated(self, task: Task) -> None:
        """An operation is about to change ``task`` (the Statement calls this first)."""
        self.first_state.setdefault(id(task), (task, task.status, task.nominated))
        if task.job is not None:
            self.touched_jobs.add(task.job.uid)

    def since_open(self) -> tuple[set[str], set[str]]:
        """The jobs the session changed since it opened: pods operated on, phases moved."""
        return self.touched_jobs, self.moved_jobs

    def record(self, ops: Sequence[_Op]) -> None:
        """Turn committed operations into decisions (called by ``Statement.commit``)."""
        names, out, cycle = self.cluster.nodes.names, self.decisions, self.cycle
        for op in ops:
            t = op.task
            if op.kind == "allocate":
                out.binds.append(Bind(t.key, names[op.node], cycle, t.job.uid if t.job is not None else ""))
            elif op.kind == "pipeline":
                out.nominations.append(Nomination(t.key, names[op.node], cycle))
            elif op.kind == "clear":
                # a nomination with an empty node clears nominatedNodeName (SPEC.md §4, added meaning)
                out.nominations.append(Nomination(t.key, "", cycle))
            else:
                out.evictions.append(Eviction(t.key, names[op.node], op.action, op.preemptor, cycle))

    def keep(self, stmt: Any) -> None:
        """Hold a pipelined job's placement (a Statement) for the rest of the cycle; it is nominated at
        close."""
        self.kept.append(stmt)

    def unschedulable(self, job: Job, reason: str | Callable[[], str]) -> None:
        """Why ``job`` did not start; a callable is formatted only when the session closes."""
        self.reasons[job.uid] = reason

    def annotate(self, job: Job, key: str, value: str) -> None:
        job.annotations[key] = value
        self.annotations.setdefault(job.uid, {})[key] = value

    def set_phase(self, job: Job, phase: PodGroupPhase) -> None:
        """Move ``job``'s podgroup to ``phase`` (every phase change in a session goes through here, so
        the session knows which jobs moved without comparing every job's phase when it closes)."""
        job.phase = phase
        self.moved_jobs.add(job.uid)

    def lock_nodes(self, rows: Sequence[int], job: str) -> None:
        """Lock node ``rows`` for ``job`` ("ns/podgroup"), or release them (``job`` empty): the state
        changes at once and each row becomes a ``node_locks`` decision."""
        nodes = self.cluster.nodes
        for r in rows:
            nodes.locked_for[r] = job
            self.decisions.node_locks.append(NodeLock(nodes.names[r], job, self.cycle))
        if len(rows):
            self.lock_version += 1
