"""The pieces of the shared :class:`~corral.actions.common.evict.Evictor` (seed 003, SPEC.md §3.2): candidate
nodes and their lower bound, the per-node dry run (removal in victim order, the reprieve, nominations,
state restored), the plan ranking and the early stop of ``best``; the ``pdb`` budgets it consults, and
the queue rule ``reclaim`` filters victims with."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from corral.actions.common.evict import Evictor, Plan
from corral.actions.common.eviction import EvictArgs
from corral.actions.preempt import PreemptAction
from corral.actions.reclaim import ReclaimAction
from corral.framework.config import parse_config
from corral.framework.session import Session
from corral.manifests import build_cluster
from corral.model import TaskStatus
from corral.model.clock import parse_time
from corral.plugins.pdb import allowed_disruptions
from corral.registry import REGISTRY
from tests.scenarios.expand import expand

NOW = parse_time("2026-01-01T12:00:00Z")


def config(queue_plugin: str = "proportion", pdb: bool = False, gang_preemptable: bool = False) -> dict:
    tier2 = [{"name": "predicates"}, {"name": queue_plugin}] + ([{"name": "pdb"}] if pdb else [])
    return {
        "actions": "enqueue, allocate, preempt, reclaim",
        "tiers": [
            {
                "plugins": [
                    {"name": "priority"},
                    {
                        "name": "gang",
                        "enablePreemptable": gang_preemptable,
                        "enableReclaimable": gang_preemptable,
                    },
                    {"name": "conformance"},
                ]
            },
            {"plugins": tier2},
        ],
    }


def open_session(case: dict, **cfg) -> Session:
    cluster = build_cluster(("test", d) for d in expand(case))
    return Session(cluster, parse_config(config(**cfg), REGISTRY, "test"), REGISTRY, NOW)


def job(name: str, priority: int, nodes: list[str], gpu: int = 8, **extra) -> dict:
    return {
        "name": name,
        "priority": priority,
        "pods": [{"count": len(nodes), "gpu": gpu, "nodes": nodes}],
        **extra,
    }


def pending(name: str = "pre", priority: int = 100, gpu: int = 8, **pod) -> dict:
    return {"name": name, "priority": priority, "pods": [{"count": 1, "gpu": gpu, **pod}]}


class Harness:
    """A session, the preempt action's Evictor, and the preemptor's ``allowed`` mask and filter."""

    def __init__(
        self, case: dict, preemptor: str = "default/pre", action: type = PreemptAction, **cfg
    ) -> None:
        self.session = open_session(case, **cfg)
        self.action = action(EvictArgs())
        self.evictor = Evictor(self.session, self.action.name)
        self.job = self.session.cluster.jobs[preemptor]
        self.task = self.job.tasks[0]
        self.allowed = self.action.allowed(self.session, self.evictor, self.job)

    def row(self, name: str) -> int:
        return self.session.cluster.nodes.index[name]

    def name(self, row: int) -> str:
        return self.session.cluster.nodes.names[row]

    def ok(self, pods):
        return self.action.filter(self.session, self.task, self.job, pods)

    def plan(self, node: str, evicted=()) -> Plan | None:
        return self.evictor.plan(self.task, self.job, self.row(node), self.allowed, self.ok, list(evicted))

    def best(self) -> Plan | None:
        return self.evictor.best(self.task, self.job, self.allowed, self.ok, [])

    def snapshot(self):
        nodes = self.session.cluster.nodes
        queue = self.session.plugin("proportion") or self.session.plugin("capacity")
        pred = self.session.plugin("predicates")
        return (
            nodes.used.copy(),
            nodes.releasing.copy(),
            nodes.pipelined.copy(),
            {k: v.copy() for k, v in queue.allocated.items()},
            set(pred.placed),
        )

    def assert_unchanged(self, snap) -> None:
        now = self.snapshot()
        for a, b in zip(snap[:3], now[:3]):
            assert np.array_equal(a, b)
        assert snap[3].keys() == now[3].keys()
        assert all(np.array_equal(snap[3][k], now[3][k]) for k in snap[3])
        assert snap[4] == now[4]


def names(tasks) -> set[str]:
    return {t.name for t in tasks}


# --- candidates ---------------------------------------------------------------------------------------
def test_candidates_ordered_by_lower_bound_and_filtered() -> None:
    zone = {"zone": "a"}
    case = {
        "nodes": [
            {"name": "n0", "labels": zone},
            {"name": "n1", "labels": zone},
            {"name": "n2", "labels": zone},
            {"name": "n3", "labels": zone},
            {"name": "n4", "labels": zone},
            {"name": "n5", "labels": {"zone": "b"}},
        ],
        "jobs": [
            job("v10", 10, ["n1"]),
            job("v30", 30, ["n2"]),
            {"name": "v3", "priority": 10, "pods": [{"count": 1, "gpu": 4, "nodes": ["n3"]}]},
            {"name": "v3b", "priority": 40, "pods": [{"count": 1, "gpu": 4, "nodes": ["n3"]}]},
            job("top", 200, ["n4"]),
            job("other-zone", 1, ["n5"]),
            {"name": "half", "priority": 1, "pods": [{"count": 1, "gpu": 4, "nodes": ["n0"]}]},
            pending(gpu=4, nodeSelector=zone),
        ],
    }
    h = Harness(case)
    rows, bounds = h.evictor.candidates(h.task, h.allowed)
    assert [h.name(r) for r in rows] == ["n0", "n1", "n3", "n2"]
    # n0 has 4 GPUs free (fits at once); n3 fits with its priority-10 pod gone; n4 holds only a higher
    # priority pod; n5 is ruled out by the nodeSelector (a static predicate)
    assert list(bounds) == [-np.inf, 10, 10, 30]


def test_candidates_forget_evicted_victims_until_back() -> None:
    case = {
        "nodes": [{"name": "n1"}, {"name": "n2"}],
        "jobs": [job("v10", 10, ["n1"]), job("v30", 30, ["n2"]), pending()],
    }
    h = Harness(case)
    victim = h.session.cluster.jobs["default/v10"].tasks[0]
    h.evictor.gone([victim])
    rows, bounds = h.evictor.candidates(h.task, h.allowed)
    assert [h.name(r) for r in rows] == ["n2"] and list(bounds) == [30]
    assert h.plan("n1") is None  # the dry run does not see it either
    h.evictor.back([victim])
    rows, _ = h.evictor.candidates(h.task, h.allowed)
    assert [h.name(r) for r in rows] == ["n1", "n2"]


def test_candidates_count_lower_nominations_as_room() -> None:
    case = {
        "nodes": [{"name": "n1"}],
        "jobs": [
            {
                "name": "leaving",
                "priority": 10,
                "pods": [{"count": 1, "gpu": 8, "nodes": ["n1"], "deleting": True}],
            },
            {"name": "low", "priority": 10, "pods": [{"count": 1, "gpu": 8, "nominated": ["n1"]}]},
            pending(),
        ],
    }
    h = Harness(case)
    rows, bounds = h.evictor.candidates(h.task, h.allowed)
    assert [h.name(r) for r in rows] == ["n1"] and list(bounds) == [-np.inf]


# --- the dry run --------------------------------------------------------------------------------------
ONE_TWO_FOUR = {
    "nodes": [{"name": "n1"}],
    "jobs": [
        job("one", 10, ["n1"], gpu=1),
        job("two", 20, ["n1"], gpu=2),
        job("four", 30, ["n1"], gpu=4),
        job("top", 500, ["n1"], gpu=1),
    ],
}


@pytest.mark.parametrize(
    "need,victims",
    [
        (1, {"one-0"}),
        (3, {"one-0", "two-0"}),
        (4, {"four-0"}),
        (5, {"one-0", "four-0"}),
        (6, {"two-0", "four-0"}),
        (7, {"one-0", "two-0", "four-0"}),
    ],
)
def test_plan_reprieve_keeps_the_minimal_victims(need: int, victims: set[str]) -> None:
    h = Harness({**ONE_TWO_FOUR, "jobs": ONE_TWO_FOUR["jobs"] + [pending(gpu=need)]})
    before = h.snapshot()
    plan = h.plan("n1")
    assert plan is not None and names(plan.victims) == victims
    assert plan.violations == 0 and plan.cleared == []
    h.assert_unchanged(before)  # the dry run leaves nothing behind


def test_plan_none_when_everything_allowed_is_not_enough() -> None:
    h = Harness({**ONE_TWO_FOUR, "jobs": ONE_TWO_FOUR["jobs"] + [pending(gpu=8)]})  # top (1 GPU) stays
    before = h.snapshot()
    assert h.plan("n1") is None
    h.assert_unchanged(before)


def test_plan_without_victims_clears_lower_nominations_only() -> None:
    case = {
        "nodes": [{"name": "n1", "gpu": 16}],
        "jobs": [
            {
                "name": "leaving",
                "priority": 1,
                "pods": [{"count": 1, "gpu": 16, "nodes": ["n1"], "deleting": True}],
            },
            {"name": "low", "priority": 10, "pods": [{"count": 1, "gpu": 8, "nominated": ["n1"]}]},
            {"name": "high", "priority": 500, "pods": [{"count": 1, "gpu": 8, "nominated": ["n1"]}]},
            pending(),
        ],
    }
    h = Harness(case)
    plan = h.plan("n1")
    assert plan is not None and plan.victims == [] and names(plan.cleared) == {"low-0"}


def test_plan_counts_higher_nominations() -> None:
    case = {
        "nodes": [{"name": "n1"}],
        "jobs": [
            {
                "name": "leaving",
                "priority": 1,
                "pods": [{"count": 1, "gpu": 4, "nodes": ["n1"], "deleting": True}],
            },
            job("low", 10, ["n1"], gpu=4),
            {"name": "high", "priority": 500, "pods": [{"count": 1, "gpu": 4, "nominated": ["n1"]}]},
            pending(gpu=4),
        ],
    }
    h = Harness(case)
    plan = h.plan("n1")
    assert plan is not None and names(plan.victims) == {"low-0"} and plan.cleared == []


def test_plan_never_takes_a_victim_already_evicted() -> None:
    """A gang's second pod must not count a pod evicted for its first pod (it is Releasing) again."""
    case = {
        "nodes": [{"name": "n1", "gpu": 16}],
        "jobs": [
            job("a", 10, ["n1"], gpu=4),
            job("b", 20, ["n1"], gpu=8),
            job("c", 30, ["n1"], gpu=4),
            {"name": "pre", "priority": 100, "pods": [{"count": 1, "gpu": 4}, {"count": 1, "gpu": 12}]},
        ],
    }
    h = Harness(case)
    first, second = sorted(h.job.tasks, key=lambda t: t.name)
    stmt = h.session.statement()
    a = h.session.cluster.jobs["default/a"].tasks[0]
    stmt.evict(a, "test")  # the first pod's plan, not yet marked gone
    stmt.pipeline(first, h.row("n1"))
    plan = h.evictor.plan(second, h.job, h.row("n1"), h.allowed, h.ok, [a])
    assert plan is not None and names(plan.victims) == {"b-0", "c-0"}
    stmt.discard()


