"""An in-process Kubernetes API server (standard-library ``http.server`` in a thread) speaking the wire
protocol of the resources ``corral run`` uses, so tests drive the real ``kubernetes`` client over HTTP.

What it implements, as the real API server does:
- ``GET`` collections (cluster-wide and per namespace) with ``limit`` / ``continue`` paging and the
  list's ``metadata.resourceVersion``; items carry no ``kind`` / ``apiVersion`` (as real lists);
- ``watch=true`` streams in chunked transfer encoding, one JSON event per line, from a
  ``resourceVersion``; ``BOOKMARK`` events when ``allowWatchBookmarks``; an ``ERROR`` event with a
  410 Status when the version is older than the retained history (:meth:`FakeAPI.compact`);
  ``timeoutSeconds``;
- ``GET`` / ``POST`` / ``PUT`` / ``PATCH`` (merge patch) / ``DELETE`` of single objects; ``PUT`` and a
  patch carrying ``metadata.resourceVersion`` answer 409 when that version is stale; ``/status``;
- ``pods/<name>/binding`` (409 when the pod already has a node) and ``pods/<name>/eviction`` (429 when
  a PodDisruptionBudget would be violated; otherwise the pod gets a ``deletionTimestamp``);
- a 404 for any resource whose group is not served (a CRD the cluster lacks).

- watch history kept per kind for the last ``history_limit`` events (the watch cache's window): a watch
  from an older version gets the 410 a real API server sends routinely, and so does an open watch that
  falls behind the window (kube-apiserver closes an unresponsive watcher; its re-watch is too old):
  events are never skipped (``gone_mid_watch`` counts those watches); bookmarks every
  ``bookmark_interval`` seconds (about a minute, as the API server's watch cache sends them);
- validation a real API server applies: object names (DNS subdomain), label keys and values (63
  characters, alphanumeric ends), an Event's namespace against its object's, a Lease's duration and
  transitions; the schemas of the kinds corral writes (Pods, Bindings, Nodes, Events, Leases, ResourceClaims,
  PodGroups and Queues of every API; the merged object after a patch: :mod:`tests.kube.fakeschema`); a 422 Invalid otherwise;
- what a client's write may not change or must satisfy beyond types (:mod:`tests.kube.fakeupdate`):
  immutable fields (``metadata.uid``, ``deletionTimestamp``, a Pod's spec but for images and the few
  fields Kubernetes lets change, a ResourceClaim's spec and allocation, a Node's pod CIDR), the peers'
  CRDs' CEL rules (``x-kubernetes-validations``, transition rules included) and ``date-time`` /
  ``int32`` / ``int64`` formats;
- the Binding's ``metadata.uid`` precondition (409 when the pod was replaced) and the
  ``PodScheduled=True`` condition the binding sets; a strategic merge patch merges a pod's
  ``status.conditions`` by ``type``;
- the eviction API's PodDisruptionBudget rules: ``minAvailable`` or ``maxUnavailable``, as counts or
  percentages of the matching pods (rounded up, as the disruption controller does); pending, finished and
  terminating pods are evicted without consulting budgets; a refusal is a 429 whose Status names the
  ``DisruptionBudget`` cause; a pod two budgets select is a 500;
- status subresources as the CRDs declare them: Volcano's PodGroup has none (``/status`` is 404 and a
  patch of the object writes its status), KAI's PodGroup has one (a patch of the object ignores status).

The state and its rules live here (the rules themselves in :mod:`tests.kube.fakerules`), the wire protocol
in :mod:`tests.kube.fakehttp`.

Test controls: :meth:`FakeAPI.fail` (answer the next N matching requests with a status, before or, with
``after=True``, after carrying the request out: an ambiguous answer), :meth:`slow` (delay answers),
:meth:`drop_watches`, :meth:`hold_watches` (a watcher falling behind), :meth:`compact`,
:meth:`finish_deletions`; ``requests`` (what came in),
``fired`` (the faults and delays that met a request) and :meth:`pending` (those still queued).

Differences from a real kube-apiserver that remain: no authentication or authorization, no admission
(defaults, webhooks, quotas), schema validation only of the kinds corral writes (strict:
unknown fields refused), no field selectors, label
selectors of budgets by ``matchLabels`` only, no server-side apply, no Table output, one global
resourceVersion counter per server (as etcd's), and watch windows counted in events rather than time.
"""

