"""The live operator's page of ``corral run --dashboard-port PORT``: the page ``corral schedule --html``
writes (:func:`corral.dashboard.render_page`), rendered from the live cluster after a cycle and served
read-only over HTTP.

- **Where**: ``--dashboard-address`` (default ``127.0.0.1``: only the machine itself; the page names
  every pod, queue and node, so exposing it is a choice) and ``--dashboard-port`` (off unless given;
  0 picks a free port, logged). Its own server thread beside ``/metrics``, in the same process.
- **What**: ``GET /`` (or ``/index.html``) answers the last rendered page; every other path is 404,
  every other method 405. The page refreshes itself every ``refresh`` seconds
  (``--dashboard-refresh``, default 5) with ``<meta http-equiv="refresh">``: no script runs. The answer
  carries ``Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'`` and
  ``X-Content-Type-Options: nosniff``, so even a name that slipped past the escaping could load or run
  nothing.
- **When**: after a cycle, in the scheduling thread (the cluster is consistent then and no cycle
  changes it meanwhile), at most once per ``refresh`` seconds and never sooner than ten times the last
  render's cost after it began (on a cluster so large that a render takes a second, one every 10 s: a
  render takes at most a tenth of the scheduler's time), and only while someone looks: the page is
  rendered when it was asked for in the last ``idle`` seconds (60), or when none was rendered yet. The
  queue view opens a session, so it runs on a copy of the cluster (a session keeps memories on the
  cluster it opens; the next cycle must not see them).
- **Content**: each queue's share (allocated over deserved, as ``corral queues`` shows it) over time, an
  inline SVG chart of the last ``samples`` (360) renders — sampled when the page is rendered, so over
  the time it was watched; the cycle's waiting podgroups and reasons, the last forecast's expected starts (when the
  live forecast runs), the evictions of the last ``kept`` (100) evictions of this process, newest
  first, the reservation and the topology as the cycle left them.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from corral.dashboard import render_page
from corral.framework.config import Config
from corral.framework.decisions import Decisions, Eviction
from corral.kube.logs import Log
from corral.model import Cluster
from corral.queueview import queue_rows
from corral.sim.forecast import clone_cluster

__all__ = ["LivePage", "serve_page"]

_WAITING = (
    "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><meta http-equiv='refresh' content='{r}'>"
    "<title>corral</title></head><body><h1>corral</h1><p id='as-of'>waiting for the first cycle</p>"
    "</body></html>\n"
)
_SHARE = 10.0  # a render takes at most a tenth of the scheduler's time: the next waits 10x its cost
_HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
}


class LivePage:
    """The last rendered page and when to render the next (module docstring)."""

    def __init__(
        self,
        config: Config,
        log: Log,
        refresh: float = 5.0,
        idle: float = 60.0,
        kept: int = 100,
        samples: int = 360,
        estimates: Callable[[], Sequence[Any]] | None = None,
    ) -> None:
        self.config, self.log = config, log
        self.refresh, self.idle = refresh, idle
        self.estimates = estimates
        self.evictions: deque[Eviction] = deque(maxlen=kept)
        self.history: deque[tuple[float, dict[str, float]]] = deque(maxlen=samples)
        self.body = _WAITING.format(r=max(1, round(refresh))).encode()
        self.rendered = 0.0  # monotonic time of the last render (0: none yet)
        self.due = 0.0  # no render before this monotonic time
        self.asked = 0.0  # monotonic time of the last request
        self.renders = 0
        self.lock = threading.Lock()

    def after_cycle(self, cluster: Cluster, decisions: Decisions, now: float) -> None:
        """Keep the cycle's evictions; render when due. Never raises (a fault is logged)."""
        self.evictions.extendleft(decisions.evictions)
        mono = time.monotonic()
        if self.rendered and (mono < self.due or mono - self.asked > self.idle):
            return
        try:
            body = self.render(cluster, decisions, now).encode()
        except Exception as exc:  # noqa: BLE001 - the page never stops the scheduler
            self.log.error("dashboard render failed", error=f"{type(exc).__name__}: {exc}")
            return
        done = time.monotonic()
        with self.lock:
            self.body, self.rendered = body, done
            self.due = mono + max(self.refresh, _SHARE * (done - mono))
            self.renders += 1

    def render(self, cluster: Cluster, decisions: Decisions, now: float) -> str:
        copy = clone_cluster(cluster)
        rows, source = queue_rows(copy, self.config, now)
        self.history.append((now, {r.name: r.share for r in rows if r.share is not None}))
        shown = Decisions(unschedulable=list(decisions.unschedulable), evictions=list(self.evictions))
        estimates = self.estimates() if self.estimates is not None else None
        return render_page(
            copy,
            shown,
            rows,
            source,
            now,
            estimates,
            refresh=max(1, round(self.refresh)),
            history=list(self.history),
        )

    def page(self) -> bytes:
        with self.lock:
            self.asked = time.monotonic()
            return self.body


def serve_page(page: LivePage, host: str, port: int, log: Log | None = None) -> ThreadingHTTPServer:
    """Start the page's HTTP server thread on ``host:port`` (0: a free port, ``server_address``)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, code: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(code)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?", 1)[0]
            if path in ("/", "/index.html"):
                self._answer(200, page.page(), _HEADERS)
            else:
                self._answer(404, b"not found\n", {"Content-Type": "text/plain"})

        do_HEAD = do_GET  # noqa: N815

        def _refuse(self) -> None:
            self._answer(405, b"read-only\n", {"Content-Type": "text/plain", "Allow": "GET, HEAD"})

        do_POST = do_PUT = do_PATCH = do_DELETE = _refuse  # noqa: N815

    class Server(ThreadingHTTPServer):
        request_queue_size = 64

        def handle_error(self, request: Any, client_address: Any) -> None:
            import sys

            exc = sys.exc_info()[1]
            if log is not None and not isinstance(exc, (BrokenPipeError, ConnectionResetError)):
                log.warning("dashboard request failed", client=str(client_address[0]), error=repr(exc))

    server = Server((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True, name="corral-dashboard"
    ).start()
    return server
