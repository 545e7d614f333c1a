"""Expected starts written by ``corral run`` (src/corral/kube/expected.py) to the in-process API server:
the PodGroup annotations and the gauge, written only when the estimate moves past the threshold, removed
once the podgroup starts, none in a dry run, and a forecast cut short by its time budget."""

from __future__ import annotations

import re

import pytest

from corral.framework.config import parse_config
from corral.kube.expected import EXPECTED_BASIS, EXPECTED_START, LiveForecast
from corral.model.clock import format_time
from corral.registry import REGISTRY
from tests.kube.fakeapi import FakeAPI
from tests.kube.test_live import NOW, wait_for
from tests.scenarios.expand import T0, expand

HOUR = 3600.0
CONFIG = parse_config(
    {
        "actions": "enqueue, allocate",
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang"}]},
            {"plugins": [{"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}]},
        ],
    },
    REGISTRY,
    "test",
)
GAUGE = re.compile(
    r'^corral_expected_start_time_seconds\{namespace="default",podgroup="(\w+)",queue="default"\} (\S+)$',
    re.M,
)


def objects(runtime: str = "2h") -> list[dict]:
    return expand(
        {
            "nodes": [{"name": "n1"}],
            "jobs": [
                {
                    "name": "busy",
                    "annotations": {"corral.io/expected-runtime": runtime},
                    "pods": [{"count": 1, "gpu": 8, "nodes": ["n1"], "started": format_time(NOW - HOUR)}],
                },
                {"name": "next", "pods": [{"count": 1, "gpu": 8}]},
                {"name": "never", "pods": [{"count": 1, "gpu": 16}]},
            ],
        }
    )


def live(**settings) -> LiveForecast:
    """A forecast with a budget no loaded test machine exhausts: the estimates must not depend on speed."""
    return LiveForecast(**{"budget": 600.0, **settings})


def annotations(server: FakeAPI, name: str) -> dict:
    return (server.get("PodGroup", name, "default") or {})["metadata"].get("annotations") or {}


def gauge(runner) -> dict[str, float]:
    return {m[0]: float(m[1]) for m in GAUGE.findall(runner.metrics.render().decode())}


def patches(server: FakeAPI, name: str) -> int:
    return sum(1 for m, p, *_ in server.requests if m == "PATCH" and p.endswith(f"/podgroups/{name}"))


def test_annotations_and_gauge_follow_the_estimate(server: FakeAPI, runner_factory) -> None:
    server.add_all(objects())
    r = runner_factory(CONFIG, now=NOW, period=10.0, forecast=live(every=1, threshold=300))
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    ann = annotations(server, "next")
    assert ann[EXPECTED_START] == format_time(NOW + HOUR)  # busy started an hour ago, runs 2h
    assert ann[EXPECTED_BASIS] == "after default/busy finishes; on n1"
    never = annotations(server, "never")
    assert EXPECTED_START not in never and never[EXPECTED_BASIS].startswith("no estimate")
    assert gauge(r) == {"next": NOW + HOUR}  # no series for a podgroup without an estimate
    assert EXPECTED_START not in annotations(server, "busy")  # running: nothing written

    # the same estimate again: no write
    wrote = patches(server, "next")
    assert wait_for(lambda: r.cache.find("PodGroup", "default/next")[1]["metadata"]["annotations"])
    r.cycle(NOW + 10)
    assert patches(server, "next") == wrote

    # busy is expected to run an hour longer: past the threshold, written again
    server.update(
        "PodGroup", "busy", "default", {"metadata": {"annotations": {"corral.io/expected-runtime": "3h"}}}
    )
    assert wait_for(
        lambda: (
            r.cache.find("PodGroup", "default/busy")[1]["metadata"]["annotations"][
                "corral.io/expected-runtime"
            ]
            == "3h"
        )
    )
    r.cycle(NOW + 20)
    assert annotations(server, "next")[EXPECTED_START] == format_time(NOW + 2 * HOUR)
    assert gauge(r) == {"next": NOW + 2 * HOUR}

    # busy finishes, next starts: its annotations and its series go
    server.delete("Pod", "busy-0", "default")
    assert wait_for(lambda: r.cache.find("Pod", "default/busy-0") is None)
    r.cycle(NOW + 30)
    assert [p for p, _ in server.bindings] == ["default/next-0"]
    assert EXPECTED_START not in annotations(server, "next")
    assert EXPECTED_BASIS not in annotations(server, "next")
    assert gauge(r) == {}


def test_a_move_within_the_threshold_is_not_written(server: FakeAPI, runner_factory) -> None:
    server.add_all(objects())
    r = runner_factory(CONFIG, now=NOW, period=10.0, forecast=live(every=1, threshold=2 * HOUR))
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    server.update(
        "PodGroup", "busy", "default", {"metadata": {"annotations": {"corral.io/expected-runtime": "3h"}}}
    )
    assert wait_for(
        lambda: (
            r.cache.find("PodGroup", "default/busy")[1]["metadata"]["annotations"][
                "corral.io/expected-runtime"
            ]
            == "3h"
        )
    )
    r.cycle(NOW + 10)
    assert annotations(server, "next")[EXPECTED_START] == format_time(NOW + HOUR)  # moved 1h < 2h
    assert gauge(r) == {"next": NOW + 2 * HOUR}  # the gauge always shows the last forecast


def test_every_n_cycles_and_nothing_written_in_a_dry_run(server: FakeAPI, runner_factory) -> None:
    server.add_all(objects())
    r = runner_factory(CONFIG, now=NOW, dry_run=True, forecast=live(every=2))
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    assert gauge(r) == {}  # cycle 1: not due
    r.cycle(NOW + 1)
    assert gauge(r) == {"next": NOW + HOUR}
    assert not any(m == "PATCH" for m, *_ in server.requests)


def test_the_time_budget_stops_the_forecast(server: FakeAPI, runner_factory) -> None:
    server.add_all(objects())
    r = runner_factory(CONFIG, now=NOW, period=10.0, forecast=LiveForecast(every=1, budget=1e-9))
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    basis = annotations(server, "next")[EXPECTED_BASIS]
    assert basis.startswith("no estimate: the forecast's time budget of 1e-09 s ran out")
    assert EXPECTED_START not in annotations(server, "next") and gauge(r) == {}


@pytest.mark.parametrize("every", [0])
def test_off_means_no_gauge_and_no_write(server: FakeAPI, runner_factory, every: int) -> None:
    server.add_all(objects())
    r = runner_factory(CONFIG, now=NOW, forecast=live(every=every))
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    assert r.expected is None and "corral_expected_start_time_seconds" not in r.metrics.render().decode()
    assert EXPECTED_BASIS not in annotations(server, "next")


def test_a_new_replica_removes_what_an_earlier_one_left_on_a_started_podgroup(
    server: FakeAPI, runner_factory
) -> None:
    docs = objects()
    for d in docs:
        if d["kind"] == "PodGroup" and d["metadata"]["name"] == "busy":
            d["metadata"]["annotations"].update({EXPECTED_START: T0, EXPECTED_BASIS: "fits now; on n1"})
    server.add_all(docs)
    r = runner_factory(CONFIG, now=NOW, forecast=live(every=1))
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    left = annotations(server, "busy")
    assert EXPECTED_START not in left and EXPECTED_BASIS not in left
    assert left["corral.io/expected-runtime"] == "2h"  # only corral's own keys are removed


def test_no_write_once_leadership_is_lost(server: FakeAPI, runner_factory) -> None:
    server.add_all(objects())
    r = runner_factory(CONFIG, now=NOW, forecast=live(every=2))
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)  # the cycle's own writes while leader; no forecast yet
    # the lease is lost after the apply phase and before the forecast's writes (not earlier: the apply
    # phase may have an event or a condition to write again, and would then stop the cycle)
    applied = []
    apply = r.applier.apply

    def apply_then_lose_the_lease(*args, **kwargs):
        report = apply(*args, **kwargs)
        applied.append(True)
        return report

    r.applier.apply = apply_then_lose_the_lease
    r.applier.api.may_write = lambda: not applied
    r.cycle(NOW + 1)  # the forecast runs (gauge set) and stops at its first write, without raising
    assert applied
    assert gauge(r) == {"next": NOW + HOUR}
    assert EXPECTED_BASIS not in annotations(server, "next")
    assert any(rec["msg"] == "leadership lost: expected starts not written" for rec in r.log.records)
