"""What ``corral run`` tells the rest of the cluster, in the shapes other tools read (docs/kubernetes.md,
"What the cluster sees"):

- a pending pod corral cannot place gets the condition ``PodScheduled=False, reason=Unschedulable`` with
  the reason text as message (kube-scheduler's ``updatePod`` and Volcano's ``taskUnschedulable`` write
  it; cluster-autoscaler and Karpenter scale up for pods carrying it), through a strategic merge patch of
  ``pods/<name>/status`` as kube-scheduler sends it; the API server sets ``PodScheduled=True`` when the
  pod is bound, so a bind clears it;
- a ``FailedScheduling`` Warning Event on each such pod (the reason kube-scheduler and Volcano's cache
  write), and an ``Unschedulable`` Warning Event on its PodGroup (Volcano's ``RecordJobStatusEvent``);
- a ``Scheduled`` Normal Event on each bound pod (``Successfully assigned <ns>/<pod> to <node>``,
  kube-scheduler's wording);
- a ``Preempted`` Normal Event on each victim naming the preemptor, the node and the action that chose
  it (kube-scheduler's ``Preempted by pod ... on node ...``, with corral's rule appended);
- a ``FieldsNotEnforced`` Warning Event on an object with fields corral accepts but does not act on
  under its configuration (a topology constraint no plugin enforces, GPU-sharing annotations without
  ``gpushare``, a queue's DRA quota keys): once per object and text, in the cycle the object is first
  seen or its warning changes (:meth:`Recorder.warn`, fed by the runner's
  :class:`~corral.framework.notices.Warned`); CamelCase, as the peers' reasons (``FailedScheduling``,
  Volcano's ``Unschedulable``), and a Warning like theirs;
- PodGroup conditions as Volcano's gang plugin writes them (:func:`gang_condition`), sent with the
  PodGroup's phase and annotations in one patch by the applier; on KAI PodGroups, KAI's
  ``schedulingConditions`` (:func:`kai_conditions`).

Rate limits: Events and pod condition patches each go through a token bucket of kube-scheduler's client
defaults (50 a second, bursts of 100: :mod:`corral.kube.ratelimit`; kube-scheduler's Events have a
client of their own), so a backlog of pods that cannot be placed reaches the API server at that pace and
costs each cycle in proportion to the time since the last, not to the backlog; what finds no token
follows in later cycles, oldest decision first (warnings wait behind the decisions'). An unchanged Event
is repeated at most every ``event_repeat`` seconds (30 minutes: client-go's events broadcaster, which
kube-scheduler records through, turns a repeated Event into a series and writes it again every
``refreshTime`` = 30 minutes) and an unchanged condition is never written again — a condition just
written is not sent again while the watch has not shown it yet. The records of what was emitted forget
entries older than ``event_repeat`` (they would be emitted again anyway) and of conditions sent after
``CONDITION_MEMORY`` seconds (the watch has shown them by then), looked at every ``PRUNE_EVERY``
seconds, so they stay bounded by one window.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from corral.framework.decisions import Decisions
from corral.kube.api import EVENT, POD, APIError, GuardedAPI
from corral.kube.cache import WatchCache
from corral.kube.logs import Log
from corral.kube.metrics import Metrics
from corral.kube.ratelimit import KUBE_SCHEDULER_BURST, KUBE_SCHEDULER_QPS, TokenBucket
from corral.model import Cluster
from corral.model.clock import format_time

__all__ = ["Recorder", "gang_condition", "kai_conditions", "merged_conditions"]

#: seconds a written condition is remembered as sent (the watch shows it well before)
CONDITION_MEMORY = 60.0
#: client-go's events broadcaster: a repeated Event's series is written again every 30 minutes
EVENT_REPEAT = 1800.0
#: seconds between two prunings of the records of what was emitted
PRUNE_EVERY = 30.0

#: the reason of the Warning Event about fields corral accepts but does not act on
NOT_ENFORCED = "FieldsNotEnforced"

#: Volcano's gang plugin (``PodGroupScheduled`` condition reason, ``NotEnoughResourcesReason``)
SCHEDULED_REASON = "tasks in gang are ready to be scheduled"
NOT_ENOUGH = "NotEnoughResources"


def gang_condition(ready: bool, message: str, transition: str, now: float) -> dict:
    """The PodGroup condition Volcano's gang plugin writes at session close: ``Scheduled`` (reason
    "tasks in gang are ready to be scheduled") when the gang is ready, else ``Unschedulable`` (reason
    ``NotEnoughResources`` and the unschedulable message); ``transitionID`` is the session's id."""
    if ready:
        cond = {"type": "Scheduled", "status": "True", "reason": SCHEDULED_REASON, "message": ""}
    else:
        cond = {"type": "Unschedulable", "status": "True", "reason": NOT_ENOUGH, "message": message}
    return {**cond, "transitionID": transition, "lastTransitionTime": format_time(now)}


