"""SPEC.md §5 as a property of one decision: no gang is left bound below its minimum by corral's own
evictions. Shared by the property tests of the legacy and the gang-aware eviction actions."""

from __future__ import annotations

from corral.model import Job, Task, TaskStatus

_READY = frozenset({TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.SUCCEEDED})
_HELD = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})


def _meets(job: Job, counted) -> bool:
    pods = [t for t in job.tasks if counted(t)]
    if len(pods) < job.min_member:
        return False
    if job.min_task_member and job.min_member >= sum(job.min_task_member.values()):
        return all(sum(1 for t in pods if t.role == r) >= n for r, n in job.min_task_member.items())
    return True


def assert_no_gang_left_broken(before, decisions) -> None:
    """``before``: the cluster as the decision found it. A gang at or above its minimums (minMember,
    and every role's minTaskMember unless it is elastic) that lost pods to the decision either stays at
    them or keeps no pod bound or running."""
    evicted = {e.pod for e in decisions.evictions}
    bound = {b.pod for b in decisions.binds}
    tasks: dict[str, Task] = {t.key: t for t in before.tasks.values()}
    hit = {tasks[p].job.uid for p in evicted if tasks[p].job is not None}
    for uid in sorted(hit):
        job = before.jobs[uid]
        if not _meets(job, lambda t: t.status in _READY):
            continue  # below a minimum before the decision: not broken by it

        def stays(t: Task) -> bool:
            return t.key not in evicted and (t.status in _READY or t.key in bound)

        left = sorted(t.key for t in job.tasks if t.key not in evicted and t.status in _HELD)
        assert not left or _meets(job, stays), (
            f"{uid} (minMember {job.min_member}, roles {job.min_task_member}) left bound below its "
            f"minimum: {left} still held after evicting {sorted(p for p in evicted if tasks[p].job is job)}"
        )
