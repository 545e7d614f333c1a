"""Tier semantics of the Session (SPEC.md §2, corral.framework.extension): ordering is decided by the
first plugin with a non-equal answer; JobEnqueueable votes (any REJECT rejects, a tier with a PERMIT
admits, all ABSTAIN admits); gates are AND (Overused OR); victims intersect within a tier and the first
tier that answers decides. Tiny fake plugins in a test-only registry stand in for the real ones."""

from __future__ import annotations

import numpy as np
import pytest

from corral.errors import PluginError
from corral.framework.extension import Domain, Purpose, Vote
from corral.framework.session import Session
from tests.framework.fakes import NOW, cluster, config, make_plugin, node, pod, podgroup, queue, registry

A, B, C = "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z", "2026-01-01T00:00:03Z"


def world():
    """Jobs a (oldest), b, c; queues qa (oldest), qb; three nodes."""
    return cluster(
        node("n1"),
        node("n2"),
        node("n3"),
        queue("qa", A),
        queue("qb", B),
        podgroup("c", created=A),
        pod("c-0", created=A, group="c"),
        podgroup("a", created=A),
        pod("a-0", created=B, group="a"),
        pod("a-1", created=A, group="a"),
        podgroup("b", created=B),
        pod("b-0", created=A, group="b"),
    )


def session(*tiers: list, plugins: tuple = ()) -> Session:
    reg = registry(*plugins)
    names = [[p if isinstance(p, dict) else {"name": p} for p in t] for t in tiers]
    return Session(world(), config(reg, *names), reg, NOW)


def jobs_in_order(s: Session) -> list[str]:
    return [j.name for j in sorted(s.cluster.jobs.values(), key=s.job_key())]


def by_name(order: list[str]):
    """A comparison that follows ``order``; names not in it compare equal (abstain)."""

    def cmp(x, y) -> int:
        if x.name in order and y.name in order:
            return (order.index(x.name) > order.index(y.name)) - (order.index(x.name) < order.index(y.name))
        return 0

    return cmp


# -- ordering --------------------------------------------------------------------------------------------
def test_no_order_plugin_means_creation_then_name() -> None:
    s = session([])
    assert jobs_in_order(s) == ["a", "c", "b"]  # a and c created at A: by uid
    assert [q.name for q in sorted(s.cluster.queues.values(), key=s.queue_key())][:2] == ["default", "qa"]
    tasks = sorted(s.cluster.jobs["default/a"].tasks, key=s.task_key())
    assert [t.name for t in tasks] == ["a-1", "a-0"]  # a-1 created first


def test_first_non_equal_answer_decides_across_tiers() -> None:
    Abstain = make_plugin("abstain", job_order=lambda a, b: 0)
    First = make_plugin("first", job_order=by_name(["b", "c", "a"]))
    Later = make_plugin("later", job_order=by_name(["c", "b", "a"]))
    s = session(["abstain", "first"], ["later"], plugins=(Abstain, First, Later))
    assert jobs_in_order(s) == ["b", "c", "a"]
    partial = make_plugin("partial", job_order=by_name(["c", "a"]))  # says nothing about b
    s = session(["partial"], ["later"], plugins=(partial, Later))
    # c<a from partial; b vs others from the later tier (c, b, a)
    assert jobs_in_order(s) == ["c", "b", "a"]


def test_order_switch_turns_a_plugin_off() -> None:
    First = make_plugin("first", job_order=by_name(["b", "c", "a"]))
    s = session([{"name": "first", "enableJobOrder": False}], plugins=(First,))
    assert jobs_in_order(s) == ["a", "c", "b"]


def test_queue_and_task_order() -> None:
    Q = make_plugin("q", queue_order=by_name(["qb", "qa"]), task_order=by_name(["a-0", "a-1"]))
    s = session(["q"], plugins=(Q,))
    qs = [q.name for q in sorted(s.cluster.queues.values(), key=s.queue_key())]
    assert qs.index("qb") < qs.index("qa")
    assert [t.name for t in sorted(s.cluster.jobs["default/a"].tasks, key=s.task_key())] == ["a-0", "a-1"]


