"""``gangpreempt`` and ``gangreclaim`` (aliases ``gang-preempt``, ``gang-reclaim``): gang-aware eviction
(seed 000 §3, SPEC.md §3.3).

For each starving gang (QueueOrder, JobOrder) that passes GangPredicate — a gang any of whose waiting
pods has ``preemptionPolicy: Never`` is left alone — the domains of GangSearchSpace (purpose Evict, at
most ``maxDomains``, which the network-topology plugin orders by an estimate of the work lost to enter
them) are each planned, and the plan that loses the least work wins (corral's choice: the seed tries
them in order and keeps the first success; the estimate cannot see node fit or the bundle order, so
the first success often costs many times the cheapest). In a domain:

1. the pods that may be victims — running or bound, preemptable, of a job of strictly lower priority in
   the same queue (gangpreempt) or of a reclaimable queue other than the preemptor's (gangreclaim),
   passing the VictimFilter — are grouped by job into SAFE and WHOLE bundles (:mod:`bundles`; ROI and
   coverage are measured over the resources the pods request, not the pod slot each takes; the cost
   counts *work*: each pod's request times the hours it has run, so the ROI prefers the victims that
   lose least; ROIs within 5 % of each other are a tie);
2. the bundles are sorted and checked with one call of the plugins' Preemptable/Reclaimable
   (UnifiedEvictable) filter over the flattened list (for gangreclaim the queue rule of
   proportion/capacity applies whatever tier it sits in); a bundle some of whose pods that call refuses
   is asked about again on its own, since a stateful plugin counts the bundles before it; each keeps its
   allowed part (a WHOLE bundle only if all of it is allowed); re-sorted; ``allowWholeBundle:
   false`` drops WHOLE bundles; a GangVictimSelector plugin may replace the choice;
3. bundles are taken in that order until what they free, with what is free in the domain, covers the
   need in total — a SAFE bundle pod by pod, a WHOLE bundle as a whole; what would make the
   ScenarioValidator reject the plan is passed over (a plan a validator rejects is taken to stay
   rejected when more is evicted, as with minruntime). Among bundles of the same kind and policy rank
   (and among the pods of a SAFE bundle) the first that lets more of the gang fit, by a first-fit
   estimate over the domain's nodes (:class:`~corral.actions.packing.Packer`), is taken before those
   that only add scattered capacity. Once the estimate says the gang fits, the victim filter is asked
   once more about what is really taken, in the order taken — so a queue's reclaimable amount is spent only on victims the
   plan uses; what it refuses is given up and the selection goes on — and what turned out not to be
   needed is spared again, the most expensive first (a *reprieve*: whole victim gangs by what they
   cost, then single units by what sparing them saves);
4. the same selection runs over *parts* of the domain (:func:`corral.actions.parts.cheapest_parts`: the nodes where
   the gang's pods cost least, chosen greedily node by node — when the domain's plan breaks no gang,
   among victims that break none and rank no later than its last), for the best two domains; a part's
   plan replaces the domain's when it goes no further down the bundle order (breaks no gang where the
   domain's plan breaks none, takes no victim the policy puts later) and loses at least 5 % less work.
   A gang such a plan breaks loses its whole WHOLE bundle in the domain, as in the domain's own plan;
5. plans are made by the estimate; only the chosen one is dry-run (each waiting pod to the best node
   by NodeOrder of the plan's nodes where it fits once the victims are gone — first the reprieved set,
   then the full one), then the next best. When no estimated plan survives its dry run, plans are made
   again dry-running each step, as the estimate may be wrong;
6. a domain whose lower bound of work (:mod:`corral.actions.bounds`) cannot beat the best plan found so
   far is not planned (estimated plans only; the decisions are the same as planning it);
7. when no bundle plan works, the victims are chosen pod by pod inside each domain as ``preempt`` and
   ``reclaim`` choose them (:mod:`corral.actions.podwise`), the cheapest such plan dry-run;
8. on success the victims are evicted and every waiting pod the gang needs is nominated (pipelined) in
   the domain. The nominations carry the domain into the next cycle: there allocate tries first the
   domain that holds them, each pod keeps its nominated node, and the capacity they reserve is not given
   to any other job, so no smaller job can take the freed nodes. ``Session.nominated_domains`` records
   the domain chosen in this cycle.

Plans are compared: within a domain, breaking no healthy gang first (SAFE before WHOLE), then the last
victim by the policy, then the work lost; across domains in the same order of the same keys — a plan
that breaks no healthy gang first, then (gangpreempt) the plan whose highest victim priority is lower,
then the work lost, costs within 5 % of each other a tie left to the search-space order. (Corral's
choice where SPEC.md §3.3 says "first success wins": the bundle order's own first two keys decide
between domains too, so no gang is broken in one domain when another can take the gang without; the
work decides only between plans the bundle order ranks alike.)
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from corral.actions.allocate import schedulable_jobs
from corral.actions.bounds import DomainBound, deficit
from corral.actions.bundles import ROI_THRESHOLD, Bundle, WHOLE, WorkCost, make_bundles, run_hours, sort_bundles
from corral.actions.evict import VICTIM_STATES, Evictor
from corral.actions.packing import Packer
from corral.actions.parts import cheapest_parts
from corral.actions.podwise import podwise_victims
from corral.actions.selection import BundleSelection
from corral.framework.config import arg
from corral.framework.extension import Domain, Purpose
from corral.framework.plugin import Action
from corral.framework.session import Session
from corral.framework.statement import Statement
from corral.model import Job, Task, TaskStatus
from corral.model.resources import PODS

__all__ = ["GangEvictAction", "Plan", "needed_tasks"]


@dataclass(frozen=True)
class GangEvictArgs:
    max_domains: int = arg("maxDomains", 8, "domains tried per gang, in the search-space order")
    allow_whole: bool = arg("allowWholeBundle", True, "may break healthy gangs (WHOLE bundles)")


@dataclass
class Plan:
    """Victims with which the gang fits (dry-run) ``domain`` — the search-space domain ``name`` or a
    part of it — what they cost in work, whether they break a healthy gang, and the victim job that
    sorts last by the action's policy (the highest priority for gangpreempt)."""

    domain: Domain
    name: str
    victims: list[Task]
    cost: float
    breaks: bool
    worst: Job | None
    index: int = 0
    fallback: list[Task] | None = None  # the victims before the reprieve, if the dry run of ``victims`` fails


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