def merged_conditions(have: list | None, cond: dict) -> list | None:
    """``have`` with ``cond`` replacing the condition of its type (Volcano's ``UpdatePodGroupCondition``),
    or None when the same type already says the same (status, reason, message): nothing to write."""
    have = [c for c in (have or []) if isinstance(c, dict)]
    for c in have:
        if c.get("type") == cond["type"]:
            if all(c.get(k, "") == cond[k] for k in ("status", "reason", "message")):
                return None
            break
    return [c for c in have if c.get("type") != cond["type"]] + [cond]


KAI_UNSCHEDULABLE = "UnschedulableOnNodePool"
KAI_NODE_POOL_LABEL = "runai/node-pool"


def kai_conditions(have: list | None, cond: dict, labels: dict, now: float) -> list | None:
    """KAI's ``status.schedulingConditions`` after ``cond`` (a :func:`gang_condition`), or None when
    nothing changes. As KAI's status updater: an unschedulable gang gets an ``UnschedulableOnNodePool``
    condition for its node pool (the ``runai/node-pool`` label, else ``default``) with reason
    ``Unschedulable``, status True and the next numeric ``transitionID``, replacing that pool's earlier
    one; a gang that is ready has that pool's condition removed."""
    have = [c for c in (have or []) if isinstance(c, dict)]
    pool = str(labels.get(KAI_NODE_POOL_LABEL) or "default")
    mine = [
        c for c in have if c.get("type") == KAI_UNSCHEDULABLE and (c.get("nodePool") or "default") == pool
    ]
    rest = [c for c in have if c not in mine]
    if cond["type"] != "Unschedulable":
        return rest if mine else None
    if mine and mine[-1].get("message") == cond["message"] and mine[-1].get("status") == "True":
        return None
    ids = [int(c["transitionID"]) for c in have if str(c.get("transitionID", "")).isdigit()]
    return rest + [
        {
            "type": KAI_UNSCHEDULABLE,
            "nodePool": pool,
            "reason": "Unschedulable",
            "message": cond["message"],
            "status": "True",
            "transitionID": str(max(ids, default=-1) + 1),
            "lastTransitionTime": format_time(now),
        }
    ]


def _split(key: str) -> tuple[str, str]:
    ns, _, name = key.partition("/")
    return ns, name