# -- JobEnqueueable votes --------------------------------------------------------------------------------
def voter(name: str, vote: Vote):
    return make_plugin(name, job_enqueueable=lambda job: vote)


@pytest.mark.parametrize(
    "tiers, admitted",
    [
        ([[]], True),  # nobody votes
        ([["abstain"]], True),  # all abstain
        ([["abstain", "reject"]], False),
        ([["permit", "reject"]], False),  # any reject in the tier rejects
        ([["reject", "permit"]], False),
        ([["permit"], ["reject"]], True),  # a tier with a permit decides
        ([["abstain"], ["permit"], ["reject"]], True),
        ([["abstain"], ["reject"], ["permit"]], False),
    ],
)
def test_job_enqueueable_votes(tiers: list, admitted: bool) -> None:
    plugins = (voter("permit", Vote.PERMIT), voter("reject", Vote.REJECT), voter("abstain", Vote.ABSTAIN))
    s = session(*tiers, plugins=plugins)
    assert s.job_enqueueable(s.cluster.jobs["default/a"]) is admitted


def test_job_enqueued_switch() -> None:
    s = session([{"name": "reject", "enableJobEnqueued": False}], plugins=(voter("reject", Vote.REJECT),))
    assert s.job_enqueueable(s.cluster.jobs["default/a"])


# -- gates -----------------------------------------------------------------------------------------------
def test_gates_and_or() -> None:
    Yes = make_plugin(
        "yes",
        job_ready=lambda j: True,
        job_pipelined=lambda j: True,
        job_starving=lambda j: True,
        allocatable=lambda q, t: True,
        overused=lambda q: False,
        preemptive=lambda q, t: True,
    )
    No = make_plugin(
        "no",
        job_ready=lambda j: j.name != "b",
        job_pipelined=lambda j: False,
        job_starving=lambda j: j.name == "a",
        allocatable=lambda q, t: q.name != "qb",
        overused=lambda q: q.name == "qb",
        preemptive=lambda q, t: False,
    )
    s = session(["yes"], ["no"], plugins=(Yes, No))
    jobs, queues = s.cluster.jobs, s.cluster.queues
    task = jobs["default/a"].tasks[0]
    assert s.job_ready(jobs["default/a"]) and not s.job_ready(jobs["default/b"])
    assert not s.job_pipelined(jobs["default/a"])
    assert s.job_starving(jobs["default/c"])  # JobStarving: the first tier that answers decides
    same = session(["yes", "no"], plugins=(Yes, No))  # ... AND inside it (Volcano's JobStarving)
    assert same.job_starving(same.cluster.jobs["default/a"])
    assert not same.job_starving(same.cluster.jobs["default/c"])
    assert s.allocatable(queues["qa"], task) and not s.allocatable(queues["qb"], task)
    assert s.overused(queues["qb"]) and not s.overused(queues["qa"])  # OR
    assert not s.preemptive(queues["qa"], task)


def test_no_starving_plugin_means_not_starving_and_no_gate_means_yes() -> None:
    s = session([])
    job = s.cluster.jobs["default/a"]
    assert not s.job_starving(job) and s.job_ready(job) and s.job_pipelined(job)
    assert not s.overused(s.cluster.queues["qa"]) and s.allocatable(s.cluster.queues["qa"], job.tasks[0])


def test_job_valid_first_reason_wins_and_invalid_input_comes_first() -> None:
    First = make_plugin("first", job_valid=lambda j: "first says no" if j.name == "a" else None)
    Second = make_plugin("second", job_valid=lambda j: "second says no")
    s = session(["first"], ["second"], plugins=(First, Second))
    assert s.job_valid(s.cluster.jobs["default/a"]) == "first says no"
    assert s.job_valid(s.cluster.jobs["default/b"]) == "second says no"
    s.cluster.jobs["default/b"].invalid_reason = "queue 'x' does not exist"
    assert s.job_valid(s.cluster.jobs["default/b"]) == "queue 'x' does not exist"


