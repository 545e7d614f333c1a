"""``gangpreempt`` and ``gangreclaim`` (aliases ``gang-preempt``, ``gang-reclaim``): gang-aware eviction
(seed 000 §3, SPEC.md §3.3).

For each starving gang (QueueOrder, JobOrder) that passes GangPredicate — a gang any of whose waiting
pods has ``preemptionPolicy: Never`` is left alone — one search, in named steps:

1. :meth:`~GangEvictAction.candidates` — the pods that may be victims: running or bound, preemptable,
   of the action's victim jobs (:meth:`allowed`), passing the VictimFilter and the plugins' victim
   filter (UnifiedEvictable, the gang-level point; for gangreclaim also the queue rule of
   proportion/capacity wherever it sits);
2. :meth:`~GangEvictAction.bundles` — each victim job's state under the cost model
   (:mod:`corral.actions.common.bundles`): what it may lose without breaking, what breaking it loses, its rank
   by the policy (gangpreempt: job priority; gangreclaim: the victim queue order);
3. :meth:`~GangEvictAction.plans` — for each key of the decision rule in turn (breaking no healthy gang
   first, then the policy levels from the lowest up) a plan per domain of the search space (purpose
   Evict, at most ``maxDomains``; :mod:`corral.actions.common.gang_plan`). A gang the plan breaks is evicted
   whole, every running pod of it (:mod:`corral.actions.common.broken`, SPEC.md §5), also those outside the
   domain (they free nothing the gang uses, but none is left bound below its minimum). The plan is checked
   with the victim filter and the ScenarioValidators over its victims and ranked by work lost, then
   the search-space order; pods evicted count only between plans that break the same gangs
   (:meth:`~GangEvictAction.ranked`);
4. :meth:`~GangEvictAction.attempt` — the dry run: the victims evicted and every pod the gang needs
   placed (pipelined) by NodeOrder in the plan's domain; the first plan that passes is committed and
   its pods nominated. The nominations carry the domain into the next cycle (allocate tries first the
   domain that holds them; the capacity they reserve is given to no other job).

The first key at which some domain has a plan that passes decides: no healthy gang is broken if any
domain can do without, no victim of a higher level is taken if a lower level suffices — in every domain
and across domains (corral's choice where the seed keeps the first domain that works: the seed's own
bundle order, applied between domains too).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from corral.actions.common.broken import whole_gangs
from corral.actions.common.bundles import CostModel, VictimJob
from corral.actions.common.evict import VICTIM_STATES
from corral.actions.common.gang_plan import DomainPlanner, QueueLimit, Room
from corral.actions.common.jobs import schedulable_jobs
from corral.actions.common.subgroups import place_subgroup, subgroup_units
from corral.framework.config import arg
from corral.framework.extension import Domain, Purpose
from corral.framework.plugin import Action
from corral.framework.session import Session
from corral.model import Job, Task, TaskStatus
from corral.model.resources import PODS

__all__ = ["GangEvictAction", "Plan", "needed_tasks"]


@dataclass(frozen=True)
class GangEvictArgs:
    max_domains: int = arg("maxDomains", 8, "domains tried per gang, in the search-space order")
    allow_whole: bool = arg("allowWholeBundle", True, "may break healthy gangs (WHOLE bundles)")


@dataclass
class Plan:
    """Victims with which the gang fits ``domain`` (the ``index``-th of the search space), whether
    they break a healthy gang, the work they lose and the gangs they break (by uid; evicted whole)."""

    domain: Domain
    index: int
    victims: list[Task]
    breaks: bool
    work: float
    gangs: frozenset[str] = frozenset()


def needed_tasks(session: Session, job: Job) -> list[Task]:
    """The waiting pods the gang must place to be pipelined: for a job with Volcano sub-groups whole
    sub-groups first (:func:`_needed_by_subgroup`), then missing role minimums, then the rest in
    TaskOrder up to minMember."""
    waiting = sorted(
        (t for t in job.tasks if t.status is TaskStatus.PENDING and t.managed and not t.best_effort),
        key=session.task_key(),
    )
    have = job.ready_count() + job.count(TaskStatus.PIPELINED)
    chosen: list[Task] = _needed_by_subgroup(job, waiting, have) if job.subjobs else []
    if job.min_task_member:
        counts = job.role_counts(
            {
                TaskStatus.ALLOCATED,
                TaskStatus.BOUND,
                TaskStatus.RUNNING,
                TaskStatus.SUCCEEDED,
                TaskStatus.PIPELINED,
            }
        )
        taken = {id(t) for t in chosen}
        for role, n in sorted(job.min_task_member.items()):
            mine = sum(1 for t in chosen if t.role == role)
            chosen += [t for t in waiting if t.role == role and id(t) not in taken][
                : max(n - counts.get(role, 0) - mine, 0)
            ]
    ids = {id(t) for t in chosen}
    rest = [t for t in waiting if id(t) not in ids]
    return chosen + rest[: max(job.min_member - have - len(chosen), 0)]


def _needed_by_subgroup(job: Job, waiting: list[Task], have: int) -> list[Task]:
    """The pods a job with Volcano sub-groups needs, sub-group by sub-group (Volcano
    ``CollectPendingTasksForJobStartup`` takes whole sub-jobs): each sub-group short of its minimum, in
    the order of its first waiting pod, gives the pods it lacks — a sub-group that cannot reach its
    minimum is passed over — until the job holds minMember and every policy's ``minSubGroups``; the
    pods of no sub-group then fill up to minMember."""
    placed = {
        TaskStatus.ALLOCATED,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
        TaskStatus.SUCCEEDED,
        TaskStatus.PIPELINED,
    }
    started = [0] * len(job.subgroup_policies)
    lack: dict[int, int] = {}
    for sj in job.subjobs:
        n = sum(1 for t in sj.tasks if t.status in placed)
        if n >= sj.size:
            started[sj.policy] += 1
        else:
            lack[id(sj)] = sj.size - n
    chosen: list[Task] = []
    seen: set[int] = set()
    for t in waiting:
        sj = t.subjob
        if sj is None or id(sj) in seen or id(sj) not in lack:
            continue
        seen.add(id(sj))
        if have + len(chosen) >= job.min_member and all(
            n >= p.min_groups for n, p in zip(started, job.subgroup_policies)
        ):
            break
        pods = [w for w in waiting if w.subjob is sj][: lack[id(sj)]]
        if len(pods) == lack[id(sj)]:
            chosen += pods
            started[sj.policy] += 1
    loose = [t for t in waiting if t.subjob is None]
    return chosen + loose[: max(job.min_member - have - len(chosen), 0)]


class GangEvictAction(Action):
    Args = GangEvictArgs

    def execute(self, session: Session) -> None:
        queues = session.cluster.queues
        queue_key, job_key = session.queue_key(), session.job_key()
        jobs = [j for j in schedulable_jobs(session, quiet=True) if session.job_starving(j)]
        jobs.sort(key=lambda j: (queue_key(queues[j.queue]), job_key(j)))
        for job in jobs:
            tasks = needed_tasks(session, job) if self.may_start(session, job) else []
            if tasks and not any(t.preempt_never for t in tasks):  # preemptionPolicy Never: never evicts
                self.serve(session, job, tasks)

    def serve(self, session: Session, job: Job, tasks: list[Task]) -> bool:
        """The search for one gang: candidates, bundles, plans by the decision rule, dry run, commit."""
        domains = self.domains(session, job, tasks)
        pods = self.candidates(session, job, tasks[0])
        need = sum((t.request for t in tasks), np.zeros(len(session.cluster.resources)))
        need[session.cluster.resources.pos(PODS)] = 0  # the pod slot is no measure of work
        jobs = self.bundles(session, CostModel(session.now, need), pods)
        self._pool: set[int] = {id(t) for t in pods}  # what a broken gang's other pods must be among
        self._kept = self.kept_whole(jobs)  # the gangs that cannot go whole
        if session.fns("GangVictimSelector"):
            return self.custom(session, job, tasks, domains, pods, need)
        planners: dict[int, DomainPlanner] = {}
        levels = sorted({j.rank for j in jobs.values()}) or [0.0]
        for may_break in (False, True) if self.args.allow_whole else (False,):
            for level in levels:
                plans = self.plans(session, job, tasks, domains, pods, jobs, planners, level, may_break)
                if any(self.attempt(session, job, tasks, p) for p in plans):
                    return True
                if plans and not plans[0].victims:
                    return False  # the gang fits with no eviction, yet the dry run fails
        return False

    def domains(self, session: Session, job: Job, tasks: list[Task]) -> list[Domain]:
        """The gang's search space (purpose Evict, at most ``maxDomains``). When the pods the gang
        needs are all of one sub-group with its own topology, that sub-group's domains inside each of
        the gang's (purpose Evict), so that the plans make room where the sub-group may go."""
        domains = session.gang_search_space(job, Purpose.EVICT)[: self.args.max_domains]
        groups = {id(t.subjob): t.subjob for t in tasks}
        sj = next(iter(groups.values())) if len(groups) == 1 else None
        if sj is None or not sj.topology_mode:
            return domains
        inner = [
            d for outer in domains for d in session.subgroup_search_space(job, sj, outer.mask, Purpose.EVICT)
        ]
        return inner[: self.args.max_domains]

    # -- 1. candidates ---------------------------------------------------------------------------
    def candidates(self, session: Session, job: Job, task: Task) -> list[Task]:
        """The pods that may be victims for ``job``, in the policy's order (job rank, then job order
        reversed): the action's rules, the VictimFilter, then the victim filter (:meth:`evictable`) —
        asked once over the whole list and, for a job some of whose pods it refuses there, once more
        about that job's pods alone. A cumulative rule (a queue's reclaimable amount) does not thin
        the candidates, whatever point carries it: it answers every candidate while they are listed
        (``Session.listing_victims``) and decides over each plan's victims (:meth:`checked`)."""
        pool: list[Task] = []
        verdict: dict[int, bool] = {}
        for t in session.cluster.tasks.values():
            v = t.job
            if (
                t.status not in VICTIM_STATES
                or not t.managed
                or t.node < 0
                or v is None
                or v is job
                or not t.preemptable
                or not self.allowed(session, job, t)
            ):
                continue
            if id(v) not in verdict:
                verdict[id(v)] = session.victim_filter(job, v, self.name)
            if verdict[id(v)]:
                pool.append(t)
        rank = self.rank(session)
        by_job: dict[int, list[Task]] = {}
        for t in pool:
            by_job.setdefault(id(t.job), []).append(t)
        order = sorted(
            by_job.values(), key=lambda pods: (rank(pods[0].job), pods[0].job.creation, pods[0].job.uid)
        )
        pool = [t for pods in order for t in pods]
        session.listing_victims = True  # a cumulative rule waits for concrete plans (SPEC.md §3.3)
        try:
            ok = {id(t) for t in self.evictable(session, task, pool, final=False)}
            for pods in order:
                if not all(id(t) in ok for t in pods):
                    ok |= {id(t) for t in self.evictable(session, task, pods, final=False)}
        finally:
            session.listing_victims = False
        return [t for t in pool if id(t) in ok]

    # -- 2. bundles ------------------------------------------------------------------------------
    def bundles(self, session: Session, costs: CostModel, pods: list[Task]) -> dict[int, VictimJob]:
        """Every candidate victim job's state (SAFE surplus, work held, policy rank), by id, numbered in
        the seed's bundle order — rank, then job order reversed (the job JobOrder would serve last goes
        first), then the newest, then the name — which breaks ties between plans."""
        rank = self.rank(session)
        found = {id(t.job): t.job for t in pods}
        jobs = {k: costs.victim(j, rank(j)) for k, j in found.items()}

        def cmp(a: VictimJob, b: VictimJob) -> int:
            if a.rank != b.rank:
                return -1 if a.rank < b.rank else 1
            r = -session.compare_jobs(a.job, b.job)
            if r:
                return r
            if a.job.creation != b.job.creation:
                return -1 if a.job.creation > b.job.creation else 1
            return (a.job.uid > b.job.uid) - (a.job.uid < b.job.uid)

        for i, j in enumerate(sorted(jobs.values(), key=functools.cmp_to_key(cmp))):
            j.order = i
        return jobs

    # -- 3. a plan per domain --------------------------------------------------------------------
    def plans(
        self,
        session: Session,
        job: Job,
        tasks: list[Task],
        domains: list[Domain],
        pods: list[Task],
        jobs: dict[int, VictimJob],
        planners: dict[int, DomainPlanner],
        level: float,
        may_break: bool,
    ) -> list[Plan]:
        """Each domain's plan at this key of the decision rule, checked (:meth:`checked`), best first."""
        out = []
        for i, domain in enumerate(domains):
            if i not in planners:
                room = Room(session, tasks, domain)
                planners[i] = DomainPlanner(
                    room, [t for t in pods if domain.mask[t.node]], jobs, self.chain(session, job)
                )
            plan = self.checked(session, job, tasks[0], planners[i], domain, i, jobs, level, may_break)
            if plan is not None:
                out.append(plan)
                if not plan.victims:
                    break  # nothing to evict: no plan is better
        return self.ranked(out)

    @staticmethod
    def ranked(plans: list[Plan]) -> list[Plan]:
        """Best first: no healthy gang broken, then least work lost, then the search-space order of
        the first domain whose plan breaks the same gangs; fewer pods evicted rank only plans that
        break the same gangs (each broken gang goes whole), then the domain."""
        first: dict[frozenset[str], int] = {}
        for p in sorted(plans, key=lambda p: p.index):
            first.setdefault(p.gangs, p.index)
        return sorted(plans, key=lambda p: (p.breaks, p.work, first[p.gangs], len(p.victims), p.index))

    def checked(
        self,
        session: Session,
        job: Job,
        task: Task,
        planner: DomainPlanner,
        domain: Domain,
        index: int,
        jobs: dict[int, VictimJob],
        level: float,
        may_break: bool,
    ) -> Plan | None:
        """The domain's plan with every gang it breaks evicted whole (:meth:`whole`), its victims
        asked about together (the victim filter in plan order, :meth:`evictable`; the
        ScenarioValidators): what is refused is left out and the plan made again — a gang one of
        whose pods is refused, or that a validator refuses to see broken, is kept whole."""
        forbid: set[int] = set()
        nobreak: set[int] = set(self._kept)  # gangs that cannot go whole
        limits = self.limits(session)
        for _ in range(6):
            victims = planner.plan(level, may_break, limits, frozenset(forbid), frozenset(nobreak))
            if victims is None:
                return None
            breaks, work, broken = CostModel.price(victims, jobs)
            victims, stuck = self.whole(victims)
            if stuck:  # a broken gang that cannot go whole is kept whole
                nobreak |= {id(j) for j in stuck}
                continue
            gone = {id(j.job) for j in broken}
            victims.sort(key=lambda t: (id(t.job) in gone, jobs[id(t.job)].rank, jobs[id(t.job)].order))
            ok = {id(t) for t in self.evictable(session, task, victims)} if victims else set()
            refused = {id(t) for t in victims if id(t) not in ok}
            if not refused and self.valid(session, job, victims):
                return Plan(domain, index, victims, breaks, work, frozenset(j.job.uid for j in broken))
            if refused:
                for t in victims:
                    if id(t) not in refused:
                        continue
                    if id(t.job) in gone:  # a refused pod of a broken gang keeps the gang whole
                        nobreak.add(id(t.job))
                    else:
                        forbid.add(id(t))
                continue
            bad = {k for k in gone if not self.valid(session, job, [t for t in victims if id(t.job) == k])}
            if not bad - nobreak:
                return None
            nobreak |= bad
        return None

    def whole(self, victims: list[Task]) -> tuple[list[Task], list[Job]]:
        """(``victims`` with every other running pod of each gang they break, in the domain or not;
        the broken gangs that cannot go whole: one of their pods is not a candidate of this search —
        not preemptable, of another scheduler, refused by a victim filter — or was placed in this
        cycle)."""
        extra, _, stuck = whole_gangs(victims)
        stuck += [t.job for t in extra if t.job is not None and id(t) not in self._pool]
        return victims + extra, list({id(j): j for j in stuck}.values())

    def kept_whole(self, jobs: dict[int, VictimJob]) -> frozenset[int]:
        """The healthy candidate gangs (by id) that cannot be evicted whole — a running pod of theirs
        is not a candidate, or a pod was placed in this cycle —, so that the planner never breaks them
        (:meth:`whole` checks each plan all the same)."""
        out = set()
        for k, vj in jobs.items():
            if not vj.healthy:
                continue
            for t in vj.job.tasks:
                held = t.status in VICTIM_STATES and t.node >= 0
                if t.status is TaskStatus.ALLOCATED or (held and id(t) not in self._pool):
                    out.add(k)
                    break
        return frozenset(out)

    # -- 4. dry run, commit and nominate -----------------------------------------------------------
    def attempt(self, session: Session, job: Job, tasks: list[Task], plan: Plan) -> bool:
        """Evict the plan's victims and place the gang in its domain onto the capacity being freed; on
        success commit and nominate, otherwise undo everything."""
        stmt = session.statement()
        for v in plan.victims:
            stmt.evict(v, f"{self.name} for {job.uid}", action=self.name, preemptor=job.uid)
        queue = session.cluster.queues[job.queue]

        def nominate(pods: list[Task], within: np.ndarray | None) -> str:
            for task in pods:
                mask = session.predicate(task) & session.capacity.fits(task, future=True)
                if within is not None:
                    mask &= within
                row = session.capacity.best_row(task, mask) if session.allocatable(queue, task) else -1
                if row < 0:
                    return f"pod {task.name} fits nowhere"
                stmt.pipeline(task, row)
            return ""

        # a sub-group with its own topology goes inside one of its domains within the plan's (Volcano
        # BuildNominationPlanInDomain); one that fits none fails the plan
        units = subgroup_units(tasks) if job.subjobs else [(None, tasks)]
        failed = ""
        for sj, unit in units:
            if sj is None:
                failed = nominate(unit, plan.domain.mask)
            else:
                failed = place_subgroup(
                    session, job, sj, unit, stmt, plan.domain.mask, nominate, Purpose.EVICT
                )
            if failed:
                break
        if failed or not session.job_pipelined(job):
            stmt.discard()
            return False
        stmt.commit()
        session.ledger.nominated_domains[job.uid] = plan.domain.name
        session.ledger.unschedulable(
            job, f"{self.name}: nominated in {plan.domain.name}; waiting for the evicted pods to leave"
        )
        return True

    def custom(
        self,
        session: Session,
        job: Job,
        tasks: list[Task],
        domains: list[Domain],
        pods: list[Task],
        need: np.ndarray,
    ) -> bool:
        """A GangVictimSelector plugin chooses the victims of each domain; the first that passes the
        dry run is committed."""
        for i, domain in enumerate(domains):
            local = [t for t in pods if domain.mask[t.node]]
            victims = session.gang_victims(job, domain, local, need, self.name)
            whole = self.whole(list(victims)) if victims is not None else None
            if (
                whole is not None
                and not whole[1]  # every gang they break can go whole
                and self.valid(session, job, whole[0])
                and self.attempt(session, job, tasks, Plan(domain, i, whole[0], False, 0.0))
            ):
                return True
        return False

    def valid(self, session: Session, job: Job, victims: list[Task]) -> bool:
        """The ScenarioValidator points on evicting ``victims`` for ``job``."""
        if not victims or not session.fns("ScenarioValidator"):
            return True
        victim_jobs = list({id(v.job): v.job for v in victims if v.job is not None}.values())
        return session.scenario_valid(job, victim_jobs, victims, self.name)

    # -- what the two actions differ in (:mod:`corral.actions.gang_actions`) ------------------------
    def may_start(self, session: Session, job: Job) -> bool:
        return True

    def allowed(self, session: Session, job: Job, victim: Task) -> bool:
        raise NotImplementedError

    def rank(self, session: Session) -> Callable[[Job], float]:
        """The policy: a victim job's level, lower gives first."""
        raise NotImplementedError

    def evictable(self, session: Session, task: Task, pods: list[Task], final: bool = True) -> list[Task]:
        """The victim filter over ``pods`` in this order (``final``: about a plan's victims)."""
        return session.unified_evictable(task, pods, self.name)

    def limits(self, session: Session) -> dict[str, QueueLimit] | None:
        return None

    def chain(self, session: Session, job: Job) -> Callable[[str], list[str]] | None:
        return None