def test_plan_takes_pdb_safe_victims_first_and_counts_violations() -> None:
    case = {
        "nodes": [{"name": "n1"}],
        "pdbs": [{"name": "web", "selector": {"app": "web"}, "minAvailable": 1}],
        "jobs": [
            {
                "name": "w1",
                "priority": 5,
                "pods": [{"count": 1, "gpu": 4, "nodes": ["n1"], "labels": {"app": "web"}}],
            },
            {
                "name": "w2",
                "priority": 6,
                "pods": [{"count": 1, "gpu": 2, "nodes": ["n1"], "labels": {"app": "web"}}],
            },
            job("batch", 50, ["n1"], gpu=2),
            pending(gpu=4),
        ],
    }
    h = Harness(case, pdb=True)
    plan = h.plan("n1")
    # the budget allows one disruption; it goes to w1 (lowest priority), w2 would violate: w1 (4 GPUs)
    # alone frees enough, so batch and w2 stay
    assert plan is not None and names(plan.victims) == {"w1-0"} and plan.violations == 0
    h2 = Harness({**case, "jobs": case["jobs"][:3] + [pending(gpu=6)]}, pdb=True)
    plan = h2.plan("n1")
    assert names(plan.victims) == {"w1-0", "batch-0"} and plan.violations == 0
    h3 = Harness({**case, "jobs": case["jobs"][:3] + [pending(gpu=8)]}, pdb=True)
    plan = h3.plan("n1")
    assert names(plan.victims) == {"w1-0", "w2-0", "batch-0"} and plan.violations == 1


