"""The reflector of ``corral run``'s watch cache: one thread per resource type lists it and watches it
into the cache (:class:`corral.kube.cache.WatchCache`), as client-go's reflector does.

A paged list (``limit`` / ``continue``) gives the store and a ``resourceVersion``; a watch from it with
bookmarks moves that version on; a dropped or timed-out watch is re-opened from the last version; a 410
Gone (too old) relists; errors back off exponentially (capped, with jitter). A 404 on the first list of
an optional kind (a CRD the cluster lacks) skips the kind with one log line.
"""

from __future__ import annotations

import random
import threading
from typing import TYPE_CHECKING, Any

from corral.kube.api import APIError, ResourceType, list_pages

if TYPE_CHECKING:
    from corral.kube.cache import WatchCache

__all__ = ["Backoff", "Informer"]


class Backoff:
    """Exponential backoff with jitter: ``base`` doubling to ``cap`` seconds; :meth:`reset` on success."""

    def __init__(self, base: float = 0.5, cap: float = 30.0) -> None:
        self.base, self.cap, self.n = base, cap, 0

    def next(self) -> float:
        delay = min(self.cap, self.base * (2**self.n))
        self.n += 1
        return delay * (0.5 + random.random() / 2)

    def reset(self) -> None:
        self.n = 0


class _Gone(Exception):
    """The watch's resourceVersion is too old: relist."""


def _rv(raw: dict) -> str:
    return str((raw.get("metadata") or {}).get("resourceVersion") or "")


class Informer(threading.Thread):
    """List + watch of one resource type into the cache (client-go's reflector)."""

    def __init__(self, cache: WatchCache, rtype: ResourceType) -> None:
        super().__init__(daemon=True, name=f"corral-watch-{rtype.name}")
        self.cache = cache
        self.rtype = rtype
        self.rv = ""
        self.stopping = threading.Event()
        self.stream: Any = None
        self.backoff = Backoff(*cache.backoff)

    def stop(self) -> None:
        self.stopping.set()
        s = self.stream
        if s is not None:
            s.abort()

    def _error(self, exc: APIError, what: str) -> None:
        m = self.cache.metrics
        if m is not None:
            m.api_errors.labels(
                "watch" if what == "watch" else "list", self.rtype.name, str(exc.status)
            ).inc()
            m.restarts.labels(self.rtype.name, "error").inc()

    def run(self) -> None:
        log = self.cache.log
        listed = False
        while not self.stopping.is_set():
            try:
                if not listed:
                    self._list()
                    listed = True
                    self.backoff.reset()
                self._watch()
            except _Gone:
                log.info("watch too old (410 Gone): relisting", resource=self.rtype.name)
                if self.cache.metrics is not None:
                    self.cache.metrics.restarts.labels(self.rtype.name, "gone").inc()
                listed = False
            except APIError as exc:
                if self.stopping.is_set():
                    return
                if exc.status == 404 and self.rtype.optional and self.rtype not in self.cache.synced:
                    log.info("resource not served by the cluster: skipped", resource=self.rtype.name)
                    self.cache.mark_absent(self.rtype)
                    return
                self._error(exc, "list" if not listed else "watch")
                delay = self.backoff.next()
                if exc.status == 410:
                    listed = False
                # a watch the server or the network ended (status 0) is routine: info, not warning
                log.log(
                    "info" if exc.status == 0 and listed else "warning",
                    "watch failed: retrying",
                    resource=self.rtype.name,
                    status=exc.status,
                    error=exc.message,
                    retry_in=round(delay, 2),
                )
                self.stopping.wait(delay)
            except Exception as exc:  # noqa: BLE001 - a reflector never dies
                delay = self.backoff.next()
                log.error(
                    "watch fault: retrying",
                    resource=self.rtype.name,
                    error=f"{type(exc).__name__}: {exc}",
                    retry_in=round(delay, 2),
                )
                listed = False
                self.stopping.wait(delay)

    def _list(self) -> None:
        api = self.cache.api
        assert api is not None
        items, self.rv = list_pages(api, self.rtype, self.cache.page)
        self.cache.replace(self.rtype, items)
        self.cache.log.debug("listed", resource=self.rtype.name, objects=len(items), resourceVersion=self.rv)

    def _watch(self) -> None:
        api = self.cache.api
        assert api is not None
        stream = api.watch(
            self.rtype.collection(),
            self.rv,
            self.cache.watch_timeout,
            read_timeout=self.cache.watch_timeout + 30,
        )
        self.stream = stream
        try:
            if self.stopping.is_set():
                return
            for ev in stream.events():
                if self.stopping.is_set():
                    return
                etype, obj = ev.get("type"), ev.get("object") or {}
                if etype == "ERROR":
                    code = obj.get("code")
                    if code == 410:
                        raise _Gone()
                    raise APIError(
                        int(code or 0),
                        str(obj.get("message") or "watch error"),
                        method="WATCH",
                        path=self.rtype.collection(),
                    )
                rv = _rv(obj)
                if etype in ("ADDED", "MODIFIED", "DELETED"):
                    self.cache.event(self.rtype, etype, obj)
                if rv:
                    self.rv = rv
                self.backoff.reset()
            # a normal end (timeoutSeconds): the loop re-opens the watch from self.rv
        finally:
            self.stream = None
            stream.close()
