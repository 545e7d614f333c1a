"""The wire to the Kubernetes API server, through the official ``kubernetes`` client's transport.

Every call goes through :class:`kubernetes.client.ApiClient` (its configuration, authentication, TLS and
connection pool, loaded from a kubeconfig or the in-cluster service account) with
``param_serialize`` + ``call_api``; bodies are read as plain JSON dicts, never turned into the client's
model classes, because the scheduler feeds the objects' dicts to the snapshot loader
(:mod:`corral.manifests`) and 50,000 pods through the generated models would cost seconds per list.

:data:`RESOURCES` is the table of what ``corral run`` watches: the core kinds, and the Volcano / KAI
custom resources (``optional``: a cluster without the CRD answers 404 and the kind is skipped).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from corral.errors import ClusterAPIError, ConfigError, InputError
from corral.inputs import load_json

__all__ = [
    "RESOURCES",
    "APIError",
    "GuardedAPI",
    "KubeAPI",
    "NotLeader",
    "ResourceType",
    "list_pages",
    "load_client",
]


@dataclass(frozen=True)
class ResourceType:
    """One watched collection: ``kind`` and ``api_version`` as the snapshot loader expects them."""

    kind: str
    api_version: str
    plural: str
    namespaced: bool
    optional: bool = False
    #: the kind has a ``status`` subresource (its CRD declares ``subresources.status``): status is written
    #: there and ignored on the main resource. Volcano's PodGroup CRD declares none (``subresources: {}``),
    #: KAI's declares one.
    status_subresource: bool = False
    #: the version is part of the name: a second watched version of a kind (names key the cache's records)
    versioned: bool = False

    @property
    def name(self) -> str:
        group, _, version = self.api_version.rpartition("/")
        if self.versioned:
            return f"{self.plural}.{version}.{group}"
        return f"{self.plural}.{group}" if group else self.plural

    def base(self) -> str:
        return f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"

    def collection(self, namespace: str | None = None) -> str:
        """The path of the whole collection (all namespaces unless ``namespace``)."""
        if namespace and self.namespaced:
            return f"{self.base()}/namespaces/{namespace}/{self.plural}"
        return f"{self.base()}/{self.plural}"

    def item(self, name: str, namespace: str = "", sub: str = "") -> str:
        path = f"{self.collection(namespace or None)}/{name}"
        return f"{path}/{sub}" if sub else path


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("Node", "v1", "nodes", False, status_subresource=True),
    ResourceType("Pod", "v1", "pods", True, status_subresource=True),
    ResourceType("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False),
    ResourceType("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", True),
    ResourceType("Queue", "scheduling.volcano.sh/v1beta1", "queues", False, optional=True),
    ResourceType("PodGroup", "scheduling.volcano.sh/v1beta1", "podgroups", True, optional=True),
    ResourceType("Queue", "scheduling.run.ai/v2", "queues", False, optional=True),
    ResourceType(
        "PodGroup", "scheduling.run.ai/v2alpha2", "podgroups", True, optional=True, status_subresource=True
    ),
    ResourceType("HyperNode", "topology.volcano.sh/v1alpha1", "hypernodes", False, optional=True),
    ResourceType("Topology", "kai.scheduler/v1alpha1", "topologies", False, optional=True),
    # Kubernetes' own gang API (manifests/native.py): PodGroups of 1.37 (v1beta1) and 1.36 (v1alpha2) —
    # a cluster serves one of them, so no object is read twice —, 1.35's Workloads (v1alpha1), whose
    # pod groups pods name by spec.workloadRef, and 1.37's CompositePodGroups (v1alpha3)
    ResourceType(
        "PodGroup", "scheduling.k8s.io/v1beta1", "podgroups", True, optional=True, status_subresource=True
    ),
    ResourceType(
        "PodGroup",
        "scheduling.k8s.io/v1alpha2",
        "podgroups",
        True,
        optional=True,
        status_subresource=True,
        versioned=True,
    ),
    ResourceType("Workload", "scheduling.k8s.io/v1alpha1", "workloads", True, optional=True),
    ResourceType(
        "CompositePodGroup", "scheduling.k8s.io/v1alpha3", "compositepodgroups", True, optional=True
    ),
    # Dynamic Resource Allocation (resource.k8s.io/v1, Kubernetes 1.34 on): devices, classes and claims;
    # a pod's claims get their allocation before its bind (kube/dra_status.py)
    ResourceType("ResourceSlice", "resource.k8s.io/v1", "resourceslices", False, optional=True),
    ResourceType("DeviceClass", "resource.k8s.io/v1", "deviceclasses", False, optional=True),
    ResourceType(
        "ResourceClaim", "resource.k8s.io/v1", "resourceclaims", True, optional=True, status_subresource=True
    ),
    ResourceType(
        "ResourceClaimTemplate", "resource.k8s.io/v1", "resourceclaimtemplates", True, optional=True
    ),
    # the labels a non-empty namespaceSelector of an inter-pod affinity term matches
    ResourceType("Namespace", "v1", "namespaces", False),
)
POD = RESOURCES[1]
NODE = RESOURCES[0]
LEASE = ResourceType("Lease", "coordination.k8s.io/v1", "leases", True)
EVENT = ResourceType("Event", "v1", "events", True)


class APIError(ClusterAPIError):
    """A request the API server refused (``status`` is the HTTP code; 0 when no answer came)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        method: str = "",
        path: str = "",
        retry_after: float | None = None,
        causes: tuple[str, ...] = (),
    ) -> None:
        self.status = status
        self.retry_after = retry_after
        self.causes = causes  # the ``details.causes[].type`` of the Status answer
        self.method = method
        self.path = path
        super().__init__(f"{method} {path}: {status} {message}".strip())


