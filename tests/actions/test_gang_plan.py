"""Unit tests of gang-aware eviction's cost model (corral.actions.common.bundles) and planner
(corral.actions.common.gang_plan), and of the UnifiedEvictable answers of the plugins (issue: gang eviction
asks its own filter point)."""

from __future__ import annotations

import numpy as np
import pytest

from corral.actions.common.bundles import CostModel
from corral.actions.common.gang_evict import needed_tasks
from corral.actions.common.gang_plan import DomainPlanner, Room
from corral.errors import InputError
from corral.framework.config import parse_config
from corral.framework.extension import Domain
from corral.framework.session import Session
from corral.manifests.build import build_cluster
from corral.model.clock import parse_time
from corral.model.resources import PODS
from corral.registry import REGISTRY
from tests.scenarios.expand import T0, expand

NOW = parse_time(T0)
HOUR_AGO = "2025-12-31T23:00:00Z"
CONFIG = {
    "actions": "enqueue, allocate, gangpreempt",
    "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
        {"plugins": [{"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}]},
    ],
}


def session(jobs: list[dict], nodes: int = 3) -> Session:
    case = {"nodes": [{"name": f"n{i}"} for i in range(1, nodes + 1)], "jobs": jobs}
    cluster = build_cluster(("t", d) for d in expand(case))
    return Session(cluster, parse_config(CONFIG, REGISTRY, "t"), REGISTRY, NOW, 1)


def planner(s: Session, preemptor: str = "default/pre") -> tuple[DomainPlanner, dict]:
    job = s.cluster.jobs[preemptor]
    tasks = needed_tasks(s, job)
    need = sum((t.request for t in tasks), np.zeros(len(s.cluster.resources)))
    need[s.cluster.resources.pos(PODS)] = 0
    costs = CostModel(NOW, need)
    pods = [t for t in s.cluster.tasks.values() if t.node >= 0 and t.job is not job]
    jobs = {id(t.job): costs.victim(t.job, float(t.job.priority)) for t in pods}
    domain = Domain("cluster", np.ones(len(s.cluster.nodes), dtype=bool), None)
    return DomainPlanner(Room(s, tasks, domain), pods, jobs), jobs


def names(pods) -> list[str]:
    return sorted(t.name for t in pods)


def test_cost_model_surplus_free_broken_gang_loses_all_its_work():
    s = session(
        [
            {
                "name": "el",
                "minMember": 1,
                "pods": [{"count": 2, "gpu": 4, "nodes": ["n1", "n1"], "started": HOUR_AGO}],
            },
            {"name": "pre", "priority": 100, "pods": [{"count": 1, "gpu": 8}]},
        ]
    )
    el = s.cluster.jobs["default/el"]
    costs = CostModel(
        NOW,
        np.where(
            np.arange(len(s.cluster.resources)) == s.cluster.resources.pos("nvidia.com/gpu"), 8000.0, 0.0
        ),
    )
    state = costs.victim(el, 10.0)
    jobs = {id(el): state}
    pods = sorted(el.tasks, key=lambda t: t.name)
    assert state.healthy and state.surplus == 1
    assert CostModel.price(pods[:1], jobs)[:2] == (False, 0.0)  # surplus: free
    breaks, work, broken = CostModel.price(pods, jobs)
    assert breaks and broken == [state] and work == pytest.approx(1.0)  # 8 GPUs x 1 h over a need of 8


def test_checkpoint_annotation_limits_the_work_and_must_be_rfc3339():
    job = {
        "name": "g",
        "annotations": {"corral.io/last-checkpoint": "2025-12-31T23:30:00Z"},
        "pods": [{"count": 1, "gpu": 8, "nodes": ["n1"], "started": HOUR_AGO}],
    }
    s = session([job, {"name": "pre", "priority": 100, "pods": [{"count": 1, "gpu": 8}]}])
    g = s.cluster.jobs["default/g"]
    need = np.where(
        np.arange(len(s.cluster.resources)) == s.cluster.resources.pos("nvidia.com/gpu"), 8000.0, 0.0
    )
    assert CostModel(NOW, need).victim(g, 0.0).held == pytest.approx(0.5)
    g.annotations["corral.io/last-checkpoint"] = "yesterday"
    with pytest.raises(InputError, match="last-checkpoint"):
        CostModel(NOW, need).victim(g, 0.0)


def test_fill_takes_the_fewest_surplus_pods_without_breaking():
    # wide (minMember 4 of 8 two-GPU pods: 4 surplus) on n1 and n2; one 8-GPU pod wants a whole node:
    # four surplus pods on n1 free it; no gang is broken
    s = session(
        [
            {
                "name": "wide",
                "priority": 10,
                "minMember": 4,
                "pods": [{"count": 8, "gpu": 2, "nodes": ["n1"] * 4 + ["n2"] * 4, "started": HOUR_AGO}],
            },
            {"name": "full", "priority": 10, "pods": [{"count": 1, "gpu": 8, "nodes": ["n3"]}]},
            {"name": "pre", "priority": 100, "pods": [{"count": 1, "gpu": 8}]},
        ]
    )
    p, jobs = planner(s)
    victims = p.plan(10.0, may_break=False)
    assert len(victims) == 4 and len({t.node for t in victims}) == 1
    assert not CostModel.price(victims, jobs)[0]


def test_break_takes_the_gang_that_loses_least_and_only_the_pods_needed():
    s = session(
        [
            {
                "name": "old",
                "priority": 10,
                "pods": [{"count": 2, "gpu": 8, "nodes": ["n1", "n2"], "started": "2025-12-29T00:00:00Z"}],
            },
            {
                "name": "young",
                "priority": 10,
                "pods": [{"count": 2, "gpu": 8, "nodes": ["n3", "n3"], "started": HOUR_AGO}],
            },
            {"name": "pre", "priority": 100, "pods": [{"count": 1, "gpu": 8}]},
        ],
        nodes=3,
    )
    p, _jobs = planner(s)
    assert p.plan(10.0, may_break=False) is None  # no surplus anywhere
    victims = p.plan(10.0, may_break=True)
    assert names(victims) == ["young-0"]  # one pod of the young gang is enough
    assert p.plan(5.0, may_break=True) is None  # no victim of level 5 or below


def test_nobreak_and_forbid_are_respected():
    s = session(
        [
            {"name": "a", "priority": 10, "pods": [{"count": 1, "gpu": 8, "nodes": ["n1"]}]},
            {"name": "b", "priority": 10, "pods": [{"count": 1, "gpu": 8, "nodes": ["n2"]}]},
            {"name": "pre", "priority": 100, "pods": [{"count": 1, "gpu": 8}]},
        ],
        nodes=2,
    )
    p, _jobs = planner(s)
    a = s.cluster.jobs["default/a"]
    assert names(p.plan(10.0, True, nobreak=frozenset({id(a)}))) == ["b-0"]
    assert p.plan(10.0, True, forbid=frozenset(id(t) for t in s.cluster.tasks.values())) is None


def test_unified_evictable_answers():
    s = session(
        [
            {"name": "low", "priority": 10, "pods": [{"count": 2, "gpu": 4, "nodes": ["n1", "n1"]}]},
            {"name": "top", "priority": 200, "pods": [{"count": 1, "gpu": 4, "nodes": ["n2"]}]},
            {"name": "pre", "priority": 100, "pods": [{"count": 1, "gpu": 8}]},
        ]
    )
    pre = s.cluster.jobs["default/pre"].tasks[0]
    cands = sorted((t for t in s.cluster.tasks.values() if t.node >= 0), key=lambda t: t.name)
    # gang allows every candidate (healthy gangs included); priority keeps lower priority for preempt
    assert names(s.unified_evictable(pre, cands, "gangpreempt")) == ["low-0", "low-1"]
    assert names(s.unified_evictable(pre, cands, "gangreclaim")) == ["low-0", "low-1", "top-0"]
    # the legacy point is unchanged: the gang plugin's Preemptable keeps minMember
    assert s.preemptable(pre, cands) == []
    cands[0].namespace = "kube-system"  # conformance keeps it out
    assert names(s.unified_evictable(pre, cands, "gangreclaim")) == ["low-1", "top-0"]


def test_queue_limit_counts_the_crossing_pod():
    from corral.actions.common.gang_plan import QueueLimit

    inf = float("inf")
    lim = QueueLimit(above=[-inf, 4.0], keep=[inf, inf])  # 4 above the line in resource 1
    assert lim.allows([0.0, 8.0], [0.0, 8.0])  # one pod of any size crosses
    assert lim.allows([0.0, 6.0], [0.0, 4.0])  # 2 freed before the 4 that crosses
    assert not lim.allows([0.0, 8.0], [0.0, 4.0])  # 4 + 4: the line is reached first
    assert QueueLimit(above=[1.0, -4.0], keep=[inf, inf]).allows([0.0, 80.0], [0.0, 8.0])  # above in 0
    assert not QueueLimit(above=[-inf, 40.0], keep=[inf, 6.0]).allows([0.0, 8.0], [0.0, 8.0])  # guarantee
