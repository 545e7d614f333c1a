"""``consolidate`` as a cycle leaves it: the moved pods' stand-ins carry their nominations during the
session only, so the cluster the decisions leave holds no phantom reservation; and a decision is the
same every time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from corral.framework.config import parse_config
from corral.framework.cycle import apply_decisions, run_cycle
from corral.manifests.build import build_cluster
from corral.model.clock import parse_time
from corral.registry import REGISTRY
from tests.scenarios.expand import expand

CASE = Path(__file__).parents[1] / "scenarios" / "cases" / "consolidate_topology_domain_emptied.yaml"


def _cycle() -> tuple:
    case = yaml.safe_load(CASE.read_text())
    cluster = build_cluster(("case", d) for d in expand(case))
    config = parse_config(case["config"], REGISTRY, "case")
    now = parse_time(case["now"])
    return cluster, run_cycle(cluster, config, REGISTRY, now), now


def test_no_phantom_nomination_after_the_session() -> None:
    cluster, decisions, now = _cycle()
    assert [e.action for e in decisions.evictions] == ["consolidate", "consolidate"]
    nodes = cluster.nodes
    columns = [c.copy() for c in (nodes.used, nodes.releasing, nodes.pipelined)]
    cluster.account()  # what the real pods hold
    for before, after in zip(columns, (nodes.used, nodes.releasing, nodes.pipelined)):
        assert np.array_equal(before, after)
    apply_decisions(cluster, decisions, now)
    assert not any(t.uid.endswith("~moved") for t in cluster.tasks.values())
    pipelined = nodes.pipelined.copy()
    cluster.account()
    assert np.array_equal(pipelined, nodes.pipelined)


def test_same_input_same_decisions() -> None:
    first = _cycle()[1].to_json(1)
    again = _cycle()[1].to_json(1)
    assert first == again
