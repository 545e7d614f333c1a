"""Carry a cycle's decisions out on the API server (SPEC.md §4; Volcano's ``cache.Bind`` / ``Evict`` /
``UpdateJobStatus`` and kube-scheduler's assume-then-bind).

Order within a cycle: evictions, then binds, then nominations, podgroup status and annotations, node
locks, and Events for what could not be scheduled. Rules:

- Every write is its own try: the failure of one decision is logged, counted
  (``corral_applied_total{outcome}``) and never stops the others.
- Eviction goes through the Eviction API (``pods/<name>/eviction``), so PodDisruptionBudgets are
  honoured by the API server. A 429 (a PDB refuses) is reported (log line, Event on the pod) and the pod is
  not asked again for ``refusal_backoff`` seconds: no retry loop against a budget. A pod that already
  carries a ``deletionTimestamp`` (an eviction issued before, e.g. by a replica that died mid-cycle) is
  not evicted again.
- Binding goes through the Binding subresource. A pod is never bound twice: a pod the cache shows on a
  node or deleting is skipped, and a successful bind is assumed in the cache until the watch shows it.
  A 409 is re-read: bound to the same node counts as done; not bound yet is retried once.
- A gang's binds are issued together (all binds of the cycle go out concurrently); a gang whose binds
  partly fail is reported (log, Event on the podgroup) and left to the next cycle, which sees its bound
  pods as bound and decides on the rest.
- Status writes (nominatedNodeName, PodGroup phase) are merge patches; a PodGroup patch carries the
  ``resourceVersion`` it was decided on; a 409 re-reads the object and retries once.
- Node locks (reservation) set / remove the node label ``corral.io/locked-for``.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from corral.framework.decisions import Decisions
from corral.kube.api import EVENT, NODE, POD, APIError, KubeAPI
from corral.kube.cache import PRESENT, WatchCache
from corral.kube.logs import Log
from corral.kube.metrics import Metrics
from corral.manifests.fields import format_time
from corral.model import Cluster

__all__ = ["LOCK_LABEL", "Applier", "ApplyReport"]

LOCK_LABEL = "corral.io/locked-for"


@dataclass
class ApplyReport:
    """What happened to each kind of decision: ``done`` / ``skipped`` / ``refused`` / ``failed`` lists."""

    outcomes: dict[str, dict[str, list[str]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    partial_gangs: dict[str, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, kind: str, outcome: str, what: str) -> None:
        with self.lock:
            self.outcomes[kind][outcome].append(what)

    def get(self, kind: str, outcome: str) -> list[str]:
        return list(self.outcomes.get(kind, {}).get(outcome, []))


def _split(key: str) -> tuple[str, str]:
    ns, _, name = key.partition("/")
    return ns, name


class Applier:
    def __init__(
        self,
        api: KubeAPI,
        cache: WatchCache,
        log: Log,
        metrics: Metrics | None = None,
        *,
        scheduler_name: str = "corral",
        identity: str = "corral",
        workers: int = 16,
        refusal_backoff: float = 60.0,
        events_per_cycle: int = 100,
        event_repeat: float = 600.0,
    ) -> None:
        self.api = api
        self.cache = cache
        self.log = log
        self.metrics = metrics
        self.scheduler_name = scheduler_name
        self.identity = identity
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="corral-apply")
        self.refusal_backoff = refusal_backoff
        self.refused: dict[str, float] = {}  # pod -> monotonic time of the last PDB refusal
        self.events_per_cycle = events_per_cycle
        self.event_repeat = event_repeat
        self.emitted: dict[tuple[str, str], tuple[str, float]] = {}
        self.after_evictions: Callable[[], None] | None = None  # a test's kill point

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    # -- bookkeeping ------------------------------------------------------------------------------
    def _count(self, report: ApplyReport, kind: str, outcome: str, what: str) -> None:
        report.add(kind, outcome, what)
        if self.metrics is not None:
            self.metrics.applied.labels(kind, outcome).inc()

    def _api_error(self, verb: str, resource: str, exc: APIError) -> None:
        if self.metrics is not None:
            self.metrics.api_errors.labels(verb, resource, str(exc.status)).inc()

    # -- the cycle ----------------------------------------------------------------------------------
    def apply(self, decisions: Decisions, cluster: Cluster, now: float) -> ApplyReport:
        report = ApplyReport()
        self._evictions(decisions, report)
        if self.after_evictions is not None:
            self.after_evictions()
        self._binds(decisions, cluster, report)
        writes = [
            ("nominations", n.pod, lambda n=n: self._nominate(n.pod, n.node, report))
            for n in decisions.nominations
        ]
        writes += [
            ("podgroups", u.podgroup, lambda u=u: self._podgroup(u.podgroup, u.phase, u.annotations, report))
            for u in decisions.podgroups
        ]
        writes += [
            ("node_locks", lock.node, lambda lock=lock: self._lock(lock.node, lock.job, report))
            for lock in decisions.node_locks
        ]
        # independent objects: written concurrently, each in its own try
        for f in [self.pool.submit(self._guard, report, kind, what, fn) for kind, what, fn in writes]:
            f.result()
        self._events(decisions, cluster, report, now)
        return report

    def _guard(self, report: ApplyReport, kind: str, what: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except APIError as exc:
            self._api_error(kind, kind, exc)
            self._count(report, kind, "failed", what)
            self.log.warning("write failed", kind=kind, object=what, status=exc.status, error=exc.message)
        except Exception as exc:  # noqa: BLE001 - one decision never loses the others
            self._count(report, kind, "failed", what)
            self.log.error("write fault", kind=kind, object=what, error=f"{type(exc).__name__}: {exc}")

    # -- evictions ----------------------------------------------------------------------------------
    def _evictions(self, decisions: Decisions, report: ApplyReport) -> None:
        todo = []
        now = time.monotonic()
        for e in decisions.evictions:
            found = self.cache.find("Pod", e.pod)
            if found is None:
                self._count(report, "evictions", "skipped", e.pod)
                continue
            if (found[1].get("metadata") or {}).get("deletionTimestamp"):
                self._count(report, "evictions", "skipped", e.pod)  # already being evicted
                continue
            if now - self.refused.get(e.pod, -1e18) < self.refusal_backoff:
                self._count(report, "evictions", "skipped", e.pod)  # refused recently by a PDB
                continue
            todo.append(e)
        for e, fut in [(e, self.pool.submit(self._evict, e.pod)) for e in todo]:
            outcome, detail = fut.result()
            self._count(report, "evictions", outcome, e.pod)
            fields = {"pod": e.pod, "node": e.node, "action": e.action, "preemptor": e.preemptor}
            if outcome == "done":
                self.log.info("evicted", **fields)
            elif outcome == "refused":
                self.refused[e.pod] = time.monotonic()
                self.log.warning("eviction refused by a disruption budget", **fields, error=detail)
                self._event_safe(
                    "Pod", e.pod, "", "EvictionRefused", f"eviction for {e.preemptor} refused: {detail}"
                )
            else:
                self.log.warning("eviction failed", **fields, error=detail)

    def _evict(self, pod: str) -> tuple[str, str]:
        ns, name = _split(pod)
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
        try:
            self.api.post(POD.item(name, ns, "eviction"), body)
        except APIError as exc:
            self._api_error("evict", "pods", exc)
            if exc.status == 429:
                return "refused", exc.message
            if exc.status == 404:
                return "skipped", "pod is gone"
            return "failed", f"{exc.status} {exc.message}"
        self.cache.assume(
            "Pod",
            pod,
            {"metadata": {"deletionTimestamp": format_time(time.time())}},
            {"metadata": {"deletionTimestamp": PRESENT}},
        )
        return "done", ""

    # -- binds --------------------------------------------------------------------------------------
    def _binds(self, decisions: Decisions, cluster: Cluster, report: ApplyReport) -> None:
        if not decisions.binds:
            return
        wanted = {b.pod for b in decisions.binds}
        job_of = {t.key: job.uid for job in cluster.jobs.values() for t in job.tasks if t.key in wanted}
        gangs: dict[str, list] = defaultdict(list)
        for b in decisions.binds:
            gangs[job_of.get(b.pod, b.pod)].append(b)
        futures = [
            (job, b, self.pool.submit(self._bind, b.pod, b.node))
            for job, binds in gangs.items()
            for b in binds
        ]
        failed: dict[str, list[str]] = defaultdict(list)
        for job, b, fut in futures:
            try:
                outcome, detail = fut.result()
            except Exception as exc:  # noqa: BLE001
                outcome, detail = "failed", f"{type(exc).__name__}: {exc}"
            self._count(report, "binds", outcome, b.pod)
            if outcome == "done":
                self.log.info("bound", pod=b.pod, node=b.node, podgroup=job)
            else:
                if outcome == "failed":
                    failed[job].append(b.pod)
                self.log.warning(
                    "bind not applied", pod=b.pod, node=b.node, podgroup=job, outcome=outcome, error=detail
                )
        for job, pods in failed.items():
            if len(pods) < len(gangs[job]):
                report.partial_gangs[job] = pods
                self.log.error(
                    "gang partly bound: the rest is decided again next cycle",
                    podgroup=job,
                    failed=pods,
                    bound=len(gangs[job]) - len(pods),
                )
                self._event_safe(
                    "PodGroup",
                    job,
                    "",
                    "PartiallyBound",
                    f"{len(pods)} of {len(gangs[job])} binds failed; retrying next cycle",
                )

    def _bind(self, pod: str, node: str) -> tuple[str, str]:
        found = self.cache.find("Pod", pod)
        if found is None:
            return "skipped", "pod is gone"
        raw = found[1]
        if (raw.get("spec") or {}).get("nodeName"):
            return "skipped", f"already on {raw['spec']['nodeName']}"
        if (raw.get("metadata") or {}).get("deletionTimestamp"):
            return "skipped", "pod is being deleted"
        ns, name = _split(pod)
        meta = raw.get("metadata") or {}
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, **({"uid": meta["uid"]} if meta.get("uid") else {})},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        for attempt in (1, 2):
            try:
                self.api.post(POD.item(name, ns, "binding"), body)
                break
            except APIError as exc:
                self._api_error("bind", "pods", exc)
                if exc.status != 409 or attempt == 2:
                    return "failed", f"{exc.status} {exc.message}"
                try:
                    fresh = self.api.get(POD.item(name, ns))
                except APIError as again:
                    self._api_error("get", "pods", again)
                    return "failed", f"{again.status} {again.message}"
                on = (fresh.get("spec") or {}).get("nodeName")
                if on == node:
                    break  # our earlier bind landed
                if on:
                    return "skipped", f"already on {on}"
        self.cache.assume("Pod", pod, {"spec": {"nodeName": node}}, {"spec": {"nodeName": node}})
        return "done", ""

    # -- status writes ------------------------------------------------------------------------------
    def _nominate(self, pod: str, node: str, report: ApplyReport) -> None:
        found = self.cache.find("Pod", pod)
        if found is None or (found[1].get("spec") or {}).get("nodeName"):
            self._count(report, "nominations", "skipped", pod)
            return
        if ((found[1].get("status") or {}).get("nominatedNodeName") or "") == node:
            self._count(report, "nominations", "skipped", pod)  # already so
            return
        ns, name = _split(pod)
        patch = {"status": {"nominatedNodeName": node or None}}
        self.api.patch(POD.item(name, ns, "status"), patch)
        self.cache.assume("Pod", pod, patch, patch)
        self._count(report, "nominations", "done", pod)

    def _patch_retry(self, path: str, current: dict, build: Callable[[dict], dict | None]) -> dict | None:
        """Patch with ``current``'s resourceVersion; on 409 read the object again and retry once."""
        for attempt in (1, 2):
            patch = build(current)
            if patch is None:
                return None
            rv = (current.get("metadata") or {}).get("resourceVersion")
            body = merge_with_rv(patch, rv)
            try:
                return self.api.patch(path, body)
            except APIError as exc:
                if exc.status != 409 or attempt == 2:
                    raise
                self._api_error("patch", path.split("/")[-2] if path.endswith("status") else "object", exc)
                current = self.api.get(path[: -len("/status")] if path.endswith("/status") else path)
        return None

    def _podgroup(self, uid: str, phase: str, annotations: dict, report: ApplyReport) -> None:
        found = self.cache.find("PodGroup", uid)
        if found is None:  # a job of one pod: no PodGroup object to write
            self._count(report, "podgroups", "skipped", uid)
            return
        rtype, raw = found
        ns, name = _split(uid)

        def status_patch(cur: dict) -> dict | None:
            if phase and (cur.get("status") or {}).get("phase") != phase:
                return {"status": {"phase": phase}}
            return None

        def annotation_patch(cur: dict) -> dict | None:
            have = (cur.get("metadata") or {}).get("annotations") or {}
            want = {k: v for k, v in (annotations or {}).items() if have.get(k) != v}
            return {"metadata": {"annotations": want}} if want else None

        wrote = False
        if self._patch_retry(rtype.item(name, ns, "status"), raw, status_patch) is not None:
            self.cache.assume("PodGroup", uid, {"status": {"phase": phase}}, {"status": {"phase": phase}})
            wrote = True
        found = self.cache.find("PodGroup", uid)
        if (
            found is not None
            and self._patch_retry(rtype.item(name, ns), found[1], annotation_patch) is not None
        ):
            self.cache.assume(
                "PodGroup",
                uid,
                {"metadata": {"annotations": dict(annotations)}},
                {"metadata": {"annotations": dict(annotations)}},
            )
            wrote = True
        self._count(report, "podgroups", "done" if wrote else "skipped", uid)

    def _lock(self, node: str, job: str, report: ApplyReport) -> None:
        found = self.cache.find("Node", node)
        if found is None:
            self._count(report, "node_locks", "skipped", node)
            return
        patch = {"metadata": {"labels": {LOCK_LABEL: job.replace("/", ".") if job else None}}}
        if _has_labels(found[1], patch):
            self._count(report, "node_locks", "skipped", node)
            return
        self.api.patch(NODE.item(node), patch)
        self.cache.assume("Node", node, patch, patch)
        self._count(report, "node_locks", "done", node)

    # -- events -------------------------------------------------------------------------------------
    def _events(self, decisions: Decisions, cluster: Cluster, report: ApplyReport, now: float) -> None:
        """Warning Events with each unschedulable podgroup's reason, on the PodGroup (when one exists)
        and its pending pods; an unchanged reason is repeated every ``event_repeat`` seconds at most, and
        at most ``events_per_cycle`` Events are written per cycle (the rest follow in later cycles)."""
        budget = self.events_per_cycle
        mono = time.monotonic()
        todo: list[tuple[str, str, str]] = []
        for u in decisions.unschedulable:
            job = cluster.jobs.get(u.podgroup)
            targets = []
            if job is not None and not job.synthetic and self.cache.find("PodGroup", u.podgroup) is not None:
                targets.append(("PodGroup", u.podgroup))
            if job is not None:
                targets += [("Pod", t.key) for t in job.tasks if t.node < 0 and t.managed]
            for kind, key in targets:
                last = self.emitted.get((kind, key))
                if last is not None and last[0] == u.reason and mono - last[1] < self.event_repeat:
                    continue
                if budget <= 0:
                    break
                budget -= 1
                todo.append((kind, key, u.reason))
        futures = [
            (kind, key, reason, self.pool.submit(self._event_safe, kind, key, "", "Unschedulable", reason))
            for kind, key, reason in todo
        ]
        for kind, key, reason, fut in futures:
            if fut.result():
                self.emitted[(kind, key)] = (reason, mono)
                self._count(report, "events", "done", key)
            else:
                self._count(report, "events", "failed", key)

    def _event_safe(self, kind: str, key: str, uid: str, reason: str, message: str) -> bool:
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
                "uid": meta.get("uid", uid),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning",
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": self.scheduler_name},
            "reportingComponent": self.scheduler_name,
            "reportingInstance": self.identity,
        }
        try:
            self.api.post(EVENT.collection(ns), body)
            return True
        except APIError as exc:
            self._api_error("create", "events", exc)
            self.log.warning(
                "event not written", object=f"{kind} {key}", status=exc.status, error=exc.message
            )
            return False


def merge_with_rv(patch: dict, rv: Any) -> dict:
    if not rv:
        return patch
    out = dict(patch)
    out["metadata"] = {**(patch.get("metadata") or {}), "resourceVersion": rv}
    return out


def _has_labels(raw: dict, patch: dict) -> bool:
    have = (raw.get("metadata") or {}).get("labels") or {}
    for k, v in patch["metadata"]["labels"].items():
        if (v is None and k in have) or (v is not None and have.get(k) != v):
            return False
    return True
