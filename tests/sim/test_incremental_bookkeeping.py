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
    jobs = synthetic(7, n_jobs=260, arrival_rate=1 / 15, queues={"a": 2, "b": 1}, gang_sizes={1: 8, 2: 4, 4: 2})
    cluster = from_spec(ClusterSpec((NodeShape("n", 4, gpus=8),), tiers=(2,))).instantiate(["a", "b"])
    eng = Engine(cluster, jobs, default_config(), options=SimOptions(startup_delay=20, eviction_grace=5,
                                                                        until=until))
    eng.run()
    return eng


def test_node_columns_follow_the_changed_pods_exactly():
    eng = _engine(4 * 3600)
    nodes = eng.cluster.nodes
    kept = [nodes.used.copy(), nodes.releasing.copy(), nodes.pipelined.copy()]
    eng.cluster.account()
    assert len(eng._waiting) > 5                      # congested: the test means something
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
    cluster.__dict__.pop("_order_keys", None)         # nothing kept: every key computed afresh
    fresh = [Session(cluster, eng.config, REGISTRY, eng.now, 1000, explain=False).job_sort_key()(j) for j in jobs]
    assert first == fresh and len(first) > 5
