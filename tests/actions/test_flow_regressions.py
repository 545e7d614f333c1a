"""Known flow bugs, kept as exact reproductions (``xfail(strict=True)``: when the bug is fixed the test
passes, and the marker must go)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from corral.framework.cycle import run_cycle
from corral.manifests.build import build_cluster
from corral.manifests.fields import parse_time
from corral.model import TaskStatus
from corral.registry import REGISTRY
from tests.actions.test_flow_properties import flow_config

DATA = Path(__file__).parent / "data"


@pytest.mark.xfail(
    strict=True,
    reason="flow binds default/j5-1 (4096Mi) on n3 into the room an earlier nomination (default/j2-2, "
    "512Mi) holds there, without clearing that nomination: n3 is promised 8704Mi of 8192Mi. Found by "
    "test_flow_never_overcommits; present since flow was added (seed 004).",
)
def test_flow_keeps_an_earlier_nomination_s_room() -> None:
    docs = list(yaml.safe_load_all((DATA / "flow_nomination_overcommit.yaml").read_text()))
    cluster = build_cluster([("flow_nomination_overcommit.yaml", d) for d in docs])
    decisions = run_cycle(
        cluster, flow_config("lowerbound", "trivial"), REGISTRY, parse_time("2026-01-01T00:00:00Z"), 1
    )
    nominated = {t.key: t.request for t in cluster.tasks.values() if t.status is TaskStatus.PIPELINED}
    assert "default/j2-2" in nominated or any(n.pod == "default/j2-2" for n in decisions.nominations)
    binds_on_n3 = [b.pod for b in decisions.binds if b.node == "n3"]
    assert "default/j5-1" not in binds_on_n3
