"""The CP-SAT eviction oracle on small hand-computed instances (corral.solvers.oracle)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from corral.manifests.build import build_cluster
from corral.solvers import candidate_victims, solve_by_rules, solve_gang_eviction, work_lost

NOW = 1767225600.0  # 2026-01-01T00:00:00Z
HOUR = 3600.0


def _ts(ago: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - ago))


class Snap:
    """A tiny snapshot builder: nodes of 8 GPUs, podgroups and their pods."""

    def __init__(self) -> None:
        self.docs: list[dict] = [
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": f"p{v}"},
                "value": v,
            }
            for v in (10, 20, 100)
        ]

    def node(self, name: str, rack: str = "", gpus: int = 8) -> Snap:
        self.docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"rack": rack}},
                "status": {
                    "allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": str(gpus), "pods": "110"}
                },
            }
        )
        return self

    def rack(self, name: str, tier: int = 1) -> Snap:
        self.docs.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": name},
                "spec": {
                    "tier": tier,
                    "members": [
                        {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": name}}}}
                    ],
                },
            }
        )
        return self

    def queue(self, name: str, reclaimable: bool = True) -> Snap:
        self.docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {"weight": 1, "reclaimable": reclaimable},
            }
        )
        return self

    def gang(
        self,
        name: str,
        nodes: list[str | None],
        gpu: int,
        *,
        min_member: int | None = None,
        prio: int = 10,
        hours: float | list[float] = 1.0,
        queue: str = "default",
        topology: dict | None = None,
        preemptable: bool = True,
    ) -> Snap:
        spec: dict = {
            "minMember": len(nodes) if min_member is None else min_member,
            "queue": queue,
            "priorityClassName": f"p{prio}",
        }
        if topology:
            spec["networkTopology"] = topology
        meta: dict = {"name": name, "namespace": "t"}
        if not preemptable:
            meta["annotations"] = {"volcano.sh/preemptable": "false"}
        self.docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": meta,
                "spec": spec,
                "status": {"phase": "Inqueue" if nodes[0] is None else "Running"},
            }
        )
        for k, node in enumerate(nodes):
            h = hours[k] if isinstance(hours, list) else hours
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{k}",
                    "namespace": "t",
                    "uid": f"{name}-{k}",
                    "creationTimestamp": _ts(h * HOUR + 60),
                    "annotations": {"scheduling.k8s.io/group-name": name},
                },
                "spec": {
                    "schedulerName": "corral",
                    "priorityClassName": f"p{prio}",
                    "containers": [
                        {
                            "name": "c",
                            "resources": {
                                "requests": {
                                    "cpu": str(gpu),
                                    "memory": f"{gpu}Gi",
                                    "nvidia.com/gpu": str(gpu),
                                }
                            },
                        }
                    ],
                },
                "status": {"phase": "Pending"},
            }
            if node is not None:
                pod["spec"]["nodeName"] = node
                pod["status"] = {"phase": "Running", "startTime": _ts(h * HOUR)}
            self.docs.append(pod)
        return self

    def build(self):
        return build_cluster(("test", d) for d in self.docs)


def _names(res) -> set[str]:
    return {v.name for v in res.victims}


def _jobs(res) -> set[str]:
    return {j.name for j in res.broken}


def test_one_whole_small_gang_beats_one_pod_from_many_gangs():
    # n0 holds gang "local" (2 pods x 4 GPUs, 1 h): breaking it loses 8 GPU-h.
    # n1..n4 hold eight gangs of 4 one-GPU pods, one pod of each per node (1 h): freeing any of those
    # nodes breaks eight gangs, 8 x 4 GPU-h = 32 GPU-h.
    s = Snap()
    for i in range(5):
        s.node(f"n{i}")
    s.gang("local", ["n0", "n0"], 4)
    for g in range(8):
        s.gang(f"spread{g}", ["n1", "n2", "n3", "n4"], 1)
    s.gang("big", [None], 8, prio=100)
    c = s.build()
    res = solve_gang_eviction(c, c.jobs["t/big"], now=NOW, time_limit=5)
    assert res.status == "OPTIMAL" and res.placed
    assert _names(res) == {"local-0", "local-1"}
    assert _jobs(res) == {"local"}
    assert res.work_lost == pytest.approx(8.0, abs=1e-3)
    assert [(t.name, c.nodes.names[r]) for t, r in res.placement] == [("big-0", "n0")]


def test_surplus_pods_are_free():
    # "elastic": 8 one-GPU pods on n0, minMember 4, 1 h each -> its 4 surplus pods cost nothing (seed 000).
    # "rigid": 8 one-GPU pods on n1, minMember 8, 1 h -> breaking it costs 8 GPU-h.
    s = Snap().node("n0").node("n1")
    s.gang("elastic", ["n0"] * 8, 1, min_member=4)
    s.gang("rigid", ["n1"] * 8, 1)
    s.gang("want4", [None], 4, prio=100)
    c = s.build()
    res = solve_gang_eviction(c, c.jobs["t/want4"], now=NOW, time_limit=5)
    assert res.placed and res.status == "OPTIMAL"
    assert len(res.victims) == 4 and all(v.job.name == "elastic" for v in res.victims)
    assert res.broken == []
    assert res.work_lost == 0.0


def test_breaking_switch_counts_the_whole_gang():
    # The preemptor needs 6 GPUs on one node: taking 6 of "elastic" (minMember 4, 1 h) breaks it and
    # costs all 8 GPU-h; breaking "rigid" (30 min) costs 8 x 0.5 = 4 GPU-h -> rigid goes.
    s = Snap().node("n0").node("n1")
    s.gang("elastic", ["n0"] * 8, 1, min_member=4)
    s.gang("rigid", ["n1"] * 8, 1, hours=0.5)
    s.gang("want6", [None], 6, prio=100)
    c = s.build()
    res = solve_gang_eviction(c, c.jobs["t/want6"], now=NOW, time_limit=5)
    assert res.placed and res.status == "OPTIMAL"
    assert _jobs(res) == {"rigid"}
    assert res.work_lost == pytest.approx(4.0, abs=1e-3)
    # the oracle evicts only what is needed: 6 of rigid's 8 pods (they all restart anyway)
    assert len(res.victims) == 6


def test_no_placement_possible():
    # the only running pods have higher priority than the preemptor, or are not preemptable
    s = Snap().node("n0").node("n1")
    s.gang("vip", ["n0"], 8, prio=100)
    s.gang("protected", ["n1"], 8, preemptable=False)
    s.gang("mid", [None], 8, prio=20)
    c = s.build()
    assert candidate_victims(c, c.jobs["t/mid"]) == []
    res = solve_gang_eviction(c, c.jobs["t/mid"], now=NOW, time_limit=5)
    assert res.status == "INFEASIBLE" and not res.placed and res.victims == []


def test_gang_needs_every_pod_placed():
    # 2 pods x 8 GPUs, but only one node can be freed (the other is held by a higher priority pod)
    s = Snap().node("n0").node("n1")
    s.gang("low", ["n0"], 8)
    s.gang("vip", ["n1"], 8, prio=100)
    s.gang("pair", [None, None], 8, prio=20)
    c = s.build()
    res = solve_gang_eviction(c, c.jobs["t/pair"], now=NOW, time_limit=5)
    assert not res.placed and res.status == "INFEASIBLE"


def test_preempt_only_same_queue_strictly_lower_priority():
    s = Snap().queue("a").queue("b").node("n0").node("n1").node("n2")
    s.gang("other-queue", ["n0"], 8, queue="b", hours=0.1)  # cheapest, but another queue
    s.gang("same-prio", ["n1"], 8, queue="a", prio=100, hours=0.1)
    s.gang("target", ["n2"], 8, queue="a", hours=5)
    s.gang("p", [None], 8, queue="a", prio=100)
    c = s.build()
    job = c.jobs["t/p"]
    assert [t.name for t in candidate_victims(c, job, "preempt")] == ["target-0"]
    res = solve_gang_eviction(c, job, now=NOW, time_limit=5)
    assert _names(res) == {"target-0"} and res.work_lost == pytest.approx(40.0, abs=1e-3)
    # reclaim takes from other (reclaimable) queues only, whatever the priority
    res = solve_gang_eviction(c, job, action="reclaim", now=NOW, time_limit=5)
    assert _names(res) == {"other-queue-0"} and res.work_lost == pytest.approx(0.8, abs=1e-3)


def test_reclaim_respects_queue_slack():
    # queue b's pod is cheapest, but b may give up only 4 GPUs: the 8-GPU pod of queue c goes
    s = Snap().queue("a").queue("b").queue("c").node("n0").node("n1")
    s.gang("b-job", ["n0"], 8, queue="b", hours=1)
    s.gang("c-job", ["n1"], 8, queue="c", hours=5)
    s.gang("p", [None], 8, queue="a", prio=10)
    c = s.build()
    job = c.jobs["t/p"]
    gpu = c.resources.pos("nvidia.com/gpu")
    slack = {name: np.full(len(c.resources), np.inf) for name in ("a", "b", "c")}
    slack["b"][gpu] = 4000.0  # milli-GPUs
    res = solve_gang_eviction(c, job, action="reclaim", now=NOW, time_limit=5)
    assert _names(res) == {"b-job-0"}
    res = solve_gang_eviction(c, job, action="reclaim", now=NOW, time_limit=5, queue_slack=slack)
    assert _names(res) == {"c-job-0"} and res.work_lost == pytest.approx(40.0, abs=1e-3)


def test_reclaim_queue_limits_count_the_crossing_pod():
    # queue b holds 4 GPUs above its line: it may give up one pod of any size (the one that crosses
    # the line), not two of 4 GPUs; queue c is at its line and gives nothing. n0: two young 4-GPU gangs
    # of b; n1: an old 8-GPU gang of b; n2: c's gang, youngest of all
    s = Snap().queue("a").queue("b").queue("c").node("n0").node("n1").node("n2")
    s.gang("y1", ["n0"], 4, queue="b", hours=0.1).gang("y2", ["n0"], 4, queue="b", hours=0.1)
    s.gang("old", ["n1"], 8, queue="b", hours=50).gang("c-job", ["n2"], 8, queue="c", hours=0.01)
    s.gang("p", [None], 8, queue="a", prio=10)
    c = s.build()
    job = c.jobs["t/p"]
    gpu = c.resources.pos("nvidia.com/gpu")
    above = {name: np.full(len(c.resources), -np.inf) for name in ("b", "c")}
    keep = np.full(len(c.resources), np.inf)
    above["b"][gpu], above["c"][gpu] = 4000.0, 0.0  # milli-GPUs
    limits = {name: (a, keep) for name, a in above.items()}
    res = solve_gang_eviction(c, job, action="reclaim", now=NOW, time_limit=5)
    assert _names(res) == {"c-job-0"}
    res = solve_gang_eviction(c, job, action="reclaim", now=NOW, time_limit=5, queue_limits=limits)
    assert _names(res) == {"old-0"}
    # 1 GPU more above the line: the two young gangs (4 GPUs freed before the crossing one) may go
    above["b"][gpu] = 5000.0
    limits = {name: (a, keep) for name, a in above.items()}
    res = solve_gang_eviction(c, job, action="reclaim", now=NOW, time_limit=5, queue_limits=limits)
    assert _names(res) == {"y1-0", "y2-0"}
    # capacity keeps a guarantee: b may free at most 4 GPUs in all, so nothing fits
    limits["b"] = (above["b"], np.where(np.arange(len(c.resources)) == gpu, 4000.0, np.inf))
    res = solve_gang_eviction(c, job, action="reclaim", now=NOW, time_limit=5, queue_limits=limits)
    assert not res.placed


def test_hard_topology_picks_the_cheapest_single_rack():
    # 2 pods x 8 GPUs. rack r1 = n1 (1 h) + n2 (10 h); rack r2 = n3 (2 h) + n4 (2 h).
    # Without topology: n1 + n3 (or n4) = 8 + 16 = 24 GPU-h. Hard tier 1: r2 = 32 GPU-h (r1 would be 88).
    s = Snap().node("n1", "r1").node("n2", "r1").node("n3", "r2").node("n4", "r2").rack("r1").rack("r2")
    for node, h in (("n1", 1), ("n2", 10), ("n3", 2), ("n4", 2)):
        s.gang(f"on-{node}", [node], 8, hours=h)
    s.gang("free", [None, None], 8, prio=100)
    s.gang("hard", [None, None], 8, prio=100, topology={"mode": "hard", "highestTierAllowed": 1})
    s.gang("soft", [None, None], 8, prio=100, topology={"mode": "soft", "highestTierAllowed": 1})
    c = s.build()
    free = solve_gang_eviction(c, c.jobs["t/free"], now=NOW, time_limit=5)
    assert (
        "on-n1-0" in _names(free)
        and len(free.victims) == 2
        and free.work_lost == pytest.approx(24.0, abs=1e-3)
    )
    assert free.domain == "cluster"
    hard = solve_gang_eviction(c, c.jobs["t/hard"], now=NOW, time_limit=5)
    assert _names(hard) == {"on-n3-0", "on-n4-0"} and hard.work_lost == pytest.approx(32.0, abs=1e-3)
    assert hard.domain == "r2"
    assert {c.nodes.names[r] for _, r in hard.placement} == {"n3", "n4"}
    soft = solve_gang_eviction(c, c.jobs["t/soft"], now=NOW, time_limit=5)
    assert soft.work_lost == pytest.approx(24.0, abs=1e-3)


def test_hard_topology_without_a_big_enough_rack():
    s = Snap().node("n1", "r1").node("n2", "r2").rack("r1").rack("r2")
    s.gang("hard", [None, None], 8, prio=100, topology={"mode": "hard", "highestTierAllowed": 1})
    c = s.build()
    res = solve_gang_eviction(c, c.jobs["t/hard"], now=NOW, time_limit=5)
    assert res.status == "NO_DOMAIN" and not res.placed


def test_free_capacity_needs_no_victims_and_placed_gangs_need_nothing():
    s = Snap().node("n0").node("n1")
    s.gang("low", ["n0"], 8)
    s.gang("p", [None], 4, prio=100)
    s.gang("running", ["n1"], 4, prio=100)
    c = s.build()
    res = solve_gang_eviction(c, c.jobs["t/p"], now=NOW, time_limit=5)
    assert res.placed and res.victims == [] and res.work_lost == 0.0
    assert c.nodes.names[res.placement[0][1]] == "n1"
    done = solve_gang_eviction(c, c.jobs["t/running"], now=NOW, time_limit=5)
    assert done.status == "NOTHING_TO_DO" and done.placed


def test_roles_must_reach_their_minimum():
    # a victim gang with roles: minMember 3 over 4 pods, but role "ps" needs its 1 pod: the surplus
    # is a worker; evicting the ps breaks the gang.
    s = Snap().node("n0").node("n1")
    s.docs.append(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "roles", "namespace": "t"},
            "spec": {"minMember": 3, "minTaskMember": {"ps": 1, "worker": 2}, "priorityClassName": "p10"},
            "status": {"phase": "Running"},
        }
    )
    for k, (role, gpu, node) in enumerate(
        [("ps", 4, "n0"), ("worker", 4, "n0"), ("worker", 4, "n1"), ("worker", 4, "n1")]
    ):
        s.docs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"roles-{k}",
                    "namespace": "t",
                    "uid": f"roles-{k}",
                    "creationTimestamp": _ts(2 * HOUR),
                    "annotations": {"scheduling.k8s.io/group-name": "roles", "volcano.sh/task-spec": role},
                },
                "spec": {
                    "schedulerName": "corral",
                    "nodeName": node,
                    "priorityClassName": "p10",
                    "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpu)}}}],
                },
                "status": {"phase": "Running", "startTime": _ts(HOUR)},
            }
        )
    s.gang("p", [None], 4, prio=100)
    c = s.build()
    res = solve_gang_eviction(c, c.jobs["t/p"], now=NOW, time_limit=5)
    assert res.placed and res.broken == [] and res.work_lost == 0.0  # a surplus worker: free
    assert len(res.victims) == 1 and res.victims[0].role == "worker"


def test_work_lost_definition():
    s = Snap().node("n0").node("n1")
    s.gang("g", ["n0", "n0", "n1"], 2, min_member=2, hours=[1, 2, 3])  # 2+4+6 = 12 GPU-h in all
    c = s.build()
    pods = sorted(c.jobs["t/g"].tasks, key=lambda t: t.name)
    lost, broken = work_lost(c, pods[2:], NOW)  # the surplus pod: free
    assert lost == 0.0 and broken == []
    lost, broken = work_lost(c, pods[1:], NOW)  # below minMember: everything
    assert lost == pytest.approx(12.0, abs=1e-3) and [j.name for j in broken] == ["g"]


def test_gangpreempt_matches_the_oracle_on_the_seed_example():
    # seed 000: one whole small gang on one node rather than one pod from each of many spread gangs
    from corral.framework.config import parse_config
    from corral.framework.cycle import run_cycle
    from corral.registry import REGISTRY

    s = Snap()
    for i in range(5):
        s.node(f"n{i}")
    s.gang("local", ["n0", "n0"], 4, hours=2)
    for g in range(8):
        s.gang(f"spread{g}", ["n1", "n2", "n3", "n4"], 1)
    s.gang("big", [None], 8, prio=100)
    c = s.build()
    oracle = solve_gang_eviction(c, c.jobs["t/big"], now=NOW, time_limit=5)
    cfg = parse_config(
        {
            "actions": "enqueue, allocate, gangpreempt",
            "tiers": [
                {
                    "plugins": [
                        {"name": "priority"},
                        {"name": "gang", "enablePreemptable": False},
                        {"name": "conformance"},
                    ]
                },
                {"plugins": [{"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}]},
            ],
        },
        REGISTRY,
        "test",
    )
    decisions = run_cycle(s.build(), cfg, REGISTRY, NOW, 1)
    assert (
        sorted(e.pod for e in decisions.evictions)
        == sorted(v.key for v in oracle.victims)
        == ["t/local-0", "t/local-1"]
    )


@pytest.mark.parametrize("seed", range(12))
def test_oracle_matches_brute_force_on_tiny_random_instances(seed):
    # 3 nodes, 3-5 victim gangs of 1-3 pods of 1, 2 or 4 GPUs (random minMember, run times), one
    # preemptor of identical pods: every subset of the candidate victims is tried; a subset works when
    # the nodes, with what it frees, hold the preemptor's pods (identical pods: sum of per-node counts).
    import itertools

    rng = np.random.default_rng(seed)
    s = Snap()
    free = {f"n{i}": 8 for i in range(3)}
    for i in range(3):
        s.node(f"n{i}")
    for g in range(int(rng.integers(3, 6))):
        size, gpu = int(rng.integers(1, 4)), int(rng.choice([1, 2, 4]))
        nodes = []
        for _ in range(size):
            fits = [n for n, f in free.items() if f >= gpu]
            if not fits:
                break
            n = str(rng.choice(fits))
            free[n] -= gpu
            nodes.append(n)
        if nodes:
            s.gang(
                f"g{g}",
                nodes,
                gpu,
                min_member=int(rng.integers(1, len(nodes) + 1)),
                hours=[float(h) for h in rng.uniform(0.1, 5, len(nodes))],
            )
    k, g = int(rng.integers(1, 4)), int(rng.choice([2, 4, 8]))
    s.gang("p", [None] * k, g, prio=100)
    c = s.build()
    job = c.jobs["t/p"]
    cands = candidate_victims(c, job)
    assert len(cands) <= 12
    gpu = c.resources.pos("nvidia.com/gpu")
    base = np.maximum(c.nodes.future_idle[:, gpu], 0)
    best = None
    for r in range(len(cands) + 1):
        for subset in itertools.combinations(cands, r):
            cap = base.copy()
            for v in subset:
                cap[v.node] += v.request[gpu]
            if int(np.sum(np.floor(cap / (g * 1000) + 1e-9))) >= k:
                lost, broken = work_lost(c, subset, NOW)
                key = (bool(broken), max((v.job.priority for v in subset), default=0), lost, len(subset))
                best = key if best is None else min(best, key)
    res = solve_gang_eviction(c, job, now=NOW, time_limit=5)
    rules = solve_by_rules(c, job, now=NOW, time_limit=5)
    if best is None:
        assert res.status == "INFEASIBLE" and not res.placed and not rules.placed
    else:
        assert res.status == "OPTIMAL" and res.placed
        # the lexicographic rule: no gang broken if avoidable, lowest victim priority, work, pods
        # (GPU-seconds are rounded to integers in the model)
        key = (bool(rules.broken), max((v.job.priority for v in rules.victims), default=0))
        assert key == best[:2]
        assert rules.work_lost == pytest.approx(best[2], abs=0.01) and len(rules.victims) == best[3]


def _surplus_or_young_gang(want: int):
    # "elastic": 8 one-GPU pods on n0, minMember 4, run 10 h: its 4 surplus pods are free.
    # "young": 8 one-GPU pods on n1, minMember 8, run 30 min: breaking it costs 4 GPU-h.
    # The preemptor wants ``want`` GPUs on one node.
    s = Snap().node("n0").node("n1")
    s.gang("elastic", ["n0"] * 8, 1, min_member=4, hours=10.0)
    s.gang("young", ["n1"] * 8, 1, hours=0.5)
    s.gang("want", [None], want, prio=100)
    c = s.build()
    return c, c.jobs["t/want"]


def test_surplus_is_free_so_least_work_and_rules_agree():
    c, job = _surplus_or_young_gang(4)
    res = solve_gang_eviction(c, job, now=NOW, time_limit=5)
    assert {v.job.name for v in res.victims} == {"elastic"} and res.broken == [] and res.work_lost == 0.0
    rules = solve_by_rules(c, job, now=NOW, time_limit=5)
    safe = solve_gang_eviction(c, job, now=NOW, time_limit=5, break_gangs=False)
    for other in (rules, safe):  # any 4 of elastic's pods: equivalent plans
        assert len(other.victims) == 4 and {v.job.name for v in other.victims} == {"elastic"}


def test_rules_break_a_gang_when_surplus_cannot_make_room():
    # 6 GPUs on one node: elastic's 4 surplus pods are not enough; rules then fall back to breaking
    c, job = _surplus_or_young_gang(6)
    assert solve_gang_eviction(c, job, now=NOW, time_limit=5, break_gangs=False).status == "INFEASIBLE"
    rules = solve_by_rules(c, job, now=NOW, time_limit=5)
    assert rules.placed and _jobs(rules) == {"young"}


def test_checkpoint_limits_the_work_lost():
    s = Snap().node("n0")
    s.gang("g", ["n0", "n0"], 4, hours=10.0)
    s.docs[-3]["metadata"]["annotations"] = {"corral.io/last-checkpoint": _ts(2 * HOUR)}
    s.gang("p", [None], 8, prio=100)
    c = s.build()
    lost, broken = work_lost(c, c.jobs["t/g"].tasks, NOW)
    assert [j.name for j in broken] == ["g"] and lost == pytest.approx(16.0, abs=1e-3)  # 8 GPUs x 2 h
