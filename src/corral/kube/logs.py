"""Structured logs of ``corral run``: one JSON object per line (``ts``, ``level``, ``msg``, fields), or
``key=value`` text with ``--log-format text``.

:meth:`Log.once` logs a message the first time its key is seen (bad objects, skipped CRDs), so a
problem that persists is reported once, not every cycle.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Hashable
from typing import TextIO

__all__ = ["Log"]

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


class Log:
    def __init__(self, stream: TextIO | None = None, fmt: str = "json", level: str = "info") -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.fmt = fmt
        self.level = _LEVELS[level]
        self.lock = threading.RLock()  # re-entered, never deadlocked, by a signal handler that logs
        self.seen: dict[Hashable, str] = {}
        self.records: list[dict] = []  # the last lines, for tests and /healthz diagnostics
        self.keep = 2000

    def log(self, level: str, msg: str, **fields: object) -> None:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
        rec = {
            "ts": ts,
            "level": level,
            "msg": msg,
            **fields,
        }
        with self.lock:
            self.records.append(rec)
            if len(self.records) > self.keep:
                del self.records[: self.keep // 2]
            if _LEVELS[level] < self.level:
                return
            if self.fmt == "json":
                line = json.dumps(rec, default=str)
            else:
                line = " ".join([ts, level.upper(), msg] + [f"{k}={v}" for k, v in fields.items()])
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass

    def debug(self, msg: str, **fields: object) -> None:
        self.log("debug", msg, **fields)

    def info(self, msg: str, **fields: object) -> None:
        self.log("info", msg, **fields)

    def warning(self, msg: str, **fields: object) -> None:
        self.log("warning", msg, **fields)

    def error(self, msg: str, **fields: object) -> None:
        self.log("error", msg, **fields)

    def once(self, key: Hashable, level: str, msg: str, **fields: object) -> bool:
        """Log unless ``key`` was already logged with the same message; True when it was logged."""
        text = msg + json.dumps(fields, sort_keys=True, default=str)
        with self.lock:
            if self.seen.get(key) == text:
                return False
            self.seen[key] = text
        self.log(level, msg, **fields)
        return True

    def forget(self, key: Hashable) -> None:
        with self.lock:
            self.seen.pop(key, None)

    def matching(self, msg: str) -> list[dict]:
        with self.lock:
            return [r for r in self.records if r["msg"] == msg]
