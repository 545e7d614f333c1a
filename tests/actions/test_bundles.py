"""Victim bundles (seed 000 §3.2, SPEC.md §3.3): the SAFE/WHOLE split of ``make_bundles``, the ROI of
``Bundle.score``, ``Bundle.shrink``, the comparator of ``sort_bundles`` (absolute and relative ROI threshold)
and the work-weighted cost (``run_hours``, ``WorkCost``, ``work_cost``), on hand-built jobs.

Vectors here are ``[cpu, memory, pods, gpu]`` in milli-units, as the model stores them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from corral.actions.bundles import ROI_THRESHOLD, SAFE, WHOLE, Bundle, make_bundles, sort_bundles
from corral.model import Job, Task, TaskStatus


def vec(cpu: float = 0, gpu: float = 0, pods: float = 1) -> np.ndarray:
    return np.array([cpu * 1000, 0.0, pods * 1000, gpu * 1000])


def need(cpu: float = 0, gpu: float = 0) -> np.ndarray:
    """What a preemptor needs, as gang_evict passes it (the pod slot left out)."""
    return vec(cpu, gpu, pods=0)


def job(name: str, min_member: int, pods: list[tuple], *, mtm: dict | None = None, priority: int = 0,
        creation: float = 0.0) -> Job:
    """``pods``: (gpu, node, status[, role[, start]]) per pod; node -1 for none."""
    j = Job(uid=f"default/{name}", name=name, namespace="default", min_member=min_member,
            min_task_member=dict(mtm or {}), priority=priority, creation=creation)
    for i, p in enumerate(pods):
        gpu, node, status = p[0], p[1], p[2]
        role = p[3] if len(p) > 3 else ""
        start = p[4] if len(p) > 4 else 0.0
        t = Task(uid=f"{name}-{i}", name=f"{name}-{i}", namespace="default", request=vec(gpu=gpu), job=j,
                 role=role, status=status, node=node, start_time=start, priority=priority)
        j.tasks.append(t)
    return j


R = TaskStatus.RUNNING


def local(j: Job, nodes: set[int]) -> list[Task]:
    return [t for t in j.tasks if t.status is R and t.node in nodes]


def bundles_of(jobs: list[Job], domain: set[int], n: np.ndarray) -> list[Bundle]:
    return make_bundles({id(j): (j, local(j, domain)) for j in jobs}, n)


# --- make_bundles: the split ----------------------------------------------------------------------------
def test_healthy_gang_is_one_whole_bundle_costing_the_whole_job() -> None:
    j = job("a", 3, [(2, 0, R), (2, 0, R), (2, 5, R)])         # one pod outside the domain {0}
    [b] = bundles_of([j], {0}, need(gpu=4))
    assert b.kind == WHOLE and [t.name for t in b.tasks] == ["a-0", "a-1"]
    assert b.global_cost[3] == 6000                              # all three pods are destroyed
    assert b.roi == pytest.approx((4 / 4) / (6 / 4))


def test_surplus_goes_to_safe_largest_coverage_first() -> None:
    # minMember 2 of 4: surplus 2; the 4-GPU pod covers the need best and goes first
    j = job("a", 2, [(1, 0, R), (4, 0, R), (2, 0, R), (1, 0, R)])
    safe, whole = bundles_of([j], {0}, need(gpu=4))
    assert safe.kind == SAFE and [t.name for t in safe.tasks] == ["a-1", "a-2"]
    assert whole.kind == WHOLE and [t.name for t in whole.tasks] == ["a-0", "a-3"]
    assert safe.global_cost[3] == 6000                           # a SAFE bundle costs only itself


def test_surplus_larger_than_local_makes_everything_safe() -> None:
    j = job("a", 1, [(1, 0, R), (1, 0, R), (1, 7, R), (1, 7, R)])
    [b] = bundles_of([j], {0}, need(gpu=2))
    assert b.kind == SAFE and len(b.tasks) == 2


def test_broken_gang_is_all_safe_and_costs_only_its_local_pods() -> None:
    j = job("a", 4, [(2, 0, R), (2, 0, R), (2, 5, R), (2, -1, TaskStatus.PENDING)])
    [b] = bundles_of([j], {0}, need(gpu=4))
    assert b.kind == SAFE and len(b.tasks) == 2
    assert b.global_cost[3] == 4000 and b.roi == pytest.approx(1.0)


def test_succeeded_pods_count_as_ready() -> None:
    # minMember 2: one running + one succeeded is healthy, so the running pod is the core
    j = job("a", 2, [(2, 0, R), (2, -1, TaskStatus.SUCCEEDED)])
    [b] = bundles_of([j], {0}, need(gpu=2))
    assert b.kind == WHOLE


def test_role_minimums_keep_their_pods_in_the_core() -> None:
    # minMember 2, ps needs 2 (sum 2: not elastic): surplus 2, but none of it may be ps
    j = job("tf", 2, [(3, 0, R, "ps"), (3, 0, R, "ps"), (1, 0, R, "worker"), (1, 0, R, "worker")],
            mtm={"ps": 2})
    safe, whole = bundles_of([j], {0}, need(gpu=2))
    assert {t.role for t in safe.tasks} == {"worker"} and len(safe.tasks) == 2
    assert {t.role for t in whole.tasks} == {"ps"}


def test_role_surplus_is_spent_per_role() -> None:
    # workers: 3 ready, minimum 2 -> one worker may go; global surplus 2 -> one ps may go as well
    j = job("tf", 3, [(1, 0, R, "ps"), (1, 0, R, "ps"), (1, 0, R, "worker"), (1, 0, R, "worker"),
                      (1, 0, R, "worker")], mtm={"ps": 1, "worker": 2})
    safe, whole = bundles_of([j], {0}, need(gpu=4))
    assert sorted(t.role for t in safe.tasks) == ["ps", "worker"]
    assert sorted(t.role for t in whole.tasks) == ["ps", "worker", "worker"]


def test_elastic_job_ignores_role_limits() -> None:
    # minMember 1 < sum of role minimums 2: roles do not bind, three of four pods are surplus
    j = job("tf", 1, [(3, 0, R, "ps"), (3, 0, R, "ps"), (1, 0, R, "worker"), (1, 0, R, "worker")],
            mtm={"ps": 2})
    assert j.elastic
    safe, whole = bundles_of([j], {0}, need(gpu=2))
    assert [t.name for t in safe.tasks] == ["tf-0", "tf-1", "tf-2"] and len(whole.tasks) == 1


def test_role_below_its_minimum_means_broken() -> None:
    # 3 ready >= minMember 3, but role ps has 1 of its 2: the gang is broken, everything is SAFE
    j = job("tf", 3, [(1, 0, R, "ps"), (1, -1, TaskStatus.PENDING, "ps"), (1, 0, R, "worker"),
                      (1, 0, R, "worker")], mtm={"ps": 2, "worker": 1})
    [b] = bundles_of([j], {0}, need(gpu=1))
    assert b.kind == SAFE and len(b.tasks) == 3


def test_victim_order_inside_a_job() -> None:
    # equal coverage (both >= need): lower priority first, then least waste, then youngest
    j = job("a", 1, [(8, 0, R, "", 10.0), (4, 0, R, "", 10.0), (4, 0, R, "", 20.0), (2, 0, R, "", 30.0)])
    j.tasks[0].priority = -1
    [safe, whole] = bundles_of([j], {0}, need(gpu=4))
    # a-0: priority -1 first; a-2 and a-1 (no waste) before... a-3 covers only half the need
    assert [t.name for t in safe.tasks] == ["a-0", "a-2", "a-1"]
    assert [t.name for t in whole.tasks] == ["a-3"]


# --- ROI ---------------------------------------------------------------------------------------------
def test_roi_formula_over_requested_resources() -> None:
    b = Bundle(job("x", 1, []), WHOLE, [], global_cost=vec(cpu=4, gpu=16, pods=9))
    b.tasks = [Task(uid="t", name="t", namespace="d", request=vec(cpu=2, gpu=8), job=b.job)]
    b.score(need(cpu=4, gpu=8))
    # gain = 2/4 + 8/8 = 1.5; cost = 4/4 + 16/8 = 3 (pods and memory are not needed, not counted)
    assert b.roi == pytest.approx(0.5)


def test_roi_caps_the_gain_at_the_need() -> None:
    b = Bundle(job("x", 1, []), WHOLE, [Task(uid="t", name="t", namespace="d", request=vec(cpu=26))],
               global_cost=vec(cpu=26))
    b.score(need(cpu=24))
    assert b.roi == pytest.approx(24 / 26)


def test_roi_of_nothing_useful_is_zero_and_of_free_gain_infinite() -> None:
    t = Task(uid="t", name="t", namespace="d", request=vec(cpu=8))
    b = Bundle(job("x", 1, []), WHOLE, [t], global_cost=vec(cpu=8))
    b.score(need(gpu=8))                                     # frees CPU, the preemptor needs GPUs
    assert b.roi == 0.0
    b = Bundle(job("x", 1, []), SAFE, [Task(uid="u", name="u", namespace="d", request=vec(gpu=2))],
               global_cost=vec(pods=0))
    b.score(need(gpu=8))
    assert math.isinf(b.roi)


def test_shrink_recomputes_a_safe_bundle_but_not_a_whole_one() -> None:
    j = job("a", 1, [(2, 0, R), (2, 0, R), (2, 0, R), (2, 0, R)])
    safe, whole = bundles_of([j], {0}, need(gpu=8))
    safe.shrink(safe.tasks[:1], need(gpu=8))
    assert safe.global_cost[3] == 2000 and safe.local[3] == 2000 and safe.roi == pytest.approx(1.0)
    cost = whole.global_cost.copy()
    whole.shrink(whole.tasks, need(gpu=8))
    assert np.array_equal(whole.global_cost, cost)


# --- sort_bundles --------------------------------------------------------------------------------------
def _b(name: str, kind: int, roi: float, *, priority: int = 0, creation: float = 0.0) -> Bundle:
    b = Bundle(Job(uid=f"default/{name}", name=name, namespace="default", priority=priority, creation=creation),
               kind, [], global_cost=np.zeros(4))
    b.roi = roi
    return b


def by_priority(a: Bundle, b: Bundle) -> int:
    return (a.job.priority > b.job.priority) - (a.job.priority < b.job.priority)


def no_policy(a: Bundle, b: Bundle) -> int:
    return 0


def job_order_priority(a: Job, b: Job) -> int:               # JobOrder: higher priority first
    return (b.priority > a.priority) - (b.priority < a.priority)


def names(bs: list[Bundle]) -> list[str]:
    return [b.job.name for b in bs]


def test_safe_before_whole_whatever_the_roi_and_policy() -> None:
    out = sort_bundles([_b("w", WHOLE, 5.0, priority=0), _b("s", SAFE, 0.1, priority=9)], by_priority,
                       job_order_priority)
    assert names(out) == ["s", "w"]


def test_policy_before_roi() -> None:
    out = sort_bundles([_b("hi", WHOLE, 1.0, priority=5), _b("lo", WHOLE, 0.2, priority=1)], by_priority,
                       job_order_priority)
    assert names(out) == ["lo", "hi"]


def test_roi_beyond_the_threshold_beats_job_order() -> None:
    out = sort_bundles([_b("lo", WHOLE, 0.90, priority=1), _b("hi", WHOLE, 1.0, priority=5)], no_policy,
                       job_order_priority)
    assert names(out) == ["hi", "lo"]


def test_roi_within_the_threshold_defers_to_reverse_job_order() -> None:
    assert ROI_THRESHOLD == 0.05
    out = sort_bundles([_b("hi", WHOLE, 1.0, priority=5), _b("lo", WHOLE, 0.96, priority=1)], no_policy,
                       job_order_priority)
    assert names(out) == ["lo", "hi"]                         # the job scheduled last is evicted first


def test_then_newest_first_then_name() -> None:
    out = sort_bundles([_b("old", WHOLE, 1.0, creation=10.0), _b("new", WHOLE, 1.0, creation=20.0),
                        _b("b", WHOLE, 1.0, creation=5.0), _b("a", WHOLE, 1.0, creation=5.0)], no_policy,
                       lambda a, b: 0)
    assert names(out) == ["new", "old", "a", "b"]


def test_sort_is_deterministic_under_input_order() -> None:
    import itertools
    # an intransitive triple: a < b and b < c by job order (ROIs within 0.05), c < a by ROI (0.06 apart)
    items = [_b("a", WHOLE, 0.94, priority=1), _b("b", WHOLE, 0.97, priority=2), _b("c", WHOLE, 1.0, priority=3)]
    results = {tuple(names(sort_bundles(list(p), no_policy, job_order_priority)))
               for p in itertools.permutations(items)}
    assert len(results) == 1


# --- work-weighted cost (corral's choice) -------------------------------------------------------------
from corral.actions.bundles import MIN_RUN, WorkCost, run_hours, work_cost  # noqa: E402

NOW = 100 * 3600.0


def test_run_hours_counts_from_the_start_with_a_floor() -> None:
    age = run_hours(NOW)
    j = job("a", 1, [(1, 0, R, "", NOW - 7200.0), (1, 0, R, "", NOW)])
    assert age(j.tasks[0]) == pytest.approx(2.0)
    assert age(j.tasks[1]) == pytest.approx(MIN_RUN / 3600.0)        # just started: not free


def test_work_weighted_roi_prefers_the_gang_that_has_run_least() -> None:
    # same shape, both wholly in the domain: by resources a tie (ROI 1 each); by work the younger
    # gang (1 h) has ROI 1, the older (4 h) 0.25
    old = job("old", 2, [(4, 0, R, "", NOW - 4 * 3600.0), (4, 0, R, "", NOW - 4 * 3600.0)])
    young = job("young", 2, [(4, 1, R, "", NOW - 3600.0), (4, 1, R, "", NOW - 3600.0)])
    n = need(gpu=8)
    plain = {b.job.name: b.roi for b in bundles_of([old, young], {0, 1}, n)}
    assert plain["old"] == pytest.approx(1.0) and plain["young"] == pytest.approx(1.0)
    worked = {b.job.name: b.roi for b in make_bundles({id(j): (j, local(j, {0, 1})) for j in (old, young)}, n,
                                                      run_hours(NOW))}
    assert worked["young"] == pytest.approx(1.0) and worked["old"] == pytest.approx(0.25)
    # a WorkCost gives the same scores, and caches
    costs = WorkCost(n, run_hours(NOW))
    cached = {b.job.name: b.roi for b in make_bundles({id(j): (j, local(j, {0, 1})) for j in (old, young)}, n,
                                                      run_hours(NOW), costs)}
    assert cached == pytest.approx(worked)


def test_relative_threshold_ties_roi_within_five_percent() -> None:
    # absolute: 60 against 57.6 is far apart; relative (4 %): a tie, job order decides
    out = sort_bundles([_b("hi", WHOLE, 60.0, priority=5), _b("lo", WHOLE, 57.6, priority=1)], no_policy,
                       job_order_priority)
    assert names(out) == ["hi", "lo"]
    out = sort_bundles([_b("hi", WHOLE, 60.0, priority=5), _b("lo", WHOLE, 57.6, priority=1)], no_policy,
                       job_order_priority, relative=True)
    assert names(out) == ["lo", "hi"]
    out = sort_bundles([_b("hi", WHOLE, 60.0, priority=5), _b("lo", WHOLE, 50.0, priority=1)], no_policy,
                       job_order_priority, relative=True)
    assert names(out) == ["hi", "lo"]


def test_work_cost_of_a_victim_set() -> None:
    # a: minMember 2 of 3 (surplus 1), 2 GPUs each, run 1 h; b: 1 pod of 4 GPUs, run 2 h
    a = job("a", 2, [(2, 0, R, "", NOW - 3600.0)] * 3)
    b = job("b", 1, [(4, 1, R, "", NOW - 7200.0)])
    n = need(gpu=8)
    age = run_hours(NOW)
    # one surplus pod of a costs itself: 2/8 GPU x 1 h
    assert work_cost([a.tasks[0]], n, age) == pytest.approx(0.25)
    # two pods of a break it: all three pods are lost
    assert work_cost(a.tasks[:2], n, age) == pytest.approx(0.75)
    assert work_cost([a.tasks[0], b.tasks[0]], n, age) == pytest.approx(0.25 + 1.0)
    costs = WorkCost(n, age)
    assert costs.breaks(a.tasks[:2]) and not costs.breaks(a.tasks[:1])
    # sparing one of two pods of a broken gang saves 0.75 - 0.25; sparing b saves all it costs
    assert costs.savings([[a.tasks[0]], [a.tasks[1]], [b.tasks[0]]]) == pytest.approx([0.5, 0.5, 1.0])
