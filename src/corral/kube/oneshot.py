"""The live cluster read once, for ``corral whatif --live`` and ``corral queues --live``: one paged list
of each kind ``corral run`` watches (:data:`~corral.kube.api.RESOURCES`), no watch, through the same
client and flags as ``corral run`` (``--kubeconfig``, ``--context``, ``--server``).

The objects come back as a snapshot's (``kind`` and ``apiVersion`` set, as a list's items lack them), so
the commands build their cluster with the snapshot loader, as they do from files. A kind whose CRD is
not installed (404) is left out, as ``corral run`` skips it. Errors are one line: no API server answering
(or no credentials) is exit code 2 with the hint ``corral run`` gives; a list refused for lack of rights
(401/403) is exit code 2 naming the resource; any other failed list is exit code 1.
"""

from __future__ import annotations

import time

from corral.errors import ClusterAPIError, ConfigError
from corral.kube.api import RESOURCES, APIError, KubeAPI, list_pages, load_client
from corral.manifests.load import SourcedObject

__all__ = ["live_objects", "probe"]


def probe(api: KubeAPI, tries: int = 3) -> None:
    """Fail fast, exit code 2, when no API server answers: any HTTP answer (even 401/403/404) counts."""
    for attempt in range(tries):
        try:
            api.get("/version")
            return
        except APIError as exc:
            if exc.status != 0:
                return
            if attempt == tries - 1:
                raise ConfigError(
                    f"no Kubernetes API server reachable at {api.client.configuration.host}: {exc.message}; "
                    "pass --kubeconfig FILE (or set $KUBECONFIG) and --context, or --server URL"
                ) from None
            time.sleep(1.0)


def live_objects(
    kubeconfig: str | None, context: str | None, server: str | None, page: int = 5000
) -> list[SourcedObject]:
    """Every object of the kinds ``corral run`` watches, listed once from the cluster."""
    api = KubeAPI(load_client(kubeconfig, context, server, pool=4))
    probe(api)
    out: list[SourcedObject] = []
    for rtype in RESOURCES:
        try:
            items, _rv = list_pages(api, rtype, page)
        except APIError as exc:
            if exc.status == 404 and rtype.optional:
                continue
            if exc.status in (401, 403):
                raise ConfigError(
                    f"cannot list {rtype.name} ({exc.message}): the credentials need list rights on it "
                    "(deploy/rbac.yaml grants what corral reads)"
                ) from None
            raise ClusterAPIError(f"cannot list {rtype.name}: {exc}") from None
        source = f"cluster {rtype.name}"
        for raw in items:
            raw.setdefault("kind", rtype.kind)
            raw.setdefault("apiVersion", rtype.api_version)
            out.append((source, raw))
    return out