class Recorder:
    """Events and pod conditions of one replica; ``emitted`` is pruned every cycle."""

    def __init__(
        self,
        api: GuardedAPI,
        cache: WatchCache,
        log: Log,
        metrics: Metrics | None,
        pool: ThreadPoolExecutor,
        *,
        scheduler_name: str = "corral",
        identity: str = "corral",
        events_rate: tuple[float, int] = (KUBE_SCHEDULER_QPS, KUBE_SCHEDULER_BURST),
        conditions_rate: tuple[float, int] = (KUBE_SCHEDULER_QPS, KUBE_SCHEDULER_BURST),
        event_repeat: float = EVENT_REPEAT,
    ) -> None:
        self.api, self.cache, self.log, self.metrics, self.pool = api, cache, log, metrics, pool
        self.scheduler_name, self.identity = scheduler_name, identity
        #: (qps, burst) of the Events and of the pod condition patches
        self.events_limit = TokenBucket(*events_rate)
        self.conditions_limit = TokenBucket(*conditions_rate)
        self.event_repeat = event_repeat
        self.emitted: dict[tuple[str, str, str], tuple[str, float]] = {}  # (kind, key, reason) -> msg, time
        #: PodScheduled=False conditions written, pod -> (message, monotonic time): not sent again
        #: while the watch lags behind them
        self.conditioned: dict[str, tuple[str, float]] = {}
        self.pruned_at = -1e18
        #: podgroups whose Events and conditions are all out: podgroup -> (its job object, the reason,
        #: the oldest of its Events' times, when it was found so); only podgroups still waiting
        self.told: dict[str, tuple[Any, str, float, float]] = {}
        #: warnings told but not written yet, (kind, key) -> message: written after the cycle's
        #: decisions, within the Event budget; an entry leaves once its Event was tried
        self.warnings: dict[tuple[str, str], str] = {}

    def warn(self, obj: str, message: str) -> None:
        """A ``FieldsNotEnforced`` Warning Event on ``obj`` ("PodGroup ns/name", "Pod ns/name",
        "Queue q"; the configuration itself has no object: nothing) at the next cycle's apply phase."""
        kind, _, key = obj.partition(" ")
        if key:
            self.warnings[(kind, key)] = message

    def prune(self) -> None:
        """Forget what was emitted more than ``event_repeat`` seconds ago (looked at every
        ``PRUNE_EVERY`` seconds: the records hold at most that much more than one window)."""
        mono = time.monotonic()
        if mono - self.pruned_at < PRUNE_EVERY:
            return  # a pass over every record costs the backlog: at most once in PRUNE_EVERY seconds
        self.pruned_at = mono
        cutoff = mono - self.event_repeat
        if self.emitted:
            self.emitted = {k: v for k, v in self.emitted.items() if v[1] >= cutoff}
        cutoff = mono - min(CONDITION_MEMORY, self.event_repeat)
        if self.conditioned:
            self.conditioned = {k: v for k, v in self.conditioned.items() if v[1] >= cutoff}

    # -- one cycle --------------------------------------------------------------------------------
    def cycle(
        self, decisions: Decisions, cluster: Cluster, bound: list[tuple[str, str]], count: Any, now: float
    ) -> None:
        """Events and conditions of one cycle: ``bound`` are the (pod, node) binds that landed; ``count``
        is the applier's outcome counter ``(kind, outcome, what)``. Preempted, then Scheduled, then the
        unschedulable podgroups' Events and conditions in the decisions' order, then FieldsNotEnforced,
        as far as the token buckets reach; what does not fit waits for a later cycle."""
        self.prune()
        mono = time.monotonic()
        todo: list[tuple[str, str, str, str, str]] = []  # kind, key, type, reason, message
        for e in decisions.evictions:
            msg = f"Preempted by {e.preemptor} on node {e.node} (corral action {e.action})"
            self._want(todo, ("Pod", e.pod, "Normal", "Preempted", msg))
        for pod, node in bound:
            ns, name = _split(pod)
            msg = f"Successfully assigned {ns}/{name} to {node}"
            self._want(todo, ("Pod", pod, "Normal", "Scheduled", msg))
        conditions = self._unschedulable(decisions, cluster, todo, mono)
        for (kind, key), msg in list(self.warnings.items()):
            if self._want(todo, (kind, key, "Warning", NOT_ENFORCED, msg)) is None:
                break
            self.warnings.pop((kind, key), None)  # written now, or the same was written lately
        event_futures = [(t, self.pool.submit(self.event, *t)) for t in todo]
        condition_futures = [
            ((key, reason), self.pool.submit(self.unschedulable_condition, key, reason, now))
            for key, reason in conditions
        ]
        for (kind, key, _etype, reason, message), fut in event_futures:
            ok = fut.result()
            if ok:
                self.emitted[(kind, key, reason)] = (message, mono)
            count("events", "done" if ok else "failed", key)
        for (key, reason), cfut in condition_futures:
            written = cfut.result()
            if written:
                self.conditioned[key] = (reason, mono)
            if written is not None:
                count("conditions", "done" if written else "failed", key)

    def _want(self, todo: list, event: tuple[str, str, str, str, str]) -> bool | None:
        """Queue ``event`` unless the same was emitted within ``event_repeat`` (False); None when the
        Event budget is spent (nothing queued)."""
        kind, key, _etype, reason, message = event
        last = self.emitted.get((kind, key, reason))
        if last is not None and last[0] == message:
            return False
        if not self.events_limit.take():
            return None
        todo.append(event)
        return True

    def _unschedulable(
        self, decisions: Decisions, cluster: Cluster, todo: list, mono: float
    ) -> list[tuple[str, str]]:
        """Queue the Events of the podgroups that cannot be placed and return the pods whose condition
        to write, as far as the buckets reach. A podgroup whose Events and conditions are all out, whose
        job (the same object: nothing of it changed) and reason are the same as then, is passed over
        without looking at its pods until its Events are due again: a steady cycle costs what changed,
        not the backlog."""
        told: dict[str, tuple[Any, str, float, float]] = {}
        conditions: list[tuple[str, str]] = []
        events_open = conditions_open = True
        for u in decisions.unschedulable:
            if not (events_open or conditions_open):
                break
            job = cluster.jobs.get(u.podgroup)
            if job is None:
                continue
            memo = self.told.get(u.podgroup)
            if memo is not None and memo[0] is job and memo[1] == u.reason and self._fresh(memo, mono):
                told[u.podgroup] = memo
                continue
            group: list[tuple[str, str, str, str, str]] = []
            if not job.synthetic and self.cache.find("PodGroup", u.podgroup) is not None:
                group.append(("PodGroup", u.podgroup, "Warning", "Unschedulable", u.reason))
            pods = [t.key for t in job.tasks if t.node < 0 and t.managed]
            group += [("Pod", pod, "Warning", "FailedScheduling", u.reason) for pod in pods]
            done = True
            for event in group:
                if not events_open:
                    done = False
                    break
                queued = self._want(todo, event)
                events_open = queued is not None
                done = done and queued is False
            for pod in pods:
                if not self._needs_condition(pod, u.reason):
                    continue
                done = False
                if not (conditions_open and self.conditions_limit.take()):
                    conditions_open = False
                    break
                conditions.append((pod, u.reason))
            if done:
                oldest = min((self.emitted[e[0], e[1], e[3]][1] for e in group), default=mono)
                told[u.podgroup] = (job, u.reason, oldest, mono)
        if len(told) < len(self.told):  # keep what the loop did not reach, for podgroups still waiting
            waiting = {u.podgroup for u in decisions.unschedulable}
            told = {k: v for k, v in self.told.items() if k in waiting} | told
        self.told = told
        return conditions

    def _fresh(self, memo: tuple[Any, str, float, float], mono: float) -> bool:
        """A podgroup told all may be passed over until its oldest Event is due again, and for at most
        ``CONDITION_MEMORY`` seconds (then its pods' conditions are looked at again: another writer may
        have changed one without the model seeing it)."""
        return mono - memo[2] < self.event_repeat and mono - memo[3] < CONDITION_MEMORY

    def _needs_condition(self, pod: str, reason: str) -> bool:
        """Whether ``pod``'s PodScheduled condition does not say ``reason`` yet, neither as the watch
        shows the pod nor as this replica wrote it lately (a pod that is gone needs none)."""
        sent = self.conditioned.get(pod)
        if sent is not None and sent[0] == reason:
            return False
        found = self.cache.find("Pod", pod)
        if found is None:
            return False
        for c in (found[1].get("status") or {}).get("conditions") or []:
            if (
                isinstance(c, dict)
                and c.get("type") == "PodScheduled"
                and c.get("status") == "False"
                and c.get("reason") == "Unschedulable"
                and c.get("message") == reason
            ):
                return False
        return True

    def unschedulable_condition(self, pod: str, message: str, now: float) -> bool | None:
        """``PodScheduled=False, reason=Unschedulable`` on ``pod`` (kube-scheduler's condition, a strategic
        merge patch of the status merging conditions by type); None when the pod is gone or bound."""
        found = self.cache.find("Pod", pod)
        if found is None or (found[1].get("spec") or {}).get("nodeName"):
            return None
        cond = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message[:32768],
            "lastProbeTime": None,
            "lastTransitionTime": format_time(now),
        }
        ns, name = _split(pod)
        try:
            self.api.send(
                "PATCH",
                POD.item(name, ns, "status"),
                {"status": {"conditions": [cond]}},
                "application/strategic-merge-patch+json",
            )
        except APIError as exc:
            if self.metrics is not None:
                self.metrics.api_errors.labels("patch", "pods/status", str(exc.status)).inc()
            self.log.warning("condition not written", pod=pod, status=exc.status, error=exc.message)
            return False
        return True

    def event(self, kind: str, key: str, etype: str, reason: str, message: str) -> bool:
        """One core/v1 Event about ``kind`` ``key``; False (logged) when it could not be written."""
        found = self.cache.find(kind, key)
        if found is None:
            return False
        rtype, raw = found
        ns, name = _split(key) if rtype.namespaced else ("default", key)
        meta = raw.get("metadata") or {}
        stamp = format_time(time.time())
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": ns},
            "involvedObject": {
                "apiVersion": rtype.api_version,
                "kind": kind,
                "name": name,
                "namespace": ns,
                "uid": meta.get("uid", ""),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": etype,
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": self.scheduler_name},
            "reportingComponent": self.scheduler_name,
            "reportingInstance": self.identity,
        }
        try:
            self.api.send("POST", EVENT.collection(ns), body, "application/json")
            return True
        except APIError as exc:
            if self.metrics is not None:
                self.metrics.api_errors.labels("create", "events", str(exc.status)).inc()
            self.log.warning(
                "event not written", object=f"{kind} {key}", status=exc.status, error=exc.message
            )
            return False
