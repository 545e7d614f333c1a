"""Flow bugs found by the property tests, kept as exact reproductions."""

from __future__ import annotations

from pathlib import Path

import yaml

from corral.framework.cycle import run_cycle
from corral.manifests.build import build_cluster
from corral.model import TaskStatus
from corral.model.clock import parse_time
from corral.registry import REGISTRY
from tests.actions.test_flow_properties import flow_config

DATA = Path(__file__).parent / "data"


def test_flow_keeps_an_earlier_nomination_s_room() -> None:
    """Found by test_flow_never_overcommits: flow moved default/j2-2 off the node it was nominated to
    (n3), default/j5-1 (4096Mi) took the room its nomination held, and j2's gang was then rolled back,
    restoring the nomination: n3 was promised 8704Mi of 8192Mi. A nominated pod now stays on its node
    within a round."""
    docs = list(yaml.safe_load_all((DATA / "flow_nomination_overcommit.yaml").read_text()))
    cluster = build_cluster([("flow_nomination_overcommit.yaml", d) for d in docs])
    decisions = run_cycle(
        cluster, flow_config("lowerbound", "trivial"), REGISTRY, parse_time("2026-01-01T00:00:00Z"), 1
    )
    nominated = {t.key: t.request for t in cluster.tasks.values() if t.status is TaskStatus.PIPELINED}
    assert "default/j2-2" in nominated or any(n.pod == "default/j2-2" for n in decisions.nominations)
    binds_on_n3 = [b.pod for b in decisions.binds if b.node == "n3"]
    assert "default/j5-1" not in binds_on_n3