from __future__ import annotations

import copy
import re
import sys
import threading
import time
import uuid
from http.server import ThreadingHTTPServer
from typing import Any

from tests.kube.fakerules import Refused, check_budgets, validate_fields, validate_meta
from tests.kube.fakerules import Reply as _Reply
from tests.kube.fakerules import status as _status
from tests.kube.fakeschema import check_write
from tests.kube.fakeupdate import check_client_write

__all__ = ["TYPES", "FakeAPI"]

#: plural-path prefix -> (kind, apiVersion, namespaced)
TYPES: dict[str, tuple[str, str, bool]] = {
    "/api/v1/nodes": ("Node", "v1", False),
    "/api/v1/pods": ("Pod", "v1", True),
    "/api/v1/events": ("Event", "v1", True),
    "/api/v1/namespaces": ("Namespace", "v1", False),
    "/apis/scheduling.k8s.io/v1/priorityclasses": ("PriorityClass", "scheduling.k8s.io/v1", False),
    "/apis/policy/v1/poddisruptionbudgets": ("PodDisruptionBudget", "policy/v1", True),
    "/apis/scheduling.volcano.sh/v1beta1/queues": ("Queue", "scheduling.volcano.sh/v1beta1", False),
    "/apis/scheduling.volcano.sh/v1beta1/podgroups": ("PodGroup", "scheduling.volcano.sh/v1beta1", True),
    "/apis/scheduling.run.ai/v2/queues": ("Queue", "scheduling.run.ai/v2", False),
    "/apis/scheduling.run.ai/v2alpha2/podgroups": ("PodGroup", "scheduling.run.ai/v2alpha2", True),
    "/apis/topology.volcano.sh/v1alpha1/hypernodes": ("HyperNode", "topology.volcano.sh/v1alpha1", False),
    "/apis/kai.scheduler/v1alpha1/topologies": ("Topology", "kai.scheduler/v1alpha1", False),
    # Kubernetes' gang API: 1.37's PodGroups and CompositePodGroups (1.36's v1alpha2 PodGroups are gone:
    # 404) and, for the tests of 1.35's groups, its v1alpha1 Workloads
    "/apis/scheduling.k8s.io/v1beta1/podgroups": ("PodGroup", "scheduling.k8s.io/v1beta1", True),
    "/apis/scheduling.k8s.io/v1alpha1/workloads": ("Workload", "scheduling.k8s.io/v1alpha1", True),
    "/apis/scheduling.k8s.io/v1alpha3/compositepodgroups": (
        "CompositePodGroup",
        "scheduling.k8s.io/v1alpha3",
        True,
    ),
    "/apis/coordination.k8s.io/v1/leases": ("Lease", "coordination.k8s.io/v1", True),
    "/apis/resource.k8s.io/v1/resourceslices": ("ResourceSlice", "resource.k8s.io/v1", False),
    "/apis/resource.k8s.io/v1/deviceclasses": ("DeviceClass", "resource.k8s.io/v1", False),
    "/apis/resource.k8s.io/v1/resourceclaims": ("ResourceClaim", "resource.k8s.io/v1", True),
    "/apis/resource.k8s.io/v1/resourceclaimtemplates": ("ResourceClaimTemplate", "resource.k8s.io/v1", True),
}
_BY_KIND = {(k, api): path for path, (k, api, _) in TYPES.items()}
#: kinds whose CRD or type has a status subresource (a patch of the object leaves status alone)
_STATUS_SUB = {
    "/apis/scheduling.run.ai/v2alpha2/podgroups",
    "/apis/scheduling.volcano.sh/v1beta1/queues",
    "/apis/scheduling.k8s.io/v1beta1/podgroups",  # a built-in kind: status is its subresource
    "/apis/resource.k8s.io/v1/resourceclaims",
}
_NO_STATUS = {"/apis/scheduling.volcano.sh/v1beta1/podgroups"}  # ``subresources: {}``: /status is 404

