"""The ``network-topology-aware`` plugin (seed 000 §2, SPEC.md §3.3): the allowed domains, GangSearchSpace
for both purposes, GangPredicate and its reasons, HyperNodeOrder, the session's "first non-empty answer"
rule, and allocate's use of the domains (``place_in_domains``)."""

from __future__ import annotations

import numpy as np
import pytest

from corral.framework.config import parse_config
from corral.framework.cycle import run_cycle
from corral.framework.extension import Domain, Purpose
from corral.framework.session import Session
from corral.manifests.build import build_cluster
from corral.model.clock import parse_time
from corral.registry import REGISTRY
from tests.scenarios.expand import T0, expand

NOW = parse_time(T0)


def config(*, args: dict | None = None, actions: str = "enqueue, allocate", extra: list | None = None):
    topo = {"name": "network-topology-aware", **({"arguments": args} if args else {})}
    return parse_config(
        {
            "actions": actions,
            "tiers": [
                {
                    "plugins": [
                        {"name": "priority"},
                        {"name": "gang", "enablePreemptable": False},
                        {"name": "conformance"},
                    ]
                },
                {
                    "plugins": [
                        *(extra or []),
                        {"name": "predicates"},
                        {"name": "proportion"},
                        {"name": "nodeorder"},
                        {"name": "binpack"},
                        topo,
                    ]
                },
            ],
        },
        REGISTRY,
        "test",
    )