def test_plan_rejected_by_scenario_validator(monkeypatch) -> None:
    h = Harness({**ONE_TWO_FOUR, "jobs": ONE_TWO_FOUR["jobs"] + [pending(gpu=4)]})
    seen = []

    def veto(preemptor, jobs, tasks, action):
        seen.append((preemptor.uid, sorted(j.uid for j in jobs), names(tasks), action))
        return False

    monkeypatch.setattr(h.session, "scenario_valid", veto)
    before = h.snapshot()
    assert h.plan("n1") is None
    assert seen == [("default/pre", ["default/four"], {"four-0"}, "preempt")]
    h.assert_unchanged(before)


# --- ranking ------------------------------------------------------------------------------------------
def _plan(node: int, prios: list[int], violations: int = 0, starts: list[float] | None = None) -> Plan:
    starts = starts or [0.0] * len(prios)
    return Plan(node, [SimpleNamespace(priority=p, start_time=s) for p, s in zip(prios, starts)], violations)


def test_plan_rank_order() -> None:
    plans = [
        _plan(0, [1], violations=1),  # any violation ranks last
        _plan(1, [10, 40]),  # highest victim priority 40
        _plan(2, [30, 30]),  # highest 30, sum 60
        _plan(3, [30, 10]),  # highest 30, sum 40, two victims
        _plan(4, [30, 5, 5]),  # highest 30, sum 40, three victims
        _plan(5, [40]),  # highest 40, sum 40
        _plan(6, [30, 10], starts=[100.0, 200.0]),  # as node 3 but its earliest victim started later
        _plan(7, []),  # no victim at all: best
    ]
    ranked = [p.node for p in sorted(plans, key=Plan.rank)]
    assert ranked == [7, 6, 3, 4, 2, 5, 1, 0]


