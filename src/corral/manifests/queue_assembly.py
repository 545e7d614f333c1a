"""Assembly step for the queues of a cluster: Queue records into the model's queue tree, with the
implicit ``root`` and ``default`` queues Volcano creates, and resource vectors from name -> amount maps."""

from __future__ import annotations

from typing import overload

import numpy as np

from corral.errors import InputError
from corral.manifests.records import QueueRec
from corral.model.objects import Queue
from corral.model.resources import ResourceIndex

__all__ = ["assemble_queues", "resource_vector"]


@overload
def resource_vector(resources: ResourceIndex, amounts: dict[str, float], fill: float) -> np.ndarray: ...
@overload
def resource_vector(
    resources: ResourceIndex, amounts: dict[str, float] | None, fill: float
) -> np.ndarray | None: ...
def resource_vector(
    resources: ResourceIndex, amounts: dict[str, float] | None, fill: float
) -> np.ndarray | None:
    """The vector of ``amounts`` by resource name, ``fill`` elsewhere; None for None."""
    if amounts is None:
        return None
    vec = np.full(len(resources), fill)
    for k, v in amounts.items():
        vec[resources.pos(k)] = v
    return vec


def assemble_queues(recs: list[QueueRec], resources: ResourceIndex) -> dict[str, Queue]:
    """The queues of ``recs`` by name (in name order), their amounts as vectors over ``resources``
    (capability infinite, deserved and guarantee zero where unset), each parent's ``children`` filled.

    As Volcano: a queue named ``default`` always exists, and a parent ``root`` that no record defines
    is created when any queue has a parent (both with ``source="implicit"``). A duplicate name, a queue
    that is its own parent, a parent that does not exist or a cycle is an :class:`InputError` naming the
    queue's file, the queue and ``spec.parent``."""
    queues: dict[str, Queue] = {}
    files = {r.name: r.file or None for r in recs}  # errors about a queue name the file it came from
    for r in sorted(recs, key=lambda r: r.name):
        if r.name in queues:
            raise InputError("duplicate queue", file=r.file, obj=f"Queue {r.name}", field="metadata.name")
        queues[r.name] = Queue(
            name=r.name,
            weight=r.weight,
            capability=resource_vector(resources, r.capability, np.inf),
            deserved=resource_vector(resources, r.deserved, 0.0),
            guarantee=resource_vector(resources, r.guarantee, 0.0),
            deserved_set=None
            if r.deserved is None
            else resource_vector(resources, dict.fromkeys(r.deserved, 1.0), 0.0) > 0,
            reclaimable=r.reclaimable,
            parent=r.parent,
            priority=r.priority,
            state=r.state,
            preempt_min_runtime=r.preempt_min_runtime,
            reclaim_min_runtime=r.reclaim_min_runtime,
            annotations=r.annotations,
            creation=r.creation,
            source=r.source,
        )
    hierarchical = any(q.parent for q in queues.values())
    if hierarchical and "root" not in queues:
        queues["root"] = Queue(name="root", source="implicit")
    if "default" not in queues:
        queues["default"] = Queue(name="default", source="implicit", parent="root" if hierarchical else None)
    _check_parents(queues, files)
    for name in sorted(queues):
        parent = queues[name].parent
        if parent:
            queues[parent].children.append(name)
    return queues


def _check_parents(queues: dict[str, Queue], files: dict[str, str | None]) -> None:
    """Every parent exists and no queue is its own ancestor."""
    for q in queues.values():
        if q.parent == q.name:
            raise InputError(
                "a queue cannot be its own parent",
                file=files.get(q.name),
                obj=f"Queue {q.name}",
                field="spec.parent",
            )
        if q.parent and q.parent not in queues:
            raise InputError(
                f"parent queue {q.parent!r} does not exist",
                file=files.get(q.name),
                obj=f"Queue {q.name}",
                field="spec.parent",
            )
    for name in sorted(queues):
        seen = [name]
        cur = queues[name].parent
        while cur:
            if cur in seen:
                cycle = " -> ".join(seen[seen.index(cur) :] + [cur])
                raise InputError(
                    f"queue cycle: {cycle}", file=files.get(name), obj=f"Queue {name}", field="spec.parent"
                )
            seen.append(cur)
            cur = queues[cur].parent