_PATH = re.compile(
    r"^(?P<base>/api/v1|/apis/[^/]+/[^/]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class FakeAPI:
    """The server's state and controls; :meth:`start` serves it on an ephemeral localhost port."""

    def __init__(
        self,
        served_groups: tuple[str, ...] | None = None,
        bookmark_interval: float = 60.0,
        evict_deletes: bool = False,
        history_limit: int = 1000,
    ) -> None:
        self.lock = threading.Condition()
        self.rv = 100
        self.store: dict[str, dict[tuple[str, str], dict]] = {p: {} for p in TYPES}
        self.history: dict[str, list[tuple[int, str, dict]]] = {p: [] for p in TYPES}  # (rv, type, object)
        self.oldest = self.rv  # watches from below this get 410
        self.trimmed: dict[str, int] = dict.fromkeys(TYPES, 0)  # the newest version dropped from history
        self.history_limit = history_limit
        self.delays: list[list] = []  # [method, path regex, seconds, count]
        self.served = served_groups
        self.bookmark_interval = bookmark_interval
        self.evict_deletes = evict_deletes
        self.faults: list[list] = []  # [method, path regex, status, count, after]
        #: faults that met a request: "<status>" (before the request is carried out), "<status> after"
        #: (after it: the write landed), "latency"
        self.fired: dict[str, int] = {}
        self.requests: list[tuple[str, str]] = []
        self.times: list[tuple[float, str, str]] = []  # (monotonic arrival, method, path)
        #: writes but the lease's: (the X-Corral-Replica header, the lease holders at that instant, ...)
        self.writes: list[tuple[str, list[str], str, str]] = []
        self.repeated_evictions: list[str] = []  # evictions of a pod already terminating
        self.full_requests: list[tuple[str, str]] = []  # with the query
        self.evictions: list[str] = []
        self.bindings: list[tuple[str, str]] = []
        self.generation = 0  # drop_watches bumps it
        #: API paths whose open watch streams send nothing until :meth:`release_watches` (a watcher that
        #: falls behind: a slow consumer, or the server thread serving it not getting to run)
        self.held: set[str] = set()
        self.gone_mid_watch = 0  # watches ended with 410 because their position left the history
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    # -- controls ---------------------------------------------------------------------------------
    def start(self) -> FakeAPI:
        from tests.kube.fakehttp import Handler as _Handler  # the wire protocol, over this state

        api = self

        class Handler(_Handler):
            fake = api

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # many watches connect at once: no SYN retries

            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
                    super().handle_error(request, client_address)  # a client hanging up is routine

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            with self.lock:
                self.generation += 1
                self.lock.notify_all()
            self.server.shutdown()
            self.server.server_close()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def fail(self, method: str, path_regex: str, status: int, count: int = 1, after: bool = False) -> None:
        """Answer the next ``count`` requests matching ``method`` and ``path_regex`` (searched in the path
        and query) with ``status``; ``after``: carry the request out first (the answer lies)."""
        with self.lock:
            self.faults = [f for f in self.faults if f[3] > 0]
            self.faults.append([method, re.compile(path_regex), status, count, after])

    def pending(self, method: str, path_regex: str) -> int:
        """Requests still to be answered by the faults and delays queued for ``method`` ``path_regex``."""
        with self.lock:
            return sum(
                f[3] for f in self.faults + self.delays if f[0] == method and f[1].pattern == path_regex
            )

    def slow(self, method: str, path_regex: str, seconds: float, count: int = 1) -> None:
        """Delay the answer of the next ``count`` matching requests by ``seconds``."""
        with self.lock:
            self.delays = [d for d in self.delays if d[3] > 0]
            self.delays.append([method, re.compile(path_regex), seconds, count])

    def drop_watches(self) -> None:
        """Cut every open watch connection (the client sees the stream end without a timeout)."""
        with self.lock:
            self.generation += 1
            self.lock.notify_all()

    def hold_watches(self, kind: str) -> None:
        """Hold every open watch of ``kind`` (events are kept in the history, not sent) until
        :meth:`release_watches`: a watcher falling behind, deterministically."""
        with self.lock:
            self.held.update(p for p, (k, _, _) in TYPES.items() if k == kind)

    def release_watches(self) -> None:
        with self.lock:
            self.held.clear()
            self.lock.notify_all()

    def compact(self) -> None:
        """Forget the event history: a watch from any earlier version gets 410 Gone."""
        with self.lock:
            for h in self.history.values():
                h.clear()
            self.oldest = self.rv + 1
            self.generation += 1
            self.lock.notify_all()

    def finish_deletions(self) -> int:
        """Remove every pod that carries a deletionTimestamp (its grace period ended)."""
        with self.lock:
            gone = [
                key for key, o in self.store["/api/v1/pods"].items() if o["metadata"].get("deletionTimestamp")
            ]
            for key in gone:
                self._delete("/api/v1/pods", key)
            return len(gone)

    def add(self, obj: dict) -> dict:
        """Create ``obj`` (any served kind) as a client would."""
        path = _BY_KIND[(obj["kind"], obj["apiVersion"])]
        with self.lock:
            ns = obj["metadata"].get("namespace", "")
            return copy.deepcopy(self._create(path, copy.deepcopy(obj), ns, schema=False))

    def load(self, objs: list[dict]) -> None:
        """Bulk-load objects (no watch history; for benchmarks)."""
        with self.lock:
            for obj in objs:
                path = _BY_KIND[(obj["kind"], obj["apiVersion"])]
                namespaced = TYPES[path][2]
                meta = obj.setdefault("metadata", {})
                self.rv += 1
                meta.setdefault("uid", str(uuid.uuid4()))
                meta.setdefault("creationTimestamp", _now())
                meta["resourceVersion"] = str(self.rv)
                if namespaced:
                    meta.setdefault("namespace", "default")
                self.store[path][(meta.get("namespace", "") if namespaced else "", meta["name"])] = obj
            self.oldest = self.rv

    def add_all(self, objs: list[dict]) -> None:
        for o in objs:
            self.add(o)

    def get(self, kind: str, name: str, namespace: str = "") -> dict | None:
        for path, (k, _, namespaced) in TYPES.items():
            if k == kind:
                obj = self.store[path].get((namespace if namespaced else "", name))
                if obj is not None:
                    return copy.deepcopy(obj)
        return None

    def objects(self, kind: str) -> list[dict]:
        with self.lock:
            return [
                copy.deepcopy(o)
                for p, (k, _, _) in TYPES.items()
                if k == kind
                for o in self.store[p].values()
            ]

    def update(self, kind: str, name: str, namespace: str, patch: dict) -> dict:
        """Merge-patch an object from the test (a kubelet or controller writing)."""
        for path, (k, _, namespaced) in TYPES.items():
            key = (namespace if namespaced else "", name)
            if k == kind and key in self.store[path]:
                with self.lock:
                    return copy.deepcopy(self._write(path, key, merge_patch(self.store[path][key], patch)))
        raise KeyError(f"{kind} {namespace}/{name}")

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        for path, (k, _, namespaced) in TYPES.items():
            key = (namespace if namespaced else "", name)
            if k == kind and key in self.store[path]:
                with self.lock:
                    self._delete(path, key)

    # -- state changes (lock held) ----------------------------------------------------------------
    def _event(self, path: str, etype: str, obj: dict) -> None:
        hist = self.history[path]
        hist.append((self.rv, etype, copy.deepcopy(obj)))
        if len(hist) > self.history_limit:
            drop = len(hist) - self.history_limit // 2
            self.trimmed[path] = hist[drop - 1][0]
            del hist[:drop]
        self.lock.notify_all()

    def _create(self, path: str, obj: dict, ns: str, schema: bool = True) -> dict:
        """Store a new object; ``schema=False`` for a test's fixture (not checked against the schema)."""
        kind, api, namespaced = TYPES[path]
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        key = (ns if namespaced else "", meta.get("name", ""))
        validate_meta(kind, meta)
        validate_fields(kind, obj)
        if schema:
            check_write(kind, api, None, obj)
            check_client_write(kind, api, None, obj)
        if key in self.store[path]:
            raise _Reply(409, _status(409, "AlreadyExists", f"{kind} {key[1]!r} already exists"))
        self.rv += 1
        obj["kind"], obj["apiVersion"] = kind, api
        if namespaced:
            meta["namespace"] = ns
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta["resourceVersion"] = str(self.rv)
        self.store[path][key] = obj
        self._event(path, "ADDED", obj)
        return obj

    def _write(self, path: str, key: tuple[str, str], obj: dict) -> dict:
        kind, api, _ = TYPES[path]
        validate_meta(kind, obj.get("metadata") or {})
        validate_fields(kind, obj)
        check_write(kind, api, self.store[path].get(key), obj)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.store[path][key] = obj
        self._event(path, "MODIFIED", obj)
        return obj

    def _delete(self, path: str, key: tuple[str, str]) -> dict:
        obj = self.store[path].pop(key)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._event(path, "DELETED", obj)
        return obj

    def _evict(self, key: tuple[str, str]) -> None:
        pod = self.store["/api/v1/pods"].get(key)
        if pod is None:
            raise _Reply(404, _status(404, "NotFound", f'pods "{key[1]}" not found'))
        self.evictions.append(f"{key[0]}/{key[1]}")
        if pod["metadata"].get("deletionTimestamp"):
            self.repeated_evictions.append(f"{key[0]}/{key[1]}")
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase not in ("Pending", "Succeeded", "Failed", None):  # pending, finished pods skip budgets
            self._check_budgets(key, pod)
        if self.evict_deletes:
            self._delete("/api/v1/pods", key)
        else:
            pod = copy.deepcopy(pod)
            pod["metadata"]["deletionTimestamp"] = _now()
            pod["metadata"]["deletionGracePeriodSeconds"] = 30
            self._write("/api/v1/pods", key, pod)

    def _check_budgets(self, key: tuple[str, str], pod: dict) -> None:
        try:
            check_budgets(
                self.store["/apis/policy/v1/poddisruptionbudgets"].values(),
                self.store["/api/v1/pods"],
                key,
                pod,
            )
        except Refused as r:
            body = _status(r.code, r.reason, r.message)
            if r.causes:
                body["details"] = {"causes": r.causes}
            raise _Reply(r.code, body) from None

    def _bind(self, key: tuple[str, str], body: dict) -> None:
        pod = self.store["/api/v1/pods"].get(key)
        if pod is None:
            raise _Reply(404, _status(404, "NotFound", f'pods "{key[1]}" not found'))
        check_write("Binding", "v1", None, body or {})
        node = ((body or {}).get("target") or {}).get("name")
        if not node:
            raise _Reply(400, _status(400, "BadRequest", "binding target name is required"))
        if pod.get("spec", {}).get("nodeName"):
            raise _Reply(
                409,
                _status(
                    409, "Conflict", f'pod {key[1]} is already assigned to node "{pod["spec"]["nodeName"]}"'
                ),
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise _Reply(409, _status(409, "Conflict", f"pod {key[1]} is being deleted"))
        uid = ((body or {}).get("metadata") or {}).get("uid")
        if uid and uid != pod["metadata"].get("uid"):
            raise _Reply(
                409,
                _status(
                    409,
                    "Conflict",
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pod['metadata'].get('uid')}",
                ),
            )
        self.bindings.append((f"{key[0]}/{key[1]}", node))
        pod = copy.deepcopy(pod)
        pod["spec"]["nodeName"] = node
        status = pod.setdefault("status", {})
        status["conditions"] = [
            c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
        ] + [{"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": _now()}]
        self._write("/api/v1/pods", key, pod)
