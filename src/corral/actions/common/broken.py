"""A broken gang is evicted whole (SPEC.md §5): shared by ``preempt``, ``reclaim``, ``gangpreempt`` and
``gangreclaim``.

A gang is *healthy* while it has at least ``minMember`` ready pods (placed, bound, running or
succeeded) and, unless it is elastic (``minMember`` below the sum of its role minimums, Volcano's
``CheckTaskReady``), at least ``minTaskMember`` of each role. When the victims an action chose push a
healthy gang below a minimum, corral evicts every other running or bound pod of that gang in the same
decision — as Volcano's ``gangpreempt`` takes a WHOLE bundle whole, and as KAI evicts a non-elastic job
as one unit —, so no gang is left bound below its minimum by corral's own evictions. A gang already
below a minimum before the decision is not broken by it: its pods are taken one by one.

:func:`whole_gangs` adds those pods; the caller asks its victim filters about them and gives the plan
up (or keeps the gang whole) when any of them may not go.
"""

from __future__ import annotations

from collections.abc import Iterable

from corral.model import ALLOCATED_STATES, Job, Task, TaskStatus

__all__ = ["breaks", "healthy", "whole_gangs"]

_READY = ALLOCATED_STATES | {TaskStatus.SUCCEEDED}
#: the pods of a broken gang that are evicted with it (as the eviction actions' victims: running, or
#: bound by an earlier cycle)
_HELD = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND})


def healthy(job: Job, gone: set[int] | frozenset[int] = frozenset()) -> bool:
    """Is ``job`` at or above its minimums without the pods whose ids are in ``gone``?"""
    ready = 0
    counts: dict[str, int] = {}
    for t in job.tasks:
        if t.status in _READY and id(t) not in gone:
            ready += 1
            counts[t.role] = counts.get(t.role, 0) + 1
    if ready < job.min_member:
        return False
    if job.min_task_member and not job.elastic:
        return all(counts.get(role, 0) >= n for role, n in job.min_task_member.items())
    return True


def breaks(job: Job, pods: Iterable[Task]) -> bool:
    """Does evicting ``pods`` (of ``job``) push the healthy ``job`` below a minimum?"""
    gone = {id(t) for t in pods}
    return bool(gone) and healthy(job) and not healthy(job, gone)


def whole_gangs(victims: list[Task]) -> tuple[list[Task], list[Job], list[Job]]:
    """(the other pods to evict with ``victims``, the gangs ``victims`` break, those of them that
    cannot be evicted whole: a pod of theirs was placed in this cycle and is not bound yet)."""
    by_job: dict[int, list[Task]] = {}
    for v in victims:
        if v.job is not None:
            by_job.setdefault(id(v.job), []).append(v)
    extra: list[Task] = []
    broken: list[Job] = []
    stuck: list[Job] = []
    for pods in by_job.values():
        job = pods[0].job
        if job is None or not breaks(job, pods):
            continue
        broken.append(job)
        mine = {id(t) for t in pods}
        if any(t.status is TaskStatus.ALLOCATED for t in job.tasks):
            stuck.append(job)
            continue
        extra += [t for t in job.tasks if t.status in _HELD and t.node >= 0 and id(t) not in mine]
    return extra, broken, stuck
