"""Which pods of a victim job a gang-aware eviction may take without breaking it (seed 000 §3.2, SPEC.md
§3.3; used by :meth:`corral.actions.gang_evict.GangEvictAction.select`).

:func:`~corral.actions.bundles.make_bundles` splits a healthy victim job's pods in the domain into a
SAFE bundle — as many pods as the job has above its minMember (and above every role's minTaskMember),
chosen by the pod order of the bundles (largest cover of the need, lowest priority, least waste,
youngest) — and a WHOLE bundle, the rest. Which of the job's pods are "the surplus" is a convention:
any that many of them may go and the job stays at its minimum. The order ignores where the pods run,
so the SAFE pods may be scattered over nodes where they free nothing the gang can use while the job's
other pods fill a node the gang could take.

**Corral's choice.** A SAFE bundle is taken pod by pod (as SPEC §3.3 says: never more of it than the
need requires), and at each step any pod of the job in the domain may be taken in place of one of its
SAFE pods — its own SAFE pods first, then the rest of the job's pods in the domain — as long as the job
keeps its minMember and every role its minTaskMember: at most as many pods as the SAFE bundle holds,
and within each role's surplus. The first that lets more of the gang fit (the first-fit estimate of
:mod:`corral.actions.packing`) is taken; when none does, the SAFE pods go in their order, as before.
When the bundles are chosen (the first of the same kind and policy rank that lets more of the gang fit),
a SAFE bundle whose own pods do not help is judged by the job's pods on one node (as many as it may
give up, at most :data:`SWAP_COST` times as dear per pod as its SAFE pods) — freeing a whole node often
takes several pods of one job on it, which the pod order rarely makes "the surplus" — and those pods
are then taken first.
The job is never broken by this phase. If its WHOLE bundle is taken later, it takes every pod of the job
in the domain not taken yet (the SAFE pods passed over included).
"""
from __future__ import annotations

from corral.actions.bundles import SAFE, WHOLE, Bundle, WorkCost
from corral.actions.packing import PackState
from corral.model import Task

__all__ = ["SWAP_COST", "SurplusChoice"]

#: The most a job's pods on one node may cost, per pod, to be taken in place of its SAFE pods, as a
#: multiple of what the SAFE pods cost (their ROI ranked the bundle; far dearer pods would make that
#: rank a lie).
SWAP_COST = 2.0


class SurplusChoice:
    """The pods taken so far in one selection, and what each bundle may still give."""

    def __init__(self, bundles: list[Bundle], costs: WorkCost) -> None:
        self.costs = costs
        self.taken: set[int] = set()
        self._core = {id(b.job): b.tasks for b in bundles if b.kind == WHOLE}
        self._safe = {id(b.job): b.tasks for b in bundles if b.kind == SAFE}
        self._safe_ids = {id(t) for b in bundles if b.kind == SAFE for t in b.tasks}
        self._count: dict[int, int] = {}                 # job -> pods taken in its SAFE phase
        self._roles: dict[int, dict[str, int]] = {}      # job -> role -> pods taken in its SAFE phase
        self._swapped: set[int] = set()                  # jobs one of whose core pods went as surplus
        self._focus: dict[int, list[Task]] = {}          # bundle -> the pods :meth:`probe` chose

    def pods(self, b: Bundle) -> list[Task]:
        """What ``b`` still has to give (the bundle's own list while none of it is taken)."""
        k = id(b.job)
        if b.kind == WHOLE and k in self._swapped:
            return [t for t in b.tasks + self._safe.get(k, []) if id(t) not in self.taken]
        if any(id(t) in self.taken for t in b.tasks):
            return [t for t in b.tasks if id(t) not in self.taken]
        return b.tasks

    def probe(self, b: Bundle, state: PackState) -> list[Task]:
        """The pods by which ``b`` is judged useful to the gang (:func:`~corral.actions.packing.first_useful`):
        what it still has to give; for a SAFE bundle whose own pods let no more of the gang fit, the
        job's pods on one node (as many as it may give up) that do, if any — they are then taken first."""
        pods = self.pods(b)
        core = self._core.get(id(b.job))
        if b.kind != SAFE or not core or not pods:
            return pods
        have = state.count()
        if have >= state.pack.n or state.useful(pods, have):
            return pods
        room = len(b.tasks) - self._count.get(id(b.job), 0)
        by_node: dict[int, list[Task]] = {}
        for t in pods + core:
            if id(t) not in self.taken:
                by_node.setdefault(t.node, []).append(t)
        for group in by_node.values():
            group = group[:room]
            # at most twice as dear per pod as the SAFE pods the bundle's ROI was measured on
            if len(group) > 1 and self.costs.total(group) * len(b.tasks) <= SWAP_COST * b.cost * len(group) \
                    and state.useful(group, have):
                self._focus[id(b)] = group
                return group
        return pods

    def options(self, b: Bundle) -> list[list[Task]]:
        """The units a bundle is taken by: a WHOLE bundle at once; a SAFE bundle pod by pod — the pods
        :meth:`probe` found first, then its own pods, then the job's other pods in the domain (any of
        them may go in place of one of its own)."""
        if b.kind == WHOLE:
            rest = self.pods(b)
            return [list(rest)] if rest else []
        first = self._focus.pop(id(b), [])
        seen = {id(t) for t in first}
        rest = [t for t in self.pods(b) + [t for t in self._core.get(id(b.job), ()) if id(t) not in self.taken]
                if id(t) not in seen]
        return [[t] for t in first + rest]

    def done(self, b: Bundle) -> bool:
        """Has the SAFE phase of ``b``'s job taken as many pods as its SAFE bundle holds?"""
        return b.kind == SAFE and self._count.get(id(b.job), 0) >= len(b.tasks)

    def may_take(self, b: Bundle, t: Task) -> bool:
        """May ``t`` go in ``b``'s SAFE phase: the job stays at its minMember and ``t``'s role at its
        minTaskMember (role limits ignored for elastic jobs; none for a job already broken)?"""
        if b.kind != SAFE:
            return True
        job = b.job
        if self.done(b):
            return False
        healthy, _, counts, enforce = self.costs.state(job)
        if not healthy or not enforce or t.role not in job.min_task_member:
            return True
        used = self._roles.get(id(job), {}).get(t.role, 0)
        return counts.get(t.role, 0) - used - job.min_task_member[t.role] > 0

    def take(self, b: Bundle, unit: list[Task]) -> None:
        for t in unit:
            self.taken.add(id(t))
        if b.kind != SAFE:
            return
        k = id(b.job)
        for t in unit:
            self._count[k] = self._count.get(k, 0) + 1
            roles = self._roles.setdefault(k, {})
            roles[t.role] = roles.get(t.role, 0) + 1
            if id(t) not in self._safe_ids:
                self._swapped.add(k)

    def give_back(self, refused: set[int]) -> None:
        """Pods the victim filter refused after all are not taken (their SAFE-phase counts stay: the
        phase does not start again)."""
        self.taken -= refused
