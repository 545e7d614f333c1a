"""The Statement: the transaction every action works through (SPEC.md §2, DESIGN.md convention 4).

Each operation is applied to the session at once and recorded with what it changed; ``commit()`` turns
the operations into decisions, ``discard()`` reverts them in reverse order and restores the state
exactly, ``save()``/``restore()`` let an action dry-run alternatives. Leaving a ``with`` block without
``commit()`` discards. Committing applies nothing more: the state already reflects the operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from corral.errors import CommitError
from corral.framework.capacity import CapacityView
from corral.framework.ledger import Ledger
from corral.model import Cluster
from corral.model.objects import Task, TaskStatus

__all__ = ["Op", "Statement"]


class Host(Protocol):
    """What a Statement works on (the Session): the cluster it changes, the ledger it writes to, the
    capacity view it tells which node rows changed, and the plugins' allocate/deallocate events."""

    cluster: Cluster
    ledger: Ledger
    capacity: CapacityView

    def fire_allocate(self, task: Task) -> None: ...

    def fire_deallocate(self, task: Task) -> None: ...


@dataclass(slots=True)
class Op:
    kind: str  # allocate | pipeline | evict | clear (drop a nomination)
    task: Task
    node: int
    prev_status: TaskStatus
    prev_node: int
    prev_nominated: int
    action: str = ""
    preemptor: str = ""
    reason: str = ""
    was_open_nomination: bool = False


class Statement:
    """A transaction over ``session`` (see the module docstring): it changes pods and node columns, and
    writes what it did to the session's ledger only."""

    def __init__(self, session: Host) -> None:
        self.session = session
        self.ops: list[Op] = []
        self.closed = False

    # -- context manager ---------------------------------------------------------------------------
    def __enter__(self) -> Statement:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.closed:
            self.discard()

    # -- operations --------------------------------------------------------------------------------
    def _apply(self, op: Op) -> None:
        session, task = self.session, op.task
        ledger = session.ledger
        was = ledger.counted(task)
        session.cluster.charge(task, -1)
        if op.kind == "allocate":
            task.status, task.node, task.nominated = TaskStatus.ALLOCATED, op.node, -1
        elif op.kind == "pipeline":
            task.status, task.nominated = TaskStatus.PIPELINED, op.node
        elif op.kind == "clear":
            task.status, task.nominated = TaskStatus.PENDING, -1
        else:
            task.status = TaskStatus.RELEASING
        op.was_open_nomination = ledger.open_nominations.pop(id(task), None) is not None
        session.cluster.charge(task, +1)
        self._fire(was, ledger.counted(task), task)
        session.capacity.touch(op.node, op.prev_node, op.prev_nominated)

    def _revert(self, op: Op) -> None:
        session, task = self.session, op.task
        ledger = session.ledger
        was = ledger.counted(task)
        session.cluster.charge(task, -1)
        task.status, task.node, task.nominated = op.prev_status, op.prev_node, op.prev_nominated
        if op.was_open_nomination:
            ledger.open_nominations[id(task)] = task
        session.cluster.charge(task, +1)
        self._fire(was, ledger.counted(task), task)
        session.capacity.touch(op.node, op.prev_node, op.prev_nominated)

    def _fire(self, was: bool, now: bool, task: Task) -> None:
        """Events follow what the task holds: allocate when it starts holding, deallocate when it stops,
        both when it moves while holding (so per-node indexes follow it)."""
        if was:
            self.session.fire_deallocate(task)
        if now:
            self.session.fire_allocate(task)

    def _op(self, kind: str, task: Task, node: int, **extra: Any) -> None:
        if self.closed:
            raise CommitError("statement already closed", obj=f"Pod {task.key}")
        op = Op(kind, task, node, task.status, task.node, task.nominated, **extra)
        self.session.ledger.operated(task)
        self._apply(op)
        self.ops.append(op)

    def allocate(self, task: Task, node: int) -> None:
        """Place ``task`` on node row ``node`` (a bind once committed)."""
        if task.status not in (TaskStatus.PENDING, TaskStatus.PIPELINED):
            raise CommitError(f"cannot allocate a task in state {task.status.value}", obj=f"Pod {task.key}")
        self._op("allocate", task, node)

    def pipeline(self, task: Task, node: int) -> None:
        """Nominate ``task`` onto ``node``, whose capacity is still being freed."""
        if task.status not in (TaskStatus.PENDING, TaskStatus.PIPELINED):
            raise CommitError(f"cannot pipeline a task in state {task.status.value}", obj=f"Pod {task.key}")
        self._op("pipeline", task, node)

    def evict(self, task: Task, reason: str, *, action: str = "", preemptor: str = "") -> None:
        """Evict a bound or running ``task``; it keeps holding its node until it is gone."""
        if task.status not in (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.ALLOCATED):
            raise CommitError(f"cannot evict a task in state {task.status.value}", obj=f"Pod {task.key}")
        self._op("evict", task, task.node, action=action, preemptor=preemptor, reason=reason)

    def clear_nomination(self, task: Task) -> None:
        """Drop ``task``'s nomination (it goes back to Pending): a higher-priority preemptor took the node."""
        if task.status is not TaskStatus.PIPELINED:
            raise CommitError(
                f"cannot clear the nomination of a task in state {task.status.value}", obj=f"Pod {task.key}"
            )
        self._op("clear", task, task.nominated)

    # -- transaction -------------------------------------------------------------------------------
    def save(self) -> int:
        return len(self.ops)

    def restore(self, mark: int) -> None:
        """Undo every operation after ``mark`` (from :meth:`save`), newest first."""
        while len(self.ops) > mark:
            self._revert(self.ops.pop())

    def discard(self) -> None:
        self.restore(0)
        self.closed = True

    def commit(self) -> None:
        """Record the operations as decisions; the state already holds them."""
        if self.closed:
            raise CommitError("statement already closed")
        self.session.ledger.record(self.ops)
        self.ops = []
        self.closed = True

    def tasks(self, kind: str | None = None) -> list[Task]:
        return [op.task for op in self.ops if kind is None or op.kind == kind]
