"""The Session's answers at each extension point (SPEC.md §2): the plugins' answers combined with the
tier semantics documented on each point in :mod:`corral.framework.extension` (Volcano's
``framework/session_plugins.go``). A base of :class:`~corral.framework.session.Session`, which builds
``points`` (per point, the bound methods tier by tier) and ``members`` (the plugins, likewise)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.framework.extension import (
    AllocatableReason,
    Domain,
    LineRefusal,
    OverusedReason,
    Purpose,
    QueueLimit,
    Resolvable,
    SimulatePredicate,
    SubGroupSearchSpace,
    Vote,
)
from corral.framework.points import declares

if TYPE_CHECKING:
    from corral.model import Cluster, Job, Queue, Task

__all__ = ["Dispatch"]


class Dispatch:
    cluster: Cluster
    points: dict[str, list[list[Callable[..., Any]]]]
    members: dict[str, list[list[Any]]]
    _implementers: dict[str, list[Any]]

    def fns(self, point: str) -> list[Callable[..., Any]]:
        raise NotImplementedError  # the Session's

    def implementers(self, point: str) -> list[Any]:
        """The plugins that extend ``point``, in tier order (do not modify the returned list)."""
        got = self._implementers.get(point)
        if got is None:
            got = self._implementers[point] = [p for tier in self.members[point] for p in tier]
        return got

    # -- gates ---------------------------------------------------------------------------------------
    def job_valid(self, job: Job) -> str | None:
        if job.invalid_reason:
            return job.invalid_reason
        for fn in self.fns("JobValid"):
            reason = fn(job)
            if reason:
                return reason
        return None

    def job_enqueueable(self, job: Job) -> bool:
        for tier in self.points["JobEnqueueable"]:
            permit = False
            for fn in tier:
                vote = fn(job)
                if vote is Vote.REJECT:
                    return False
                permit = permit or vote is Vote.PERMIT
            if permit:
                return True
        return True

    def enqueue_refusal(self, job: Job) -> str | None:
        """The reason of the first EnqueueReason plugin that explains a rejection of ``job``, or None."""
        for fn in self.fns("EnqueueReason"):
            why = fn(job)
            if why:
                return str(why)
        return None

    def job_enqueued(self, job: Job) -> None:
        """Tell the JobEnqueued plugins (admission state) that enqueue admitted ``job``."""
        for fn in self.fns("JobEnqueued"):
            fn(job)

    def job_ready(self, job: Job) -> bool:
        return all(fn(job) for fn in self.fns("JobReady"))

    def job_pipelined(self, job: Job) -> bool:
        return all(fn(job) for fn in self.fns("JobPipelined"))

    def job_starving(self, job: Job) -> bool:
        """Volcano's ``Session.JobStarving``: the first tier with a plugin that answers decides (AND
        inside it); no plugin means not starving."""
        for tier in self.points["JobStarving"]:
            if tier:
                return all(fn(job) for fn in tier)
        return False

    def allocatable(self, queue: Queue, task: Task) -> bool:
        return all(fn(queue, task) for fn in self.fns("Allocatable"))

    def allocatable_refusal(self, queue: Queue, task: Task) -> str | None:
        """None when Allocatable lets ``queue`` take ``task``; else the reason of the first plugin that
        refuses, in its own words (AllocatableReason; a plugin without one is named), so a reason
        points at the real cause — a FIFO line, a capability — not at a guess."""
        for plugin in self.implementers("Allocatable"):
            if plugin.allocatable(queue, task):
                continue
            why = plugin.allocatable_refusal(queue, task) if declares(plugin, AllocatableReason) else None
            return why or f"queue {queue.name!r} may not take pod {task.name} ({plugin.name})"
        return None

    def line_refusal(self, queue: Queue, job: Job) -> str | None:
        """The reason every pod of ``job`` is refused by Allocatable now, when the first Allocatable
        plugin declares LineRefusal and answers for ``job`` (a strict FIFO line closed behind its
        head): that plugin's refusal comes first for each pod, whatever the later plugins say. None:
        ask pod by pod (:meth:`allocatable_refusal`)."""
        plugins = self.implementers("Allocatable")
        first = plugins[0] if plugins else None
        if first is None or not declares(first, LineRefusal):
            return None
        return first.line_refusal(queue, job)

    def overused(self, queue: Queue) -> bool:
        return any(fn(queue) for fn in self.fns("Overused"))

    def overused_reason(self, queue: Queue, task: Task) -> str | None:
        """Why an Overused ``queue`` holds ``task`` back, in the words of the first plugin that finds it
        Overused (OverusedReason); None when that plugin says its share is not the cause (the queue
        deserves all the cluster has of what the pod asks for: the nodes are full) or no plugin finds
        the queue Overused."""
        for plugin in self.implementers("Overused"):
            if not plugin.overused(queue):
                continue
            if declares(plugin, OverusedReason):
                return plugin.overused_reason(queue, task)
            return f"queue {queue.name!r} already holds its deserved share"
        return None

    def preemptive(self, queue: Queue, task: Task) -> bool:
        return all(fn(queue, task) for fn in self.fns("Preemptive"))

    # -- placement -----------------------------------------------------------------------------------
    def predicate(self, task: Task) -> np.ndarray:
        """Nodes ``task`` may go to, resources aside: AND of the plugins' masks, never a down node."""
        mask = ~self.cluster.nodes.down
        for fn in self.fns("Predicate"):
            mask = mask & fn(task)
        return mask

    def explain(self, task: Task) -> list[tuple[np.ndarray, str]]:
        out = [(self.cluster.nodes.down, "node is down")]
        for fn in self.fns("PredicateReason"):
            out.extend(fn(task))
        return out

    def hypernode_scores(self, job: Job, domains: Sequence[Domain]) -> np.ndarray:
        score = np.zeros(len(domains))
        for fn in self.fns("HyperNodeOrder"):
            score = score + fn(job, domains)
        return score

    # -- victims -------------------------------------------------------------------------------------
    def _victims(self, point: str, preemptor: Task, candidates: list[Task], *extra: Any) -> list[Task]:
        """Within a tier the answers intersect; the first tier with an answer decides. No answer at all
        (no plugin implements the point, or every one is switched off) allows no victim: Volcano's
        ``Preemptable``/``Reclaimable`` return nil then, and the action evicts nothing."""
        for tier in self.points[point]:
            answered: set[int] | None = None
            for fn in tier:
                got = fn(preemptor, candidates, *extra)
                if got is None:
                    continue
                ids = {id(t) for t in got}
                answered = ids if answered is None else answered & ids
            if answered is not None:
                return [t for t in candidates if id(t) in answered]
        return []

    def preemptable(self, preemptor: Task, candidates: list[Task]) -> list[Task]:
        return self._victims("Preemptable", preemptor, candidates)

    def reclaimable(self, reclaimer: Task, candidates: list[Task]) -> list[Task]:
        return self._victims("Reclaimable", reclaimer, candidates)

    def unified_evictable(self, preemptor: Task, candidates: list[Task], action: str) -> list[Task]:
        """The gang-level victim filter (Volcano's UnifiedEvictable, asked by ``gangpreempt`` and
        ``gangreclaim`` only; ``action`` names the asking action); the legacy actions keep to
        Preemptable/Reclaimable."""
        return self._victims("UnifiedEvictable", preemptor, candidates, action)

    def queue_rules(self) -> list[Callable[[Task, list[Task]], list[Task] | None]]:
        """The Reclaimable answers of the queue rules (QueueRule plugins whose rule is on: proportion,
        capacity, hierarchical drf) configured for both points, in tier order."""
        rules = {id(p) for p in self.implementers("QueueRule") if p.queue_rule_enabled()}
        return [p.reclaimable for p in self.implementers("Reclaimable") if id(p) in rules]

    def queue_limits(self) -> dict[str, QueueLimit] | None:
        """Per victim queue, what the queue rules with amounts (QueueAmounts) let a plan take; with two,
        the tighter amount in each resource; None without one."""
        out: dict[str, QueueLimit] = {}
        for fn in self.fns("QueueAmounts"):
            for name, lim in fn().items():
                old = out.get(name)
                if old is not None:
                    lim = QueueLimit(
                        [min(a, b) for a, b in zip(lim.above, old.above)],
                        [min(a, b) for a, b in zip(lim.keep, old.keep)],
                    )
                out[name] = lim
        return out or None

    def victim_side(self, reclaimer_queue: str | None) -> Callable[[str], list[str]] | None:
        """The queues a victim's eviction draws on, per victim queue, for a reclaimer of
        ``reclaimer_queue`` (the first QueueAmounts plugin answers), or None without one."""
        amounts = self.implementers("QueueAmounts")
        if not amounts:
            return None
        plugin = amounts[0]

        def side(victim_queue: str) -> list[str]:
            return plugin.victim_side(victim_queue, reclaimer_queue)

        return side

    def victim_filter(self, preemptor: Job, victim: Job, action: str) -> bool:
        return all(fn(preemptor, victim, action) for fn in self.fns("VictimFilter"))

    def scenario_valid(
        self, preemptor: Job, victims: Sequence[Job], tasks: Sequence[Task], action: str
    ) -> bool:
        return all(fn(preemptor, victims, tasks, action) for fn in self.fns("ScenarioValidator"))

    def violations(self, tasks: Sequence[Task]) -> list[bool]:
        """For each of ``tasks`` (evicted together, in order): would its eviction break a disruption
        budget? OR over the DisruptionBudget plugins (``pdb``)."""
        out = [False] * len(tasks)
        for fn in self.fns("DisruptionBudget"):
            out = [a or b for a, b in zip(out, fn(tasks))]
        return out

    def resolvable(self, task: Task) -> np.ndarray:
        """Nodes where ``task`` could go once pods are evicted: AND over Predicate plugins of their
        Resolvable mask when they have one; a plugin that simulates (SimulatePredicate) is otherwise
        left to the dry run; any other plugin's predicate mask applies as is."""
        mask = ~self.cluster.nodes.down
        for p in self.implementers("Predicate"):
            if declares(p, Resolvable):
                mask = mask & p.resolvable(task)
            elif not declares(p, SimulatePredicate):
                mask = mask & p.predicate(task)
        return mask

    def victim_tasks(self) -> list[Task]:
        seen: dict[int, Task] = {}
        for fn in self.fns("VictimTasks"):
            for t in fn():
                seen.setdefault(id(t), t)
        return list(seen.values())

    # -- gang level (seed 000) -----------------------------------------------------------------------
    def gang_predicate(self, job: Job) -> str | None:
        for fn in self.fns("GangPredicate"):
            reason = fn(job)
            if reason:
                return reason
        return None

    def gang_search_space(self, job: Job, purpose: Purpose) -> list[Domain]:
        """The first plugin (config order) with a non-empty answer defines the space; with none, the
        whole cluster is the one domain."""
        for fn in self.fns("GangSearchSpace"):
            got = fn(job, purpose)
            if got:
                return list(got)
        return [Domain("cluster", np.ones(len(self.cluster.nodes), dtype=bool), None)]

    def subgroup_search_space(
        self, job: Job, subjob: Any, within: np.ndarray | None, purpose: Purpose = Purpose.ALLOCATE
    ) -> list[Domain]:
        """The domains a Volcano sub-group (:class:`~corral.model.subjobs.SubJob`) of ``job`` may be
        placed in, inside ``within`` (the job's own domain; None: the cluster), for ``purpose``: the first
        GangSearchSpace plugin that is also a SubGroupSearchSpace with a non-empty answer defines them
        (Volcano ``HyperNodeGradientForSubJobFn``); with none, ``within`` is the one domain."""
        for plugin in self.implementers("GangSearchSpace"):
            if declares(plugin, SubGroupSearchSpace):
                got = plugin.subgroup_search_space(job, subjob, within, purpose)
                if got:
                    return list(got)
        mask = np.ones(len(self.cluster.nodes), dtype=bool) if within is None else within
        return [Domain("cluster", mask, None)]

    def gang_victims(
        self, preemptor: Job, domain: Domain, candidates: list[Task], need: np.ndarray, action: str
    ) -> list[Task] | None:
        for fn in self.fns("GangVictimSelector"):
            got = fn(preemptor, domain, candidates, need, action)
            if got is not None:
                return got
        return None

    # -- simulation (seed 003) -----------------------------------------------------------------------
    def simulate_add(self, task: Task, node: int) -> None:
        for fn in self.fns("SimulateAddTask"):
            fn(task, node)

    def simulate_remove(self, task: Task, node: int) -> None:
        for fn in self.fns("SimulateRemoveTask"):
            fn(task, node)

    def simulate_predicate(self, task: Task, node: int) -> bool:
        return all(fn(task, node) for fn in self.fns("SimulatePredicate"))

    def simulate_allocatable(self, queue: Queue, task: Task) -> bool:
        return all(fn(queue, task) for fn in self.fns("SimulateAllocatable"))

    # -- reservation (seed 001) and closing ----------------------------------------------------------
    def target_job(self, jobs: Sequence[Job]) -> Job | None:
        for fn in self.fns("TargetJob"):
            got = fn(jobs)
            if got is not None:
                return got
        return None

    def reserved_nodes(self, target: Job, locked: np.ndarray) -> np.ndarray | None:
        for fn in self.fns("ReservedNodes"):
            got = fn(target, locked)
            if got is not None:
                return got
        return None

    def reason_notes(self, job: Job, reason: str) -> str:
        """``reason`` with every ReasonNote plugin's note for ``job`` appended, in tier order."""
        for fn in self.fns("ReasonNote"):
            note = fn(job, reason)
            if note:
                reason = f"{reason}; {note}"
        return reason
