"""The Statement (SPEC.md §2): operations apply at once, commit turns them into decisions, discard and
restore undo them exactly and in reverse order, and the plugins hear every change."""

from __future__ import annotations

import pytest

from corral.errors import CommitError
from corral.framework.session import Session
from corral.model import TaskStatus
from tests.framework.fakes import NOW, config, make_plugin, registry, small_cluster

Recorder = make_plugin("recorder", on_allocate=lambda t: None, on_deallocate=lambda t: None)


@pytest.fixture()
def env():
    Recorder.calls.clear()
    reg = registry(Recorder)
    cluster = small_cluster()
    session = Session(cluster, config(reg, ["recorder"]), reg, NOW, 3)
    return cluster, session


def T(cluster, name: str):
    return cluster.tasks[f"default/{name}"]


def gpu(cluster, array, row: int) -> float:
    return float(array[row, cluster.resources.pos("nvidia.com/gpu")])


def events() -> list[tuple[str, str]]:
    return [(m, args[0].name) for m, args in Recorder.calls]


def test_initial_state(env) -> None:
    cluster, _ = env
    nodes = cluster.nodes
    assert (gpu(cluster, nodes.used, 0), gpu(cluster, nodes.used, 1)) == (2000, 4000)
    assert gpu(cluster, nodes.releasing, 1) == 4000 and gpu(cluster, nodes.pipelined, 1) == 3000
    assert (
        T(cluster, "gone-0").status is TaskStatus.RELEASING
        and T(cluster, "wait-1").status is TaskStatus.PIPELINED
    )


def test_allocate_applies_at_once_and_commit_records_a_bind(env) -> None:
    cluster, session = env
    stmt = session.statement()
    t = T(cluster, "wait-0")
    stmt.allocate(t, 0)
    assert (t.status, t.node, t.nominated) == (TaskStatus.ALLOCATED, 0, -1)
    assert gpu(cluster, cluster.nodes.used, 0) == 3000
    assert cluster.nodes.used[0, cluster.resources.pos("pods")] == 2000
    assert session.decisions.binds == []
    stmt.commit()
    (b,) = session.decisions.binds
    assert (b.pod, b.node, b.cycle) == ("default/wait-0", "n1", 3)
    assert stmt.closed and events() == [("on_allocate", "wait-0")]


def test_allocating_a_nominated_task_releases_its_reservation(env) -> None:
    cluster, session = env
    t = T(cluster, "wait-1")
    with session.statement() as stmt:
        stmt.allocate(t, 0)
        assert gpu(cluster, cluster.nodes.pipelined, 1) == 0 and gpu(cluster, cluster.nodes.used, 0) == 5000
        assert t.nominated == -1
    assert (t.status, t.node, t.nominated) == (TaskStatus.PIPELINED, -1, 1)
    assert gpu(cluster, cluster.nodes.pipelined, 1) == 3000 and gpu(cluster, cluster.nodes.used, 0) == 2000


def test_pipeline_and_evict_and_their_decisions(env) -> None:
    cluster, session = env
    stmt = session.statement()
    stmt.pipeline(T(cluster, "wait-0"), 1)
    stmt.evict(T(cluster, "run-0"), "for a test", action="preempt", preemptor="default/wait")
    assert T(cluster, "wait-0").status is TaskStatus.PIPELINED and T(cluster, "wait-0").nominated == 1
    assert gpu(cluster, cluster.nodes.pipelined, 1) == 4000
    run = T(cluster, "run-0")
    assert run.status is TaskStatus.RELEASING and run.node == 0  # still holds its node
    assert gpu(cluster, cluster.nodes.used, 0) == 2000 and gpu(cluster, cluster.nodes.releasing, 0) == 2000
    assert [t.name for t in stmt.tasks()] == ["wait-0", "run-0"] and [
        t.name for t in stmt.tasks("evict")
    ] == ["run-0"]
    stmt.commit()
    (n,) = session.decisions.nominations
    (e,) = session.decisions.evictions
    assert (n.pod, n.node) == ("default/wait-0", "n2")
    assert (e.pod, e.node, e.action, e.preemptor, e.cycle) == (
        "default/run-0",
        "n1",
        "preempt",
        "default/wait",
        3,
    )
    assert events() == [("on_allocate", "wait-0"), ("on_deallocate", "run-0")]


