"""``gangpreempt`` and ``gangreclaim`` (aliases ``gang-preempt``, ``gang-reclaim``): gang-aware eviction
(seed 000 §3, SPEC.md §3.3).

For each starving gang (QueueOrder, JobOrder) that passes GangPredicate: the domains of GangSearchSpace
(purpose Evict, at most ``maxDomains``) are tried in order and the first success wins. In a domain:

1. the pods that may be victims — running or bound, preemptable, of a job of strictly lower priority in
   the same queue (gangpreempt) or of a reclaimable queue other than the preemptor's (gangreclaim),
   passing the VictimFilter — are grouped by job into SAFE and WHOLE bundles (:mod:`bundles`);
2. the bundles are sorted and validated with ONE call of the plugins' Preemptable/Reclaimable
   (UnifiedEvictable) filter over the flattened list, so stateful plugins count cumulatively; a WHOLE
   bundle survives only if all of it is allowed, a SAFE bundle shrinks to its allowed part; re-sorted;
   ``allowWholeBundle: false`` drops WHOLE bundles; a GangVictimSelector plugin may replace the choice;
3. bundles are taken until what they free, with what is free in the domain, covers the need — a SAFE
   bundle pod by pod, never more of it than needed — then the ScenarioValidator sees the plan and the
   gang is dry-run into the domain (allocate's placement restricted to the domain, onto capacity being
   freed); if it does not fit yet, the next bundle is added and the dry run repeated (Volcano's gang
   preemption over-evicts here; corral stops at the first set that works);
4. on success the victims are evicted, every pod of the gang is nominated (pipelined) in the domain and
   the domain is remembered (``Session.nominated_domains``), so the next cycle's allocate places the gang
   there first and no smaller job can take the freed nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corral.actions.allocate import schedulable_jobs
from corral.actions.bundles import Bundle, WHOLE, make_bundles, sort_bundles
from corral.actions.evict import VICTIM_STATES
from corral.framework.config import arg
from corral.framework.extension import Domain, Purpose
from corral.framework.plugin import Action
from corral.framework.session import Session
from corral.framework.statement import Statement
from corral.model import Job, Task, TaskStatus
from corral.model.resources import EPS

__all__ = ["GangPreemptAction", "GangReclaimAction"]


@dataclass(frozen=True)
class GangEvictArgs:
    max_domains: int = arg("maxDomains", 8, "domains tried per gang, in the search-space order")
    allow_whole: bool = arg("allowWholeBundle", True, "may break healthy gangs (WHOLE bundles)")


def needed_tasks(session: Session, job: Job) -> list[Task]:
    """The waiting pods the gang must place to be pipelined: missing role minimums first, then the rest
    in TaskOrder up to minMember."""
    waiting = sorted((t for t in job.tasks if t.status is TaskStatus.PENDING and t.managed and not t.best_effort),
                     key=session.task_key())
    have = job.ready_count() + job.count(TaskStatus.PIPELINED)
    missing = max(job.min_member - have, 0)
    chosen: list[Task] = []
    if job.min_task_member:
        counts = job.role_counts({TaskStatus.ALLOCATED, TaskStatus.BOUND, TaskStatus.RUNNING,
                                  TaskStatus.SUCCEEDED, TaskStatus.PIPELINED})
        for role, n in sorted(job.min_task_member.items()):
            lack = n - counts.get(role, 0)
            for t in waiting:
                if lack <= 0:
                    break
                if t.role == role and t not in chosen:
                    chosen.append(t)
                    lack -= 1
    for t in waiting:
        if len(chosen) >= missing:
            break
        if t not in chosen:
            chosen.append(t)
    return chosen


class GangEvictAction(Action):
    Args = GangEvictArgs

    def execute(self, session: Session) -> None:
        queues = session.cluster.queues
        queue_key, job_key = session.queue_key(), session.job_key()
        jobs = [j for j in schedulable_jobs(session, quiet=True) if session.job_starving(j)]
        jobs.sort(key=lambda j: (queue_key(queues[j.queue]), job_key(j)))
        for job in jobs:
            if not self.may_start(session, job):
                continue
            tasks = needed_tasks(session, job)
            if not tasks:
                continue
            domains = session.gang_search_space(job, Purpose.EVICT)[: self.args.max_domains]
            for domain in domains:
                if self.try_domain(session, job, tasks, domain):
                    session.nominated_domains[job.uid] = domain.name
                    break

    # -- hooks -----------------------------------------------------------------------------------
    def may_start(self, session: Session, job: Job) -> bool:
        return True

    def allowed(self, session: Session, job: Job, victim: Task) -> bool:
        raise NotImplementedError

    def policy(self, session: Session):
        raise NotImplementedError

    def plugin_filter(self, session: Session, task: Task, pods: list[Task]) -> list[Task]:
        raise NotImplementedError

    # -- one domain ------------------------------------------------------------------------------
    def candidates(self, session: Session, job: Job, domain: Domain) -> dict[int, tuple[Job, list[Task]]]:
        by_job: dict[int, tuple[Job, list[Task]]] = {}
        verdict: dict[int, bool] = {}
        for t in session.cluster.tasks.values():
            if t.status not in VICTIM_STATES or not t.managed or t.node < 0 or not domain.mask[t.node]:
                continue
            v = t.job
            if v is None or v is job or not t.preemptable or not self.allowed(session, job, t):
                continue
            if id(v) not in verdict:
                verdict[id(v)] = session.victim_filter(job, v, self.name)
            if verdict[id(v)]:
                by_job.setdefault(id(v), (v, []))[1].append(t)
        return by_job

    def bundles(self, session: Session, job: Job, tasks: list[Task], domain: Domain, need: np.ndarray) -> list[Bundle]:
        by_job = self.candidates(session, job, domain)
        if not by_job:
            return []
        order = sort_bundles(make_bundles(by_job, need), self.policy(session), session.compare_jobs)
        flat = [t for b in order for t in b.tasks]
        ok = {id(t) for t in self.plugin_filter(session, tasks[0], flat)}
        valid = []
        for b in order:
            keep = [t for t in b.tasks if id(t) in ok]
            if b.kind == WHOLE and (len(keep) < len(b.tasks) or not self.args.allow_whole):
                continue
            if keep:
                b.tasks = keep
                b.score(need)
                valid.append(b)
        return sort_bundles(valid, self.policy(session), session.compare_jobs)

    def try_domain(self, session: Session, job: Job, tasks: list[Task], domain: Domain) -> bool:
        need = sum((t.request for t in tasks), np.zeros(len(session.cluster.resources)))
        nodes = session.cluster.nodes
        cols = np.flatnonzero(need)
        free = np.clip(nodes.future_idle[domain.mask][:, cols], 0, None).sum(axis=0)
        bundles = self.bundles(session, job, tasks, domain, need)
        custom = session.gang_victims(job, domain, [t for b in bundles for t in b.tasks], need, self.name)
        if custom is not None:
            return self.attempt(session, job, tasks, domain, list(custom))
        victims: list[Task] = []
        if np.all(free >= need[cols] - EPS) and self.attempt(session, job, tasks, domain, victims):
            return True
        for b in bundles:
            pods = b.tasks if b.kind == WHOLE else b.tasks
            for t in pods:
                victims.append(t)
                free = free + t.request[cols]
                if b.kind != WHOLE and not np.all(free >= need[cols] - EPS):
                    continue            # a SAFE bundle: pod by pod, only as far as the need requires
                if b.kind == WHOLE and t is not pods[-1]:
                    continue            # a WHOLE bundle goes as a whole
                if np.all(free >= need[cols] - EPS) and self.attempt(session, job, tasks, domain, victims):
                    return True
        return False

    def attempt(self, session: Session, job: Job, tasks: list[Task], domain: Domain, victims: list[Task]) -> bool:
        """Evict ``victims``, dry-run the gang into ``domain`` onto the capacity being freed; commit on
        success, otherwise undo everything."""
        victim_jobs = list({id(v.job): v.job for v in victims if v.job is not None}.values())
        if victims and not session.scenario_valid(job, victim_jobs, victims, self.name):
            return False
        stmt = session.statement()
        for v in victims:
            stmt.evict(v, f"{self.name} for {job.uid}", action=self.name, preemptor=job.uid)
        if self.nominate(session, job, tasks, domain, stmt) and session.job_pipelined(job):
            stmt.commit()
            return True
        stmt.discard()
        return False

    def nominate(self, session: Session, job: Job, tasks: list[Task], domain: Domain, stmt: Statement) -> bool:
        queue = session.cluster.queues[job.queue]
        for task in tasks:
            if not session.allocatable(queue, task):
                return False
            mask = session.predicate(task) & domain.mask & session.fits(task, future=True)
            row = session.best_row(task, mask)
            if row < 0:
                return False
            stmt.pipeline(task, row)
        return True


class GangPreemptAction(GangEvictAction):
    name = "gangpreempt"

    def allowed(self, session: Session, job: Job, victim: Task) -> bool:
        return victim.job.queue == job.queue and victim.job.priority < job.priority

    def policy(self, session: Session):
        return lambda a, b: (a.job.priority > b.job.priority) - (a.job.priority < b.job.priority)

    def plugin_filter(self, session: Session, task: Task, pods: list[Task]) -> list[Task]:
        return session.preemptable(task, pods)


class GangReclaimAction(GangEvictAction):
    name = "gangreclaim"

    def may_start(self, session: Session, job: Job) -> bool:
        queue = session.cluster.queues[job.queue]
        if session.overused(queue):
            return False
        tasks = needed_tasks(session, job)
        return bool(tasks) and session.preemptive(queue, tasks[0])

    def allowed(self, session: Session, job: Job, victim: Task) -> bool:
        q = session.cluster.queues.get(victim.job.queue)
        return victim.job.queue != job.queue and q is not None and q.reclaimable

    def policy(self, session: Session):
        queues = session.cluster.queues
        key = session.victim_queue_key()
        def cmp(a: Bundle, b: Bundle) -> int:
            ka, kb = key(queues[a.job.queue]), key(queues[b.job.queue])
            return -1 if ka < kb else (1 if kb < ka else 0)
        return cmp

    def plugin_filter(self, session: Session, task: Task, pods: list[Task]) -> list[Task]:
        return session.reclaimable(task, pods)
