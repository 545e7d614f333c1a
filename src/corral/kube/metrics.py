"""``/metrics`` (Prometheus text format, the ``prometheus-client`` library) and ``/healthz`` of
``corral run``, on one small HTTP server thread.

Metrics (all prefixed ``corral_``): ``cycle_seconds`` (histogram, the whole cycle) and
``cycle_phase_seconds{phase}`` (snapshot, build, schedule, apply), ``decisions_total{kind}`` (binds,
evictions, nominations, podgroups, node_locks, unschedulable), ``applied_total{kind,outcome}``,
``pending_pods``, ``api_errors_total{verb,resource,code}``, ``cache_objects{resource}``,
``bad_objects``, ``watch_restarts_total{resource,reason}``, ``leader``, ``model_builds_total{kind}``;
and the per-queue gauges and the outcome counters of :mod:`corral.kube.queuemetrics`.

``/healthz`` (readiness) answers 200 while the cache is synced and the last cycle finished recently (or
the replica is a standby), 503 otherwise, with a one-line reason; ``/livez`` (liveness) answers 200 while
the process is working, including while it waits for the first sync within its timeout. A scraper that
disconnects mid-answer, or any other fault of one request, is one log line (never a traceback on the
one-JSON-object-per-line log).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from corral.kube.queuemetrics import QueueCollector, QueueOutcomes

__all__ = ["Metrics", "serve"]

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.cycle = Histogram(
            "corral_cycle_seconds", "Duration of a scheduling cycle", registry=r, buckets=_BUCKETS
        )
        self.phase = Histogram(
            "corral_cycle_phase_seconds",
            "Duration of a cycle's phases",
            ["phase"],
            registry=r,
            buckets=_BUCKETS,
        )
        self.decisions = Counter("corral_decisions_total", "Decisions taken, by kind", ["kind"], registry=r)
        self.applied = Counter(
            "corral_applied_total",
            "Decisions written to the API server, by outcome",
            ["kind", "outcome"],
            registry=r,
        )
        self.pending = Gauge(
            "corral_pending_pods", "Pods of served schedulers waiting for a node", registry=r
        )
        self.api_errors = Counter(
            "corral_api_errors_total", "Failed API requests", ["verb", "resource", "code"], registry=r
        )
        self.objects = Gauge("corral_cache_objects", "Objects in the watch cache", ["resource"], registry=r)
        self.bad = Gauge(
            "corral_bad_objects", "Objects left out because the model cannot read them", registry=r
        )
        self.restarts = Counter(
            "corral_watch_restarts_total", "Watches re-opened or relisted", ["resource", "reason"], registry=r
        )
        self.leader = Gauge("corral_leader", "1 while this replica holds the lease", registry=r)
        self.builds = Counter(
            "corral_model_builds_total",
            "Models built for a cycle: full (every object "
            "assembled), incremental (changed jobs rebuilt), unchanged",
            ["kind"],
            registry=r,
        )
        self.queues = QueueCollector()
        r.register(self.queues)
        self.outcomes = QueueOutcomes(r)
        self.last_cycle = 0.0

    def render(self) -> bytes:
        return generate_latest(self.registry)


def serve(
    metrics: Metrics,
    port: int,
    health: Callable[[], tuple[bool, str]],
    host: str = "0.0.0.0",
    live: Callable[[], tuple[bool, str]] | None = None,
    log: Any = None,
) -> ThreadingHTTPServer:
    """Start the HTTP server thread on ``host:port``; ``port`` 0 picks a free port
    (``server.server_address``). ``log`` (a :class:`~corral.kube.logs.Log`) gets one line per failed
    request."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            if self.path.startswith("/metrics"):
                body, code, ctype = metrics.render(), 200, CONTENT_TYPE_LATEST
            elif self.path.startswith(("/healthz", "/readyz")) or (
                self.path.startswith("/livez") and live is not None
            ):
                ok, why = (live if self.path.startswith("/livez") and live is not None else health)()
                body, code, ctype = (why + "\n").encode(), 200 if ok else 503, "text/plain"
            else:
                body, code, ctype = b"not found\n", 404, "text/plain"
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        request_queue_size = 64

        def handle_error(self, request: Any, client_address: Any) -> None:
            exc = sys.exc_info()[1]
            if log is not None and not isinstance(exc, (BrokenPipeError, ConnectionResetError)):
                log.warning("metrics request failed", client=str(client_address[0]), error=repr(exc))

    server = Server((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True, name="corral-metrics"
    ).start()
    return server
