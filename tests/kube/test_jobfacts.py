"""A steady cycle of ``corral run`` costs what changed, not every job nor the backlog (issue 31): the state
as built is put back only for what the last cycle changed, and the applier's partly-bound gangs, the
per-queue unschedulable counts, the podgroups' gang conditions and the podgroups' notices are kept per
job (:mod:`corral.kube.jobfacts`, :mod:`corral.kube.builtstate`). Each kept answer equals a walk over
every job: ``CORRAL_CHECK_INDEX=1`` compares them each time (the whole ``tests/kube`` suite runs with it,
``conftest.py``), here over the scenario suite with changes between cycles."""

from __future__ import annotations

import copy
import io
from pathlib import Path

import pytest
import yaml

from corral.framework.config import parse_config
from corral.framework.cycle import run_cycle
from corral.framework.decisions import Decisions
from corral.framework.notices import cluster_notices
from corral.kube import jobfacts, partial, queuemetrics
from corral.kube.apply import Applier
from corral.kube.dryrun import dry_run_assume
from corral.kube.jobfacts import IndexMismatch, JobFacts
from corral.kube.logs import Log
from corral.kube.queuemetrics import unschedulable_by_queue, unschedulable_kept
from corral.model import Job, TaskStatus
from corral.model.clock import parse_time
from corral.registry import REGISTRY, default_config
from tests.kube.test_live import NOW, wait_for
from tests.kube.test_model import CASES, _cache, _changes
from tests.scenarios.expand import T0, expand


def _cluster_objects(running: int = 6, waiting: int = 4) -> list[dict]:
    """``running`` gangs of 2 pods running on 2 nodes each, and ``waiting`` gangs of 4 that fit nowhere."""
    nodes = [{"name": f"n{i}"} for i in range(2 * running)]
    jobs = [
        {"name": f"run{i}", "pods": [{"count": 2, "gpu": 8, "nodes": [f"n{2 * i}", f"n{2 * i + 1}"]}]}
        for i in range(running)
    ]
    jobs += [{"name": f"wait{i}", "pods": [{"count": 4, "gpu": 8}]} for i in range(waiting)]
    return expand({"nodes": nodes, "jobs": jobs})


def _steady(server, runner_factory):
    """A runner past its first cycles: the waiting gangs' Events and conditions are out."""
    server.add_all(_cluster_objects())
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    r.cycle(NOW)

    def told() -> bool:
        found = [r.cache.find("Pod", f"default/wait{i}-{k}") for i in range(4) for k in range(4)]
        return all(f is not None and (f[1].get("status") or {}).get("conditions") for f in found)

    assert wait_for(told)
    r.cycle(NOW + 1)
    r.cycle(NOW + 2)
    return r


def test_a_steady_cycle_puts_back_only_what_its_cycle_changed(server, runner_factory) -> None:
    r = _steady(server, runner_factory)
    result = r.cycle(NOW + 3)
    assert result is not None and r.cache.model.last == "unchanged"
    touched = result.decisions.touched or []
    r.cycle(NOW + 4)
    state = r.cache.model.state
    assert state.restored <= len(touched) + len(result.decisions.changed_jobs or ())
    assert state.restored < len(r.cache.model.tasks)  # 28 pods, 10 jobs: far fewer put back
    assert not state.differences()


def test_a_cycle_that_failed_puts_back_every_task(server, runner_factory, monkeypatch) -> None:
    """No account of what a cycle changed (it failed midway): everything is put back."""
    r = _steady(server, runner_factory)

    def fails_after_scheduling(*a, **k):
        run_cycle(*a, **k)
        raise RuntimeError("a fault in the scheduling core")

    monkeypatch.setattr("corral.kube.runner.run_cycle", fails_after_scheduling)
    assert r.cycle(NOW + 3) is None  # logged as failed, after run_cycle changed the model
    monkeypatch.undo()
    assert r.cycle(NOW + 4) is not None
    model = r.cache.model
    assert model.state.restored == len(model.tasks) + len(model.jobs)


def _boom(*_a, **_k):
    raise RuntimeError("a fault after the scheduling")


