"""Tests of corral.sim.engine and corral.sim.clusters: hand-computed timelines, the job model (gangs,
restarts, checkpoints, elastic surplus, node failures), never-fit and bad-input handling, determinism,
invariants under random workloads, and a week of the Philly trace end to end."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.errors import InputError
from corral.framework.config import parse_config
from corral.model import TaskStatus
from corral.registry import DEFAULT_CONFIG, REGISTRY, default_config
from corral.sim.clusters import ClusterSpec, NodeShape, QueueSpec, from_spec, load_cluster
from corral.sim.engine import Engine, SimOptions, simulate, water_fill
from corral.sim.jobspec import GPU, JobSpec, RoleSpec
from corral.sim.report import write_report
from corral.sim.synthetic import synthetic

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared"
PHILLY = SHARED / "traces" / "philly" / "philly.csv"


def job(
    name: str,
    submit: float,
    duration: float,
    gpus: float,
    pods: int = 1,
    queue: str = "default",
    min_member: int | None = None,
    priority: int = 0,
    topology=None,
) -> JobSpec:
    role = RoleSpec("", pods, {GPU: gpus, "cpu": 1.0, "memory": 2.0**30})
    return JobSpec(
        name,
        submit,
        duration,
        queue,
        (role,),
        priority=priority,
        min_member=min_member,
        topology=topology,
        source=f"test.csv row {name}",
    )


def engine(jobs, nodes: int = 2, gpus: int = 8, *, queues=None, tiers=(), config=None, **options) -> Engine:
    spec = ClusterSpec((NodeShape("n", nodes, gpus=gpus),), tiers=tiers, queues=queues)
    cluster = from_spec(spec).instantiate(j.queue for j in jobs)
    return Engine(cluster, jobs, config or default_config(), options=SimOptions(**options))


def by_name(result):
    return {r.job: r for r in result.jobs}


# ------------------------------------------------------------------------------------ timelines


def test_fifo_on_two_nodes():
    # a and b fill both nodes at 0; c (t=5) and d (t=6) wait; a ends at 100 and c, the older, takes
    # its node at once (the cycle at 100 sees the completion); d follows when c ends at 150.
    jobs = [job("a", 0, 100, 8), job("b", 0, 200, 8), job("c", 5, 50, 8), job("d", 6, 50, 8)]
    result = engine(jobs).run()
    r = by_name(result)
    assert [(r[n].first_start, r[n].end) for n in "abcd"] == [(0, 100), (0, 200), (100, 150), (150, 200)]
    assert r["c"].wait == 95 and r["c"].jct == 145 and r["d"].wait == 144
    assert all(x.status == "completed" and x.restarts == 0 for x in result.jobs)
    assert result.meta["end_time"] == 200
    util = [(s.time, s.utilisation) for s in result.cluster]
    assert util[0] == (0, 1.0) and util[-1] == (200, 0.0)


def test_submission_waits_for_the_next_cycle_boundary():
    result = engine([job("a", 3, 10, 1), job("b", 10, 10, 1)], schedule_period=10).run()
    r = by_name(result)
    assert (r["a"].first_start, r["a"].end, r["b"].first_start) == (10, 20, 10)


def test_gang_waits_for_whole_nodes():
    # g needs both nodes whole; the 4-GPU job a holds half of one until 100, so g starts at 100, never
    # with one pod alone.
    jobs = [job("a", 0, 100, 4), job("g", 1, 50, 8, pods=2)]
    eng = engine(jobs)
    while eng.step():
        gang = eng.cluster.jobs.get("default/g")
        if gang is not None:
            running = gang.count(TaskStatus.RUNNING, TaskStatus.BOUND)
            assert running in (0, 2)
    r = by_name(eng.run())
    assert (r["g"].first_start, r["g"].end, r["g"].wait) == (100, 150, 99)


def test_startup_delay_counts_before_progress():
    r = by_name(engine([job("a", 0, 100, 8)], startup_delay=30).run())
    assert (r["a"].first_start, r["a"].end) == (30, 130)


def test_injected_eviction_restarts_a_gang_and_loses_its_work():
    eng = engine([job("g", 0, 100, 8, pods=2)])
    eng.evict(50, ["default/g-0"])
    r = by_name(eng.run())["g"]
    # the evicted pod comes straight back (no grace) and is bound by the cycle at 50: 100 more seconds
    assert (r.first_start, r.end, r.restarts, r.evictions) == (0, 150, 1, 1)
    assert r.gpu_hours_lost == pytest.approx(50 * 16 / 3600)


def test_cluster_samples_count_evictions_and_restarts_when_they_happen():
    eng = engine([job("g", 0, 100, 8, pods=2)], checkpoint_interval=50)
    eng.evict(75, ["g"])
    samples = eng.run().cluster
    before = [s for s in samples if s.time < 75]
    after = [s for s in samples if s.time >= 75]
    assert before and all((s.evictions, s.restarts) == (0, 0) for s in before)
    assert after[0].time == 75 and (after[0].evictions, after[0].restarts) == (2, 1)
    assert (samples[-1].evictions, samples[-1].restarts) == (2, 1)


def test_eviction_grace_holds_the_node():
    eng = engine([job("g", 0, 100, 8, pods=2)], eviction_grace=25)
    eng.evict(50, ["g-0"])
    r = by_name(eng.run())["g"]
    assert (r.end, r.restarts) == (80 + 100, 1)  # released at 75, bound by the cycle at 80


def test_checkpoint_saves_half_the_work():
    eng = engine([job("g", 0, 100, 8, pods=2)], checkpoint_interval=50)
    eng.evict(75, ["g"])  # a job name evicts all its pods
    r = by_name(eng.run())["g"]
    # 75 s done, the checkpoint at 50 survives: 25 s lost; the next cycle (80) restarts it with 50 s to go
    assert (r.end, r.restarts, r.evictions) == (130, 1, 2)
    assert r.gpu_hours_lost == pytest.approx(25 * 16 / 3600)


def test_surplus_eviction_of_an_elastic_job_does_not_restart_it():
    eng = engine([job("e", 0, 100, 4, pods=3, min_member=2)])
    eng.evict(40, ["e-2"])
    r = by_name(eng.run())["e"]
    assert (r.end, r.restarts, r.evictions, r.gpu_hours_lost) == (100, 0, 1, 0.0)


@pytest.mark.parametrize("policy, held", [("job", 8.0), ("pods", 16.0)])
def test_restart_policy_decides_what_the_broken_gang_holds(policy, held):
    # g-0 is evicted at 50 and gone at 70; the high-priority x (t=60) takes its node at 70 (no enqueue:
    # nothing holds x back for the cluster being full). Under "job" g-1 stopped too, so only x holds GPUs
    # until 1070; under "pods" g-1 idles on its node meanwhile.
    jobs = [job("g", 0, 100, 8, pods=2), job("x", 60, 1000, 8, priority=100)]
    config = parse_config({**DEFAULT_CONFIG, "actions": "allocate, backfill"}, REGISTRY, "no enqueue")
    eng = engine(jobs, eviction_grace=20, restart_policy=policy, config=config)
    eng.evict(50, ["g-0"])
    result = eng.run()
    r = by_name(result)
    assert (r["x"].first_start, r["g"].restarts, r["g"].end) == (70, 1, 1170)
    during = [s.gpu_used for s in result.cluster if 70 <= s.time < 1070]
    assert during and set(during) == {held}


@pytest.mark.skipif(REGISTRY.action_class("preempt") is None, reason="no preempt action registered yet")
def test_preemption_restarts_the_low_priority_gang():
    # overcommit 2: a full cluster still admits the preemptor (preempt serves admitted jobs only)
    config = parse_config(
        {
            **DEFAULT_CONFIG,
            "actions": "enqueue, allocate, preempt, backfill",
            "configurations": [{"name": "enqueue", "arguments": {"overcommit-factor": 2.0}}],
        },
        REGISTRY,
        "preempt",
    )
    jobs = [job("low", 0, 1000, 8, pods=2, priority=0), job("high", 50, 100, 8, priority=100)]
    r = by_name(engine(jobs, config=config).run())
    assert r["low"].restarts >= 1 and r["low"].evictions >= 1
    assert r["high"].first_start in (50, 60)
    # the low gang lost all 50 s of its work and reruns whole once the high job has finished
    assert r["low"].end == r["high"].end + 1000 and r["low"].gpu_hours_lost == pytest.approx(50 * 16 / 3600)


def test_node_failure_loses_the_pods_on_it():
    eng = engine([job("a", 0, 100, 8), job("b", 0, 100, 8)])
    eng.node_down(30, "n-000", duration=1000)
    result = eng.run()
    r = by_name(result)
    ends = sorted((r[n].end, r[n].restarts) for n in "ab")
    assert ends == [(100, 0), (200, 1)]  # the lost job reruns on the other node once it is free
    totals = {s.time: s.gpu_total for s in result.cluster}
    assert totals[30] == 8 and totals[1030] == 16


# ----------------------------------------------------------------------------- inputs, never fits


def test_jobs_that_can_never_fit_are_reported():
    queues = (QueueSpec("small", capability={GPU: 8}),)
    jobs = [
        job("big", 0, 10, 8, pods=2, queue="small"),
        job("ok", 0, 10, 8, queue="small"),
        job("far", 0, 10, 8, pods=2, topology=("hard", 1)),
    ]
    result = engine(jobs, queues=queues, tiers=(1,)).run()
    r = by_name(result)
    assert (r["big"].status, r["far"].status, r["ok"].status) == ("never_fits", "never_fits", "completed")
    reasons = {x["job"]: x["reason"] for x in result.meta["never_fits"]}
    assert "capability" in reasons["big"] and "topology" in reasons["far"]


@pytest.mark.parametrize(
    "bad, words",
    [
        (job("huge", 0, 10, 8, pods=3), "larger than the cluster"),
        (job("wide", 0, 10, 16), "more than any node"),
        (job("neg", 0, -5, 1), "duration"),
        (job("nan", math.nan, 5, 1), "submit"),
        (job("lost", 0, 10, 1, queue="nowhere"), "unknown queue 'nowhere'"),
    ],
)
def test_bad_input_names_the_row(bad, words):
    queues = (QueueSpec("default"),)
    with pytest.raises(InputError) as err:
        engine([job("fine", 0, 1, 1), bad], queues=queues)
    text = err.value.describe()
    assert words in text and f"test.csv row {bad.name}" in text


def test_cluster_spec_and_tree(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "nodes:\n- {name: a, count: 6, gpus: 4, memory: 64Gi}\n- {name: b, count: 2, gpus: 8}\n"
        "topology: {tiers: [4, 2]}\nqueue_weights: {x: 3}\n"
    )
    tpl = load_cluster(path)
    cluster = tpl.instantiate(["x", "y"])
    assert cluster.nodes.names[0] == "a-000" and len(cluster.nodes) == 8 and not tpl.explicit_queues
    assert [len(cluster.hypernodes.domains(t)) for t in (1, 2)] == [2, 1]
    assert cluster.hypernodes.lca_tier(np.array([0, 7])) == 2
    assert cluster.queues["x"].weight == 3 and cluster.queues["y"].weight == 1
    assert tpl.gpus_per_node() == 8
    path.write_text("nodes:\n- {name: a, count: 0}\n")
    with pytest.raises(InputError, match="count"):
        load_cluster(path)


def test_snapshot_cluster_reads_alibaba_gpu_counts():
    nodes = SHARED / "traces" / "alibaba-gpu-2023" / "openb_node_list_gpu_node.yaml"
    if not nodes.exists():
        pytest.skip("shared traces are absent")
    tpl = load_cluster(nodes)
    total = tpl.cluster.total_allocatable()[tpl.cluster.resources.pos(GPU)]
    assert total > 0 and not tpl.explicit_queues


def test_water_fill_caps_and_redistributes():
    got = water_fill(
        12, np.array([1.0, 1.0, 2.0]), np.array([2.0, 100, 100]), np.array([np.inf, 3, np.inf]), np.zeros(3)
    )
    assert got.tolist() == pytest.approx([2, 3, 7])


# ------------------------------------------------------------------------------ whole-run promises


def _small_run(seed: int, folder: Path) -> None:
    jobs = synthetic(
        seed, n_jobs=80, arrival_rate=1 / 40, queues={"a": 2, "b": 1}, gang_sizes={1: 6, 2: 3, 4: 1}
    )
    cluster = from_spec(ClusterSpec((NodeShape("n", 8, gpus=8),), tiers=(4,))).instantiate(["a", "b"])
    eng = Engine(cluster, jobs, default_config(), options=SimOptions(checkpoint_interval=600))
    eng.evict(1500, [jobs[20].name, jobs[21].name])
    write_report(eng.run(), folder)


def test_same_seed_gives_identical_reports(tmp_path):
    _small_run(11, tmp_path / "one")
    _small_run(11, tmp_path / "two")
    for name in ("summary.json", "jobs.json", "jobs.csv", "queues.csv", "cluster.csv"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    metas = [json.loads((tmp_path / d / "meta.json").read_text()) for d in ("one", "two")]
    for meta in metas:
        meta.pop("wall_time")
    assert metas[0] == metas[1]


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 7))
    out = []
    for i in range(n):
        pods = draw(st.integers(1, 3))
        out.append(
            job(
                f"j{i}",
                draw(st.integers(0, 300)),
                draw(st.integers(1, 400)),
                draw(st.sampled_from([1, 2, 4, 8])),
                pods=pods,
                min_member=draw(st.integers(1, pods)),
                queue=draw(st.sampled_from(["a", "b"])),
            )
        )
    evictions = draw(
        st.lists(st.tuples(st.integers(0, 600), st.sampled_from([j.name for j in out])), max_size=3)
    )
    return (
        out,
        evictions,
        draw(st.sampled_from([None, 60.0])),
        draw(st.sampled_from([0.0, 15.0])),
        draw(st.sampled_from(list(CONFIGS))),
        draw(st.sampled_from(["job", "pods"])),
    )


CONFIGS = {"default": DEFAULT_CONFIG}
if REGISTRY.action_class("preempt") is not None:  # the scheduler evicts too, when it can
    CONFIGS["preempt"] = {
        **DEFAULT_CONFIG,
        "actions": "enqueue, allocate, preempt, backfill",
        "configurations": [{"name": "enqueue", "arguments": {"overcommit-factor": 2.0}}],
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_invariants_under_random_workloads(case):
    jobs, evictions, checkpoint, grace, config, policy = case
    jobs = [replace(j, priority=10 * (i % 3)) for i, j in enumerate(jobs)]
    eng = engine(
        jobs,
        nodes=3,
        checkpoint_interval=checkpoint,
        eviction_grace=grace,
        restart_policy=policy,
        config=parse_config(CONFIGS[config], REGISTRY, config),
    )
    for at, name in evictions:
        eng.evict(at, [name])
    while eng.step():
        nodes = eng.cluster.nodes
        used = nodes.used.copy()
        eng.cluster.account()
        assert np.array_equal(used, nodes.used)  # accounting never drifts
        assert (nodes.used <= nodes.allocatable + 1e-6).all()  # never over-committed
        for uid in eng.running_jobs():
            j = eng.cluster.jobs[uid]
            assert j.count(TaskStatus.RUNNING) >= j.min_member  # progress only at >= minMember
    result = eng.run()
    end = result.meta["end_time"]
    samples = result.cluster
    gpu_seconds = sum(s.gpu_used * (b.time - s.time) for s, b in itertools.pairwise(samples))
    assert gpu_seconds <= 24 * end + 1e-6
    for r in result.jobs:
        assert r.status == "completed"  # everything fits: all finish
        assert r.end - r.first_start >= r.duration - 1e-9 and r.jct >= r.duration - 1e-9
        assert r.restarts <= r.evictions


def test_until_stops_the_clock_and_reports_the_rest():
    result = engine([job("a", 0, 100, 8), job("b", 0, 100, 8, pods=2), job("c", 500, 10, 1)], until=50).run()
    r = by_name(result)
    assert result.meta["end_time"] == 50 and result.meta["jobs_not_submitted"] == 1
    assert {r["a"].status, r["b"].status} == {"running", "pending"} and "c" not in r


def test_progress_callback_reports_the_end():
    seen = []
    simulate(
        from_spec(ClusterSpec((NodeShape("n", 2),))).instantiate(["default"]),
        [job("a", 0, 10, 1)],
        default_config(),
        progress=lambda *a: seen.append(a),
    )
    assert seen[-1] == (10.0, 1, 1)


@pytest.mark.slow
def test_one_week_of_philly_end_to_end(tmp_path):
    if not PHILLY.exists():
        pytest.skip("the shared Philly trace is absent")
    from corral.sim.workload import filter_jobs, load_philly

    jobs = filter_jobs(load_philly(PHILLY), 14 * 86400, 21 * 86400)
    tpl = from_spec(ClusterSpec((NodeShape("n", 64, gpus=8),), tiers=(8,)))  # 512 GPUs: busy, not swamped
    result = simulate(tpl.instantiate(j.queue for j in jobs), jobs, default_config())
    assert len(result.jobs) == len(jobs) > 1000
    assert all(r.status == "completed" for r in result.jobs)
    assert all(s.gpu_used <= s.gpu_total for s in result.cluster)
    write_report(result, tmp_path / "philly")
    assert (tmp_path / "philly" / "index.html").exists()


def test_a_job_in_a_queue_with_children_never_runs(tmp_path):
    """Only leaf queues hold work (SPEC.md §3.2): a job naming a parent queue is reported as never
    fitting, with the reason, while the job of the leaf runs."""
    snap = tmp_path / "tree.yaml"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}},
    }
    queues = [
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": n}, "spec": s}
        for n, s in (("eng", {}), ("eng-a", {"parent": "eng"}))
    ]
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node, *queues]}))
    cluster = load_cluster(snap).instantiate()
    jobs = [job("onparent", 0, 10, 8, queue="eng"), job("onleaf", 0, 10, 8, queue="eng-a")]
    result = Engine(cluster, jobs, default_config()).run()
    r = by_name(result)
    assert (r["onparent"].status, r["onleaf"].status) == ("never_fits", "completed")
    reasons = {x["job"]: x["reason"] for x in result.meta["never_fits"]}
    assert "queue 'eng' has child queues (eng-a): only leaf queues hold work" in reasons["onparent"]


def test_job_record_notes_an_unenforced_topology():
    # Volcano's shipped configuration has no network-topology-aware: the hard tier-1 gang is placed
    # across the leaves (one cluster-wide domain, as Volcano does) and its record says it was not held
    conf = parse_config(
        {**DEFAULT_CONFIG, "tiers": [DEFAULT_CONFIG["tiers"][0], {"plugins": [{"name": "predicates"}]}]},
        REGISTRY,
        "no-topology",
    )
    jobs = [job("g", 0, 10, 8, pods=2, topology=("hard", 1)), job("plain", 0, 10, 8)]
    r = by_name(engine(jobs, nodes=4, tiers=(2,), config=conf).run())
    assert "spec.networkTopology" in r["g"].notes and "network-topology-aware" in r["g"].notes
    assert r["plain"].notes == ""
    held = by_name(engine(jobs, nodes=4, tiers=(2,)).run())  # the built-in default holds it
    assert held["g"].notes == ""


def test_a_gang_records_the_smallest_domain_that_held_it():
    jobs = [job("small", 0, 100, 4, pods=2), job("wide", 0, 100, 8, pods=3), job("one", 0, 100, 8)]
    r = by_name(engine(jobs, nodes=4, tiers=(2,)).run())
    assert r["one"].placement == ""  # a job of one pod is not a gang
    assert r["small"].placement == "node"  # two 4-GPU pods binpacked on one node
    assert r["wide"].placement == "cluster"  # three nodes: more than a tier-1 domain of two holds
    r = by_name(engine([job("pair", 0, 100, 8, pods=2)], nodes=4).run())
    assert r["pair"].placement == "nodes"  # no hypernodes to measure against
    r = by_name(engine([job("pair", 0, 100, 8, pods=2)], nodes=4, tiers=(2, 2)).run())
    assert r["pair"].placement in ("tier 1", "tier 2")
