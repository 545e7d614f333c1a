"""The wire protocol of the tests' API server (:class:`tests.kube.fakeapi.FakeAPI`): routing of paths to
resources, paged lists, chunked watch streams with bookmarks and 410s (at the start, and when an open
watch falls behind the history window: events are never skipped), single-object verbs, the binding
and eviction subresources, and the faults and delays the tests queue, answered before or after the
request is carried out."""

from __future__ import annotations

import bisect
import copy
import json
import socket
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from tests.kube.fakeapi import _NO_STATUS, _PATH, _STATUS_SUB, TYPES, merge_patch
from tests.kube.fakerules import Refused, strategic_patch
from tests.kube.fakerules import Reply as _Reply
from tests.kube.fakerules import status as _status
from tests.kube.fakeupdate import check_client_write

if TYPE_CHECKING:
    from tests.kube.fakeapi import FakeAPI

__all__ = ["Handler"]


class Handler(BaseHTTPRequestHandler):
    fake: FakeAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms delayed-ACK stalls

    after: _Reply | None = None

    def _send(self, code: int, body: Any, headers: dict | None = None) -> None:
        if self.after is not None and 200 <= code < 300:  # done, but the answer says otherwise
            code, body, headers = self.after.code, self.after.body, self.after.headers
        self.after = None
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise _Reply(400, _status(400, "BadRequest", "body is not JSON")) from None

    def _handle(self, method: str) -> None:
        fake = self.fake
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self._body() if method in ("POST", "PUT", "PATCH") else None
        try:
            delay, after = 0.0, None
            with fake.lock:
                fake.requests.append((method, url.path))
                fake.full_requests.append((method, self.path))
                fake.times.append((time.monotonic(), method, url.path))
                if method != "GET" and "/leases" not in url.path:
                    holders = [
                        (lease.get("spec") or {}).get("holderIdentity") or ""
                        for lease in fake.store["/apis/coordination.k8s.io/v1/leases"].values()
                    ]
                    fake.writes.append((self.headers.get("X-Corral-Replica", ""), holders, method, url.path))
                for d in fake.delays:
                    if d[3] > 0 and d[0] == method and d[1].search(self.path):
                        d[3] -= 1
                        delay = d[2]
                        fake.fired["latency"] = fake.fired.get("latency", 0) + 1
                        break
                for f in fake.faults:
                    if f[3] > 0 and f[0] == method and f[1].search(self.path):
                        f[3] -= 1
                        fired = f"{f[2]} after" if f[4] else str(f[2])
                        fake.fired[fired] = fake.fired.get(fired, 0) + 1
                        reply = _Reply(
                            f[2],
                            _status(f[2], "Injected", f"injected {f[2]}"),
                            {"Retry-After": "1"} if f[2] == 429 else None,
                        )
                        if not f[4]:
                            raise reply
                        after = reply
                        break
            if delay:
                time.sleep(delay)
            self.after = after
            m = _PATH.match(url.path)
            if not m:
                raise _Reply(
                    404, _status(404, "NotFound", "the server could not find the requested resource")
                )
            ns, name, sub = m["ns"] or "", m["name"], m["sub"]
            tpath = f"{m['base']}/{m['plural']}"
            if tpath not in TYPES or (
                fake.served is not None
                and m["base"].startswith("/apis/")
                and m["base"].split("/")[2] not in fake.served
            ):
                raise _Reply(
                    404, _status(404, "NotFound", "the server could not find the requested resource")
                )
            if name is None:
                self._collection(method, tpath, ns, query, body)
            else:
                self._item(method, tpath, ns, name, sub, body)
        except _Reply as r:
            self._send(r.code, r.body, r.headers)
        except Refused as r:
            body = _status(r.code, r.reason, r.message)
            if r.causes:
                body["details"] = {"causes": r.causes}
            self._send(r.code, body)

    def _collection(self, method: str, tpath: str, ns: str, query: dict, body: Any) -> None:
        fake = self.fake
        if method == "POST":
            with fake.lock:
                obj = fake._create(tpath, body or {}, ns)
                self._send(201, obj)
            return
        if method != "GET":
            raise _Reply(405, _status(405, "MethodNotAllowed", method))
        if query.get("watch") in ("true", "1"):
            self._watch(tpath, ns, query)
            return
        with fake.lock:
            items = sorted((k, o) for k, o in fake.store[tpath].items() if not ns or k[0] == ns)
            rv = str(fake.rv)
            if query.get("continue"):
                start, rv = query["continue"].split(":", 1)
                items = [(k, o) for k, o in items if f"{k[0]}/{k[1]}" > start]
            limit = int(query.get("limit") or 0)
            more = limit and len(items) > limit
            items = items[:limit] if limit else items
            out = []
            for _k, o in items:
                o = dict(o)
                o.pop("kind", None)
                o.pop("apiVersion", None)
                out.append(o)
            kind, api, _ = TYPES[tpath]
            meta: dict = {"resourceVersion": rv}
            if more:
                meta["continue"] = f"{items[-1][0][0]}/{items[-1][0][1]}:{rv}"
            payload = json.dumps({"kind": f"{kind}List", "apiVersion": api, "metadata": meta, "items": out})
        data = payload.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, obj: dict) -> None:
        data = json.dumps(obj).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _watch(self, tpath: str, ns: str, query: dict) -> None:
        fake = self.fake
        since = int(query.get("resourceVersion") or 0)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        kind, api, _ = TYPES[tpath]
        try:
            with fake.lock:
                gen = fake.generation
                if since and (since < fake.oldest - 1 or since < fake.trimmed[tpath]):
                    self._chunk(
                        {
                            "type": "ERROR",
                            "object": _status(410, "Expired", f"too old resource version: {since}"),
                        }
                    )
                    self.wfile.write(b"0\r\n\r\n")
                    return
            last_bookmark = time.monotonic()
            pos = since
            while time.monotonic() < deadline:
                with fake.lock:
                    if fake.generation != gen:
                        break  # dropped: end the stream with no terminator
                    if tpath in fake.held:
                        fake.lock.wait(0.05)
                        continue
                    if pos and pos < fake.trimmed[tpath]:
                        # fallen behind the window: kube-apiserver closes an unresponsive watcher and
                        # answers its re-watch from this version with 410; never a silent gap
                        fake.gone_mid_watch += 1
                        self._chunk(
                            {
                                "type": "ERROR",
                                "object": _status(410, "Expired", f"too old resource version: {pos}"),
                            }
                        )
                        self.wfile.write(b"0\r\n\r\n")
                        return
                    hist = fake.history[tpath]
                    start = bisect.bisect_right(hist, pos, key=lambda e: e[0])
                    batch = [
                        (rv, t, o)
                        for rv, t, o in hist[start:]
                        if not ns or o["metadata"].get("namespace") == ns
                    ]
                    current = fake.rv
                    if not batch:
                        fake.lock.wait(0.05)
                        if fake.generation != gen:
                            break
                for rv, etype, obj in batch:
                    self._chunk({"type": etype, "object": obj})
                    pos = rv
                if batch:
                    continue
                pos = max(pos, current)
                if bookmarks and time.monotonic() - last_bookmark >= fake.bookmark_interval:
                    self._chunk(
                        {
                            "type": "BOOKMARK",
                            "object": {
                                "kind": kind,
                                "apiVersion": api,
                                "metadata": {"resourceVersion": str(pos)},
                            },
                        }
                    )
                    last_bookmark = time.monotonic()
            else:
                self.wfile.write(b"0\r\n\r\n")
                return
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _item(self, method: str, tpath: str, ns: str, name: str, sub: str | None, body: Any) -> None:
        fake = self.fake
        kind, _, namespaced = TYPES[tpath]
        key = (ns if namespaced else "", name)
        with fake.lock:
            if sub == "binding" and method == "POST" and kind == "Pod":
                fake._bind(key, body)
                self._send(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})
                return
            if sub == "eviction" and method == "POST" and kind == "Pod":
                fake._evict(key)
                self._send(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})
                return
            if sub not in (None, "status") or (sub == "status" and tpath in _NO_STATUS):
                raise _Reply(404, _status(404, "NotFound", f"no subresource {sub}"))
            obj = fake.store[tpath].get(key)
            if obj is None:
                raise _Reply(404, _status(404, "NotFound", f'{kind.lower()}s "{name}" not found'))
            if method == "GET":
                self._send(200, obj)
                return
            if method == "DELETE":
                self._send(200, fake._delete(tpath, key))
                return
            if method not in ("PUT", "PATCH"):
                raise _Reply(405, _status(405, "MethodNotAllowed", method))
            want = ((body or {}).get("metadata") or {}).get("resourceVersion")
            if want and want != obj["metadata"]["resourceVersion"]:
                raise _Reply(
                    409,
                    _status(
                        409,
                        "Conflict",
                        f"Operation cannot be fulfilled on {kind.lower()}s "
                        f'"{name}": the object has been modified; please '
                        f"apply your changes to the latest version and try again",
                    ),
                )
            if method == "PUT":
                new = copy.deepcopy(body)
                new["metadata"] = {**obj["metadata"], **(body.get("metadata") or {})}
                new["kind"], new["apiVersion"] = obj["kind"], obj["apiVersion"]
            else:
                patch = copy.deepcopy(body or {})
                (patch.get("metadata") or {}).pop("resourceVersion", None)
                if sub == "status":
                    patch = {"status": patch.get("status")} if "status" in patch else {}
                elif tpath in _STATUS_SUB and "status" in patch:
                    patch.pop("status")  # CRDs with a status subresource ignore status here
                strategic = "strategic" in (self.headers.get("Content-Type") or "")
                new = strategic_patch(obj, patch) if strategic else merge_patch(obj, patch)
            check_client_write(kind, TYPES[tpath][1], obj, new, sub)
            self._send(200, fake._write(tpath, key, new))

    def do_GET(self) -> None:  # noqa: N802
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")
