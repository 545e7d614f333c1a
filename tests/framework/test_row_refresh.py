"""The one-row paths of the per-task refresh (Session._fits_row, nodeorder's _resource_score) give
exactly, bit for bit, what the array code gives for the same node: a placement's changed row is
recomputed in plain floats, and decisions must not depend on which path ran."""

from __future__ import annotations

import numpy as np

from corral.framework.session import Session
from corral.model.resources import EPS
from corral.registry import REGISTRY, default_config
from tests.framework.fakes import NOW, cluster, node, pod, podgroup


def _session(rng: np.random.Generator) -> Session:
    objs = [node(f"n{i}", gpu=int(rng.integers(0, 9))) for i in range(12)]
    for g, gpu in enumerate((1, 2, 3, 8, 0)):
        objs += [podgroup(f"g{g}"), pod(f"g{g}-0", gpu, group=f"g{g}")]
    s = Session(cluster(*objs), default_config(), REGISTRY, NOW)
    nodes = s.cluster.nodes
    n, r = nodes.allocatable.shape
    # awkward states: full, over-full, fractional, releasing and nominated capacity
    scale = nodes.allocatable * rng.choice([0.0, 0.3, 1 / 3, 0.5, 0.999999, 1.0, 1.2], size=(n, r))
    nodes.used[:] = scale
    nodes.releasing[:] = scale * rng.choice([0.0, 0.5, 1.0], size=(n, r))
    nodes.pipelined[:] = nodes.allocatable * rng.choice([0.0, 0.1, 0.25], size=(n, r))
    return s


def test_one_row_paths_equal_the_array_code() -> None:
    rng = np.random.default_rng(19)
    checked = 0
    for _ in range(40):
        s = _session(rng)
        nodeorder = s.plugin("nodeorder")
        tasks = list(s.cluster.tasks.values())
        for task in tasks:
            need = s.capacity.request_cols(task)[1] - EPS
            for row in range(len(s.cluster.nodes)):
                rows = np.array([row])
                for future in (False, True):
                    expect = bool((s.capacity.free(task, future=future, rows=rows) >= need).all(axis=1)[0])
                    assert s.capacity._fits_row(task, row, future) is expect
                other = (row + 1) % len(s.cluster.nodes)
                both = nodeorder.node_order(task, np.array([row, other]))
                one = nodeorder.node_order(task, rows)
                assert one.tobytes() == both[:1].tobytes(), (task.name, row, one, both)
                checked += 1
    assert checked > 1000
