"""The last resort of ``gangpreempt`` and ``gangreclaim``: victims chosen pod by pod inside a domain.

The bundle selection of :mod:`corral.actions.gang_evict` takes whole bundles in their sorted order and
checks the plugins' victim filter along the way. Where a stateful filter leaves almost no room — a
reclaim whose victim queues may give up exactly what the gang needs, and only on the right nodes — the
bundle order can spend that room on victims the gang cannot use, and no plan survives. The legacy
actions find such plans because they work node by node: for each waiting pod, the node where the fewest,
lowest-priority victims make it fit, with the filter asked about that node's pods only, the evictions of
the earlier pods already counted.

When no bundle plan of any domain works, the gang actions run that same per-pod search
(:class:`~corral.actions.evict.Evictor`, the engine of ``preempt``/``reclaim``) inside each domain of
the search space, over the gang action's own candidates (its eligibility rules and the VictimFilter
already applied). The victims found become one more plan per domain, priced in work like every other
plan; the cheapest is dry-run and committed as usual (evict, nominate in the domain). So a gang-aware
action places the preemptor wherever the legacy action restricted to the domain would — with
``allowWholeBundle: false`` only by a plan that breaks no healthy gang.

Decision (the issue asks that the gang actions place the preemptor whenever the exact oracle can; the
seed is silent on a fallback): the per-pod plan is tried only after every bundle plan failed, so it never
displaces the bundle order of SPEC.md §3.3 where that order finds a plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from corral.actions.evict import Evictor
from corral.framework.extension import Domain
from corral.framework.session import Session
from corral.model import Job, Task

if TYPE_CHECKING:                                    # pragma: no cover
    from corral.actions.gang_evict import GangEvictAction

__all__ = ["podwise_victims"]


def podwise_victims(session: Session, action: "GangEvictAction", evictor: Evictor, job: Job, tasks: list[Task],
                    domain: Domain, pool: list[Task]) -> list[Task] | None:
    """Victims that let every pod of ``tasks`` fit inside ``domain``, found pod by pod as ``preempt`` and
    ``reclaim`` find them with ``evictor`` (best node per pod, its victims reprieved, the earlier pods'
    evictions counted), taken only from ``pool`` (the action's candidates); None when some pod finds no
    node. Nothing is left applied (``evictor`` included)."""
    ok = {id(t) for t in pool}
    allowed = np.fromiter((id(t) in ok for t in evictor.tasks), bool, len(evictor.tasks))
    if len(evictor.tasks):
        allowed &= domain.mask[evictor.t_node]
    within = domain.mask & ~session.cluster.nodes.down
    stmt = session.statement()
    victims: list[Task] = []
    try:
        for task in tasks:
            plan = evictor.best(task, job, allowed, lambda pods, t=task: action.plugin_filter(session, t, pods),
                                victims, within)
            if plan is None:
                return None
            for v in plan.victims:
                stmt.evict(v, f"{action.name} for {job.uid}", action=action.name, preemptor=job.uid)
            evictor.gone(plan.victims)
            stmt.pipeline(task, plan.node)
            victims.extend(plan.victims)
        return victims
    finally:
        stmt.discard()
        evictor.back(victims)
