"""The pieces of ``allocate``'s turns (Volcano ``allocateResources``): the continue-allocating rule
(``NeedContinueAllocating``), a job's waiting tasks kept across turns, the turn that ends when the job
becomes ready, and the candidate clamp of the eviction actions."""

from __future__ import annotations

from corral.actions.allocate import AllocateAction
from corral.actions.common.evict import Evictor
from corral.actions.common.jobs import Pending, continue_allocating, waiting_tasks
from corral.framework.session import Session
from corral.manifests import build_cluster
from corral.model.clock import parse_time
from corral.registry import REGISTRY, default_config
from tests.scenarios.expand import expand

NOW = parse_time("2026-01-01T12:00:00Z")


def open_session(jobs: list[dict], nodes: int = 1) -> Session:
    case = {"nodes": [{"name": f"n{i + 1}"} for i in range(nodes)], "jobs": jobs}
    cluster = build_cluster(("test", d) for d in expand(case))
    return Session(cluster, default_config(), REGISTRY, NOW)


def job_of(session: Session, name: str):
    return session.cluster.jobs[f"default/{name}"]


def test_a_job_needing_every_pod_stops_at_the_first_failure() -> None:
    s = open_session([{"name": "g", "pods": [{"count": 3, "gpu": 4}]}])
    job = job_of(s, "g")
    assert not continue_allocating(job, {""}, waiting_tasks(job))


def test_a_role_without_minimum_lets_the_job_go_on() -> None:
    s = open_session(
        [
            {
                "name": "j",
                "minMember": 2,
                "pods": [{"role": "big", "count": 1, "gpu": 16}, {"role": "small", "count": 3, "gpu": 4}],
            }
        ]
    )
    job = job_of(s, "j")
    assert continue_allocating(job, {"big"}, waiting_tasks(job)[1:])


def test_a_failed_role_below_its_minimum_stops_a_job_that_is_not_elastic() -> None:
    s = open_session(
        [
            {
                "name": "j",
                "minMember": 4,
                "minTaskMember": {"a": 2, "b": 2},
                "pods": [{"role": "a", "count": 2, "gpu": 16}, {"role": "b", "count": 3, "gpu": 2}],
            }
        ]
    )
    job = job_of(s, "j")
    assert not job.elastic
    assert not continue_allocating(job, {"a"}, waiting_tasks(job)[1:])


def test_an_elastic_job_counts_the_waiting_pods_of_roles_not_failed() -> None:
    s = open_session(
        [
            {
                "name": "j",
                "minMember": 2,
                "minTaskMember": {"a": 2, "b": 2},
                "pods": [{"role": "a", "count": 2, "gpu": 16}, {"role": "b", "count": 2, "gpu": 4}],
            }
        ]
    )
    job = job_of(s, "j")
    rest = waiting_tasks(job)[1:]
    assert job.elastic
    assert continue_allocating(job, {"a"}, rest)  # the two b pods reach minMember 2
    assert not continue_allocating(job, {"a", "b"}, rest)  # nothing left that could


def test_a_turn_ends_when_the_job_becomes_ready_and_resumes_where_it_stopped() -> None:
    s = open_session([{"name": "e", "minMember": 1, "pods": [{"count": 3, "gpu": 2}]}])
    job = job_of(s, "e")
    state = Pending(waiting_tasks(job))
    action = AllocateAction(None)
    assert action.place_job(s, job, state)  # ready after one pod, two still waiting
    assert state.pos == 1 and job.ready_count() == 1
    assert action.place_job(s, job, state)
    assert not action.place_job(s, job, state)  # the last pod: nothing left to requeue for
    assert job.ready_count() == 3


def test_a_turn_that_placed_nothing_never_requeues() -> None:
    s = open_session(
        [
            {
                "name": "e",
                "minMember": 1,
                "pods": [{"count": 1, "gpu": 8, "nodes": ["n1"]}, {"count": 2, "gpu": 8}],
            }
        ]
    )
    job = job_of(s, "e")
    state = Pending(waiting_tasks(job))
    assert not AllocateAction(None).place_job(s, job, state)  # ready already, but the node is full
    assert "needs 8 nvidia.com/gpu" in s.ledger.reasons[job.uid]


def test_the_candidate_cap_is_clamped_by_the_maximum() -> None:
    s = open_session([{"name": "e", "pods": [{"count": 1, "gpu": 2}]}], nodes=3)
    assert Evictor(s, "preempt", 100, 10.0).limit == 100
    assert Evictor(s, "preempt", 100, 10.0, max_candidates=2).limit == 2
    assert Evictor(s, "preempt", 1, 10.0, max_candidates=100).limit == 1
