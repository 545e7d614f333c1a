"""``minruntime``: a minimum runtime before a job may be preempted or reclaimed (seed 002, SPEC.md §3.4;
KAI-Scheduler's ``minruntime`` plugin).

A running job is *protected* while ``now < start + min_runtime``: no preempt or reclaim action may pick it
as a victim. The start time is the PodGroup annotation ``kai.scheduler/last-start-timestamp`` (written by
``allocate`` when the job becomes ready), else ``corral.io/start-time``, in RFC 3339. A job with neither
annotation is **not** protected (it was never seen starting, so there is nothing to count from).

Which min-runtime applies (node-pool defaults are the plugin arguments; queues override them with
``preemptMinRuntime`` / ``reclaimMinRuntime``, unset meaning inherit):

- preempt (preemptor and victim in the same leaf queue): walk up from the victim's leaf queue to the
  first queue that sets ``preemptMinRuntime``; else ``defaultPreemptMinRuntime``;
- reclaim (different queues): take the lowest common ancestor of the two leaf queues, step one level
  down towards the victim, and walk up from there to the first queue that sets ``reclaimMinRuntime``;
  else ``defaultReclaimMinRuntime``. So a setting only shields a subtree against its *siblings*: a
  reclaim between two leaves under ``C`` never sees what ``C``'s parent says about ``C`` itself.
  ``reclaimResolveMethod: queue`` walks up from the victim's leaf instead (one owner for the whole tree).

The action name picks the rule: ``preempt``/``gangpreempt`` preempt, ``reclaim``/``gangreclaim`` reclaim;
any other action uses the preempt rule when both jobs share a leaf queue and the reclaim rule otherwise.
Queues above the top of the tree are joined under one virtual root, so two separate trees still have a
common ancestor.

Extension points:

- VictimFilter: False for a protected victim, except an *elastic* job (more pods than minMember, or
  minMember below the sum of its role minimums) whose pods are allowed here — its surplus may go;
- ScenarioValidator: False when the scenario would leave a protected elastic job with fewer than
  minMember running or bound pods (its pods in ALLOCATED_STATES that the scenario does not evict), and —
  as a second line of defence for actions that skip the filter — when it evicts any pod of a protected
  job that is not elastic.

Every answer is a pure function of the session clock, the queue tree and the victim's annotations, so
the same input gives the same decisions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.framework.config import arg
from corral.framework.extension import ScenarioValidator, VictimFilter
from corral.framework.plugin import Plugin
from corral.model import ALLOCATED_STATES, Job, Queue, Task
from corral.model.clock import parse_time

__all__ = [
    "PREEMPT",
    "RECLAIM",
    "START_ANNOTATIONS",
    "MinRuntimeArgs",
    "MinRuntimePlugin",
    "is_elastic",
    "resolve_min_runtime",
    "rule_for",
    "start_time",
]

PREEMPT = "preempt"
RECLAIM = "reclaim"

#: PodGroup annotations that carry a job's start time, in order of precedence.
START_ANNOTATIONS = ("kai.scheduler/last-start-timestamp", "corral.io/start-time")

_FIELD = {PREEMPT: "preempt_min_runtime", RECLAIM: "reclaim_min_runtime"}


@dataclass(frozen=True)
class MinRuntimeArgs:
    default_preempt: float = arg(
        "defaultPreemptMinRuntime",
        0.0,
        "node-pool preempt min-runtime (a duration: 0, 90s, 5m, 1h30m)",
        kind="duration",
    )
    default_reclaim: float = arg(
        "defaultReclaimMinRuntime", 0.0, "node-pool reclaim min-runtime (a duration)", kind="duration"
    )
    reclaim_resolve_method: str = arg(
        "reclaimResolveMethod",
        "lca",
        "lca: resolve below the lowest common ancestor; queue: from the victim's leaf queue",
        choices=("lca", "queue"),
    )


def rule_for(action: str, preemptor_queue: str | None = None, victim_queue: str | None = None) -> str:
    """``"preempt"`` or ``"reclaim"``: which min-runtime an action is subject to. ``gang``-prefixed and
    dashed names map to the plain ones; an unknown action is a preemption inside one leaf queue and a
    reclaim across queues."""
    key = action.strip().lower().replace("-", "").replace("_", "")
    if key.startswith("gang"):
        key = key[4:]
    if key in (PREEMPT, RECLAIM):
        return key
    return PREEMPT if preemptor_queue == victim_queue else RECLAIM


def _chain(queues: Mapping[str, Any], name: str | None) -> list[str]:
    """``name`` and its ancestors, leaf first. A name missing from ``queues`` is a tree of its own."""
    out: list[str] = []
    seen: set[str] = set()
    while name and name not in seen:
        out.append(name)
        seen.add(name)
        q = queues.get(name)
        name = getattr(q, "parent", None) if q is not None else None
    return out


def _walk_up(queues: Mapping[str, Any], chain: Sequence[str], attr: str, default: float) -> float:
    for name in chain:
        q = queues.get(name)
        value = getattr(q, attr, None) if q is not None else None
        if value is not None:
            return float(value)
    return float(default)


def _default(defaults: Mapping[str, float], rule: str) -> float:
    return float(defaults.get(rule, 0.0) or 0.0)


def resolve_min_runtime(
    queues: Mapping[str, Any],
    preemptor_queue: str | None,
    victim_queue: str | None,
    action: str,
    defaults: Mapping[str, float] | None = None,
    method: str = "lca",
) -> float:
    """The min-runtime (seconds) that protects a victim in leaf queue ``victim_queue`` against a
    preemptor in ``preemptor_queue`` under ``action`` (seed 002, SPEC.md §3.4).

    ``queues`` maps a queue name to an object with ``parent``, ``preempt_min_runtime`` and
    ``reclaim_min_runtime`` (seconds, None = inherit), e.g. ``cluster.queues``. ``defaults`` maps
    ``"preempt"`` / ``"reclaim"`` to the node-pool values (missing: 0). ``method`` is the
    ``reclaimResolveMethod``: ``"lca"`` or ``"queue"``.
    """
    defaults = defaults or {}
    rule = rule_for(action, preemptor_queue, victim_queue)
    attr = _FIELD[rule]
    victim_chain = _chain(queues, victim_queue)
    if rule == PREEMPT or method == "queue":
        return _walk_up(queues, victim_chain, attr, _default(defaults, rule))
    if method != "lca":
        raise ValueError(f"unknown reclaimResolveMethod {method!r} (allowed: lca, queue)")
    preemptor_side = set(_chain(queues, preemptor_queue))
    # the LCA is the victim's first ancestor the preemptor shares (past the top: a virtual root above
    # every tree); the queue one level below it, towards the victim, is the one just before it
    lca_at = next((i for i, name in enumerate(victim_chain) if name in preemptor_side), len(victim_chain))
    start = max(lca_at - 1, 0)  # 0: the victim's queue is the preemptor's or its ancestor, no step down
    return _walk_up(queues, victim_chain[start:], attr, _default(defaults, rule))


def start_time(job: Job) -> float | None:
    """Seconds since the epoch at which ``job`` last started, from its PodGroup annotations; None if it
    has none. A malformed value is an :class:`~corral.errors.InputError` naming the podgroup and field."""
    for key in START_ANNOTATIONS:
        value = job.annotations.get(key)
        if value:
            return parse_time(value, obj=f"PodGroup {job.uid}", field=f"metadata.annotations.{key}")
    return None


def is_elastic(job: Job) -> bool:
    """More pods than minMember (some may go without breaking the gang), or role minimums that do not
    bind (seed 000)."""
    return len(job.tasks) > job.min_member or job.elastic


class MinRuntimePlugin(Plugin, VictimFilter, ScenarioValidator):
    """Seed 002 (SPEC.md §3.4): protect jobs from preempt/reclaim until they have run their min-runtime."""

    name = "minruntime"
    Args = MinRuntimeArgs

    def on_session_open(self) -> None:
        self.queues: Mapping[str, Queue] = self.session.cluster.queues
        self.defaults = {PREEMPT: self.args.default_preempt, RECLAIM: self.args.default_reclaim}
        self._runtime: dict[tuple[str, str, str], float] = {}
        self._starts: dict[str, float | None] = {}
        # a malformed start annotation is bad input: say so now, not in the middle of an action
        for job in sorted(self.session.cluster.jobs.values(), key=lambda j: j.uid):
            start_time(job)

    def on_session_close(self) -> None:
        self._runtime = {}
        self._starts = {}

    # -- resolution --------------------------------------------------------------------------------
    def _min_runtime(self, preemptor: Job, victim: Job, action: str) -> float:
        """Seconds of protection ``victim`` has against ``preemptor`` under ``action``."""
        rule = rule_for(action, preemptor.queue, victim.queue)
        key = (rule, preemptor.queue, victim.queue)
        got = self._runtime.get(key)
        if got is None:
            got = resolve_min_runtime(
                self.queues,
                preemptor.queue,
                victim.queue,
                rule,
                self.defaults,
                self.args.reclaim_resolve_method,
            )
            self._runtime[key] = got
        return got

    def _start(self, job: Job) -> float | None:
        # annotations change during a cycle (allocate stamps the jobs it starts): key the cache by value
        raw = next((job.annotations.get(k) for k in START_ANNOTATIONS if job.annotations.get(k)), None)
        if raw is None:
            return None
        got = self._starts.get(raw)
        if got is None:
            got = start_time(job)
            self._starts[raw] = got
        return got

    def _protected_until(self, preemptor: Job, victim: Job, action: str) -> float | None:
        """When ``victim``'s protection against ``preemptor`` ends (seconds since the epoch), or None if
        it is not protected now."""
        start = self._start(victim)
        if start is None:
            return None
        until = start + self._min_runtime(preemptor, victim, action)
        return until if self.session.now < until else None

    def _protected(self, preemptor: Job, victim: Job, action: str) -> bool:
        return self._protected_until(preemptor, victim, action) is not None

    # -- extension points --------------------------------------------------------------------------
    def victim_filter(self, preemptor: Job, victim: Job, action: str) -> bool:
        if is_elastic(victim):
            return True  # its surplus may go; scenario_valid guards minMember
        return not self._protected(preemptor, victim, action)

    def scenario_valid(
        self, preemptor: Job, victims: Sequence[Job], tasks: Sequence[Task], action: str
    ) -> bool:
        evicted: dict[str, set[int]] = {}
        jobs: dict[str, Job] = {v.uid: v for v in victims}
        for t in tasks:
            if t.job is not None:
                evicted.setdefault(t.job.uid, set()).add(id(t))
                jobs.setdefault(t.job.uid, t.job)
        for uid in sorted(jobs):
            job = jobs[uid]
            gone = evicted.get(uid, set())
            if not gone or not self._protected(preemptor, job, action):
                continue
            if not is_elastic(job):
                return False
            left = sum(1 for t in job.tasks if t.status in ALLOCATED_STATES and id(t) not in gone)
            if left < job.min_member:
                return False
        return True
