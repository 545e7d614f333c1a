"""Unit tests of :mod:`corral.actions.common.subgroups`: the one helper every placing action uses to
hold a Volcano sub-group to its own topology."""

from __future__ import annotations

import numpy as np

from corral.actions.common.subgroups import greedy_trial, place_subgroup, subgroup_units
from corral.framework.config import parse_config
from corral.framework.extension import Purpose
from corral.framework.session import Session
from corral.manifests import build_cluster
from corral.model import TaskStatus
from corral.model.clock import parse_time
from corral.registry import REGISTRY
from tests.scenarios.expand import T0, expand

CONFIG = {
    "actions": "allocate",
    "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}]},
        {"plugins": [{"name": "predicates"}, {"name": "nodeorder"}, {"name": "network-topology-aware"}]},
    ],
}
HYPERNODES = [
    {"name": "s0", "tier": 1, "nodes": ["n0", "n1"]},
    {"name": "s1", "tier": 1, "nodes": ["n2", "n3"]},
    {"name": "spine", "tier": 2, "hypernodes": ["s0", "s1"]},
]


def _session(busy: list[str]) -> Session:
    case = {
        "hypernodes": HYPERNODES,
        "nodes": [{"name": f"n{i}"} for i in range(4)],
        "jobs": [
            {"name": "busy", "minMember": 1, "pods": [{"count": len(busy), "gpu": 8, "nodes": busy}]},
            {
                "name": "train",
                "minMember": 2,
                "subGroupPolicy": [
                    {
                        "name": "t0",
                        "subGroupSize": 2,
                        "matchLabelKeys": ["p"],
                        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                    }
                ],
                "pods": [
                    {"count": 1, "gpu": 8, "labels": {"p": "0"}},
                    {"count": 1, "gpu": 1},
                    {"count": 1, "gpu": 8, "labels": {"p": "0"}},
                ],
            },
        ],
    }
    cluster = build_cluster(("unit", d) for d in expand(case))
    return Session(cluster, parse_config(CONFIG, REGISTRY, "unit"), REGISTRY, parse_time(T0))


def _train(session: Session):
    job = session.cluster.jobs["default/train"]
    return job, sorted(job.tasks, key=lambda t: t.name)


def test_a_sub_group_with_topology_is_one_unit_where_its_first_pod_stands() -> None:
    _, pods = _train(_session(["n1"]))
    units = subgroup_units(pods)
    assert [(sj.name if sj else None, [t.name for t in ts]) for sj, ts in units] == [
        ("t0-0", ["train-0", "train-2"]),
        (None, ["train-1"]),
    ]


def test_the_first_domain_that_holds_the_sub_group_is_kept() -> None:
    session = _session(["n1"])  # s0 has one free node, s1 two
    job, pods = _train(session)
    stmt = session.statement()
    trial = greedy_trial(session, job, stmt, pipeline=False)
    why = place_subgroup(session, job, pods[0].subjob, [pods[0], pods[2]], stmt, None, trial)
    assert why == ""
    names = session.cluster.nodes.names
    assert sorted(names[t.node] for t in (pods[0], pods[2])) == ["n2", "n3"]


def test_a_domain_that_does_not_hold_the_sub_group_is_undone() -> None:
    session = _session(["n1", "n3"])  # one free node in each leaf: no leaf holds the pair
    job, pods = _train(session)
    stmt = session.statement()
    undone: list[int] = []
    trial = greedy_trial(session, job, stmt, pipeline=False)
    why = place_subgroup(
        session, job, pods[0].subjob, [pods[0], pods[2]], stmt, None, trial, undo=lambda: undone.append(1)
    )
    assert why.startswith("sub-group t0-0 (subGroupSize 2) cannot start")
    assert not stmt.ops and all(t.status is TaskStatus.PENDING for t in pods)
    assert undone  # the action's own state was given back for every domain tried


def test_the_evict_purpose_offers_the_domains_in_the_eviction_order() -> None:
    session = _session(["n1", "n3"])
    job, pods = _train(session)
    sj = pods[0].subjob
    evict = session.subgroup_search_space(job, sj, None, Purpose.EVICT)
    assert {d.name for d in evict} == {"s0", "s1"}
    inside = session.subgroup_search_space(job, sj, np.array([True, True, False, False]), Purpose.EVICT)
    assert [d.name for d in inside] == ["s0"]