def test_a_steady_cycle_walks_no_job_for_the_applier_and_the_metrics(
    server, runner_factory, monkeypatch
) -> None:
    """Partly bound gangs, unschedulable pods by queue, gang conditions and notices: no walk over the jobs."""
    r = _steady(server, runner_factory)
    calls = {"below_minimum": 0, "ready_count": 0, "job_notices": 0}
    below, ready, notices = partial.below_minimum, Job.ready_count, jobfacts.job_notices

    def count_below(job):
        calls["below_minimum"] += 1
        return below(job)

    def count_notices(*a):
        calls["job_notices"] += 1
        return notices(*a)

    monkeypatch.setattr(partial, "below_minimum", count_below)
    monkeypatch.setattr(jobfacts, "job_notices", count_notices)
    monkeypatch.setattr(queuemetrics, "unschedulable_by_queue", _boom)  # the walk is not taken
    monkeypatch.setattr("corral.kube.runner.unschedulable_by_queue", _boom)
    monkeypatch.setattr(jobfacts, "cluster_notices", _boom)
    monkeypatch.setattr(r.applier.recorder, "cycle", lambda *a, **k: None)  # its own test elsewhere
    apply = r.applier.apply

    def counted_apply(*a):
        def count_ready(job):
            calls["ready_count"] += 1
            return ready(job)

        with monkeypatch.context() as m:
            m.setattr(Job, "ready_count", count_ready)
            return apply(*a)

    monkeypatch.setattr(r.applier, "apply", counted_apply)
    r.cache.model.facts.check = r.applier.cache.model.facts.check = False  # the walks of the check off
    r.notices.check = False
    result = r.cycle(NOW + 3)
    assert result is not None and len(result.decisions.unschedulable) == 4
    assert calls == {"below_minimum": 0, "ready_count": 0, "job_notices": 0}
    queues = {s.labels["queue_name"]: s.value for s in _samples(r, "corral_queue_unschedulable_pods")}
    assert queues == {"default": 16}


def _samples(r, name: str) -> list:
    return [s for fam in r.metrics.queues.collect() if fam.name == name for s in fam.samples]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_kept_answers_equal_walks_over_the_scenario_suite(path: Path, monkeypatch) -> None:
    """Cycles over each scenario case, objects changed in between (as the model's own equivalence
    test): after each cycle the kept facts, the partly bound gangs, the unschedulable counts and the
    notices equal their walks, and the partial put-back leaves every task and job as built."""
    monkeypatch.setenv("CORRAL_CHECK_INDEX", "1")
    case = yaml.safe_load(path.read_text())
    config = parse_config(case["config"], REGISTRY, "scenario") if case.get("config") else default_config()
    now = parse_time(str(case.get("now", T0)))
    cache = _cache(expand(case))
    applier = Applier(None, cache, Log(stream=io.StringIO()))  # type: ignore[arg-type]  # never writes
    notices = jobfacts.PodGroupNotices(config, REGISTRY)
    try:
        cluster = cache.build()[0]
    except Exception as exc:  # noqa: BLE001 - a case the loader rejects is out of scope here
        pytest.skip(f"the loader rejects the case: {exc}")
    try:
        for step in range(4):
            model = cache.model
            assert not model.facts.differences(model.jobs), f"step {step}"
            decisions = run_cycle(cluster, config, REGISTRY, now + step, step + 1)
            model.state.changed(decisions.touched, decisions.changed_jobs)
            kept = applier._incomplete(cluster, decisions)  # compared with the walk (check on)
            assert kept.keys() == applier._incomplete_of(cluster, cluster.jobs).keys()
            assert unschedulable_kept(cluster, decisions, model.facts.waiting) == unschedulable_by_queue(
                cluster, decisions
            )
            assert notices.of(cluster, model.version) == cluster_notices(cluster, config, REGISTRY)
            dry_run_assume(cache, decisions, now + step)
            if step > 1:
                _changes(cache, step - 1)
            cluster = cache.build()[0]  # puts back what the cycle changed (checked)
    finally:
        applier.close()


def test_the_check_names_a_kept_answer_that_is_wrong(monkeypatch) -> None:
    monkeypatch.setenv("CORRAL_CHECK_INDEX", "1")
    cache = _cache(_cluster_objects(running=2, waiting=1))
    cluster = cache.build()[0]
    facts = cache.model.facts
    assert facts.check and not facts.differences(cluster.jobs)
    assert facts.waiting == {"default/wait0": 4}
    facts.waiting["default/wait0"] = 3
    assert facts.differences(cluster.jobs) == ["waiting pods differ for ['default/wait0']"]
    decisions = run_cycle(cluster, default_config(), REGISTRY, NOW)
    cache.model.state.changed([], set())  # a cycle that claims to have changed nothing
    with pytest.raises(IndexMismatch, match="not as built"):
        cache.build()
    fresh = JobFacts()
    fresh.reset(cluster.jobs.values())
    assert fresh.below == set() and decisions.unschedulable


