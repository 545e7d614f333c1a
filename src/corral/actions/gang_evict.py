"""``gangpreempt`` and ``gangreclaim`` (aliases ``gang-preempt``, ``gang-reclaim``): gang-aware eviction
(seed 000 §3, SPEC.md §3.3).

For each starving gang (QueueOrder, JobOrder) that passes GangPredicate — a gang any of whose waiting
pods has ``preemptionPolicy: Never`` is left alone — the domains of GangSearchSpace (purpose Evict, at
most ``maxDomains``) are tried in order and the first success wins. In a domain:

1. the pods that may be victims — running or bound, preemptable, of a job of strictly lower priority in
   the same queue (gangpreempt) or of a reclaimable queue other than the preemptor's (gangreclaim),
   passing the VictimFilter — are grouped by job into SAFE and WHOLE bundles (:mod:`bundles`; ROI and
   coverage are measured over the resources the pods request, not the pod slot each takes);
2. the bundles are sorted and validated with ONE call of the plugins' Preemptable/Reclaimable
   (UnifiedEvictable) filter over the flattened list, so stateful plugins count cumulatively (for
   gangreclaim the queue rule of proportion/capacity applies whatever tier it sits in); a WHOLE
   bundle survives only if all of it is allowed, a SAFE bundle shrinks to its allowed part; re-sorted;
   ``allowWholeBundle: false`` drops WHOLE bundles; a GangVictimSelector plugin may replace the choice;
3. bundles are taken in that order until what they free, with what is free in the domain, covers the
   need in total — a SAFE bundle pod by pod, a WHOLE bundle as a whole; what would make the
   ScenarioValidator reject the plan is passed over (a plan a validator rejects is taken to stay
   rejected when more is evicted, as with minruntime). Then, once a first-fit estimate over the domain's
   nodes (:class:`Packer`) says the gang fits, or at the end of a bundle anyway, the gang is dry-run into
   the domain (each waiting pod goes to the best node by NodeOrder of the domain where it fits once the
   victims are gone); if it does not fit yet, more is taken and the dry run repeated. Among bundles of
   the same kind and policy rank (and among the pods of a SAFE bundle) the first that lets more of the
   gang fit, by the estimate, is taken before those that only add scattered capacity: one gang that
   frees a whole node goes before eight gangs with one GPU on each of four nodes. Once the gang fits,
   what was taken earlier and turns out not to be needed is spared again, latest first (a reprieve by
   the estimate; the smaller set is dry-run, and the full set if the estimate was wrong);
4. on success the victims are evicted and every waiting pod the gang needs is nominated (pipelined) in
   the domain. The nominations carry the domain into the next cycle: there allocate tries first the
   domain that holds them, each pod keeps its nominated node, and the capacity they reserve is not given
   to any other job, so no smaller job can take the freed nodes. ``Session.nominated_domains`` records
   the domain chosen in this cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corral.actions.allocate import schedulable_jobs
from corral.actions.bundles import Bundle, WHOLE, WorkCost, make_bundles, run_hours, sort_bundles
from corral.actions.evict import VICTIM_STATES
from corral.actions.reclaim import queue_rules
from corral.framework.config import arg
from corral.framework.extension import Domain, Purpose
from corral.framework.plugin import Action
from corral.framework.session import Session
from corral.framework.statement import Statement
from corral.model import Job, Task, TaskStatus
from corral.model.resources import EPS, PODS

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


#: Candidates (bundles of one kind and policy rank, or pods of one SAFE bundle) looked at for one that
#: lets more of the gang fit.
LOOKAHEAD = 32


class Packer:
    """A quick estimate of how many of the gang's waiting pods a domain could hold once given victims are
    gone: first fit, pod by pod in TaskOrder, over each node's future idle capacity plus what the victims
    on it free, within the pod's predicate mask. It only steers which victims are taken first and which
    are spared; the dry run decides."""

    def __init__(self, session: Session, tasks: list[Task], domain: Domain) -> None:
        nodes = session.cluster.nodes
        self.rows = np.flatnonzero(domain.mask & ~nodes.down)
        self.pos = {int(r): i for i, r in enumerate(self.rows)}
        self.base = np.clip(nodes.future_idle[self.rows], 0, None)
        # runs of identical pods (same class: same request and constraints), in TaskOrder
        self.groups: list[list] = []            # [request, mask, count]
        for t in tasks:
            last = self.groups[-1] if self.groups else None
            if last is not None and t.klass and last[3] == t.klass:
                last[2] += 1
                continue
            self.groups.append([t.request, session.predicate(t)[self.rows], 1, t.klass])
        self.n = len(tasks)

    def freed(self, victims: list[Task], free: np.ndarray | None = None) -> np.ndarray:
        """Each domain node's room once ``victims`` are gone (added to ``free`` if given, else to what
        is free or being freed now)."""
        free = self.base.copy() if free is None else free.copy()
        idx = [(self.pos[v.node], v.request) for v in victims if v.node in self.pos]
        if idx:
            np.add.at(free, [i for i, _ in idx], np.array([r for _, r in idx]))
        return free

    def fit(self, free: np.ndarray) -> int:
        """How many of the gang's waiting pods fit into ``free``, first fit in TaskOrder."""
        free = free.copy()
        placed = 0
        for req, mask, k, _ in self.groups:
            cols = req > 0
            # first fit of k identical pods: fill the nodes in row order
            room = np.floor((free[:, cols] + EPS) / req[cols]).min(axis=1) if cols.any() else np.full(len(free), k)
            room = np.where(mask, np.maximum(room, 0), 0)
            take = np.minimum(room, np.maximum(k - (np.cumsum(room) - room), 0))
            free -= take[:, None] * req
            placed += int(take.sum())
        return placed

    def count(self, victims: list[Task]) -> int:
        return self.fit(self.freed(victims))


