"""Bookkeeping kept by events, not recounted each cycle (issue "cycles that cost what changed"): the node
columns after a congested simulation equal a full recount, every waiting job has a reason in the
result, and kept job order keys equal freshly computed ones."""

from __future__ import annotations

import numpy as np

from corral.framework.session import Session
from corral.registry import REGISTRY, default_config
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.engine import Engine, SimOptions
from corral.sim.synthetic import synthetic


def _engine(until: float) -> Engine:
    jobs = synthetic(
        7, n_jobs=260, arrival_rate=1 / 15, queues={"a": 2, "b": 1}, gang_sizes={1: 8, 2: 4, 4: 2}
    )
    cluster = from_spec(ClusterSpec((NodeShape("n", 4, gpus=8),), tiers=(2,))).instantiate(["a", "b"])
    eng = Engine(
        cluster, jobs, default_config(), options=SimOptions(startup_delay=20, eviction_grace=5, until=until)
    )
    eng.run()
    return eng


def test_node_columns_follow_the_changed_pods_exactly():
    eng = _engine(4 * 3600)
    nodes = eng.cluster.nodes
    kept = [nodes.used.copy(), nodes.releasing.copy(), nodes.pipelined.copy()]
    eng.cluster.account()
    assert len(eng._waiting) > 5  # congested: the test means something
    for got, want in zip(kept, [nodes.used, nodes.releasing, nodes.pipelined]):
        assert np.array_equal(got, want)


def test_every_waiting_job_has_a_reason_in_the_result():
    eng = _engine(3 * 3600)
    reasons = eng.result().meta["pending_reasons"]
    names = {eng._active[u].spec.name for u in eng._waiting}
    assert names and names <= set(reasons)
    assert all(reasons[n] for n in names)


def test_kept_order_keys_equal_fresh_ones():
    eng = _engine(2 * 3600)
    cluster = eng.cluster
    session = Session(cluster, eng.config, REGISTRY, eng.now, 999, explain=False)
    kept = session.job_sort_key()
    jobs = list(cluster.jobs.values())
    first = [kept(j) for j in jobs]
    cluster.__dict__.pop("_order_keys", None)  # nothing kept: every key computed afresh
    fresh = [
        Session(cluster, eng.config, REGISTRY, eng.now, 1000, explain=False).job_sort_key()(j) for j in jobs
    ]
    assert first == fresh and len(first) > 5


def test_a_podgroup_the_budget_refuses_gets_enqueues_reason_at_the_end():
    """A podgroup left out as hopeless (never tried, so no cycle gave a reason) is explained when the
    result is written, with enqueue's own wording and the budget of the end state."""
    eng = _engine(3 * 3600)
    reasons = eng.result().meta["pending_reasons"]
    pending = [eng._active[u].spec.name for u in eng._waiting if eng._active[u].job.phase.value == "Pending"]
    assert pending, "the workload should leave podgroups not admitted"
    texts = [reasons[n] for n in pending]
    assert any(
        t.startswith("not admitted: minResources need ") and "overcommit-factor 1.2" in t for t in texts
    )


def test_a_job_running_again_after_a_restart_has_no_pending_reason(monkeypatch):
    """A gang restarted by a node failure waits again (and is given a reason), then runs: the result no
    longer lists it among the pending reasons (its per-job record keeps the reason it last waited for)."""
    from corral.framework.memo import ClusterHistory

    jobs = synthetic(
        11, n_jobs=220, arrival_rate=1 / 12, queues={"a": 2, "b": 1}, gang_sizes={1: 8, 2: 4, 4: 2}
    )
    cluster = from_spec(ClusterSpec((NodeShape("n", 4, gpus=8),), tiers=(2,))).instantiate(["a", "b"])
    eng = Engine(
        cluster,
        jobs,
        default_config(),
        options=SimOptions(checkpoint_interval=600, until=5 * 3600, eviction_grace=30.0),
        history=ClusterHistory(tracked=True, skip=False),  # every waiting job is given a reason each cycle
    )
    eng.node_down(3600.0, cluster.nodes.names[1], duration=1800.0)
    result = eng.run()
    again = [r for r in result.jobs if r.restarts and r.status in ("running", "completed") and r.reason]
    assert again, "the workload should restart a job that waits with a reason and runs again"
    assert not {r.job for r in again} & set(result.meta["pending_reasons"])