def test_a_gang_the_cycle_itself_breaks_is_a_candidate(monkeypatch) -> None:
    """A gang whole as built (one pod bound and not started, two running) whose running pod the cycle
    moves (an eviction leaves it Releasing): below its minimum only after the cycle, so the kept
    candidates count the pods the cycle moved, not only the gangs below their minimum as built."""
    monkeypatch.setenv("CORRAL_CHECK_INDEX", "0")  # the kept answer alone
    objects = expand(
        {
            "nodes": [{"name": "n0"}, {"name": "n1"}, {"name": "n2"}],
            "jobs": [
                {
                    "name": "low",
                    "minMember": 3,
                    "pods": [
                        {"count": 1, "gpu": 4, "nodes": ["n0"], "phase": "Pending"},
                        {"count": 2, "gpu": 8, "nodes": ["n1", "n2"], "role": "b"},
                    ],
                },
            ],
        }
    )
    cache = _cache(objects)
    applier = Applier(None, cache, Log(stream=io.StringIO()))  # type: ignore[arg-type]  # never writes
    try:
        cache.build()
        cluster = cache.build()[0]  # the kept model's (the first is the full assembly's own)
        assert cluster.jobs is cache.model.jobs and cache.model.last == "unchanged"
        assert cache.model.facts.below == set()  # whole as built
        assert applier._incomplete(cluster, Decisions(touched=[])) == {}
        victim = cluster.jobs["default/low"].tasks[1]
        assert victim.status is TaskStatus.RUNNING
        victim.status = TaskStatus.RELEASING  # what an eviction in the session leaves
        decisions = Decisions(touched=[(victim, TaskStatus.RUNNING, -1)])
        assert list(applier._incomplete(cluster, decisions)) == ["default/low"]
        assert list(applier._incomplete_of(cluster, cluster.jobs)) == ["default/low"]
    finally:
        applier.close()


class _NoWalk(dict):
    def values(self):  # type: ignore[override]
        raise AssertionError("every pod walked")


def test_the_outcome_counters_look_up_only_the_pods_the_cycle_moved() -> None:
    """Binds counted by queue (and their latency) from the pods the cycle's operations changed; every pod
    is walked only for a released gang's pods, which the cycle did not move."""
    from prometheus_client import CollectorRegistry

    from corral.kube.apply_report import ApplyReport
    from corral.kube.queuemetrics import QueueOutcomes

    cache = _cache(
        expand(
            {
                "nodes": [{"name": "n0"}, {"name": "n1"}],
                "jobs": [
                    {"name": "run0", "pods": [{"count": 1, "gpu": 8, "nodes": ["n0"]}]},
                    {"name": "new", "pods": [{"count": 1, "gpu": 8}]},
                ],
            }
        )
    )
    cluster = cache.build()[0]
    decisions = run_cycle(cluster, default_config(), REGISTRY, NOW)
    assert [b.pod for b in decisions.binds] == ["default/new-0"]
    report = ApplyReport()
    report.add("binds", "done", "default/new-0")
    outcomes = QueueOutcomes(CollectorRegistry())
    cluster.tasks = _NoWalk(cluster.tasks)
    outcomes.observe(cluster, decisions, report, NOW + 5)
    assert outcomes.binds.labels("default", "done")._value.get() == 1
    report.add("evictions", "done", "default/run0-0")  # a released gang's pod: looked for among all
    with pytest.raises(AssertionError, match="every pod walked"):
        outcomes.observe(cluster, decisions, report, NOW + 5)


def test_a_rebuilt_job_gets_its_notices_made_again() -> None:
    """The notices are kept by job object: a job rebuilt (a new object) has them made again, the others
    are reused; the same model version reuses the whole list."""
    from corral.framework.config import parse_config as parse

    config = parse(
        {"actions": "enqueue, allocate", "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}]}]},
        REGISTRY,
        "test",
    )
    spec = {
        "nodes": [{"name": "n0"}],
        "hypernodes": [{"name": "h0", "tier": 1, "nodes": ["n0"]}],
        "jobs": [
            {
                "name": "a",
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                "pods": [{"count": 1}],
            },
            {"name": "b", "pods": [{"count": 1}]},
        ],
    }
    cache = _cache(expand(spec))
    cache.build()
    cluster = cache.build()[0]
    notices = jobfacts.PodGroupNotices(config, REGISTRY)
    first = notices.of(cluster, cache.model.version)
    assert [n.obj for n in first] == ["PodGroup default/a"]  # no topology plugin: not enforced
    assert notices.of(cluster, cache.model.version) is first
    # b gets the same constraint: its PodGroup changes, its job is rebuilt, its notices made again
    pg_type = next(r for r in cache.stores if r.kind == "PodGroup" and cache.stores[r])
    raw = copy.deepcopy(cache.stores[pg_type]["default/b"].raw)
    raw["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    cache.event(pg_type, "MODIFIED", raw)
    cluster = cache.build()[0]
    assert cache.model.last == "incremental"
    got = notices.of(cluster, cache.model.version)
    assert [n.obj for n in got] == ["PodGroup default/a", "PodGroup default/b"]
    assert got == cluster_notices(cluster, config, REGISTRY)