def tree(n: int = 4) -> list[dict]:
    """Leaves of two nodes (s1 = n1, n2; s2 = n3, n4; ...), one spine over all."""
    leaves = [
        {"name": f"s{k + 1}", "tier": 1, "nodes": [f"n{2 * k + 1}", f"n{2 * k + 2}"]} for k in range(n // 2)
    ]
    return leaves + [{"name": "spine", "tier": 2, "hypernodes": [lf["name"] for lf in leaves]}]


def session(
    jobs: list[dict], *, nodes: list[dict] | None = None, hypernodes: list[dict] | None = None, **kw
) -> Session:
    case = {
        "nodes": nodes or [{"name": f"n{i}"} for i in range(1, 5)],
        "hypernodes": tree() if hypernodes is None else hypernodes,
        "jobs": jobs,
    }
    cluster = build_cluster([("test.yaml", d) for d in expand(case)])
    return Session(cluster, config(**kw), REGISTRY, NOW)


def plugin(s: Session):
    return s.plugin("network-topology-aware")


def gang(
    name: str = "g", count: int = 2, gpu: int = 8, mode: str | None = "hard", tier: int | None = 1, **extra
) -> dict:
    job = {"name": name, "priority": 100, "pods": [{"count": count, "gpu": gpu}], **extra}
    if mode:
        job["networkTopology"] = {"mode": mode, **({"highestTierAllowed": tier} if tier is not None else {})}
    return job


def fill(node: str, gpu: int = 8, name: str | None = None, **extra) -> dict:
    return {
        "name": name or f"fill-{node}",
        "priority": 10,
        "pods": [{"count": 1, "gpu": gpu, "nodes": [node], "started": "2025-12-31T23:00:00Z"}],
        **extra,
    }


def names(domains: list[Domain]) -> list[str]:
    return [d.name for d in domains]


# --- allowed domains and the ALLOCATE search space ------------------------------------------------
def test_no_topology_means_no_answer_and_the_session_gives_the_cluster() -> None:
    s = session([gang(mode=None)])
    job = s.cluster.jobs["default/g"]
    assert plugin(s).gang_search_space(job, Purpose.ALLOCATE) == []
    assert plugin(s).gang_predicate(job) is None
    [d] = s.gang_search_space(job, Purpose.ALLOCATE)
    assert d.name == "cluster" and d.tier is None and d.mask.all()


def test_hard_tier1_allows_only_leaves() -> None:
    s = session([gang(tier=1)])
    assert names(s.gang_search_space(s.cluster.jobs["default/g"], Purpose.ALLOCATE)) == ["s1", "s2"]


def test_without_highest_tier_every_tier_is_allowed_lowest_first() -> None:
    s = session([gang(tier=None)])
    assert names(s.gang_search_space(s.cluster.jobs["default/g"], Purpose.ALLOCATE)) == ["s1", "s2", "spine"]


def test_domains_too_small_for_the_gang_are_left_out() -> None:
    s = session([gang(count=3, tier=2)])  # 24 GPUs: only the spine (32) can hold them
    assert names(s.gang_search_space(s.cluster.jobs["default/g"], Purpose.ALLOCATE)) == ["spine"]


def test_running_pods_restrict_the_domains_to_those_holding_them() -> None:
    job = {
        "name": "g",
        "priority": 100,
        "minMember": 1,
        "networkTopology": {"mode": "hard"},
        "pods": [{"count": 1, "gpu": 8, "nodes": ["n3"]}, {"count": 1, "gpu": 8}],
    }
    s = session([job])
    assert names(s.gang_search_space(s.cluster.jobs["default/g"], Purpose.ALLOCATE)) == ["s2", "spine"]


def test_allocate_order_is_tier_then_tighter_fit() -> None:
    s = session([gang(count=2, gpu=4), fill("n3", 4), fill("n4", 4)])
    space = s.gang_search_space(s.cluster.jobs["default/g"], Purpose.ALLOCATE)
    assert names(space) == ["s2", "s1"]  # s2 is half full: 100% after the gang
    assert space[0].score == pytest.approx(100.0) and space[1].score == pytest.approx(50.0)


def test_soft_mode_appends_the_whole_cluster() -> None:
    s = session([gang(mode="soft", tier=1)])
    space = s.gang_search_space(s.cluster.jobs["default/g"], Purpose.ALLOCATE)
    assert names(space) == ["s1", "s2", "cluster"] and space[-1].tier is None


def test_soft_mode_with_no_domain_big_enough_is_the_cluster_alone() -> None:
    s = session([gang(mode="soft", count=3, tier=1)])
    assert names(s.gang_search_space(s.cluster.jobs["default/g"], Purpose.ALLOCATE)) == ["cluster"]


def test_hard_mode_without_hypernodes_is_unconstrained() -> None:
    s = session([gang()], hypernodes=[])
    job = s.cluster.jobs["default/g"]
    assert plugin(s).gang_search_space(job, Purpose.ALLOCATE) == []
    assert plugin(s).gang_predicate(job) is None


# --- the EVICT search space -------------------------------------------------------------------------
def test_evict_order_puts_the_cheapest_domain_to_enter_first() -> None:
    # s1 full, s2 has n4 free: s2 first although s1 sorts first by name
    s = session([gang(), fill("n1"), fill("n2"), fill("n3")])
    assert names(s.gang_search_space(s.cluster.jobs["default/g"], Purpose.EVICT)) == ["s2", "s1"]


def test_evict_order_counts_the_bottleneck_resource() -> None:
    # a CPU-only gang on a GPU cluster: free CPU decides (s2 has it), not the GPUs it does not ask for
    nodes = [{"name": f"n{i}", "cpu": 32} for i in range(1, 5)]
    job = {
        "name": "g",
        "priority": 100,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        "pods": [{"count": 2, "cpu": 32}],
    }
    s = session(
        [
            job,
            fill("n1", 0, name="c1")
            | {"pods": [{"count": 1, "cpu": 32, "nodes": ["n1"], "started": HOUR_AGO}]},
            {"name": "c2", "priority": 10, "pods": [{"count": 1, "cpu": 32, "nodes": ["n2"]}]},
            {"name": "c3", "priority": 10, "pods": [{"count": 1, "cpu": 16, "nodes": ["n3"]}]},
        ],
        nodes=nodes,
    )
    assert names(s.gang_search_space(s.cluster.jobs["default/g"], Purpose.EVICT)) == ["s2", "s1"]


#: The entry cost counts work, request x hours run: the victims here started one hour before now (T0).
W = 1.0
HOUR_AGO = "2025-12-31T23:00:00Z"


def test_entry_costs() -> None:
    # s1: a whole 2 x 8 GPU gang of lower priority (cost 16/16 = 1, times its work weight); s2: a
    # higher-priority gang of the same queue, which nothing may evict for the gang: it cannot be entered
    s = session(
        [
            gang(),
            {
                "name": "a",
                "priority": 10,
                "pods": [{"count": 2, "gpu": 8, "nodes": ["n1", "n2"], "started": HOUR_AGO}],
            },
            {"name": "vip", "priority": 500, "pods": [{"count": 2, "gpu": 8, "nodes": ["n3", "n4"]}]},
        ]
    )
    p, job = plugin(s), s.cluster.jobs["default/g"]
    doms = p._allowed_domains(job)
    assert p._entry_costs(job, doms, p._need(job)) == [pytest.approx(1.0 * W), float("inf")]
    assert names(s.gang_search_space(job, Purpose.EVICT)) == ["s1", "s2"]


def test_entry_costs_count_free_room_surplus_and_spread() -> None:
    s = session(
        [
            gang(count=1),
            {
                "name": "el",
                "priority": 10,
                "minMember": 1,
                "pods": [{"count": 2, "gpu": 4, "nodes": ["n2", "n2"]}],
            },
        ]
    )
    p, job = plugin(s), s.cluster.jobs["default/g"]
    assert p._entry_costs(job, p._allowed_domains(job), p._need(job)) == [0.0, 0.0]  # n1, n3, n4 are free
    jobs = [
        gang(count=1),
        {
            "name": "el",
            "priority": 10,
            "minMember": 1,
            "pods": [{"count": 2, "gpu": 4, "nodes": ["n1", "n2"], "started": HOUR_AGO}],
        },
        fill("n2", 4, name="f2"),
        {
            "name": "wide",
            "priority": 10,
            "pods": [{"count": 4, "gpu": 8, "nodes": ["n3", "n4", "n5", "n6"], "started": HOUR_AGO}],
        },
    ]
    s = session(jobs, nodes=[{"name": f"n{i}"} for i in range(1, 7)], hypernodes=tree(6))
    p, job = plugin(s), s.cluster.jobs["default/g"]
    costs = dict(
        zip(names(p._allowed_domains(job)), p._entry_costs(job, p._allowed_domains(job), p._need(job)))
    )
    # s1 lacks 8 - 4 (free on n1) = 4 GPUs: one surplus pod of el makes them up, free (seed 000: SAFE)
    assert costs["s1"] == 0.0
    # s2 and s3 lack 8: wide frees 16 there but destroys all its 32 GPUs
    assert costs["s2"] == pytest.approx(4.0 * W) and costs["s3"] == pytest.approx(4.0 * W)
    assert names(s.gang_search_space(job, Purpose.EVICT)) == ["s1", "s2", "s3"]


def test_entry_costs_count_work_not_resources() -> None:
    # s1 and s2 each hold one 2 x 8 GPU gang of lower priority: the one in s2 started ten minutes ago,
    # the one in s1 three days ago; entering s2 loses far less work, so it comes first
    s = session(
        [
            gang(),
            {
                "name": "old",
                "priority": 10,
                "pods": [{"count": 2, "gpu": 8, "nodes": ["n1", "n2"], "started": "2025-12-29T00:00:00Z"}],
            },
            {
                "name": "young",
                "priority": 10,
                "pods": [{"count": 2, "gpu": 8, "nodes": ["n3", "n4"], "started": "2025-12-31T23:50:00Z"}],
            },
        ]
    )
    p, job = plugin(s), s.cluster.jobs["default/g"]
    costs = dict(
        zip(names(p._allowed_domains(job)), p._entry_costs(job, p._allowed_domains(job), p._need(job)))
    )
    assert costs["s1"] == pytest.approx(72.0) and costs["s2"] == pytest.approx(10 / 60)
    assert names(s.gang_search_space(job, Purpose.EVICT))[:2] == ["s2", "s1"]


def test_evict_order_counts_surplus_node_by_node() -> None:
    # a one-pod gang of 8 GPUs. s1: an elastic job (minMember 2 of 4) with one 4-GPU pod on each node of
    # s1 and s2 (n1-n4) and 4 GPUs free on n1, n2: in total its surplus frees as much in s1 as in s2,
    # but only in s1 does a free surplus pod sit beside free room (n1: 4 free + 4). s2 is full otherwise.
    jobs = [
        gang(count=1),
        {
            "name": "el",
            "priority": 10,
            "minMember": 2,
            "pods": [{"count": 4, "gpu": 4, "nodes": ["n1", "n2", "n3", "n4"], "started": HOUR_AGO}],
        },
        fill("n3", 4, name="f3"),
        fill("n4", 4, name="f4"),
    ]
    s = session(jobs)
    p, job = plugin(s), s.cluster.jobs["default/g"]
    doms = p._allowed_domains(job)
    assert names(doms) == ["s1", "s2"] and p._safe_fits(job, doms).tolist() == [True, False]
    # the same with s1 and s2 swapped: the order follows the fit, not the name
    jobs[2:] = [fill("n1", 4, name="f1"), fill("n2", 4, name="f2")]
    s = session(jobs)
    assert names(s.gang_search_space(s.cluster.jobs["default/g"], Purpose.EVICT)) == ["s2", "s1"]


def test_evict_estimate_counts_only_the_asking_actions_victims() -> None:
    # s1 holds another queue's gang, s2 a lower-priority gang of the gang's queue: gangpreempt can
    # enter s2 only, gangreclaim s1 only; the estimate follows the action that asks
    queues = [{"name": "default", "weight": 1}, {"name": "other", "weight": 1}]
    jobs = [
        gang(),
        {
            "name": "foreign",
            "queue": "other",
            "priority": 1,
            "pods": [{"count": 2, "gpu": 8, "nodes": ["n1", "n2"], "started": HOUR_AGO}],
        },
        {
            "name": "low",
            "priority": 10,
            "pods": [{"count": 2, "gpu": 8, "nodes": ["n3", "n4"], "started": "2025-12-29T00:00:00Z"}],
        },
    ]
    case = {
        "nodes": [{"name": f"n{i}"} for i in range(1, 5)],
        "hypernodes": tree(),
        "jobs": jobs,
        "queues": queues,
    }
    cluster = build_cluster([("test.yaml", d) for d in expand(case)])
    s = Session(cluster, config(), REGISTRY, NOW)
    job = s.cluster.jobs["default/g"]
    for action, first in (("gangpreempt", "s2"), ("gangreclaim", "s1")):
        s.action = action
        assert names(s.gang_search_space(job, Purpose.EVICT))[0] == first
        assert (
            np.isinf(plugin(s)._entry_costs(job, plugin(s)._allowed_domains(job), plugin(s)._need(job))).sum()
            == 1
        )


def test_evict_space_is_truncated_to_evict_domains() -> None:
    s = session([gang(tier=None)], args={"evictDomains": 2})
    assert names(s.gang_search_space(s.cluster.jobs["default/g"], Purpose.EVICT)) == ["s1", "s2"]
    s = session([gang(tier=None, mode="soft")], args={"evictDomains": 1})
    assert names(s.gang_search_space(s.cluster.jobs["default/g"], Purpose.EVICT)) == ["s1", "cluster"]


def test_evict_domains_must_be_an_integer() -> None:
    from corral.errors import ConfigError

    with pytest.raises(ConfigError):
        config(args={"evictDomains": "many"})


# --- GangPredicate ------------------------------------------------------------------------------------
def test_predicate_whole_cluster_too_small() -> None:
    s = session([gang(mode="soft", count=5)])
    reason = plugin(s).gang_predicate(s.cluster.jobs["default/g"])
    assert reason == "the gang's waiting pods need 40 nvidia.com/gpu but the whole cluster has only 32"


def test_predicate_no_allowed_hypernode_big_enough() -> None:
    s = session([gang(count=3, tier=1)])
    reason = plugin(s).gang_predicate(s.cluster.jobs["default/g"])
    assert reason == (
        "no HyperNode of tier <= 1 can hold the gang's waiting pods (24 nvidia.com/gpu); "
        "the largest, s1, has 16 nvidia.com/gpu in all"
    )


def test_predicate_running_pods_outside_every_allowed_hypernode() -> None:
    job = {
        "name": "g",
        "priority": 100,
        "minMember": 1,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
        "pods": [{"count": 2, "gpu": 8, "nodes": ["n1", "n3"]}, {"count": 1, "gpu": 8}],
    }
    s = session([job])
    reason = plugin(s).gang_predicate(s.cluster.jobs["default/g"])
    assert reason is not None and "holds all the nodes the gang already runs on" in reason


def test_predicate_passes_a_gang_that_fits_a_leaf_and_soft_gangs() -> None:
    s = session([gang(count=2, tier=1), gang("soft", count=3, mode="soft", tier=1)])
    assert plugin(s).gang_predicate(s.cluster.jobs["default/g"]) is None
    assert plugin(s).gang_predicate(s.cluster.jobs["default/soft"]) is None


def test_down_nodes_do_not_count() -> None:
    s = session([gang(count=2, tier=1)])
    s.cluster.nodes.down[[0, 2]] = True  # n1 and n3: no leaf has 16 GPUs any more
    reason = plugin(s).gang_predicate(s.cluster.jobs["default/g"])
    assert reason is not None and "the largest" in reason


# --- HyperNodeOrder and the session's rules -----------------------------------------------------------
def test_hypernode_order_is_the_used_share_of_gpus() -> None:
    s = session([gang(), fill("n1", 4), fill("n3", 8)])
    job = s.cluster.jobs["default/g"]
    space = plugin(s)._allowed_domains(job)
    assert list(plugin(s).hypernode_order(job, space)) == pytest.approx([25.0, 50.0])
    assert list(s.hypernode_scores(job, space)) == pytest.approx([25.0, 50.0])


class _Empty:
    """A GangSearchSpace plugin that never answers."""

    def gang_search_space(self, job, purpose):
        return []


class _Fixed:
    def __init__(self, name: str, n: int) -> None:
        self.domain = Domain(name, np.ones(n, dtype=bool), 9)

    def gang_search_space(self, job, purpose):
        return [self.domain]


def test_session_takes_the_first_non_empty_answer_in_config_order() -> None:
    s = session([gang()])
    job = s.cluster.jobs["default/g"]
    topo = plugin(s).gang_search_space
    s.points["GangSearchSpace"] = [[_Empty().gang_search_space], [topo, _Fixed("x", 4).gang_search_space]]
    assert names(s.gang_search_space(job, Purpose.ALLOCATE)) == ["s1", "s2"]
    s.points["GangSearchSpace"] = [[_Fixed("x", 4).gang_search_space, topo]]
    assert names(s.gang_search_space(job, Purpose.ALLOCATE)) == ["x"]
    s.points["GangSearchSpace"] = [[_Empty().gang_search_space]]
    assert names(s.gang_search_space(job, Purpose.ALLOCATE)) == ["cluster"]


def test_switch_turns_the_search_space_off() -> None:
    s = session([gang()], extra=[])
    cfg = parse_config(
        {
            "actions": "enqueue, allocate",
            "tiers": [
                {
                    "plugins": [
                        {"name": "gang"},
                        {"name": "predicates"},
                        {"name": "network-topology-aware", "enableGangSearchSpace": False},
                    ]
                }
            ],
        },
        REGISTRY,
        "test",
    )
    s2 = Session(s.cluster, cfg, REGISTRY, NOW)
    assert names(s2.gang_search_space(s.cluster.jobs["default/g"], Purpose.ALLOCATE)) == ["cluster"]


# --- allocate's place_in_domains -------------------------------------------------------------------------
def _binds(jobs: list[dict], hypernodes: list[dict] | None = None, nodes: list[dict] | None = None) -> tuple:
    case = {
        "nodes": nodes or [{"name": f"n{i}"} for i in range(1, 5)],
        "hypernodes": tree() if hypernodes is None else hypernodes,
        "jobs": jobs,
    }
    cluster = build_cluster([("test.yaml", d) for d in expand(case)])
    decisions = run_cycle(cluster, config(), REGISTRY, NOW, 1)
    return {b.pod: b.node for b in decisions.binds}, {u.podgroup: u.reason for u in decisions.unschedulable}


def test_allocate_prefers_the_lowest_tier_then_the_tighter_domain() -> None:
    binds, _ = _binds([gang(count=2, gpu=4, tier=2), fill("n3", 4), fill("n4", 4)])
    assert binds == {"default/g-0": "n3", "default/g-1": "n4"}


def test_allocate_handles_tier_zero_domains() -> None:
    # a tier-0 hypernode is the lowest tier there is: it wins over the tier-1 one
    hns = [
        {"name": "rack", "tier": 0, "nodes": ["n3", "n4"]},
        {"name": "row", "tier": 1, "nodes": ["n1", "n2"]},
    ]
    binds, _ = _binds([gang(count=2, tier=1)], hypernodes=hns)
    assert binds == {"default/g-0": "n3", "default/g-1": "n4"}


def test_allocate_keeps_the_domain_holding_the_nominations() -> None:
    # nominated (by an earlier gangpreempt) into s2; s1 would be tighter now, s2 is kept
    job = gang(count=2, gpu=4, tier=1)
    job["pods"][0]["nominated"] = ["n3", "n4"]
    binds, _ = _binds([job, fill("n1", 4), fill("n2", 4)])
    assert binds == {"default/g-0": "n3", "default/g-1": "n4"}


def test_allocate_reason_names_the_domains_tried() -> None:
    binds, reasons = _binds([gang(count=2, tier=1), fill("n2"), fill("n4")])
    assert binds == {}
    assert reasons["default/g"].startswith("none of 2 topology domain(s) (s1, s2) can hold the gang; in s2: ")


def test_allocate_skips_full_domains_even_past_the_dry_run_cap() -> None:
    # 40 full tier-1 domains sort before the one with room by name and tightness; allocate dry-runs at
    # most 32 domains, yet the gang lands in the free one because full domains are left out.
    nodes = [f"m{i:02d}" for i in range(41)]
    hns = [{"name": f"a{i:02d}", "tier": 1, "nodes": [f"m{i:02d}"]} for i in range(41)]
    objs = [gang(count=1, gpu=8, tier=1)] + [fill(n) for n in nodes[:40]]
    binds, _ = _binds(objs, hypernodes=hns, nodes=[{"name": n} for n in nodes])
    assert binds == {"default/g-0": "m40"}