def test_discard_undoes_in_reverse_order_exactly(env) -> None:
    cluster, session = env
    before = cluster.nodes.state_bytes()
    states = {u: (t.status, t.node, t.nominated) for u, t in cluster.tasks.items()}
    stmt = session.statement()
    stmt.allocate(T(cluster, "wait-0"), 1)
    stmt.evict(T(cluster, "wait-0"), "changed our mind")  # an allocated task may be evicted
    stmt.evict(T(cluster, "run-0"), "x")
    stmt.allocate(T(cluster, "wait-1"), 0)
    Recorder.calls.clear()
    stmt.discard()
    assert cluster.nodes.state_bytes() == before
    assert {u: (t.status, t.node, t.nominated) for u, t in cluster.tasks.items()} == states
    assert events() == [
        ("on_deallocate", "wait-1"),
        ("on_allocate", "run-0"),
        ("on_allocate", "wait-0"),
        ("on_deallocate", "wait-0"),
    ]
    assert stmt.closed and session.decisions.binds == [] and session.decisions.evictions == []


def test_save_and_restore(env) -> None:
    cluster, session = env
    stmt = session.statement()
    stmt.allocate(T(cluster, "wait-0"), 0)
    mark = stmt.save()
    at_mark = cluster.nodes.state_bytes()
    stmt.allocate(T(cluster, "wait-1"), 0)
    stmt.evict(T(cluster, "run-0"), "x")
    stmt.restore(mark)
    assert cluster.nodes.state_bytes() == at_mark and stmt.save() == mark == 1
    assert (
        T(cluster, "wait-1").status is TaskStatus.PIPELINED
        and T(cluster, "run-0").status is TaskStatus.RUNNING
    )
    stmt.restore(mark)  # restoring again is a no-op
    stmt.commit()
    assert [b.pod for b in session.decisions.binds] == ["default/wait-0"]


def test_context_manager_discards_unless_committed(env) -> None:
    cluster, session = env
    with session.statement() as stmt:
        stmt.allocate(T(cluster, "wait-0"), 0)
    assert T(cluster, "wait-0").status is TaskStatus.PENDING
    with session.statement() as stmt:
        stmt.allocate(T(cluster, "wait-0"), 0)
        stmt.commit()
    assert T(cluster, "wait-0").status is TaskStatus.ALLOCATED and len(session.decisions.binds) == 1


def test_discard_on_exception_inside_with(env) -> None:
    cluster, session = env
    with pytest.raises(RuntimeError), session.statement() as stmt:
        stmt.allocate(T(cluster, "wait-0"), 0)
        raise RuntimeError("boom")
    assert T(cluster, "wait-0").status is TaskStatus.PENDING


@pytest.mark.parametrize(
    "op, name",
    [
        ("allocate", "run-0"),
        ("allocate", "gone-0"),
        ("pipeline", "run-0"),
        ("evict", "wait-0"),
        ("evict", "wait-1"),
        ("evict", "gone-0"),
    ],
)
def test_illegal_transitions(env, op: str, name: str) -> None:
    cluster, session = env
    stmt = session.statement()
    before = cluster.nodes.state_bytes()
    with pytest.raises(CommitError):
        if op == "evict":
            stmt.evict(T(cluster, name), "x")
        else:
            getattr(stmt, op)(T(cluster, name), 0)
    assert cluster.nodes.state_bytes() == before and stmt.ops == []


def test_a_closed_statement_takes_nothing(env) -> None:
    cluster, session = env
    stmt = session.statement()
    stmt.commit()
    with pytest.raises(CommitError):
        stmt.commit()
    with pytest.raises(CommitError):
        stmt.allocate(T(cluster, "wait-0"), 0)
    other = session.statement()
    other.discard()
    with pytest.raises(CommitError):
        other.commit()