def _first_useful(pack: Packer, victims: list[Task], options: list[list[Task]], same) -> int:
    """Index of the first option (among the leading ones for which ``same(i)`` holds, at most
    ``LOOKAHEAD``) whose pods, evicted on top of ``victims``, let the estimate place more of the gang;
    0 when none does."""
    if len(options) <= 1:
        return 0
    base = pack.freed(victims)
    have = pack.fit(base)
    if have >= pack.n:
        return 0
    for i, opt in enumerate(options[:LOOKAHEAD]):
        if not same(i):
            break
        if pack.fit(pack.freed(opt, base)) > have:
            return i
    return 0


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
            if not tasks or any(t.preempt_never for t in tasks):
                continue                # preemptionPolicy Never: the pod never preempts or reclaims
            domains = session.gang_search_space(job, Purpose.EVICT)[: self.args.max_domains]
            # every domain offered is planned (dry runs only); the plan that loses the least work wins,
            # the search-space order breaking ties; a plan that evicts nothing ends the search
            plans: list[tuple[float, int, Domain, list[Task]]] = []
            for i, domain in enumerate(domains):
                plan = self.plan_domain(session, job, tasks, domain)
                if plan is None:
                    continue
                cost, victims = plan
                plans.append((cost, i, domain, victims))
                if not victims:
                    break
            plans.sort(key=lambda p: (p[0], len(p[3]), p[1]))
            for _, _, domain, victims in plans:
                if self.attempt(session, job, tasks, domain, victims):
                    session.nominated_domains[job.uid] = domain.name
                    session.unschedulable(job, f"{self.name}: nominated in {domain.name}; waiting for the "
                                               f"evicted pods to leave")
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
        """The domain's bundles, sorted, each checked with the plugins' victim filter on its own (a WHOLE
        bundle kept only if all of it is allowed, a SAFE one shrunk to its allowed part), sorted again.
        What stateful plugins allow *together* is checked along the selection (:meth:`plan_domain`)."""
        by_job = self.candidates(session, job, domain)
        if not by_job:
            return []
        # ROI and coverage count the resources the pods request, not the pod slot every pod takes
        need = self.roi_need(session, need)
        order = sort_bundles(make_bundles(by_job, need, run_hours(session.now)), self.policy(session),
                             session.compare_jobs)
        valid = []
        for b in order:
            if b.kind == WHOLE and not self.args.allow_whole:
                continue
            ok = {id(t) for t in self.plugin_filter(session, tasks[0], b.tasks)}
            keep = [t for t in b.tasks if id(t) in ok]
            if keep:
                b.shrink(keep, need)
                valid.append(b)
        return sort_bundles(valid, self.policy(session), session.compare_jobs)

    @staticmethod
    def roi_need(session: Session, need: np.ndarray) -> np.ndarray:
        need = need.copy()
        need[session.cluster.resources.pos(PODS)] = 0
        return need

    def plan_domain(self, session: Session, job: Job, tasks: list[Task], domain: Domain
                    ) -> tuple[float, list[Task]] | None:
        """The victims with which the gang fits ``domain`` (dry-run, nothing kept) and their cost in
        work (:class:`WorkCost`), or None."""
        need = sum((t.request for t in tasks), np.zeros(len(session.cluster.resources)))
        cols = np.flatnonzero(need)
        bundles = self.bundles(session, job, tasks, domain, need)
        costs = WorkCost(self.roi_need(session, need), run_hours(session.now))
        custom = session.gang_victims(job, domain, [t for b in bundles for t in b.tasks], need, self.name)
        if custom is not None:
            victims = list(custom)
            if self.attempt(session, job, tasks, domain, victims, commit=False):
                return costs.total(victims), victims
            return None
        nodes = session.cluster.nodes
        base = np.clip(nodes.future_idle[domain.mask & ~nodes.down][:, cols], 0, None).sum(axis=0)

        def covered(victims: list[Task]) -> bool:
            freed = sum((v.request[cols] for v in victims), np.zeros(len(cols)))
            return bool(np.all(base + freed >= need[cols] - EPS))

        if covered([]) and self.attempt(session, job, tasks, domain, [], commit=False):
            return 0.0, []
        pack = Packer(session, tasks, domain)
        policy = self.policy(session)
        victims: list[Task] = []
        units: list[list[Task]] = []        # what was taken, in order: a WHOLE bundle, or one SAFE pod
        pending = list(bundles)
        while pending:
            b = pending.pop(_first_useful(pack, victims, [x.tasks for x in pending],
                                          lambda i: pending[i].kind == pending[0].kind
                                          and policy(pending[0], pending[i]) == 0))
            # a SAFE bundle pod by pod, only as far as the need requires; a WHOLE one as a whole (once its
            # gang is broken the rest of its pods in the domain cost nothing more)
            left = [list(b.tasks)] if b.kind == WHOLE else [[t] for t in b.tasks]
            while left:
                unit = left.pop(_first_useful(pack, victims, left, lambda i: True))
                unit = self.allowed_together(session, tasks[0], victims, unit)
                if not unit:
                    continue            # a stateful victim filter refuses it on top of what is taken
                if not self.valid(session, job, victims + unit):
                    continue            # a ScenarioValidator rejects it: pass it over
                victims = victims + unit
                units.append(unit)
                # a SAFE bundle goes pod by pod, only as far as the need requires; a WHOLE one as a whole.
                # Dry-run once the estimate says the gang fits, or at the end of a bundle anyway
                if not covered(victims) or (left and pack.count(victims) < pack.n):
                    continue
                spared = self.reprieve(session, job, units, covered, pack, costs)
                if len(spared) < len(victims) and self.attempt(session, job, tasks, domain, spared, commit=False):
                    return costs.total(spared), spared
                if self.attempt(session, job, tasks, domain, victims, commit=False):
                    return costs.total(victims), victims
        return None

    def allowed_together(self, session: Session, task: Task, victims: list[Task], unit: list[Task]) -> list[Task]:
        """What of ``unit`` the plugins' victim filter allows on top of ``victims`` (one call over the
        selection in the order taken, so stateful plugins count cumulatively only what is really
        taken): all of it or nothing for one SAFE pod, the allowed part of a WHOLE bundle (its gang
        breaks all the same)."""
        ok = {id(t) for t in self.plugin_filter(session, task, victims + unit)}
        return [t for t in unit if id(t) in ok]

    def reprieve(self, session: Session, job: Job, units: list[list[Task]], covered, pack: "Packer",
                 costs: WorkCost) -> list[Task]:
        """Spare what turned out not to be needed, the most expensive first: first every victim gang as
        a whole (all its pods taken, by what the gang costs), then each pod on its own (by what sparing
        it saves, then the latest taken), each given back when the estimate says the gang still fits
        without it (the caller dry-runs the result first, then the full set if the estimate was
        wrong). A pod of a gang the set breaks anyway saves nothing and is tried last."""
        keep = set(range(len(units)))

        def spare(drop: set[int]) -> bool:
            nonlocal keep
            rest = keep - drop
            trial = [t for j in sorted(rest) for t in units[j]]
            if covered(trial) and pack.count(trial) >= pack.n and self.valid(session, job, trial):
                keep = rest
                return True
            return False

        groups: dict[int, list[int]] = {}
        for i, u in enumerate(units):
            groups.setdefault(id(u[0].job), []).append(i)
        if len(groups) > 1:
            cost = {k: costs.job(units[ix[0]][0].job, [t for i in ix for t in units[i]]) for k, ix in groups.items()}
            for k in sorted(groups, key=lambda k: (-cost[k], -max(groups[k]))):
                spare(set(groups[k]))
        live = sorted(keep)
        saving = dict(zip(live, costs.savings([units[i] for i in live])))
        for i in sorted(live, key=lambda i: (-saving[i], -i)):
            spare({i})
        return [t for j in sorted(keep) for t in units[j]]

    def attempt(self, session: Session, job: Job, tasks: list[Task], domain: Domain, victims: list[Task],
                *, commit: bool = True) -> bool:
        """Evict ``victims``, dry-run the gang into ``domain`` onto the capacity being freed; on success
        commit (or, with ``commit=False``, only report it), otherwise undo everything."""
        if not self.valid(session, job, victims):
            return False
        stmt = session.statement()
        for v in victims:
            stmt.evict(v, f"{self.name} for {job.uid}", action=self.name, preemptor=job.uid)
        if self.nominate(session, job, tasks, domain, stmt) and session.job_pipelined(job):
            if commit:
                stmt.commit()
            else:
                stmt.discard()
            return True
        stmt.discard()
        return False

    def valid(self, session: Session, job: Job, victims: list[Task]) -> bool:
        """The ScenarioValidator points on evicting ``victims`` for ``job``."""
        if not victims:
            return True
        victim_jobs = list({id(v.job): v.job for v in victims if v.job is not None}.values())
        return session.scenario_valid(job, victim_jobs, victims, self.name)

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
        """VictimQueueOrder; where no plugin answers it, the reverse of QueueOrder (the queue allocate
        would serve last — with proportion or capacity, the one furthest above its share — gives first);
        bundles of queues no plugin tells apart are left to the ROI."""
        queues = session.cluster.queues
        victim_order, queue_order = session.fns("VictimQueueOrder"), session.fns("QueueOrder")

        def cmp(a: Bundle, b: Bundle) -> int:
            qa, qb = queues[a.job.queue], queues[b.job.queue]
            if qa is qb:
                return 0
            for fn in victim_order:
                r = fn(qa, qb)
                if r:
                    return r
            for fn in queue_order:
                r = fn(qa, qb)
                if r:
                    return -r
            return 0
        return cmp

    def plugin_filter(self, session: Session, task: Task, pods: list[Task]) -> list[Task]:
        """Reclaimable over the ordered list, then — whatever tier they sit in, as in ``reclaim`` — the
        queue rule of proportion/capacity (a victim only while its queue stays at or above its
        deserved share, counted cumulatively along the list)."""
        allowed = session.reclaimable(task, pods)
        for rule in queue_rules(session):
            ok = rule(task, allowed)
            if ok is not None:
                keep = {id(t) for t in ok}
                allowed = [t for t in allowed if id(t) in keep]
        return allowed