def test_best_stops_when_no_node_can_beat_the_plan() -> None:
    nodes = [{"name": f"n{i}"} for i in range(5)]
    jobs = [job(f"v{i}", 10 * (i + 1), [f"n{i}"]) for i in range(5)]
    h = Harness({"nodes": nodes, "jobs": jobs + [pending()]})
    plan = h.best()
    assert h.name(plan.node) == "n0" and h.evictor.dry_runs == 1  # bounds 20.. exceed 10


def test_best_ties_limit_dry_runs() -> None:
    nodes = [{"name": f"n{i}"} for i in range(8)]
    jobs = [job(f"v{i}", 10, [f"n{i}"]) for i in range(8)]
    h = Harness({"nodes": nodes, "jobs": jobs + [pending()]})
    h.evictor.ties = 3
    plan = h.best()
    assert h.name(plan.node) == "n0" and h.evictor.dry_runs == 1 + 3


def test_best_dry_runs_every_node_that_could_beat_the_best() -> None:
    """Bounds below the best plan's highest victim priority do not count as ties (a plan can be worse
    than its bound when a plugin filters victims out: here conformance protects kube-system pods)."""
    nodes = [{"name": f"n{i}", "gpu": 16} for i in range(5)] + [{"name": "n5"}]
    jobs = [
        {
            "name": "sys",
            "namespace": "kube-system",
            "priority": 1,
            "pods": [{"count": 5, "gpu": 8, "nodes": [f"n{i}" for i in range(5)]}],
        },
        {
            "name": "mid",
            "priority": 50,
            "pods": [{"count": 5, "gpu": 8, "nodes": [f"n{i}" for i in range(5)]}],
        },
        job("low", 20, ["n5"]),
        pending(),
    ]
    h = Harness({"nodes": nodes, "jobs": jobs})
    h.evictor.ties = 1
    plan = h.best()
    assert h.name(plan.node) == "n5" and names(plan.victims) == {"low-0"}
    assert h.evictor.dry_runs == 6


def test_best_prefers_no_violation_over_lower_priority() -> None:
    case = {
        "nodes": [{"name": "n1"}, {"name": "n2"}],
        "pdbs": [{"name": "web", "selector": {"app": "web"}, "maxUnavailable": 0}],
        "jobs": [
            {
                "name": "web",
                "priority": 1,
                "pods": [{"count": 1, "gpu": 8, "nodes": ["n1"], "labels": {"app": "web"}}],
            },
            job("batch", 90, ["n2"]),
            pending(),
        ],
    }
    h = Harness(case, pdb=True)
    plan = h.best()
    assert h.name(plan.node) == "n2" and plan.violations == 0
    assert h.evictor.dry_runs == 2  # the violating plan does not stop the search