def load_client(
    kubeconfig: str | None = None, context: str | None = None, host: str | None = None, pool: int = 32
) -> k8s.ApiClient:
    """An ``ApiClient``: ``host`` (no authentication; tests and ``kubectl proxy``), else the kubeconfig
    (``--kubeconfig`` or ``$KUBECONFIG`` / ``~/.kube/config``), else the in-cluster service account."""
    cfg = k8s.Configuration()
    if host:
        cfg.host = host
    else:
        try:
            k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        except Exception as first:  # noqa: BLE001 - fall back to the in-cluster account, report both
            if kubeconfig:
                raise ConfigError(
                    f"cannot load kubeconfig {kubeconfig}: {first}", field="--kubeconfig"
                ) from None
            try:
                k8s_config.load_incluster_config(client_configuration=cfg)
            except Exception as second:  # noqa: BLE001
                raise ConfigError(
                    f"no cluster credentials: kubeconfig: {first}; in-cluster: {second}; "
                    "pass --kubeconfig FILE (or set $KUBECONFIG) and --context, or --server URL"
                ) from None
    cfg.connection_pool_maxsize = pool
    cfg.retries = False
    return k8s.ApiClient(cfg)


def _json(data: bytes | str, where: str) -> Any:
    """An API answer, read like any input file: bounded nesting depth and number size
    (:func:`corral.inputs.load_json`), so a hostile answer is an error, not a crash."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return load_json(text, where, InputError)


def _causes(body: bytes | str | None) -> tuple[str, ...]:
    """The ``details.causes[].type`` of a Status answer (the eviction API names ``DisruptionBudget``)."""
    if not body:
        return ()
    try:
        data = _json(body, "error answer")
    except (InputError, TypeError):
        return ()
    details = data.get("details") if isinstance(data, dict) else None
    causes = details.get("causes") if isinstance(details, dict) else None
    if not isinstance(causes, list):
        return ()
    return tuple(str(c.get("type") or "") for c in causes if isinstance(c, dict))


def _message(body: bytes | str | None) -> str:
    """The ``message`` (else ``reason``) of an error answer; a body that is not such JSON, cut short."""
    if not body:
        return ""
    try:
        data = _json(body, "error answer")
    except (InputError, TypeError):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
        return text[:200]
    return str(data.get("message") or data.get("reason") or "") if isinstance(data, dict) else ""


class KubeAPI:
    """JSON requests over the client's connection pool. Errors become :class:`APIError`."""

    def __init__(self, api_client: k8s.ApiClient, timeout: float = 30.0) -> None:
        self.client = api_client
        self.timeout = timeout

    def _send(
        self, method: str, path: str, query: dict | None, body: Any, content_type: str | None, timeout: Any
    ) -> Any:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        params = [
            (k, v if not isinstance(v, bool) else str(v).lower())
            for k, v in (query or {}).items()
            if v is not None
        ]
        req = self.client.param_serialize(
            method, path, query_params=params, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        try:
            resp = self.client.call_api(*req, _request_timeout=timeout)
        except ApiException as exc:
            raise APIError(
                exc.status or 0, _message(exc.body) or str(exc.reason), method=method, path=path
            ) from None
        except Exception as exc:  # noqa: BLE001 - connection refused, reset, timeout: no answer
            raise APIError(0, f"{type(exc).__name__}: {exc}", method=method, path=path) from None
        return resp

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> dict:
        """One call; the decoded JSON answer (``{}`` for an empty one)."""
        resp = self._send(method, path, query, body, content_type, self.timeout)
        try:
            data = resp.read()
        except Exception as exc:  # noqa: BLE001 - the connection dropped while reading
            raise APIError(0, f"{type(exc).__name__}: {exc}", method=method, path=path) from None
        if not 200 <= resp.status <= 299:
            retry = resp.getheader("Retry-After") if hasattr(resp, "getheader") else None
            raise _refused(resp.status, str(resp.reason), data, retry, method, path)
        if not data:
            return {}
        try:
            return _json(data, path)
        except InputError as exc:
            raise APIError(
                resp.status, f"answer is not usable JSON: {exc.message}", method=method, path=path
            ) from None

    def send(self, method: str, path: str, body: dict, content_type: str) -> None:
        """A write whose answer corral does not read (an Event, a pod condition): the body serialized
        once as JSON bytes and sent over the client's connection pool with its authentication headers,
        the answer drained but not decoded. About a quarter less CPU than :meth:`request` (measured
        with ``benchmarks/bench_live.py``), for the writes a backlog of unschedulable pods repeats.
        Errors as :meth:`request`."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        _method, url, headers, _body, _post = self.client.param_serialize(
            method, path, header_params=headers, auth_settings=["BearerToken"]
        )
        data = json.dumps(body, separators=(",", ":")).encode()
        try:
            resp = self.client.rest_client.pool_manager.request(
                method,
                url,
                body=data,
                headers=headers,
                timeout=self.timeout,
                preload_content=False,
            )
            answer = resp.read()
            resp.release_conn()
        except Exception as exc:  # noqa: BLE001 - connection refused, reset, timeout: no answer
            raise APIError(0, f"{type(exc).__name__}: {exc}", method=method, path=path) from None
        if not 200 <= resp.status <= 299:
            raise _refused(
                resp.status, str(resp.reason), answer, resp.headers.get("Retry-After"), method, path
            )

    def get(self, path: str, **query: Any) -> dict:
        return self.request("GET", path, query=query)

    def patch(self, path: str, body: dict) -> dict:
        """A JSON merge patch (RFC 7386): ``None`` values remove keys."""
        return self.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    def strategic_patch(self, path: str, body: dict) -> dict:
        """A strategic merge patch: lists with a merge key (a pod's ``status.conditions``, by ``type``)
        are merged item by item, as kube-scheduler patches a pod's conditions."""
        return self.request("PATCH", path, body=body, content_type="application/strategic-merge-patch+json")

    def post(self, path: str, body: dict) -> dict:
        return self.request("POST", path, body=body, content_type="application/json")

    def put(self, path: str, body: dict) -> dict:
        return self.request("PUT", path, body=body, content_type="application/json")

    def watch(
        self, path: str, resource_version: str, timeout_seconds: int, read_timeout: float
    ) -> WatchStream:
        """Open a watch (``allowWatchBookmarks``) from ``resource_version``; iterate the events."""
        query = {
            "watch": True,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
        }
        resp = self._send("GET", path, query, None, None, (min(10.0, read_timeout), read_timeout))
        if not 200 <= resp.status <= 299:
            data = resp.read()
            raise APIError(resp.status, _message(data) or str(resp.reason), method="WATCH", path=path)
        return WatchStream(resp.response, path)


class WatchStream:
    """The events of one watch response, one JSON object per line of the chunked body."""

    def __init__(self, raw: Any, path: str) -> None:
        self.raw = raw
        self.path = path
        self.aborted = False

    def close(self) -> None:
        with contextlib.suppress(Exception):  # already closed
            if self.aborted:  # a shut-down connection never goes back to the pool
                self.raw.close()
            else:
                self.raw.release_conn()

    def abort(self) -> None:
        """Close the connection under a reader blocked in :meth:`events` (another thread stops it)."""
        self.aborted = True
        try:
            self.raw.shutdown()
        except Exception:  # noqa: BLE001
            with contextlib.suppress(Exception):
                self.raw.close()

    def events(self) -> Iterator[dict]:
        buf = b""
        try:
            for chunk in self.raw.stream(65536, decode_content=False):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield _json(line, self.path)
        except (ValueError, InputError) as exc:
            raise APIError(0, f"bad watch event: {exc}", method="WATCH", path=self.path) from None
        except APIError:
            raise
        except Exception as exc:  # noqa: BLE001 - the stream dropped
            raise APIError(
                0, f"watch dropped: {type(exc).__name__}: {exc}", method="WATCH", path=self.path
            ) from None
        if buf.strip():
            with contextlib.suppress(InputError):
                yield _json(buf, self.path)


class NotLeader(BaseException):  # noqa: N818 - a stop signal, not an error of one request
    """Raised by :class:`GuardedAPI` instead of sending a write once this replica may no longer act as
    leader. A ``BaseException``, so the per-write ``except Exception`` handlers of the apply phase do not
    swallow it: the whole phase stops at the first write it would have made."""


class GuardedAPI:
    """The writes of the apply phase: ``post`` / ``patch`` / ``put`` ask ``may_write`` just before the
    request goes out (leadership checked where it matters: kube-scheduler's leader stops at once when its
    lease is lost); reads go through unchecked."""

    def __init__(self, api: KubeAPI, may_write: Any) -> None:
        self.api = api
        self.may_write = may_write

    def _check(self, method: str, path: str) -> None:
        if not self.may_write():
            raise NotLeader(f"{method} {path}: not leader")

    def get(self, path: str, **query: Any) -> dict:
        return self.api.get(path, **query)

    def send(self, method: str, path: str, body: dict, content_type: str) -> None:
        self._check(method, path)
        self.api.send(method, path, body, content_type)

    def patch(self, path: str, body: dict) -> dict:
        self._check("PATCH", path)
        return self.api.patch(path, body)

    def strategic_patch(self, path: str, body: dict) -> dict:
        self._check("PATCH", path)
        return self.api.strategic_patch(path, body)

    def post(self, path: str, body: dict) -> dict:
        self._check("POST", path)
        return self.api.post(path, body)

    def put(self, path: str, body: dict) -> dict:
        self._check("PUT", path)
        return self.api.put(path, body)


def list_pages(api: KubeAPI | GuardedAPI, rtype: ResourceType, page: int = 5000) -> tuple[list[dict], str]:
    """Every object of ``rtype`` by a paged list (``limit`` / ``continue``; an expired continue token
    lists again from the start), and the list's ``resourceVersion``. Raises :class:`APIError`."""
    items: list[dict] = []
    cont = None
    while True:
        try:
            data = api.get(rtype.collection(), limit=page, **({"continue": cont} if cont else {}))
        except APIError as exc:
            if exc.status == 410 and cont:  # the continue token expired: list again
                items, cont = [], None
                continue
            raise
        items.extend(data.get("items") or [])
        meta = data.get("metadata") or {}
        cont = meta.get("continue")
        if not cont:
            return items, str(meta.get("resourceVersion") or "")


def _refused(status: int, reason: str, data: bytes, retry: str | None, method: str, path: str) -> APIError:
    """The error for an answer outside 2xx: the server's message (else the HTTP reason), its
    ``Retry-After`` in seconds when it gave a number, and the causes it named."""
    return APIError(
        status,
        _message(data) or reason,
        method=method,
        path=path,
        retry_after=float(retry) if retry and retry.isdigit() else None,
        causes=_causes(data),
    )
