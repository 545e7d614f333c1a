"""Taking bundles until the gang fits (seed 000 §3 step 3, SPEC.md §3.3; the selection of
:class:`~corral.actions.gang_evict.GangEvictAction`, which see for the whole procedure): bundles in
their order, a SAFE bundle pod by pod (:mod:`corral.actions.surplus`) and a WHOLE one as a whole,
steered by the first-fit estimate (:mod:`corral.actions.packing`); the victim filter over what is
really taken; then the reprieve of what turned out not to be needed."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from corral.actions.bundles import Bundle, WorkCost
from corral.actions.packing import LOOKAHEAD, Packer, PackState, first_useful
from corral.actions.surplus import SurplusChoice
from corral.framework.extension import Domain
from corral.framework.session import Session
from corral.model import Job, Task
from corral.model.resources import EPS

if TYPE_CHECKING:                                    # pragma: no cover
    from corral.actions.gang_evict import Plan

__all__ = ["BundleSelection"]


class BundleSelection:
    """The selection and the reprieve; the action provides ``policy``, ``plugin_filter``, ``valid``,
    ``attempt`` and ``plan``."""

    def select(self, session: Session, job: Job, tasks: list[Task], domain: Domain, name: str, bundles: list[Bundle],
               need: np.ndarray, costs: WorkCost, pack: Packer, dry: bool = True) -> Plan | None:
        """Take the bundles in their order until the gang fits ``domain``: with ``dry``, by a dry run each
        time the estimate says it fits (or a bundle ends); otherwise by the estimate alone (the caller
        dry-runs the plan it chooses)."""
        cols = np.flatnonzero(need)
        nodes = session.cluster.nodes
        want = need[cols] - EPS
        taken = _Taken(pack, cols, np.clip(nodes.future_idle[domain.mask & ~nodes.down][:, cols], 0, None).sum(axis=0))
        if np.all(taken.total >= want) and (self.attempt(session, job, tasks, domain, [], commit=False) if dry
                                            else taken.state.count() >= pack.n):
            return self.plan(session, domain, name, [], costs)
        policy = self.policy(session)
        pending = list(bundles)
        surplus = SurplusChoice(bundles, costs)
        while pending:
            b = pending.pop(first_useful(taken.state, [surplus.probe(x, taken.state) for x in pending[:LOOKAHEAD]],
                                          lambda i: pending[i].kind == pending[0].kind
                                          and policy(pending[0], pending[i]) == 0))
            # a SAFE bundle pod by pod, only as far as the need requires — any pod of its job in the
            # domain may go in place of one of its pods (:mod:`corral.actions.surplus`); a WHOLE one as a
            # whole (once its gang is broken the rest of its pods in the domain cost nothing more)
            left = surplus.options(b)
            while left and not surplus.done(b):
                unit = left.pop(first_useful(taken.state, left, lambda i: True))
                if not surplus.may_take(b, unit[0]) or not self.valid(session, job, taken.victims + unit):
                    continue            # a role minimum, or a ScenarioValidator rejects it: pass it over
                taken.add(unit)
                surplus.take(b, unit)
                plan = self._settle(session, job, tasks, domain, name, costs, taken, surplus, want, dry,
                                    not left or surplus.done(b))
                if plan is not None:
                    return plan
        return None

    def _settle(self, session: Session, job: Job, tasks: list[Task], domain: Domain, name: str, costs: WorkCost,
                taken: "_Taken", surplus: SurplusChoice, want: np.ndarray, dry: bool, ended: bool) -> Plan | None:
        """Once the estimate says the gang fits (or, with ``dry`` — a dry run at every step — the bundle
        ``ended``): spare what is not needed (:meth:`reprieve`), ask the victim filter about what is
        really taken — in the order taken: stateful plugins count cumulatively only what is really
        taken; what it refuses is given up (a WHOLE bundle as a whole: SPEC §3.3 keeps a WHOLE bundle
        only if all of it is allowed) and, while the rest still fits, this starts again — and make the
        plan (dry-run with ``dry``). None: the selection goes on."""
        pack = taken.pack
        while np.all(taken.total >= want) and (taken.state.count() >= pack.n or (dry and ended)):
            spared = self.reprieve(session, job, taken.units, PackState(pack, taken.state.free.copy()), costs,
                                   taken.total, taken.cols, want)
            ok = {id(t) for t in self.plugin_filter(session, tasks[0], spared)}
            if len(ok) < len(spared):
                surplus.give_back(taken.drop({id(t) for t in spared if id(t) not in ok}))
                if not self.valid(session, job, taken.victims):
                    return None
                continue
            victims = taken.victims
            full = None
            if len(spared) < len(victims) and len(self.plugin_filter(session, tasks[0], victims)) == len(victims):
                full = victims
            if not dry:
                plan = self.plan(session, domain, name, spared, costs)
                plan.fallback = full
                return plan
            if self.attempt(session, job, tasks, domain, spared, commit=False):
                return self.plan(session, domain, name, spared, costs)
            if full is not None and self.attempt(session, job, tasks, domain, full, commit=False):
                return self.plan(session, domain, name, full, costs)
            return None
        return None

    def reprieve(self, session: Session, job: Job, units: list[list[Task]], state: PackState, costs: WorkCost,
                 total: np.ndarray, cols: np.ndarray, want: np.ndarray) -> list[Task]:
        """Spare what turned out not to be needed, the most expensive first: first every victim gang as
        a whole (all its pods taken, by what the gang costs), then each pod on its own (by what sparing
        it saves, then the latest taken), each given back when the estimate says the gang still fits
        without it (the caller dry-runs the result first, then the full set if the estimate was
        wrong). A pod of a gang the set breaks anyway saves nothing and is tried last. ``state`` and
        ``total`` are the estimate's room per node and in all with every unit taken (``state`` is
        changed)."""
        keep = set(range(len(units)))
        n = state.pack.n

        def spare(drop: set[int]) -> bool:
            nonlocal keep, total
            pods = [t for i in drop for t in units[i]]
            t2 = total - sum(v.request[cols] for v in pods)
            if not np.all(t2 >= want) or state.trial(pods, -1.0) < n:
                return False
            rest = keep - drop
            if not self.valid(session, job, [t for j in sorted(rest) for t in units[j]]):
                return False
            state.apply(pods, -1.0)
            keep, total = rest, t2
            return True

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
            if i in keep:
                spare({i})
        return [t for j in sorted(keep) for t in units[j]]


class _Taken:
    """What a selection has taken so far: the units in order (a WHOLE bundle, or one pod of a SAFE
    bundle), what they free with what was free (over the need's columns) and the estimate's room per
    node."""

    def __init__(self, pack: Packer, cols: np.ndarray, base_total: np.ndarray) -> None:
        self.pack, self.cols, self.base_total = pack, cols, base_total
        self.units: list[list[Task]] = []
        self.total = base_total
        self.state = PackState(pack, pack.freed([]))

    @property
    def victims(self) -> list[Task]:
        return [t for u in self.units for t in u]

    def add(self, unit: list[Task]) -> None:
        self.units.append(unit)
        self.total = self.total + sum(v.request[self.cols] for v in unit)
        self.state.apply(unit)

    def drop(self, refused: set[int]) -> set[int]:
        """Give up the pods ``refused`` (ids) — a WHOLE bundle any of whose pods is refused as a whole:
        what is left is counted again. Returns the ids of every pod given up."""
        hit = [any(id(t) in refused for t in u) for u in self.units]
        gone = {id(t) for u, h in zip(self.units, hit) if h for t in u}
        self.units = [u for u, h in zip(self.units, hit) if not h]
        victims = self.victims
        self.total = self.base_total + sum((v.request[self.cols] for v in victims), np.zeros(len(self.cols)))
        self.state = PackState(self.pack, self.pack.freed(victims))
        return gone