# -- placement -------------------------------------------------------------------------------------------
def test_predicate_is_and_of_masks_and_never_a_down_node() -> None:
    P1 = make_plugin("p1", predicate=lambda t: np.array([True, True, False]))
    P2 = make_plugin("p2", predicate=lambda t: np.array([False, True, True]))
    s = session(["p1"], ["p2"], plugins=(P1, P2))
    task = s.cluster.jobs["default/a"].tasks[0]
    assert list(s.predicate(task)) == [False, True, False]
    s.cluster.nodes.down[1] = True
    assert not s.predicate(task).any()
    s2 = session([{"name": "p1", "enablePredicate": False}], plugins=(P1,))
    assert s2.predicate(task).all()


def test_node_scores_are_summed_over_plugins() -> None:
    S1 = make_plugin("s1", node_order=lambda t, rows: rows * 10.0)
    S2 = make_plugin("s2", node_order=lambda t, rows: np.ones(len(rows)))
    s = session(["s1"], ["s2"], plugins=(S1, S2))
    task = s.cluster.jobs["default/a"].tasks[0]
    assert list(s.capacity.node_scores(task, np.array([0, 2]))) == [1.0, 21.0]


def test_gang_search_space_first_non_empty_answer() -> None:
    d1 = Domain("leaf-1", np.array([True, False, False]), 1)
    Empty = make_plugin("empty", gang_search_space=lambda j, p: [])
    One = make_plugin("one", gang_search_space=lambda j, p: [d1])
    s = session(["empty"], ["one"], plugins=(Empty, One))
    assert s.gang_search_space(s.cluster.jobs["default/a"], Purpose.ALLOCATE) == [d1]
    (whole,) = session([]).gang_search_space(s.cluster.jobs["default/a"], Purpose.ALLOCATE)
    assert whole.mask.all() and whole.tier is None


def test_refusals_carry_the_refusing_plugins_reason() -> None:
    Open = make_plugin("open", allocatable=lambda q, t: True, overused=lambda q: False)
    Line = make_plugin(
        "line",
        allocatable=lambda q, t: q.name != "qb",
        allocatable_refusal=lambda q, t: f"waiting in line in {q.name}",
        overused=lambda q: q.name == "qb",
        overused_reason=lambda q, t: None,  # "my share is not the cause"
    )
    Mute = make_plugin("mute", allocatable=lambda q, t: q.name != "qa", overused=lambda q: q.name == "qa")
    s = session(["open", "line", "mute"], plugins=(Open, Line, Mute))
    queues, task = s.cluster.queues, s.cluster.jobs["default/a"].tasks[0]
    assert s.allocatable_refusal(queues["qb"], task) == "waiting in line in qb"
    assert s.allocatable_refusal(queues["qa"], task) == f"queue 'qa' may not take pod {task.name} (mute)"
    assert s.overused_reason(queues["qb"], task) is None
    assert s.overused_reason(queues["qa"], task) == "queue 'qa' already holds its deserved share"


# -- victims ---------------------------------------------------------------------------------------------
def picks(*names: str):
    return lambda preemptor, cands, *rest: [t for t in cands if t.name in names]


def victims(s: Session, fn: str = "preemptable") -> list[str]:
    tasks = sorted(s.cluster.tasks.values(), key=lambda t: t.name)
    return [t.name for t in getattr(s, fn)(tasks[0], tasks)]


def test_victims_intersect_within_a_tier() -> None:
    P1 = make_plugin("p1", preemptable=picks("a-0", "a-1", "b-0"))
    P2 = make_plugin("p2", preemptable=picks("a-1", "b-0", "c-0"))
    P3 = make_plugin("p3", preemptable=picks("c-0"))
    s = session(["p1", "p2"], ["p3"], plugins=(P1, P2, P3))
    assert victims(s) == ["a-1", "b-0"]  # the first tier decides; p3 is not asked


