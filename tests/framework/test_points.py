"""The closed plugin contract (src/corral/framework/points.py, hints.py): a plugin declares the points
it implements as bases; the registry refuses a misspelt or stray public method and a point method with
the wrong signature at start-up; and a NodeOrder plugin that gives no cache hints is never cached."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from corral.errors import PluginError
from corral.framework.contract import check_plugin_class
from corral.framework.extension import POINTS, JobOrder, NodeOrder, Predicate
from corral.framework.hints import ROW, CacheHints
from corral.framework.plugin import Plugin
from corral.framework.points import declared_points
from corral.framework.session import Session
from corral.model import Job, Task
from corral.registry import REGISTRY
from tests.framework.fakes import NOW, cluster, config, node, pod, podgroup, registry


class Misspelt(Plugin, JobOrder):
    name = "misspelt"

    def job_order(self, a: Job, b: Job) -> int:
        return 0

    def job_ordr(self, a: Job, b: Job) -> int:  # a typo: would never be called
        return 0


class WrongSignature(Plugin, Predicate):
    name = "wrong"

    def predicate(self, task: Task, node: int) -> np.ndarray:  # Predicate passes the task alone
        return np.ones(1, dtype=bool)


class Undeclared(Plugin):
    """Implements node_order but does not declare NodeOrder: the method belongs to no point."""

    name = "undeclared"

    def node_order(self, task: Task, nodes: np.ndarray) -> np.ndarray:
        return np.zeros(len(nodes))


class DeclaredNotImplemented(Plugin, NodeOrder):
    name = "half"


def test_a_misspelt_point_method_is_refused_at_start_up() -> None:
    with pytest.raises(PluginError, match=r"plugin 'misspelt' .*public method 'job_ordr' belongs to no"):
        registry(Misspelt)


@pytest.mark.parametrize(
    ("cls", "words"),
    [
        (WrongSignature, r"predicate\(\) must accept \(self, task\) as Predicate passes them"),
        (Undeclared, r"public method 'node_order' belongs to no extension point"),
        (DeclaredNotImplemented, r"declares NodeOrder but does not implement node_order\(\)"),
    ],
)
def test_contract_breaks_are_refused(cls: type, words: str) -> None:
    with pytest.raises(PluginError, match=words):
        check_plugin_class(cls)


def test_every_built_in_plugin_keeps_the_contract() -> None:
    for cls in REGISTRY.plugins.values():
        check_plugin_class(cls)
        assert all(m in dir(cls) for p in declared_points(cls) for m in p.methods)


def test_every_point_has_a_method_and_a_unique_name() -> None:
    assert len({p.name for p in POINTS}) == len(POINTS)
    assert all(p.methods for p in POINTS)


# -- cache hints: safe by default -------------------------------------------------------------------
def _scorer(hinted: bool) -> type:
    calls: list[int] = []

    def node_order(self: Any, task: Task, nodes: np.ndarray) -> np.ndarray:
        calls.append(len(nodes))
        return np.asarray(nodes, dtype=float)  # a node scores its row number

    body: dict[str, Any] = {"name": "scorer", "calls": calls, "node_order": node_order}
    bases: tuple[type, ...] = (Plugin, NodeOrder)
    if hinted:
        body["sign_pod"] = lambda self, task: ()
        body["score_scope"] = lambda self, task: ROW
        bases = (*bases, CacheHints)
    return type("Scorer", bases, body)


def _session(cls: type) -> Session:
    reg = registry(cls)
    c = cluster(node("n1"), node("n2"), node("n3"), podgroup("a"), pod("a-0", 1, group="a"))
    return Session(c, config(reg, [{"name": "scorer"}]), reg, NOW)


@pytest.mark.parametrize("hinted", [False, True])
def test_a_node_order_plugin_without_hints_is_never_cached(hinted: bool) -> None:
    cls = _scorer(hinted)
    s = _session(cls)
    task = s.cluster.jobs["default/a"].tasks[0]
    mask = np.ones(3, dtype=bool)
    for _ in range(3):
        assert s.capacity.best_row(task, mask) == 2
        assert s.capacity.node_scores(task, np.array([0, 2])).tolist() == [0.0, 2.0]
    if hinted:  # computed once over every node, then served from the kept array
        assert cls.calls == [3]  # type: ignore[attr-defined]
        assert s.score_key(task) is not None
    else:  # asked afresh every time
        assert len(cls.calls) == 6  # type: ignore[attr-defined]
        assert s.score_key(task) is None


# -- the pod signature: the request and what each enabled plugin signs -------------------------------------
def _signature_of_two_pods(plugins: list[str], field: str, values: tuple[Any, Any]) -> tuple[Any, Any]:
    """The Predicate signatures of two pods whose classes differ in ``field`` alone."""
    reg = registry(*(REGISTRY.plugins[p] for p in plugins))
    c = cluster(node("n1"), podgroup("a"), pod("a-0", 1, group="a"), pod("a-1", 1, group="a"))
    s = Session(c, config(reg, [{"name": p} for p in plugins]), reg, NOW)
    one, two = s.cluster.jobs["default/a"].tasks
    assert one.klass is not None and two.klass is not None
    one.klass = one.klass._replace(**{field: values[0]})
    two.klass = two.klass._replace(**{field: values[1]})
    return s.signature(one), s.signature(two)


@pytest.mark.parametrize(
    ("field", "values", "signer"),
    [
        ("gpu_share", (None, (1, 0.5, 0.0)), "gpushare"),
        ("subgroup", ("a", "b"), "network-topology-aware"),
        ("claims", (None, ("c",)), "dra"),
        ("node_selector", ((), (("zone", "a"),)), "predicates"),
    ],
)
def test_a_class_field_splits_the_signature_only_when_a_plugin_reads_it(
    field: str, values: tuple[Any, Any], signer: str
) -> None:
    others = [p for p in ("predicates", "gpushare", "dra") if p != signer]
    one, two = _signature_of_two_pods(others, field, values)
    assert one is not None and one == two  # nobody reads it: one cached answer serves both pods
    one, two = _signature_of_two_pods([*others, signer], field, values)
    assert one is not None and two is not None and one != two