#: Domains (the best by their whole-domain plan) also planned over their cheapest parts.
REFINE = 2


class GangEvictAction(BundleSelection, Action):
    Args = GangEvictArgs

    _pool: tuple[Job, list[Task]] | None = None       # the victim candidates of the gang being served
    _rows: np.ndarray                                   # their nodes
    _ordered = False                                    # are they in the bundles' order (:meth:`pool`)
    _local: dict[int, tuple[Domain, dict]]              # by domain: its candidates (:meth:`candidates`)
    #: order the domains by their lower bound of work and skip those that cannot win (:meth:`plans`);
    #: False plans every domain in the search-space order (to compare, in tests)
    use_bounds = True

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
            # the domains offered are planned (but those a lower bound shows cannot win); the best plan
            # wins (:meth:`compare_plans`), the search-space order breaking ties. Plans are made by the
            # first-fit estimate and only the chosen one is dry-run (then the next); when no estimated
            # plan works, plans are made dry-running each, and last, victims are chosen pod by pod
            need = sum((t.request for t in tasks), np.zeros(len(session.cluster.resources)))
            costs = WorkCost(self.roi_need(session, need), run_hours(session.now))
            self._pool = None
            self.pool(session, job, costs)
            for dry in (False, True):
                plans = self.plans(session, job, tasks, domains, costs, dry)
                if self.commit_first(session, job, tasks, plans):
                    break
            else:
                self.commit_first(session, job, tasks, self.podwise_plans(session, job, tasks, domains, costs))
            self._pool, self._local = None, {}

    def podwise_plans(self, session: Session, job: Job, tasks: list[Task], domains: list[Domain],
                      costs: WorkCost) -> list[Plan]:
        """The last resort when no bundle plan works: per domain, the victims found pod by pod as the
        legacy actions find them (:mod:`corral.actions.podwise`), cheapest first."""
        plans = []
        evictor = Evictor(session, self.name)
        for i, domain in enumerate(domains):
            victims = podwise_victims(session, self, evictor, job, tasks, domain, self.pool(session, job))
            if victims is None or (not self.args.allow_whole and costs.breaks(victims)):
                continue
            plan = self.plan(session, domain, domain.name, victims, costs)
            plan.index = i
            plans.append(plan)
        return sorted(plans, key=functools.cmp_to_key(lambda a, b: self.compare_plans(session, a, b, across=True)))

    def plans(self, session: Session, job: Job, tasks: list[Task], domains: list[Domain], costs: WorkCost,
              dry: bool) -> list[Plan]:
        """A plan per domain (the bundles taken over the whole domain), then, for the best
        :data:`REFINE` of them (for every domain when none has one), plans over the cheapest parts of
        the domain; sorted best first."""
        order = functools.cmp_to_key(lambda a, b: self.compare_plans(session, a, b, across=True))
        found: list[tuple[Plan | None, int, object]] = []
        best: Plan | None = None
        visit = list(range(len(domains)))
        bounds = None
        if not dry and len(domains) > 1 and not session.fns("GangVictimSelector"):
            # plans made by the estimate: the domains with the lowest bound of work first, and a domain
            # none of whose plans (over it or a part of it) could beat the best so far is skipped — the
            # plan chosen is never ranked below the one planning every domain would choose. (When none
            # survives its dry run every domain is planned again; a GangVictimSelector plugin chooses
            # victims its own way: then nothing is skipped.)
            caps = self.victim_caps(session, costs)
            bounds = [self.bound(session, job, tasks, d, costs, caps) for d in domains]
            if self.use_bounds:
                # (those that may be entered without breaking a gang first, by that bound)
                visit.sort(key=lambda i: (False, bounds[i].safe, i) if bounds[i].safe < float("inf")
                           else (True, bounds[i].all, i))
        skip = bounds if self.use_bounds else None
        for i in visit:
            domain = domains[i]
            if skip is not None and (skip[i].all == float("inf") or (
                    best is not None and not self.may_beat(skip[i], best, i))):
                continue
            pack = bounds[i].pack if bounds is not None else None
            plan, refine = self.plan_domain(session, job, tasks, domain, costs, dry, pack)
            if plan is not None:
                plan.index = i
                if best is None or order(plan) < order(best):
                    best = plan
            found.append((plan, i, refine))
            if plan is not None and not plan.victims:
                return [plan]           # nothing to evict: no plan is better
        plans = sorted((p for p, _, _ in found if p is not None), key=order)
        # the best plans' domains are refined — but for one that cannot beat the best plan even by a
        # part of it (by its bound), which may be skipped above: the same are refined either way
        hopeful = [p for p in plans if bounds is None or p is plans[0] or self.may_beat(bounds[p.index], plans[0], p.index)]
        chosen = {id(p) for p in hopeful[:REFINE]} if plans else None
        for plan, i, refine in found:
            if refine is None or (chosen is not None and id(plan) not in chosen):
                continue
            better = refine()
            if better is not None:
                better.index = i
                plans.append(better)
        return sorted(plans, key=order)

    def may_beat(self, bound: DomainBound, best: Plan, i: int) -> bool:
        """Could a plan of the ``i``-th domain (bounded by ``bound``) beat ``best`` across domains?"""
        return bound.could_beat(self.across_rank(best), best.cost, best.breaks, i < best.index)

    def bound(self, session: Session, job: Job, tasks: list[Task], domain: Domain, costs: WorkCost,
              caps: dict[str, float] | None) -> DomainBound:
        """The lower bound of the work of ``domain``'s plans (:mod:`corral.actions.bounds`)."""
        pack = Packer(session, tasks, domain)
        return DomainBound(self.candidates(session, job, domain).values(), costs,
                           deficit(costs.need, pack.base.sum(axis=0), costs), self.victim_rank, pack, caps)

    def commit_first(self, session: Session, job: Job, tasks: list[Task], plans: list[Plan]) -> bool:
        """Evict and nominate by the first plan whose dry run succeeds (its victims, else the set it was
        reprieved from)."""
        for plan in plans:
            for victims in (plan.victims, plan.fallback):
                if victims is not None and self.attempt(session, job, tasks, plan.domain, victims):
                    session.nominated_domains[job.uid] = plan.name
                    session.unschedulable(job, f"{self.name}: nominated in {plan.name}; waiting for the "
                                               f"evicted pods to leave")
                    return True
        return False

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
        """The pods that may be victims for ``job`` inside ``domain``, by job (kept while the gang is
        served: the bound and the plan of a domain share them)."""
        pool = self.pool(session, job)
        cached = self._local.get(id(domain))
        if cached is not None and cached[0] is domain:
            return cached[1]
        by_job: dict[int, tuple[Job, list[Task]]] = {}
        for i in np.flatnonzero(domain.mask[self._rows]).tolist():
            t = pool[i]
            by_job.setdefault(id(t.job), (t.job, []))[1].append(t)
        self._local[id(domain)] = (domain, by_job)
        return by_job

    def pool(self, session: Session, job: Job, costs: WorkCost | None = None) -> list[Task]:
        """Every pod that may be a victim for ``job`` (the action's rules, the VictimFilter), kept while
        the gang is served. Built with ``costs``, its pods are priced at once and kept in the order
        bundles take a job's pods (:meth:`WorkCost.order_key`), so every job's candidates in a domain
        come out in that order."""
        if self._pool is None or self._pool[0] is not job:
            pool: list[Task] = []
            verdict: dict[int, bool] = {}
            for t in session.cluster.tasks.values():
                if t.status not in VICTIM_STATES or not t.managed or t.node < 0:
                    continue
                v = t.job
                if v is None or v is job or not t.preemptable or not self.allowed(session, job, t):
                    continue
                if id(v) not in verdict:
                    verdict[id(v)] = session.victim_filter(job, v, self.name)
                if verdict[id(v)]:
                    pool.append(t)
            if costs is not None:
                ordered = costs.prime(pool)
                if len(ordered) == len(pool):
                    pool = ordered
                else:                       # (some were priced before: sort them all by the key)
                    pool.sort(key=costs.order_key)
            self._pool = (job, pool)
            self._rows = np.array([t.node for t in pool], dtype=np.int64)
            self._ordered = costs is not None
            self._local = {}
        return self._pool[1]

    def bundles(self, session: Session, job: Job, tasks: list[Task], by_job: dict[int, tuple[Job, list[Task]]],
                need: np.ndarray, costs: WorkCost) -> list[Bundle]:
        """The bundles of the candidates (:meth:`candidates`), sorted, each checked with the plugins'
        victim filter on its own and shrunk to its allowed part (a WHOLE bundle is kept only if all of it
        is allowed, SPEC §3.3), sorted again. What stateful plugins allow *together* is checked along
        the selection (:meth:`select`)."""
        if not by_job:
            return []
        # ROI and coverage count the resources the pods request, not the pod slot every pod takes
        need = self.roi_need(session, need)
        order = sort_bundles(make_bundles(by_job, need, costs.age, costs, ordered=self._ordered), self.policy(session),
                             session.compare_jobs, relative=True)
        if not self.args.allow_whole:
            order = [b for b in order if b.kind != WHOLE]
        # one call over the whole ordered list; a bundle some of whose pods it refuses is asked about
        # again on its own (the refusal may be a stateful plugin's, counting the bundles before it)
        flat = {id(t) for t in self.plugin_filter(session, tasks[0], [t for b in order for t in b.tasks])}
        valid = []
        changed = False
        for b in order:
            ok = flat
            if not all(id(t) in ok for t in b.tasks):
                ok = {id(t) for t in self.plugin_filter(session, tasks[0], b.tasks)}
            keep = [t for t in b.tasks if id(t) in ok]
            if b.kind == WHOLE and len(keep) < len(b.tasks):
                keep = []               # a WHOLE bundle only if all of it is allowed (SPEC §3.3)
            if len(keep) < len(b.tasks):
                changed = True
                if keep:
                    b.shrink(keep, need)
            if keep:
                valid.append(b)
        if not changed:
            return valid                # all allowed: the order stands
        return sort_bundles(valid, self.policy(session), session.compare_jobs, relative=True)

    @staticmethod
    def roi_need(session: Session, need: np.ndarray) -> np.ndarray:
        need = need.copy()
        need[session.cluster.resources.pos(PODS)] = 0
        return need

    def plan_domain(self, session: Session, job: Job, tasks: list[Task], domain: Domain, costs: WorkCost,
                    dry: bool = True, pack: Packer | None = None):
        """The plan for ``domain`` — the bundles taken in their order over the whole domain — and a
        function that plans over the cheapest parts of it (:func:`~corral.actions.parts.cheapest_parts`), returning the best part plan
        that beats the domain's: one that loses less work without going further down the order
        (breaking a gang where the whole-domain plan breaks none, or a victim the policy puts later)."""
        need = sum((t.request for t in tasks), np.zeros(len(session.cluster.resources)))
        by_job = self.candidates(session, job, domain)
        bundles = self.bundles(session, job, tasks, by_job, need, costs)
        custom = session.gang_victims(job, domain, [t for b in bundles for t in b.tasks], need, self.name)
        if custom is not None:
            victims = list(custom)
            if self.attempt(session, job, tasks, domain, victims, commit=False):
                return self.plan(session, domain, domain.name, victims, costs), None
            return None, None
        pack = pack or Packer(session, tasks, domain)      # the gang's pods over the domain's nodes
        whole = self.select(session, job, tasks, domain, domain.name, bundles, need, costs, pack, dry)

        def refine() -> Plan | None:
            cores = {id(b.job): b.tasks for b in bundles if b.kind == WHOLE}
            best = None
            for part in cheapest_parts(tasks, domain, bundles, costs, pack, self.part_modes(session, whole)):
                sub = {k: (j, [t for t in pods if part.mask[t.node]]) for k, (j, pods) in by_job.items()}
                sub = {k: v for k, v in sub.items() if v[1]}
                plan = self.select(session, job, tasks, part, domain.name, self.bundles(session, job, tasks, sub, need, costs),
                                   need, costs, Packer(session, tasks, part, pack), dry)
                if plan is not None:
                    self.complete(session, job, tasks, plan, cores, costs)
                if plan is not None and self.beats(session, plan, whole) and (
                        best is None or self.compare_plans(session, plan, best) < 0):
                    best = plan
            return best
        return whole, refine

    def part_modes(self, session: Session, whole: Plan | None) -> list[tuple[bool, object]]:
        """Which cheapest parts to plan over (:func:`~corral.actions.parts.cheapest_parts`): a part's plan
        replaces the whole domain's only if it goes no further down the bundle order (:meth:`beats`).
        With no plan for the whole domain, the cheapest nodes and the cheapest that break no gang; if
        the domain's plan breaks a gang, those too (a plan breaking none beats it); if it breaks none,
        only the cheapest nodes that break no gang and hold only victims the policy ranks no later than
        the plan's last."""
        if whole is None or whole.breaks or whole.worst is None:
            return [(False, None), (True, None)]
        policy, last = self.policy(session), SimpleNamespace(job=whole.worst)
        return [(True, lambda j: policy(SimpleNamespace(job=j), last) <= 0)]

    def complete(self, session: Session, job: Job, tasks: list[Task], plan: Plan, cores: dict[int, list[Task]],
                 costs: WorkCost) -> None:
        """A plan made over a part of the domain breaks a gang as a whole there: the rest of the gang's
        WHOLE bundle in the domain (``cores``: job id -> its pods) joins the victims, at no extra cost,
        as far as the victim filter allows it on top of the plan's victims and the ScenarioValidators
        agree."""
        for attr in ("victims", "fallback"):
            victims = getattr(plan, attr)
            if not victims:
                continue
            have = {id(t) for t in victims}
            groups: dict[int, list[Task]] = {}
            for v in victims:
                if v.job is not None:
                    groups.setdefault(id(v.job), []).append(v)
            extra = [t for k, pods in groups.items() if k in cores and costs.breaks(pods)
                     for t in cores[k] if id(t) not in have]
            if not extra:
                continue
            ok = {id(t) for t in self.plugin_filter(session, tasks[0], victims + extra)}
            if not all(id(t) in ok for t in victims):
                continue
            extra = [t for t in extra if id(t) in ok]
            if extra and self.valid(session, job, victims + extra):
                setattr(plan, attr, victims + extra)

    def plan(self, session: Session, domain: Domain, name: str, victims: list[Task], costs: WorkCost) -> Plan:
        worst = None
        policy = self.policy(session)
        for v in victims:
            if v.job is not None and (worst is None or policy(SimpleNamespace(job=v.job), SimpleNamespace(job=worst)) > 0):
                worst = v.job
        return Plan(domain, name, victims, costs.total(victims), costs.breaks(victims), worst)

    def compare_plans(self, session: Session, a: Plan, b: Plan, across: bool = False) -> int:
        """Within a domain: a plan that breaks no healthy gang before one that does (SAFE before WHOLE),
        then the one whose last victim sorts earlier by the policy, then the least work, then the fewest
        victims. Across domains: breaking no healthy gang first, then :meth:`across_rank` (gangpreempt:
        the lower highest victim priority), then the work — costs within :data:`ROI_THRESHOLD` (5 %)
        of each other are a tie, left to the search-space order."""
        if not across:
            r = self.level(session, a, b)
            if r:
                return r
        else:
            if a.breaks != b.breaks:
                return -1 if b.breaks else 1
            ra, rb = self.across_rank(a), self.across_rank(b)
            if ra != rb:
                return -1 if ra < rb else 1
            if abs(a.cost - b.cost) > ROI_THRESHOLD * max(a.cost, b.cost):
                return -1 if a.cost < b.cost else 1
            return a.index - b.index
        if abs(a.cost - b.cost) > 1e-9:
            return -1 if a.cost < b.cost else 1
        if len(a.victims) != len(b.victims):
            return len(a.victims) - len(b.victims)
        return a.index - b.index

    def level(self, session: Session, a: Plan, b: Plan) -> int:
        """How far down the bundle order two plans of one domain go: breaking no healthy gang before
        breaking one, then the last victim by the policy."""
        if a.breaks != b.breaks:
            return -1 if b.breaks else 1
        if a.worst is not None and b.worst is not None:
            return self.policy(session)(SimpleNamespace(job=a.worst), SimpleNamespace(job=b.worst))
        return 0

    def beats(self, session: Session, part: Plan, whole: Plan | None) -> bool:
        """Does a plan over a part of the domain replace the whole-domain plan — not going further down
        the bundle order, and losing less work by more than :data:`ROI_THRESHOLD` (5 %; a smaller
        difference leaves the bundle order's choice)?"""
        if whole is None:
            return True
        r = self.level(session, part, whole)
        return r < 0 or (r == 0 and part.cost < (1 - ROI_THRESHOLD) * whole.cost - 1e-12)

    def across_rank(self, plan: Plan) -> float:
        """What decides between the plans of different domains before the work they lose (lower
        first); nothing by default."""
        return 0.0

    def victim_rank(self, job: Job) -> float:
        """The :meth:`across_rank` of a plan whose highest victim is of ``job``."""
        return 0.0

    def victim_caps(self, session: Session, costs: WorkCost) -> dict[str, float] | None:
        """The most each victim queue may give up, in units of the need (none by default)."""
        return None

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
        if not victims or not session.fns("ScenarioValidator"):
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
