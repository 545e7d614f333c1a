"""The lower bound that lets gangpreempt/gangreclaim skip domains (corral.actions.bounds): unit tests of
the knapsack pieces, and the property that skipping never changes a decision."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from corral.actions import gang_evict
from corral.actions.bounds import DomainBound, _bound, deficit
from corral.actions.bundles import WorkCost
from corral.model import Job, Task, TaskStatus
from tests.actions.test_gang_properties import SETTINGS, Gen, _run, clusters


def test_fractional_knapsack_takes_the_cheapest_rate_first() -> None:
    assert _bound([(3.0, 4.0, "a"), (1.0, 2.0, "b")], 3.0) == 1.0 * 2 + 3.0 * 1
    assert _bound([(1.0, 2.0, "a")], 3.0) == float("inf")


def test_fractional_knapsack_respects_the_queue_limits() -> None:
    items = [(1.0, 2.0, "a"), (2.0, 2.0, "a"), (5.0, 4.0, "b")]
    assert _bound(items, 3.0) == 1.0 * 2 + 2.0 * 1
    # queue a may give up only 2 units: the third comes from b
    assert _bound(items, 3.0, {"a": 2.0}) == 1.0 * 2 + 5.0 * 1
    assert _bound(items, 3.0, {"a": 0.5, "b": 1.0}) == float("inf")


def could_beat(by_job, costs: WorkCost, need_units: float, rank, best_rank: float, best_cost: float,
               best_breaks: bool = True) -> bool:
    return DomainBound(by_job, costs, need_units, rank).could_beat(best_rank, best_cost, best_breaks)


def _pod(name: str, gpu: float, job: Job, node: int, start: float) -> Task:
    t = Task(uid=name, name=name, namespace="d", request=np.array([gpu, 1.0]), job=job, node=node,
             status=TaskStatus.RUNNING, start_time=start)
    job.tasks.append(t)
    return t


def _costs(need_gpu: float) -> WorkCost:
    return WorkCost(np.array([need_gpu, 0.0]), lambda t: (3600.0 * 10 - (t.start_time or 0.0)) / 3600.0)


def test_bound_counts_a_broken_gang_at_everything_it_holds() -> None:
    # one healthy gang of two 4-GPU pods (minMember 2) that has run 9 hours: freeing 4 GPUs breaks it
    job = Job(uid="d/old", name="old", namespace="d", min_member=2)
    pods = [_pod("o0", 4, job, 0, 3600.0), _pod("o1", 4, job, 0, 3600.0)]
    costs = _costs(8.0)
    held = costs.held(job)                          # 2 pods x 0.5 of the need x 9 h = 9
    assert abs(held - 9.0) < 1e-9
    # a plan that costs the whole gang can be beaten only by less than 95 % of it
    assert not could_beat([(job, pods)], costs, 1.0, lambda j: 0.0, 0.0, held * 0.95)
    assert could_beat([(job, pods)], costs, 1.0, lambda j: 0.0, 0.0, held * 1.2)
    # not enough victims to cover the deficit at all
    assert not could_beat([(job, pods)], costs, 1.5, lambda j: 0.0, 0.0, 1e9)
    # nothing to free: a plan that evicts nothing beats anything
    assert could_beat([], costs, 0.0, lambda j: 0.0, 0.0, 0.0)


def test_bound_lets_a_lower_ranked_victim_win_whatever_its_work() -> None:
    low = Job(uid="d/low", name="low", namespace="d", min_member=1, priority=1)
    pods = [_pod("l0", 8, low, 0, 0.0)]
    costs = _costs(8.0)
    # the best plan so far evicts priority 5: a domain with a priority-1 victim may beat it
    assert could_beat([(low, pods)], costs, 1.0, lambda j: float(j.priority), 5.0, 0.001)
    # a best plan of priority 1 and tiny work: not beaten
    assert not could_beat([(low, pods)], costs, 1.0, lambda j: float(j.priority), 1.0, 0.001)


def test_bound_of_plans_that_break_no_gang() -> None:
    # a healthy gang of four 2-GPU pods, minMember 3: one surplus pod (2 GPUs) may go without breaking it
    job = Job(uid="d/g", name="g", namespace="d", min_member=3)
    pods = [_pod(f"g{i}", 2, job, 0, 3600.0 * 9) for i in range(4)]
    costs = _costs(2.0)
    bound = DomainBound([(job, pods)], costs, 1.0, lambda j: 0.0)
    assert abs(bound.safe - 1.0) < 1e-9            # one pod, the whole need, run 1 hour
    # a best plan that breaks a gang is beaten by any plan that breaks none, whatever its work
    assert bound.could_beat(0.0, 0.001, best_breaks=True)
    # a best plan that breaks none: only a cheaper plan that breaks none beats it
    assert not bound.could_beat(0.0, 1.0, best_breaks=False)
    assert bound.could_beat(0.0, 2.0, best_breaks=False)
    # twice the need: the surplus pod cannot cover it, so every plan here breaks the gang
    tight = DomainBound([(job, pods)], costs, 2.0, lambda j: 0.0)
    assert tight.safe == float("inf") and tight.all < float("inf")
    assert not tight.could_beat(0.0, 1e9, best_breaks=False)


def test_deficit_is_the_missing_part_of_the_need() -> None:
    costs = _costs(16.0)
    assert deficit(np.array([16.0, 0.0]), np.array([4.0, 3.0]), costs) == 0.75
    assert deficit(np.array([16.0, 0.0]), np.array([20.0, 3.0]), costs) == 0.0


def _decisions(gen: Gen, action: str, queue_plugin: str) -> dict:
    _, decisions, *_ = _run(gen, action, queue_plugin)
    return decisions.to_json(1)


def _same_without_skipping(gen: Gen, action: str, queue_plugin: str) -> None:
    with_bound = _decisions(gen, action, queue_plugin)
    gang_evict.GangEvictAction.use_bounds = False
    try:
        without = _decisions(gen, action, queue_plugin)
    finally:
        gang_evict.GangEvictAction.use_bounds = True
    assert with_bound == without


@settings(max_examples=100, derandomize=True, **SETTINGS)
@given(clusters())
def test_bound_order_and_skipping_change_no_gangpreempt_decision(gen: Gen) -> None:
    _same_without_skipping(gen, "gangpreempt", "proportion")


@settings(max_examples=100, derandomize=True, **SETTINGS)
@given(clusters(reclaim=True))
def test_bound_order_and_skipping_change_no_gangreclaim_decision(gen: Gen) -> None:
    _same_without_skipping(gen, "gangreclaim", "capacity")