# --- pdb budgets ----------------------------------------------------------------------------------
def _pdb(**spec):
    from corral.manifests.selectors import parse_label_selector
    from corral.model import PodDisruptionBudget

    return PodDisruptionBudget(
        "default/b",
        "default",
        parse_label_selector({"matchLabels": {"app": "web"}}, "b", "s"),
        spec.get("minAvailable"),
        spec.get("maxUnavailable"),
    )


def _pods(running: int, pending_: int = 0):
    def mk(status):
        return SimpleNamespace(namespace="default", labels={"app": "web"}, status=status)

    return [mk(TaskStatus.RUNNING) for _ in range(running)] + [
        mk(TaskStatus.PENDING) for _ in range(pending_)
    ]


@pytest.mark.parametrize(
    "spec,running,pending_,allowed",
    [
        ({"minAvailable": 2}, 3, 0, 1),
        ({"minAvailable": 3}, 3, 0, 0),
        ({"minAvailable": "50%"}, 3, 0, 1),
        ({"minAvailable": "50%"}, 2, 1, 0),
        ({"maxUnavailable": 1}, 3, 0, 1),
        ({"maxUnavailable": 1}, 2, 1, 0),
        ({"maxUnavailable": "50%"}, 4, 0, 2),
        ({"maxUnavailable": "30%"}, 4, 0, 2),
        ({}, 2, 0, 2),
    ],
)
def test_allowed_disruptions(spec, running, pending_, allowed) -> None:
    assert allowed_disruptions(_pdb(**spec), _pods(running, pending_)) == allowed


def test_pdb_budget_follows_evictions_of_running_pods_only() -> None:
    case = {
        "nodes": [{"name": "n1"}],
        "pdbs": [{"name": "web", "selector": {"app": "web"}, "maxUnavailable": 2}],  # 3 match: 1 allowed
        "jobs": [
            {
                "name": "run",
                "priority": 1,
                "pods": [{"count": 2, "gpu": 2, "nodes": ["n1", "n1"], "labels": {"app": "web"}}],
            },
            {
                "name": "bound",
                "priority": 1,
                "pods": [
                    {"count": 1, "gpu": 2, "nodes": ["n1"], "phase": "Pending", "labels": {"app": "web"}}
                ],
            },
            pending(gpu=2),
        ],
    }
    s = open_session(case, pdb=True)
    pdb = s.plugin("pdb")
    ((_, budget0),) = pdb.budgets
    assert budget0 == 1  # 2 healthy (running) - (3 - 2) desired
    bound = s.cluster.jobs["default/bound"].tasks[0]
    assert bound.status is TaskStatus.BOUND
    stmt = s.statement()
    stmt.evict(bound, "test")  # not healthy: no budget used
    assert pdb.budgets[0][1] == budget0
    stmt.discard()
    assert pdb.budgets[0][1] == budget0
    run0, run1 = s.cluster.jobs["default/run"].tasks
    stmt = s.statement()
    stmt.evict(run0, "test")
    assert pdb.budgets[0][1] == budget0 - 1
    assert s.violations([run1]) == [True]  # the one disruption is spent
    stmt.discard()
    assert pdb.budgets[0][1] == budget0 and s.violations([run1]) == [False]


# --- the queue rule of reclaim --------------------------------------------------------------------
def test_reclaim_rule_any_resource_above_deserved() -> None:
    """Proportion on a GPU cluster whose pods also ask for CPU (Volcano's ``!allocated.LessEqual(deserved)``):
    qa (16 GPUs, deserves 8; its CPU deserved is its request, nothing limits it) gives up GPU pods while
    it holds more than it deserves in some resource: 16 -> 12 -> 8, then it is at its share everywhere."""
    case = {
        "nodes": [{"name": "n1"}, {"name": "n2"}],
        "queues": [{"name": "qa"}, {"name": "qb"}],
        "jobs": [
            {
                "name": "a",
                "queue": "qa",
                "priority": 1,
                "minMember": 1,
                "pods": [{"count": 4, "gpu": 4, "cpu": 8, "nodes": ["n1", "n1", "n2", "n2"]}],
            },
            {"name": "b", "queue": "qb", "priority": 1, "pods": [{"count": 1, "gpu": 8, "cpu": 8}]},
        ],
    }
    s = open_session(case)
    prop = s.plugin("proportion")
    gpu, cpu = s.cluster.resources.pos("nvidia.com/gpu"), s.cluster.resources.pos("cpu")
    assert prop.deserved["qa"][gpu] == 8000 and prop.deserved["qa"][cpu] == prop.allocated["qa"][cpu]
    b = s.cluster.jobs["default/b"].tasks[0]
    victims = s.cluster.jobs["default/a"].tasks
    assert names(prop.reclaimable(b, victims)) == {"a-0", "a-1"}  # 16 -> 8 GPUs