def test_first_answering_tier_decides_abstaining_tiers_are_skipped() -> None:
    Abstain = make_plugin("abstain", preemptable=lambda p, c: None)
    P3 = make_plugin("p3", preemptable=picks("c-0"))
    s = session(["abstain"], ["p3"], plugins=(Abstain, P3))
    assert victims(s) == ["c-0"]
    Nobody = make_plugin("nobody", preemptable=lambda p, c: [])
    s = session(["nobody"], ["p3"], plugins=(Nobody, P3))
    assert victims(s) == []  # an empty answer is an answer
    assert victims(session(["abstain"], plugins=(Abstain,))) == []  # no answer at all: no victim


def test_reclaimable_and_unified_evictable() -> None:
    R = make_plugin("r", reclaimable=picks("b-0"), preemptable=picks("a-0"))
    s = session(["r"], plugins=(R,))
    assert victims(s, "reclaimable") == ["b-0"] and victims(s) == ["a-0"]
    U = make_plugin(
        "u",
        unified_evictable=lambda p, c, action: [
            t for t in c if t.name == ("c-0" if action == "gangpreempt" else "a-1")
        ],
    )
    s = session(["r"], ["u"], plugins=(R, U))
    # the legacy points stay the legacy actions' own; UnifiedEvictable answers the gang actions only
    assert victims(s) == ["a-0"] and victims(s, "reclaimable") == ["b-0"]
    cands = sorted(s.cluster.tasks.values(), key=lambda t: t.name)
    pre = cands[0]
    assert [t.name for t in s.unified_evictable(pre, cands, "gangpreempt")] == ["c-0"]
    assert [t.name for t in s.unified_evictable(pre, cands, "gangreclaim")] == ["a-1"]


def test_victim_switch() -> None:
    P1 = make_plugin("p1", preemptable=picks("a-0"))
    s = session([{"name": "p1", "enablePreemptable": False}], plugins=(P1,))
    assert victims(s) == []  # every victim filter off: no answer, no victim (Volcano returns nil)


def test_victim_filter_and_scenario_validator_are_and() -> None:
    F1 = make_plugin("f1", victim_filter=lambda p, v, a: True, scenario_valid=lambda p, vs, ts, a: True)
    F2 = make_plugin(
        "f2", victim_filter=lambda p, v, a: v.name != "b", scenario_valid=lambda p, vs, ts, a: len(ts) < 2
    )
    s = session(["f1"], ["f2"], plugins=(F1, F2))
    jobs = s.cluster.jobs
    assert s.victim_filter(jobs["default/a"], jobs["default/c"], "preempt")
    assert not s.victim_filter(jobs["default/a"], jobs["default/b"], "preempt")
    assert s.scenario_valid(jobs["default/a"], [jobs["default/b"]], jobs["default/b"].tasks, "reclaim")
    assert not s.scenario_valid(jobs["default/a"], [], jobs["default/a"].tasks, "reclaim")


# -- events ----------------------------------------------------------------------------------------------
def test_event_handlers_hear_apply_and_revert() -> None:
    Both = make_plugin("both", on_allocate=lambda t: None, on_deallocate=lambda t: None)
    s = session(["both"], plugins=(Both,))
    task = s.cluster.jobs["default/a"].tasks[0]
    Both.calls.clear()
    with s.statement() as stmt:
        stmt.allocate(task, 0)
    assert [m for m, _ in Both.calls] == ["on_allocate", "on_deallocate"]


def test_a_plugin_with_only_on_allocate_is_refused_at_start_up() -> None:
    """Half an EventHandler is no point at all: the registry refuses the method (it would never be
    called)."""
    Half = make_plugin("half", on_allocate=lambda t: None)
    with pytest.raises(PluginError, match=r"public method 'on_allocate' belongs to no extension point"):
        session(["half"], plugins=(Half,))
