"""A watch that falls behind never leaves the watch cache stale: the repeated podgroup updates of one
loaded ``bench_live.py`` run.

Under load, the in-process API server's watch of PodGroups fell more than its history window behind the
first cycle's burst of podgroup writes; it went on from the events left in the window and skipped the
others silently, where kube-apiserver closes an unresponsive watcher and answers its re-watch from a
version older than its window with 410 (``cacher/cache_watcher.go``). The skipped writes' assumptions
were never confirmed, ran out after their 60 s, and left the cache holding those PodGroups as they were
before the writes (``Inqueue``) while their pods were bound: every later cycle made them ``Running``
again at the session's close, and each write met a 409 and a read back that found nothing to write.
Here the watch is held deterministically while the first cycle writes more podgroups than the window
keeps.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

from corral.kube.api import POD
from corral.kube.cache import WatchCache
from corral.kube.logs import Log
from corral.model.clock import parse_time
from tests.kube.conftest import make_runner
from tests.kube.fakeapi import FakeAPI
from tests.scenarios.expand import T0, expand

NOW = parse_time(T0)
GANGS = 30  # placed in the first cycle: 30 podgroup writes, beyond the window of 20 events


def _objects() -> list[dict]:
    return expand(
        {
            "nodes": [{"name": f"n{i}", "gpu": 8} for i in range(8)],
            "jobs": [{"name": f"g{k:02d}", "pods": [{"count": 2, "gpu": 1}]} for k in range(GANGS)],
        }
    )


def _podgroups_as_served(srv: FakeAPI, cache: WatchCache) -> list[str]:
    """The PodGroups whose phase the cache (assumptions applied) holds otherwise than the server."""
    wrong = []
    for obj in srv.objects("PodGroup"):
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        found = cache.find("PodGroup", key)
        cached = None if found is None else (found[1].get("status") or {}).get("phase")
        if cached != (obj.get("status") or {}).get("phase"):
            wrong.append(f"{key}: cache {cached}, server {obj['status'].get('phase')}")
    return wrong


def _settled(cache: WatchCache, timeout: float = 10.0) -> bool:
    """Every assumption of the scheduler's writes confirmed by the watch (within ``timeout``)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with cache.lock:
            if not cache.assumed:
                return True
        time.sleep(0.05)
    return False


def test_a_steady_cycle_after_a_watch_fell_behind_decides_no_podgroup_update() -> None:
    srv = FakeAPI(history_limit=20).start()
    runner = make_runner(srv, now=NOW)
    try:
        srv.add_all(_objects())
        runner.start()
        assert runner.cache.wait_synced(5)
        srv.hold_watches("PodGroup")  # the watch falls behind the first cycle's podgroup writes
        first = runner.cycle(NOW)
        assert first is not None and len(first.decisions.podgroups) == GANGS
        srv.release_watches()
        settled = _settled(runner.cache)
        # the assumptions' 60 s run out (those the watch confirmed are gone already)
        with runner.cache.lock:
            for a in runner.cache.assumed.values():
                a.deadline = 0.0
        assert settled, "writes never confirmed by the watch: events skipped"
        assert runner.cache.find("PodGroup", "default/g00") is not None
        assert not _podgroups_as_served(srv, runner.cache)
        runner.cycle(NOW + 1)  # the cycle after the binds (their jobs rebuilt)
        for k in range(3):
            steady = runner.cycle(NOW + 2 + k)
            assert steady is not None
            assert steady.decisions.podgroups == [], steady.decisions.podgroups[:2]
            assert runner.cache.model.last == "unchanged"
    finally:
        runner.stop()
        srv.stop()


def test_a_podgroup_found_already_written_on_a_read_back_is_not_decided_again() -> None:
    """A watch that lags past the assumptions' 60 s (no event lost, none delivered yet): the cache holds
    the placed gangs' PodGroups as before the first cycle's writes, so the next cycle makes them Running
    again; each write meets a 409 and a read back that finds them Running. That read is assumed like a
    write, so the cycle after it decides nothing while the watch still lags."""
    srv = FakeAPI().start()
    runner = make_runner(srv, now=NOW)
    try:
        srv.add_all(_objects())
        runner.start()
        assert runner.cache.wait_synced(5)
        srv.hold_watches("PodGroup")
        assert len(runner.cycle(NOW).decisions.podgroups) == GANGS
        with runner.cache.lock:  # the assumptions' 60 s run out before the watch delivers their echo
            for a in runner.cache.assumed.values():
                if a.patch is not None and "status" in a.patch:
                    a.deadline = 0.0
        again = runner.cycle(NOW + 1)
        assert len(again.decisions.podgroups) == GANGS  # the cache is behind: decided again ...
        why = _bench_live()._why_podgroups(runner, again)  # what bench_live prints for such a cycle
        assert "first default/g00: status.phase: watched 'Inqueue' -> 'Running' (server 'Running')" in why, (
            why
        )
        assert not again.report.get("podgroups", "done")  # ... found written on the read back
        conflicts = sum(1 for m, p in srv.requests if m == "PATCH" and "/podgroups/" in p)
        assert runner.cycle(NOW + 2).decisions.podgroups == []
        assert sum(1 for m, p in srv.requests if m == "PATCH" and "/podgroups/" in p) == conflicts
        srv.release_watches()
        assert _settled(runner.cache)
        assert not _podgroups_as_served(srv, runner.cache)
        assert runner.cycle(NOW + 3).decisions.podgroups == []
    finally:
        runner.stop()
        srv.stop()


def _bench_live() -> ModuleType:
    """``benchmarks/bench_live.py`` as a module (its guard explains a steady cycle's podgroup updates)."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_live.py"
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location("bench_live", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def _pod(node: str | None) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "default", "resourceVersion": "7"},
        "spec": {"schedulerName": "corral", "containers": [], **({"nodeName": node} if node else {})},
    }


def test_a_write_whose_echo_came_before_its_answer_is_not_assumed() -> None:
    """The watch may deliver a bind's echo before the bind's answer comes back; the assumption made then
    would never be confirmed and would overlay the pod for its 60 s, over later versions of it."""
    cache = WatchCache(None, Log())
    cache.replace(POD, [_pod("n1")])  # the echo first
    cache.assume("Pod", "default/p", {"spec": {"nodeName": "n1"}}, {"spec": {"nodeName": "n1"}})
    assert not cache.assumed
    cache.assume("Pod", "default/p", {"spec": {"nodeName": "n2"}}, {"spec": {"nodeName": "n2"}})
    assert list(cache.assumed) == [("Pod", "default/p")]  # not shown yet: overlaid until the watch does
    cache.event(POD, "MODIFIED", _pod("n2"))
    assert not cache.assumed
    cache.assume("Pod", "default/p", {"spec": {"nodeName": "n2"}}, None)  # a dry run's: never confirmed
    cache.assume("Pod", "default/p", {"spec": {"nodeName": "n2"}}, {"spec": {"nodeName": "n2"}})
    assert list(cache.assumed) == [("Pod", "default/p")]
