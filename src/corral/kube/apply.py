"""Carry a cycle's decisions out on the API server (SPEC.md §4; Volcano's ``cache.Bind`` / ``Evict`` /
``UpdateJobStatus`` and kube-scheduler's assume-then-bind).

Order within a cycle: ambiguous writes of the last cycle are read back (before the cycle's cluster is
built, :meth:`Applier.resolve`), then evictions, binds, nominations, podgroup status and annotations,
node locks, then the Events and pod conditions of :mod:`corral.kube.conventions`. Rules:

- Every write is its own try: the failure of one decision is logged, counted
  (``corral_applied_total{outcome}``) and never stops the others.
- Leadership: every write goes through :class:`~corral.kube.api.GuardedAPI`, which asks the runner
  whether this replica may still act as leader just before the request is sent; when it may not, the
  whole apply phase stops at once (:class:`~corral.kube.api.NotLeader`).
- Eviction goes through the Eviction API (``pods/<name>/eviction``), so PodDisruptionBudgets are
  honoured by the API server. A 429 whose Status names a ``DisruptionBudget`` cause (or, from servers
  older than Kubernetes 1.26, says "disruption budget") is a refusal: reported (log line, Event on the
  pod) and the pod is not asked again for ``refusal_backoff`` seconds. Any other 429 is rate limiting:
  retried ``retries`` times with exponential backoff (the answer's ``Retry-After`` when shorter than the
  cap), then left to the next cycle, never recorded as a refusal. A pod that already carries a
  ``deletionTimestamp`` is not evicted again.
- A gang's binds are not started when the lease has less than ``bind_margin`` seconds left (the
  runner's renewal interval): a lease that runs out stops the apply phase at once, and must not do so
  between two binds of a gang. The cycle's binds are put off to the next leader's cycle.
- Binding goes through the Binding subresource with the pod's uid as precondition. A pod is never bound
  twice: a pod the cache shows on a node or deleting is skipped, and a successful bind is assumed in the
  cache until the watch shows it. A 409 is re-read: bound to the same node counts as done; not bound yet
  is retried once.
- Ambiguous answers (a 5xx, or no answer: a timeout or a dropped connection) may hide a write that
  landed: the object is read back at once, twice if need be (found not to have landed, the write is sent
  once more: a bind, or an eviction within its ``retries``); when both reads fail, the write is assumed
  to have landed (a bind holds its node, so nothing is placed on capacity that may be taken) and read
  back again before the next cycle's cluster is built, until an answer settles it.
- A gang's binds are issued together; a gang whose binds partly fail is reported (log, Event on the
  podgroup) and decided again next cycle. A gang found below its minimum at the start of a cycle (its
  binds partly failed, or a replica died between them) is completed in that cycle or released in it:
  its pods on nodes are evicted, so it never holds capacity idle (:mod:`corral.kube.partial`).
- PodGroup phase, conditions and annotations are one merge patch carrying the ``resourceVersion`` they
  were decided on (Volcano's PodGroup has no status subresource); for KAI's PodGroup, whose CRD has one,
  the status goes to ``/status`` and the annotations follow with the ``resourceVersion`` that write
  returned. A 409 re-reads the object and retries once.
- Node locks (reservation) set / remove the node label ``corral.io/locked-for`` (a valid label value:
  hashed past 63 characters, see :func:`~corral.framework.reservation.lock_label_value`) and the node
  annotation of the same key with the podgroup's full name.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from corral.framework.decisions import Decisions
from corral.framework.reservation import LOCK_LABEL, lock_label_value
from corral.kube.api import NODE, POD, APIError, GuardedAPI, KubeAPI
from corral.kube.apply_report import ApplyReport
from corral.kube.cache import PRESENT, WatchCache
from corral.kube.conventions import EVENT_REPEAT, Recorder
from corral.kube.dra_status import write_claims
from corral.kube.logs import Log
from corral.kube.metrics import Metrics
from corral.kube.partial import PartialGangs
from corral.kube.podgroups import PodGroupWrites
from corral.kube.ratelimit import KUBE_SCHEDULER_BURST, KUBE_SCHEDULER_QPS
from corral.model import Cluster
from corral.model.clock import format_time

__all__ = ["LOCK_LABEL", "Applier", "ambiguous", "lock_patch"]


def ambiguous(exc: APIError) -> bool:
    """An answer that does not say whether the write happened: no answer at all, or a server error."""
    return exc.status == 0 or exc.status >= 500


def lock_patch(job: str) -> dict:
    """The node patch of a lock for ``job`` ("" releases it): the label and the full-name annotation."""
    value = lock_label_value(job) if job else None
    return {"metadata": {"labels": {LOCK_LABEL: value}, "annotations": {LOCK_LABEL: job or None}}}


def _split(key: str) -> tuple[str, str]:
    ns, _, name = key.partition("/")
    return ns, name


class Applier(PodGroupWrites, PartialGangs):
    """The API server's :class:`~corral.framework.cycle.DecisionSink`: :meth:`apply` carries a cycle's
    decisions out as the module docstring says and returns what each write did
    (:class:`~corral.kube.apply_report.ApplyReport`)."""

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
        events_rate: tuple[float, int] = (KUBE_SCHEDULER_QPS, KUBE_SCHEDULER_BURST),
        conditions_rate: tuple[float, int] = (KUBE_SCHEDULER_QPS, KUBE_SCHEDULER_BURST),
        event_repeat: float = EVENT_REPEAT,
        may_write: Callable[[], bool] | None = None,
        lease_left: Callable[[], float] | None = None,
        bind_margin: float = 0.0,
        retries: int = 3,
        retry_backoff: tuple[float, float] = (0.5, 5.0),
    ) -> None:
        self.api = GuardedAPI(api, may_write or (lambda: True))
        #: seconds this replica may still act as leader; no gang's binds start with less than
        #: ``bind_margin`` left, so a lease running out does not stop them halfway
        self.lease_left: Callable[[], float] = lease_left or (lambda: float("inf"))
        self.bind_margin = bind_margin
        self.cache = cache
        self.log = log
        self.metrics = metrics
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="corral-apply")
        self.refusal_backoff = refusal_backoff
        self.refused: dict[str, float] = {}  # pod -> monotonic time of the last PDB refusal
        self.retries, self.retry_backoff = retries, retry_backoff
        self.uncertain: dict[str, tuple[str, str]] = {}  # pod -> ("bind", node) | ("evict", "")
        self.partial: set[str] = set()  # gangs whose binds partly failed in the last cycle
        self.pg_quiet = {}  # PodGroups whose gang condition needed no write (kube/podgroups.py)
        self.recorder = Recorder(
            self.api,
            cache,
            log,
            metrics,
            self.pool,
            scheduler_name=scheduler_name,
            identity=identity,
            events_rate=events_rate,
            conditions_rate=conditions_rate,
            event_repeat=event_repeat,
        )
        self.after_evictions: Callable[[], None] | None = None  # a test's kill point
        self.sleep: Callable[[float], object] = time.sleep

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

    def _prune(self) -> None:
        mono = time.monotonic()
        if self.refused:
            self.refused = {p: t for p, t in self.refused.items() if mono - t < self.refusal_backoff}

    # -- the cycle ----------------------------------------------------------------------------------
    def apply(self, decisions: Decisions, cluster: Cluster, now: float) -> ApplyReport:
        report = ApplyReport()
        self.now = now
        self._prune()
        retried = self._release_unfinished(self._incomplete(cluster, decisions), decisions, report)
        self._evictions(decisions, report)
        if self.after_evictions is not None:
            self.after_evictions()
        bound, failed = self._binds(decisions, cluster, report)
        self._release_failed_again(retried, failed, report)
        writes: list[tuple[str, str, Callable[[], None]]] = [
            ("nominations", n.pod, functools.partial(self._nominate, n.pod, n.node, report))
            for n in decisions.nominations
        ]
        writes += self._podgroup_writes(decisions, cluster, bound, now, report)
        writes += [
            ("node_locks", lock.node, functools.partial(self._lock, lock.node, lock.job, report))
            for lock in decisions.node_locks
        ]
        # independent objects: written concurrently, each in its own try
        for f in [self.pool.submit(self._guard, report, kind, what, fn) for kind, what, fn in writes]:
            f.result()
        self.recorder.cycle(decisions, cluster, bound, lambda *a: self._count(report, *a), now)
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

    # -- ambiguous writes -------------------------------------------------------------------------
    def resolve(self) -> None:
        """Read back every write whose answer was ambiguous, before the next cycle relies on it: a bind
        found on its node stays assumed (until the watch shows it), one found unbound is forgotten; an
        eviction likewise; a pod that is gone settles both. A read that fails keeps the assumption (and
        renews it) for the next try."""
        for pod, (what, node) in list(self.uncertain.items()):
            ns, name = _split(pod)
            try:
                fresh = self.api.get(POD.item(name, ns))
            except APIError as exc:
                self._api_error("get", "pods", exc)
                if exc.status == 404:
                    self.uncertain.pop(pod, None)
                    self.cache.unassume("Pod", pod)
                else:
                    self._assume_landed(pod, what, node)
                continue
            self.uncertain.pop(pod, None)
            landed = self._landed(fresh, what, node)
            self.log.info("ambiguous write read back", pod=pod, write=what, node=node, landed=landed)
            if not landed:
                self.cache.unassume("Pod", pod)

    @staticmethod
    def _landed(fresh: dict, what: str, node: str) -> bool:
        if what == "bind":
            return (fresh.get("spec") or {}).get("nodeName") == node
        return bool((fresh.get("metadata") or {}).get("deletionTimestamp"))

    def _assume_landed(self, pod: str, what: str, node: str) -> None:
        self.uncertain[pod] = (what, node)
        if what == "bind":
            self.cache.assume("Pod", pod, {"spec": {"nodeName": node}}, {"spec": {"nodeName": node}})
        else:
            self.cache.assume(
                "Pod",
                pod,
                {"metadata": {"deletionTimestamp": format_time(time.time())}},
                {"metadata": {"deletionTimestamp": PRESENT}},
            )

    def _read_back(self, pod: str, what: str, node: str, exc: APIError) -> tuple[str, str]:
        """After an ambiguous answer: ``done`` when the write landed, ``failed`` when it did not,
        ``uncertain`` (assumed landed, read again before the next cycle) when the read fails twice."""
        ns, name = _split(pod)
        for attempt in (1, 2):
            try:
                fresh = self.api.get(POD.item(name, ns))
                break
            except APIError as again:
                self._api_error("get", "pods", again)
                if again.status == 404:
                    return "skipped", "pod is gone"
                if attempt == 2:
                    self._assume_landed(pod, what, node)
                    return "uncertain", f"{exc.status} {exc.message}; read back failed: {again.status}"
        if self._landed(fresh, what, node):
            return "done", f"landed despite {exc.status}"
        if what == "bind" and (fresh.get("spec") or {}).get("nodeName"):
            on = fresh["spec"]["nodeName"]
            self.cache.assume("Pod", pod, {"spec": {"nodeName": on}}, {"spec": {"nodeName": on}})
            return "skipped", f"already on {on}"
        return "failed", f"{exc.status} {exc.message}"

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
            if outcome in ("done", "uncertain"):
                self.log.info(
                    "evicted", **fields, **({"uncertain": detail} if outcome == "uncertain" else {})
                )
            elif outcome == "refused":
                self.refused[e.pod] = time.monotonic()
                self.log.warning("eviction refused by a disruption budget", **fields, error=detail)
                self.recorder.event(
                    "Pod",
                    e.pod,
                    "Warning",
                    "EvictionRefused",
                    f"eviction for {e.preemptor} refused: {detail}",
                )
            else:
                self.log.warning("eviction failed", **fields, error=detail)

    def _evict(self, pod: str) -> tuple[str, str]:
        ns, name = _split(pod)
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
        base, cap = self.retry_backoff
        for attempt in range(self.retries + 1):
            try:
                self.api.post(POD.item(name, ns, "eviction"), body)
                break
            except APIError as exc:
                self._api_error("evict", "pods", exc)
                if exc.status == 429 and _budget_refusal(exc):
                    return "refused", exc.message
                if exc.status == 429 and attempt < self.retries:
                    delay = min(cap, base * 2**attempt)
                    self.sleep(min(delay, exc.retry_after) if exc.retry_after else delay)
                    continue
                if exc.status == 404:
                    return "skipped", "pod is gone"
                if ambiguous(exc):
                    outcome, detail = self._read_back(pod, "evict", "", exc)
                    if outcome == "failed" and attempt < self.retries:
                        continue  # read back: it did not land, so asking again is safe
                    if outcome != "done":
                        return outcome, detail
                    break
                return "failed", f"{exc.status} {exc.message}"
        self.cache.assume(
            "Pod",
            pod,
            {"metadata": {"deletionTimestamp": format_time(time.time())}},
            {"metadata": {"deletionTimestamp": PRESENT}},
        )
        return "done", ""

    # -- binds --------------------------------------------------------------------------------------
    def _binds(
        self, decisions: Decisions, cluster: Cluster, report: ApplyReport
    ) -> tuple[list[tuple[str, str]], dict[str, list[str]]]:
        """Issue the cycle's binds; the (pod, node) binds that landed, and the pods of each gang whose
        binds partly failed."""
        if not decisions.binds:
            return [], {}
        left = self.lease_left()
        if left < self.bind_margin:
            self.log.warning(
                "binds put off: the lease runs out before they could all go out",
                binds=len(decisions.binds),
                lease_left=round(left, 3),
            )
            for b in decisions.binds:
                self._count(report, "binds", "skipped", b.pod)
            return [], {}
        self.claims_for: dict[str, list] = defaultdict(list)  # pod -> its claim allocations (DRA)
        for c in decisions.claim_allocations:
            self.claims_for[c.pod].append(c)
        self.dra = cluster.dra
        gangs = self._gangs(decisions, report)
        futures = [
            (job, b, self.pool.submit(self._bind, b.pod, b.node))
            for job, binds in gangs.items()
            for b in binds
        ]
        failed: dict[str, list[str]] = defaultdict(list)
        bound = []
        for job, b, fut in futures:
            try:
                outcome, detail = fut.result()
            except Exception as exc:  # noqa: BLE001
                outcome, detail = "failed", f"{type(exc).__name__}: {exc}"
            self._count(report, "binds", outcome, b.pod)
            if outcome in ("done", "uncertain"):
                self.log.info(
                    "bound", pod=b.pod, node=b.node, podgroup=job, **({"uncertain": detail} if detail else {})
                )
                if outcome == "done":
                    bound.append((b.pod, b.node))
            else:
                if outcome == "failed" or detail == "pod is gone":
                    failed[job].append(b.pod)
                self.log.warning(
                    "bind not applied", pod=b.pod, node=b.node, podgroup=job, outcome=outcome, error=detail
                )
        self._report_partial(failed, gangs, report)
        return bound, failed

    def _gangs(self, decisions: Decisions, report: ApplyReport) -> dict[str, list]:
        """The cycle's binds by gang (a pod of no podgroup is a gang of its own), less those of the gangs
        just released (counted as skipped)."""
        gangs: dict[str, list] = defaultdict(list)
        released = set(report.released)
        for b in decisions.binds:
            job = b.podgroup or b.pod
            if job in released:  # its pods on nodes were just evicted: it starts again whole later
                self._count(report, "binds", "skipped", b.pod)
                continue
            gangs[job].append(b)
        return gangs

    def _report_partial(
        self, failed: dict[str, list[str]], gangs: dict[str, list], report: ApplyReport
    ) -> None:
        """Gangs some of whose binds failed (``failed``: their pods) and some landed: logged, an Event on
        the PodGroup, and remembered, so the next cycle completes or releases them."""
        for job, pods in failed.items():
            if len(pods) < len(gangs[job]):
                report.partial_gangs[job] = pods
                self.partial.add(job)
                self.log.error(
                    "gang partly bound: the rest is decided again next cycle",
                    podgroup=job,
                    failed=pods,
                    bound=len(gangs[job]) - len(pods),
                )
                self.recorder.event(
                    "PodGroup",
                    job,
                    "Warning",
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
        claims = self.claims_for.get(pod) if hasattr(self, "claims_for") else None
        if claims:  # DRA: the claims are reserved for the pod before its bind (kube/dra_status.py)
            refused = write_claims(self.api, self.cache, claims, raw, self.dra, self.now)
            if refused is not None:
                return refused
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
                if ambiguous(exc):
                    outcome, detail = self._read_back(pod, "bind", node, exc)
                    if outcome == "failed" and attempt == 1:
                        continue  # read back: it did not land, so binding again is safe
                    if outcome != "done":
                        return outcome, detail
                    break
                if exc.status != 409 or attempt == 2:
                    return "failed", f"{exc.status} {exc.message}"
                try:
                    fresh = self.api.get(POD.item(name, ns))
                except APIError as again:
                    self._api_error("get", "pods", again)
                    return "failed", f"{again.status} {again.message}"
                if (fresh.get("metadata") or {}).get("uid") != meta.get("uid"):
                    return "skipped", "pod was replaced"
                on = (fresh.get("spec") or {}).get("nodeName")
                if on == node:
                    break  # our earlier bind landed
                if on:  # bound meanwhile (a replica before this one): what the cache must show
                    self.cache.assume("Pod", pod, {"spec": {"nodeName": on}}, {"spec": {"nodeName": on}})
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

    def _lock(self, node: str, job: str, report: ApplyReport) -> None:
        found = self.cache.find("Node", node)
        if found is None:
            self._count(report, "node_locks", "skipped", node)
            return
        patch = lock_patch(job)
        if _has_labels(found[1], patch):
            self._count(report, "node_locks", "skipped", node)
            return
        self.api.patch(NODE.item(node), patch)
        self.cache.assume("Node", node, patch, patch)
        self._count(report, "node_locks", "done", node)


def _budget_refusal(exc: APIError) -> bool:
    """A 429 of the eviction API that a PodDisruptionBudget caused (its Status names the
    ``DisruptionBudget`` cause, Kubernetes 1.26+, or its message says so), not rate limiting."""
    return "DisruptionBudget" in exc.causes or "disruption budget" in exc.message.lower()


def _has_labels(raw: dict, patch: dict) -> bool:
    have = (raw.get("metadata") or {}).get("labels") or {}
    for k, v in patch["metadata"]["labels"].items():
        if (v is None and k in have) or (v is not None and have.get(k) != v):
            return False
    return True
