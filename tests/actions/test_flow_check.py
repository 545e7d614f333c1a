"""Unit tests of corral.actions.common.flow_check: the exact per-group fit of the pod-by-pod check
(:class:`GroupFit`) and which jobs enter a network at all (:func:`may_fit`). The check and the repair
through the flow action are tested in test_flow.py."""

from __future__ import annotations

from corral.actions.common.flow_check import GroupFit, may_fit
from corral.framework.session import Session
from corral.manifests.build import build_cluster
from corral.registry import REGISTRY
from tests.actions.test_flow import T0, _config, _gang_docs


def _session(n_nodes: int, gangs: list[tuple[str, int, int, int]]) -> Session:
    cluster = build_cluster(("t", d) for d in _gang_docs(n_nodes, gangs))
    return Session(cluster, _config(), REGISTRY, T0, 1)


def _tasks(session: Session, job: str) -> list:
    return sorted(
        (t for t in session.cluster.tasks.values() if t.name.startswith(f"{job}-")), key=lambda t: t.name
    )


def test_group_fit_counts_the_binds_it_was_told_of() -> None:
    # two nodes of 8 GPUs, three 4-GPU pods: n0 holds two of them, the third fits only on n1
    session = _session(2, [("g", 3, 4, 1)])
    a, b, c = _tasks(session, "g")
    fit = GroupFit(session, a, [0, 0, 1])
    assert fit.peek(a, 0, 0) == 0
    fit.take(0, 0)
    assert fit.peek(b, 0, 0) == 0
    fit.take(0, 0)
    assert fit.peek(c, 0, 0) == 2  # n0 is full once two binds are counted
    assert fit.peek(c, 1, 0) == 0
    assert fit.peek(c, 1, 1) == 1  # an answer of kind 1 (capacity being released) is a nomination


def test_may_fit_asks_room_for_the_lower_bound() -> None:
    # two nodes of 8 GPUs hold two of a gang's three 8-GPU pods: not its minimum of 3, enough for 2
    session = _session(2, [("wide", 3, 8, 3)])
    tasks = _tasks(session, "wide")
    assert not may_fit(session, tasks, 3, {})
    assert may_fit(session, tasks, 2, {})
    huge = _session(2, [("huge", 1, 16, 1)])
    assert not may_fit(huge, _tasks(huge, "huge"), 0, {})  # no bound, still one pod must fit
