"""``run_cycles`` (the multi-cycle loop of ``corral schedule --cycles N`` and the scenario suite), the model's
:class:`~corral.framework.cycle.DecisionSink`, and the podgroup each bind names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from corral.framework.cycle import DecisionSink, ModelSink, apply_decisions, run_cycle, run_cycles
from corral.framework.decisions import Decisions
from corral.manifests.build import build_cluster
from corral.model import Cluster, TaskStatus
from corral.model.clock import parse_time
from corral.registry import REGISTRY, default_config
from tests.scenarios.expand import T0 as START
from tests.scenarios.expand import expand

ROOT = Path(__file__).resolve().parents[2]
T0 = parse_time(START)


def _cluster() -> Cluster:
    """Three nodes of 8 GPUs; a gang of two 8-GPU pods and a single 8-GPU pod: all fit at once."""
    case = {
        "nodes": [{"name": "n1"}, {"name": "n2"}, {"name": "n3"}],
        "jobs": [
            {"name": "train", "pods": [{"count": 2, "gpu": 8}]},
            {"name": "solo", "pods": [{"count": 1, "gpu": 8}]},
        ],
    }
    return build_cluster([("case", o) for o in expand(case)])


class Recording:
    """A sink that records what it is asked to carry out, and carries it out on the model."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, float]] = []

    def apply(self, decisions: Decisions, cluster: Cluster, now: float) -> None:
        self.seen.append((len(decisions.binds), now))
        apply_decisions(cluster, decisions, now)


def test_run_cycles_carries_out_every_cycle_but_the_last_through_its_sink() -> None:
    sink, derived = Recording(), []
    out, after = run_cycles(
        _cluster(),
        default_config(),
        REGISTRY,
        T0,
        3,
        2.5,
        sink=sink,
        derive=lambda cluster, decisions, cycle: derived.append(cycle),
    )
    assert derived == [1, 2, 3]
    assert sink.seen == [(3, T0), (0, T0 + 2.5)]  # every pod is bound in cycle 1; the last is not applied
    assert after == T0 + 7.5
    assert sorted(b.pod for b in out.binds) == ["default/solo-0", "default/train-0", "default/train-1"]
    assert {b.cycle for b in out.binds} == {1}  # bound pods run: cycle 2 does not bind them again
    _, _ = run_cycles(_cluster(), default_config(), REGISTRY, T0, 1, sink=sink, carry_out_last=True)
    assert sink.seen[-1] == (3, T0)


def test_the_model_sink_is_apply_decisions() -> None:
    assert isinstance(ModelSink(), DecisionSink)
    cluster = _cluster()
    decisions = run_cycle(cluster, default_config(), REGISTRY, T0, 1)
    ModelSink(bound=TaskStatus.BOUND).apply(decisions, cluster, T0)
    placed = {t.key: t.status for t in cluster.tasks.values() if t.node >= 0}
    assert placed == dict.fromkeys(("default/solo-0", "default/train-0", "default/train-1"), TaskStatus.BOUND)


def test_a_bind_names_its_podgroup() -> None:
    cluster = _cluster()
    decisions = run_cycle(cluster, default_config(), REGISTRY, T0, 1)
    assert {b.pod: b.podgroup for b in decisions.binds} == {
        "default/solo-0": "default/solo",
        "default/train-0": "default/train",
        "default/train-1": "default/train",
    }
    record = next(r for r in decisions.to_json(1)["binds"] if r["pod"] == "default/train-1")
    assert record == {
        "pod": "default/train-1",
        "node": record["node"],
        "cycle": 1,
        "podgroup": "default/train",
    }


def test_the_scenario_harness_does_not_import_the_command_line() -> None:
    probe = (
        "import sys\nimport tests.scenarios.test_scenarios\n"
        "print(sorted(m for m in sys.modules if m == 'corral.cli' or m.startswith('corral.commands')))"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=ROOT, check=True
    )
    assert run.stdout.strip() == "[]", run.stdout
