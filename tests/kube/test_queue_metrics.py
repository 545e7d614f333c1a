"""Per-queue metrics of ``corral run`` (src/corral/kube/queuemetrics.py): a cycle against the in-process API
server, its ``/metrics`` scraped over HTTP and read with Prometheus' own parser; every value checked
against what the objects hold, worked out by hand."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from corral.framework.config import parse_config
from corral.kube.metrics import serve
from corral.registry import REGISTRY
from tests.kube.test_live import NOW, PREEMPT, preempt_objects, wait_for
from tests.scenarios.expand import expand

CAPACITY = parse_config(
    {
        "actions": "enqueue, allocate, backfill",
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
            {"plugins": [{"name": "predicates"}, {"name": "capacity"}, {"name": "nodeorder"}]},
        ],
    },
    REGISTRY,
    "test",
)
GIB = 1024**3


def queue_objects() -> list[dict]:
    pod = {"cpu": 2, "memory": "1Gi"}
    return expand(
        {
            "nodes": [{"name": "n1"}, {"name": "n2"}],
            "queues": [
                {"name": "eng", "deserved": {"nvidia.com/gpu": 12}},
                {"name": "research", "deserved": {"nvidia.com/gpu": 4}, "capability": {"nvidia.com/gpu": 8}},
            ],
            "jobs": [
                {
                    "name": "serve",
                    "queue": "eng",
                    "phase": "Running",
                    "pods": [{"count": 2, "gpu": 4, **pod, "nodes": ["n1", "n1"]}],
                },
                {"name": "big", "queue": "eng", "pods": [{"count": 4, "gpu": 8, **pod}]},
                {
                    "name": "small",
                    "queue": "research",
                    "created": "2025-12-31T23:59:00Z",  # 60 s before the cycle
                    "pods": [{"count": 1, "gpu": 4, **pod}],
                },
            ],
        }
    )


def scrape(runner) -> dict[tuple[str, frozenset], float]:
    """Every sample of the runner's /metrics, read over HTTP: (name, labels) -> value."""
    server = serve(runner.metrics, 0, runner.health, host="127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/metrics", timeout=5) as got:
            text = got.read().decode()
    finally:
        server.shutdown()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def value(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def gpu(queue: str) -> dict[str, str]:
    return {"queue_name": queue, "resource": "nvidia.com/gpu", "unit": "integer"}


def test_a_cycle_exports_each_queues_numbers(server, runner_factory) -> None:
    server.add_all(queue_objects())
    r = runner_factory(CAPACITY, now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert res is not None
    assert [b.pod for b in res.decisions.binds] == ["default/small-0"]
    assert [u.podgroup for u in res.decisions.unschedulable] == ["default/big"]
    m = scrape(r)
    # held at session open: serve's two pods (4 GPUs, 2 cores, 1 GiB each)
    assert value(m, "corral_queue_allocated", **gpu("eng")) == 8
    cpu = {"queue_name": "eng", "resource": "cpu", "unit": "core"}
    assert value(m, "corral_queue_allocated", **cpu) == 4
    mem = {"queue_name": "eng", "resource": "memory", "unit": "byte"}
    assert value(m, "corral_queue_allocated", **mem) == 2 * GIB
    assert value(m, "corral_queue_allocated", **gpu("research")) == 0
    assert not any(n == "corral_queue_allocated" and ("resource", "pods") in ls for n, ls in m)
    # deserved as the capacity plugin reads spec.deserved; share = held / deserved
    assert value(m, "corral_queue_deserved", **gpu("eng")) == 12
    assert value(m, "corral_queue_deserved", **gpu("research")) == 4
    assert value(m, "corral_queue_share", queue_name="eng") == pytest.approx(8 / 12)
    assert value(m, "corral_queue_share", queue_name="research") == 0
    assert value(m, "corral_queue_overused", queue_name="eng") == 0
    # waiting pods' requests: big's 4 x 8 GPUs, small's 4
    assert value(m, "corral_queue_pending_requests", **gpu("eng")) == 32
    assert value(m, "corral_queue_pending_requests", **{**cpu, "queue_name": "research"}) == 2
    assert value(m, "corral_queue_capability", **gpu("research")) == 8
    assert value(m, "corral_queue_capability", **gpu("eng")) is None  # unlimited: no series
    assert value(m, "corral_queue_weight", queue_name="eng") == 1
    assert value(m, "corral_queue_podgroups", queue_name="eng", state="running") == 1
    assert value(m, "corral_queue_podgroups", queue_name="eng", state="waiting") == 1
    assert value(m, "corral_queue_podgroups", queue_name="research", state="waiting") == 1
    # the cycle's outcome: big could not start (4 pods waiting), small was bound
    assert value(m, "corral_queue_unschedulable_podgroups", queue_name="eng") == 1
    assert value(m, "corral_queue_unschedulable_pods", queue_name="eng") == 4
    assert value(m, "corral_queue_unschedulable_podgroups", queue_name="research") == 0
    assert value(m, "corral_binds_total", queue_name="research", result="done") == 1
    assert value(m, "corral_binds_total", queue_name="eng", result="done") is None
    latency = {"queue_name": "research"}
    assert value(m, "corral_pod_scheduling_duration_seconds_count", **latency) == 1
    assert 60 <= value(m, "corral_pod_scheduling_duration_seconds_sum", **latency) < 90
    assert value(m, "corral_pod_scheduling_duration_seconds_bucket", **latency, le="30.0") == 0
    assert value(m, "corral_pod_scheduling_duration_seconds_bucket", **latency, le="120.0") == 1
    # a deleted queue leaves every series with the next cycle
    server.delete("Queue", "research")
    assert wait_for(lambda: r.cache.find("Queue", "research") is None)
    r.cycle(NOW + 1)
    m = scrape(r)
    assert value(m, "corral_queue_weight", queue_name="research") is None
    assert not any(("queue_name", "research") in ls for n, ls in m if n.startswith("corral_queue_"))
    assert value(m, "corral_queue_weight", queue_name="eng") == 1


def test_evictions_by_queue_and_action(server, runner_factory) -> None:
    """The evictions of a preempting cycle, counted by the victim's queue and the action that chose it."""
    server.add_all(preempt_objects())
    r = runner_factory(PREEMPT, now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert res is not None and res.decisions.evictions
    m = scrape(r)
    assert {e.action for e in res.decisions.evictions} == {"preempt"}
    done = value(m, "corral_evictions_total", queue_name="default", action="preempt", result="done")
    assert done == len(res.decisions.evictions)


def test_proportions_overused_queue(server, runner_factory) -> None:
    """proportion: two queues of equal weight asking 16 and 8 GPUs of 16 deserve 8 each; the one holding
    16 is overused (every resource it deserves is held, Volcano's ``deserved.LessEqual(allocated)``),
    share 2."""
    server.add_all(
        expand(
            {
                "nodes": [{"name": "n1"}, {"name": "n2"}],
                "queues": [{"name": "a", "weight": 1}, {"name": "b", "weight": 1}],
                "jobs": [
                    {
                        "name": "hog",
                        "queue": "a",
                        "phase": "Running",
                        "pods": [{"count": 4, "gpu": 4, "nodes": ["n1", "n1", "n2", "n2"]}],
                    },
                    {"name": "want", "queue": "b", "pods": [{"count": 1, "gpu": 8}]},
                ],
            }
        )
    )
    r = runner_factory(PREEMPT, now=NOW, dry_run=True)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    m = scrape(r)
    assert value(m, "corral_queue_deserved", **gpu("a")) == 8 == value(m, "corral_queue_deserved", **gpu("b"))
    assert value(m, "corral_queue_overused", queue_name="a") == 1
    assert value(m, "corral_queue_overused", queue_name="b") == 0
    assert value(m, "corral_queue_share", queue_name="a") == 2


def test_a_dry_run_writes_and_counts_nothing(server, runner_factory) -> None:
    server.add_all(queue_objects())
    r = runner_factory(CAPACITY, now=NOW, dry_run=True)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    m = scrape(r)
    assert value(m, "corral_queue_allocated", **gpu("eng")) == 8  # the gauges are there
    assert not any(n == "corral_binds_total" for n, _ in m)


def test_the_queue_gauges_are_recomputed_once_per_interval(server, runner_factory) -> None:
    """``--queue-metrics-interval``: within it, a cycle keeps the last rows (a queue deleted meanwhile
    keeps its series); the unschedulable counts are the cycle's own."""
    server.add_all(queue_objects())
    r = runner_factory(CAPACITY, now=NOW, queue_metrics_interval=3600.0)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)
    server.delete("Queue", "research")
    assert wait_for(lambda: r.cache.find("Queue", "research") is None)
    computed = r.queue_rows_at
    assert r.cycle(NOW + 1) is not None
    assert r.queue_rows_at == computed
    m = scrape(r)
    assert value(m, "corral_queue_weight", queue_name="research") == 1  # not recomputed yet
    r.queue_rows_at -= 3600.0
    r.cycle(NOW + 2)
    assert value(scrape(r), "corral_queue_weight", queue_name="research") is None


def test_the_interval_option(server) -> None:
    """``--queue-metrics-interval`` reaches the runner (default 10 s); a negative value is refused."""
    from typer.testing import CliRunner

    from corral.cli import app
    from corral.commands.run import RunFlags, _make_runner

    flags = {"dry_run": True, "cycles": 1, "server": server.url}
    assert _make_runner(RunFlags(**flags)).opts.queue_metrics_interval == 10.0
    assert _make_runner(RunFlags(**flags, queue_metrics_interval=2.5)).opts.queue_metrics_interval == 2.5
    res = CliRunner().invoke(app, ["run", "--server", server.url, "--queue-metrics-interval", "-1"])
    assert res.exit_code == 2 and "--queue-metrics-interval" in res.output
