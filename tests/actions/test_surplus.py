"""Which pods of a victim job a gang-aware eviction may take without breaking it (corral.actions.surplus)."""

from __future__ import annotations

from corral.actions.bundles import SAFE, WHOLE, WorkCost, make_bundles
from corral.actions.surplus import SurplusChoice
from tests.actions.test_bundles import R, job, local, need


def _choice(j, nodes: set[int], n):
    costs = WorkCost(n, None)
    bundles = make_bundles({id(j): (j, local(j, nodes))}, n, None, costs)
    by_kind = {b.kind: b for b in bundles}
    return SurplusChoice(bundles, costs), by_kind, costs


def test_any_pod_of_the_job_may_go_in_place_of_a_safe_pod_but_no_more_than_the_safe_bundle_holds() -> None:
    # six 2-GPU pods, minMember 4: two may go
    j = job("w", 4, [(2, 0, R), (2, 0, R), (2, 1, R), (2, 1, R), (2, 2, R), (2, 2, R)])
    n = need(gpu=4)
    choice, b, costs = _choice(j, {0, 1, 2}, n)
    safe, whole = b[SAFE], b[WHOLE]
    assert len(safe.tasks) == 2
    units = choice.options(safe)
    # its own SAFE pods first, then every other pod of the job in the domain
    assert [u[0] for u in units[:2]] == safe.tasks and len(units) == 6
    core_pod = whole.tasks[0]
    assert choice.may_take(safe, core_pod)
    choice.take(safe, [core_pod])
    choice.take(safe, [safe.tasks[0]])
    assert choice.done(safe) and not choice.may_take(safe, safe.tasks[1])
    assert not costs.breaks([core_pod, safe.tasks[0]])
    # the WHOLE bundle then takes every pod not taken yet, the SAFE pod passed over included
    rest = choice.pods(whole)
    assert safe.tasks[1] in rest and core_pod not in rest and len(rest) == 4


def test_a_role_at_its_minimum_gives_no_pod() -> None:
    # ps: one pod, minimum 1; worker: four pods, minimum 2; minMember 3 -> two workers may go
    pods = [(0, 0, R, "ps")] + [(2, 0, R, "worker")] * 4
    j = job("r", 3, pods, mtm={"ps": 1, "worker": 2})
    choice, b, costs = _choice(j, {0}, need(gpu=4))
    safe = b[SAFE]
    assert {t.role for t in safe.tasks} == {"worker"}
    ps = next(t for t in j.tasks if t.role == "ps")
    assert not choice.may_take(safe, ps)
    other = next(t for t in j.tasks if t.role == "worker" and t not in safe.tasks)
    assert choice.may_take(safe, other)
    choice.take(safe, [other])
    choice.take(safe, [safe.tasks[0]])
    assert choice.done(safe)
    assert not costs.breaks([other, safe.tasks[0]])


def test_refused_pods_are_not_taken_any_more() -> None:
    j = job("g", 1, [(8, 0, R), (8, 1, R)])
    choice, b, _ = _choice(j, {0, 1}, need(gpu=8))
    safe = b[SAFE]
    choice.take(safe, [safe.tasks[0]])
    assert choice.pods(safe) == []
    choice.give_back({id(safe.tasks[0])})
    assert choice.pods(safe) == safe.tasks