def test_reclaim_rule_allows_the_pod_that_crosses_the_line() -> None:
    """The issue's case: a queue 1 CPU and 0.8 GiB above its share, running 1 CPU / 1 GiB pods, gives one
    back (the old floor could never allow it), and only one."""
    case = {
        "nodes": [{"name": "n1", "cpu": 4, "memory": "4Gi", "gpu": 0}],
        "queues": [
            {"name": "qa", "deserved": {"cpu": 2, "memory": "2458Mi"}},
            {"name": "qb", "deserved": {"cpu": 2, "memory": "2Gi"}},
        ],
        "jobs": [
            {
                "name": "a",
                "queue": "qa",
                "priority": 1,
                "minMember": 1,
                "pods": [{"count": 3, "cpu": 1, "memory": "1Gi", "nodes": ["n1"] * 3}],
            },
            {"name": "b", "queue": "qb", "priority": 1, "pods": [{"count": 2, "cpu": 1, "memory": "1Gi"}]},
        ],
    }
    s = open_session(case, queue_plugin="capacity")
    cap = s.plugin("capacity")
    b = s.cluster.jobs["default/b"].tasks[0]
    assert names(cap.reclaimable(b, list(s.cluster.jobs["default/a"].tasks))) == {"a-0"}


def test_reclaim_action_applies_queue_rule_whatever_the_tier() -> None:
    case = {
        "nodes": [{"name": "n1"}],
        "queues": [
            {"name": "qa", "deserved": {"nvidia.com/gpu": 6}},
            {"name": "qb", "deserved": {"nvidia.com/gpu": 4}},
        ],
        "jobs": [
            {
                "name": "a",
                "queue": "qa",
                "priority": 1,
                "minMember": 1,
                "pods": [{"count": 2, "gpu": 4, "nodes": ["n1", "n1"]}],
            },
            {"name": "pre", "queue": "qb", "priority": 1, "pods": [{"count": 1, "gpu": 4}]},
        ],
    }
    h = Harness(case, action=ReclaimAction, queue_plugin="capacity")
    pods = list(h.session.cluster.jobs["default/a"].tasks)
    assert names(h.session.reclaimable(h.task, pods)) == {"a-0", "a-1"}  # tier 1 (conformance) decides
    # qa (8 GPUs, deserves 6) gives back the pod that crosses 6: the last in TaskOrder (victims of one job
    # go in reverse TaskOrder, Volcano BuildVictimsPriorityQueue)
    assert names(h.ok(pods)) == {"a-1"}
    plan = h.plan("n1")
    assert plan is not None and names(plan.victims) == {"a-1"}


def test_plan_clears_only_the_nominations_it_needs() -> None:
    """Two lower-priority pods of the same queue are nominated to n1 (4 GPUs each, capacity being
    released); a 4-GPU preemptor needs only one of the places: the lower of the two gives way. A
    nomination of another queue is never cleared."""
    case = {
        "nodes": [{"name": "n1"}],
        "queues": [{"name": "qa"}, {"name": "qb"}],
        "jobs": [
            {
                "name": "leaving",
                "queue": "qa",
                "priority": 1,
                "pods": [{"count": 1, "gpu": 8, "nodes": ["n1"], "deleting": True}],
            },
            {
                "name": "n10",
                "queue": "qa",
                "priority": 10,
                "pods": [{"count": 1, "gpu": 4, "nominated": ["n1"]}],
            },
            {
                "name": "n20",
                "queue": "qa",
                "priority": 20,
                "pods": [{"count": 1, "gpu": 4, "nominated": ["n1"]}],
            },
            pending(gpu=4) | {"queue": "qa"},
        ],
    }
    plan = Harness(case).plan("n1")
    assert plan is not None and plan.victims == [] and names(plan.cleared) == {"n10-0"}
    other = {
        **case,
        "jobs": [j | {"queue": "qb"} if j["name"] in ("n10", "n20") else j for j in case["jobs"]],
    }
    assert Harness(other).plan("n1") is None  # the other queue's reservations stand
