"""``cheapest_domain`` (actions/common/eviction.py): among the domains where a job with a hard job-level
topology can start, preempt and reclaim enter the one whose victims cost least by the gang-eviction
cost model — no healthy gang broken first, then the work lost, then the fewest victims, then the
search-space order."""

from __future__ import annotations

import numpy as np

from corral.actions.common.evict import Evictor
from corral.actions.common.eviction import cheapest_domain
from corral.framework.session import Session
from corral.model import Task
from corral.registry import REGISTRY, default_config
from tests.framework.fakes import NOW, cluster, node, pod, podgroup


def _session() -> Session:
    c = cluster(
        node("n1"),
        node("n2"),
        podgroup("single", 1),
        pod("single-0", 4, node_name="n1", group="single", phase="Running"),
        podgroup("elastic", 1),
        *(pod(f"elastic-{i}", 2, node_name="n2", group="elastic", phase="Running") for i in range(3)),
        podgroup("want", 1),
        pod("want-0", 4, group="want"),
    )
    return Session(c, default_config(), REGISTRY, NOW)


def _pods(s: Session, job: str) -> list[Task]:
    return list(s.cluster.jobs[f"default/{job}"].tasks)


def test_a_domain_that_breaks_no_gang_wins_over_fewer_victims() -> None:
    s = _session()
    want = s.cluster.jobs["default/want"]
    masks = [np.array([True, False]), np.array([False, True])]
    tried: list[int] = []
    answers = {0: _pods(s, "single"), 1: _pods(s, "elastic")[:2]}

    def attempt(mask: np.ndarray | None) -> list[Task] | None:
        i = next(k for k, m in enumerate(masks) if m is mask)
        tried.append(i)
        return answers[i]

    assert cheapest_domain(s, want, list(masks), attempt) == 1  # two surplus pods break nothing
    assert tried == [0, 1]


def test_a_domain_without_victims_ends_the_search_and_none_when_nowhere() -> None:
    s = _session()
    want = s.cluster.jobs["default/want"]
    masks = [np.array([True, False]), np.array([False, True]), np.array([True, True])]
    tried: list[int] = []
    answers: dict[int, list[Task] | None] = {0: None, 1: [], 2: _pods(s, "elastic")[:1]}

    def attempt(mask: np.ndarray | None) -> list[Task] | None:
        i = next(k for k, m in enumerate(masks) if m is mask)
        tried.append(i)
        return answers[i]

    assert cheapest_domain(s, want, list(masks), attempt) == 1
    assert tried == [0, 1]
    assert cheapest_domain(s, want, list(masks), lambda mask: None) is None


def test_a_pod_nominated_in_several_tried_domains_is_listed_once() -> None:
    """A job that tries several domains nominates its pod in each (undone in between): the Evictor's
    list of nominations, which later preemptors clear from, must hold it once, else its room would be
    counted once per listing."""
    s = _session()
    evictor = Evictor(s, "preempt")
    (task,) = _pods(s, "want")
    before = len(evictor.nominated)
    for _ in range(3):
        evictor.nominate(task)
    assert len(evictor.nominated) == before + 1
