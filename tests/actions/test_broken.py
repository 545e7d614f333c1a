"""Unit tests of :mod:`corral.actions.common.broken` (SPEC.md §5: a broken gang is evicted whole) and of the
victim side of capacity's queue rule with ``ancestorReclaimLevel``."""

from __future__ import annotations

from corral.actions.common.broken import breaks, healthy, whole_gangs
from corral.framework.config import parse_config
from corral.framework.session import Session
from corral.manifests import build_cluster
from corral.model import TaskStatus
from corral.model.clock import parse_time
from corral.registry import REGISTRY
from tests.scenarios.expand import T0, expand


def _cluster(case: dict):
    return build_cluster(("unit", d) for d in expand(case))


def _pods(cluster, job: str):
    return sorted(cluster.jobs[f"default/{job}"].tasks, key=lambda t: t.name)


NODES = [{"name": "n1"}, {"name": "n2"}, {"name": "n3"}]


def test_a_victim_below_min_member_takes_the_rest_of_its_gang() -> None:
    c = _cluster(
        {
            "nodes": NODES,
            "jobs": [{"name": "g", "pods": [{"count": 3, "gpu": 4, "nodes": ["n1", "n2", "n3"]}]}],
        }
    )
    pods = _pods(c, "g")
    extra, broken, stuck = whole_gangs(pods[:1])
    assert [t.name for t in extra] == ["g-1", "g-2"]
    assert [j.name for j in broken] == ["g"] and not stuck


def test_surplus_pods_break_nothing() -> None:
    c = _cluster(
        {
            "nodes": NODES,
            "jobs": [
                {"name": "g", "minMember": 2, "pods": [{"count": 3, "gpu": 4, "nodes": ["n1", "n2", "n3"]}]}
            ],
        }
    )
    pods = _pods(c, "g")
    assert whole_gangs(pods[:1]) == ([], [], [])
    assert breaks(pods[0].job, pods[:2])


def test_role_minimum_binds_unless_elastic() -> None:
    roles = [
        {"role": "ps", "count": 1, "gpu": 4, "nodes": ["n1"]},
        {"role": "worker", "count": 2, "gpu": 4, "nodes": ["n2", "n3"]},
    ]
    c = _cluster(
        {
            "nodes": NODES,
            "jobs": [
                {"name": "r", "minMember": 2, "minTaskMember": {"ps": 1, "worker": 1}, "pods": roles},
                {"name": "e", "minMember": 1, "minTaskMember": {"ps": 1, "worker": 1}, "pods": roles},
            ],
        }
    )
    ps = _pods(c, "r")[0]
    assert ps.role == "ps" and breaks(ps.job, [ps])  # ps below its minimum, though minMember holds
    e_ps = _pods(c, "e")[0]
    assert not breaks(e_ps.job, [e_ps])  # elastic (minMember below the role sum): roles do not bind


def test_a_gang_broken_already_is_not_broken_again() -> None:
    c = _cluster(
        {
            "nodes": NODES,
            "jobs": [
                {
                    "name": "g",
                    "pods": [
                        {"count": 3, "gpu": 4, "nodes": ["n1", "n2", "n3"], "deleting": [True, False, False]}
                    ],
                }
            ],
        }
    )
    pods = _pods(c, "g")
    assert not healthy(pods[0].job)
    assert whole_gangs(pods[1:2]) == ([], [], [])


def test_a_gang_with_a_pod_placed_this_cycle_cannot_go_whole() -> None:
    c = _cluster(
        {
            "nodes": NODES,
            "jobs": [{"name": "g", "pods": [{"count": 3, "gpu": 4, "nodes": ["n1", "n2", "n3"]}]}],
        }
    )
    pods = _pods(c, "g")
    pods[2].status = TaskStatus.ALLOCATED
    _, broken, stuck = whole_gangs(pods[:1])
    assert [j.name for j in broken] == ["g"] and [j.name for j in stuck] == ["g"]


def _side(level: int | None) -> list[list[str]]:
    queues = [
        {"name": "top", "deserved": {"nvidia.com/gpu": 16}},
        {"name": "a", "parent": "top", "deserved": {"nvidia.com/gpu": 8}},
        {"name": "b", "parent": "top", "deserved": {"nvidia.com/gpu": 8}},
        {"name": "a1", "parent": "a", "deserved": {"nvidia.com/gpu": 4}},
        {"name": "a2", "parent": "a", "deserved": {"nvidia.com/gpu": 4}},
        {"name": "b1", "parent": "b", "deserved": {"nvidia.com/gpu": 8}},
    ]
    plugin: dict = {"name": "capacity"}
    if level is not None:
        plugin["arguments"] = {"ancestorReclaimLevel": level}
    cfg = parse_config({"actions": "reclaim", "tiers": [{"plugins": [plugin]}]}, REGISTRY, "unit")
    p = Session(_cluster({"nodes": NODES, "queues": queues}), cfg, REGISTRY, parse_time(T0)).plugin(
        "capacity"
    )
    return [p.victim_side("a1", "a2"), p.victim_side("a1", "b1")]


def test_victim_side_leaf_only_by_default_and_ancestors_below_the_common_one() -> None:
    assert _side(None) == [["a1"], ["a1"]]
    assert _side(1) == [["a1"], ["a1", "a"]]  # a is common with a2: never checked for it
    assert _side(5) == [["a1"], ["a1", "a"]]  # top is common with b1
