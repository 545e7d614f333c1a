"""Unit tests of the ``flow`` action (seed 004): its arguments, the built-in example through
``corral schedule``, and ``corral simulate`` / ``corral compare`` with flow in place of allocate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from corral.actions.flow import FlowAction, FlowArgs
from corral.commands.simulate import register
from corral.errors import ConfigError
from corral.framework.config import parse_config
from corral.framework.session import Session
from corral.manifests.build import build_cluster
from corral.registry import DEFAULT_CONFIG, REGISTRY
from tests.sim.test_commands import CLUSTER, WORKLOAD

T0 = 1767225600.0


def _config(**arguments):
    raw = {
        **DEFAULT_CONFIG,
        "actions": "enqueue, flow, backfill",
        "configurations": [{"name": "flow", "arguments": arguments}],
    }
    return parse_config(raw, REGISTRY, "test")


def test_arguments_parse_with_their_spellings() -> None:
    cfg = _config(
        gangMode="sequential",
        costModel="topology",
        sequentialOrder="gangsFirst",
        maxResolves=5,
        waitCostUnit="5m",
    )
    args = cfg.actions[1].args
    assert args == FlowArgs("sequential", "topology", "gangsFirst", 5, 300.0)


@pytest.mark.parametrize(
    "arguments, words",
    [
        ({"gangMode": "greedy"}, "gangMode"),
        ({"costModel": "cheap"}, "costModel"),
        ({"maxResolves": -1}, "maxResolves"),
        ({"resolves": 2}, "resolves"),
    ],
)
def test_bad_arguments_name_the_field(arguments, words) -> None:
    with pytest.raises(ConfigError) as err:
        _config(**arguments)
    assert words in str(err.value)


def _gang_docs(n_nodes: int, gangs: list[tuple[str, int, int, int]]) -> list[dict]:
    docs = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"n{i}"},
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"}},
        }
        for i in range(n_nodes)
    ]
    for name, pods, gpu, minimum in gangs:
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "d", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"minMember": minimum},
                "status": {"phase": "Inqueue"},
            }
        )
        for k in range(pods):
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{k}",
                        "namespace": "d",
                        "uid": f"{name}-{k}",
                        "annotations": {"scheduling.k8s.io/group-name": name},
                        "creationTimestamp": "2026-01-01T00:00:00Z",
                    },
                    "spec": {
                        "schedulerName": "corral",
                        "containers": [
                            {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpu), "cpu": "1"}}}
                        ],
                    },
                    "status": {"phase": "Pending"},
                }
            )
    return docs


@pytest.mark.parametrize("mode", ["lowerbound", "rollback", "sequential"])
def test_stats_and_gangs_whole(mode: str) -> None:
    docs = _gang_docs(4, [("a", 3, 8, 3), ("b", 3, 8, 3), ("c", 2, 4, 1)])
    cluster = build_cluster(("t", d) for d in docs)
    cfg = _config(gangMode=mode)
    session = Session(cluster, cfg, REGISTRY, T0, 1)
    action = FlowAction(cfg.actions[1].args)
    action.execute(session)
    decisions = session.close()
    jobs = {}
    for b in decisions.binds:
        jobs[b.pod.split("/")[1].rsplit("-", 1)[0]] = jobs.get(b.pod.split("/")[1].rsplit("-", 1)[0], 0) + 1
    assert jobs.get("a", 0) in (0, 3) and jobs.get("b", 0) in (0, 3)
    assert jobs.get("a", 0) + jobs.get("b", 0) == 3  # 4 nodes hold one of the two 3-node gangs
    assert jobs.get("c") == 2  # the two 4-GPU pods share the fourth node
    assert action.stats["solves"] >= 1 and action.stats["rounds"] >= 1


def _both_prefer_n0() -> tuple[Session, FlowAction]:
    """An 8-GPU and a 4-GPU pod that both prefer n0 (8 GPUs), a quincy round executed on two nodes."""
    docs = _gang_docs(2, [("big", 1, 8, 1), ("small", 1, 4, 1)])
    for d in docs:
        if d["kind"] == "Pod":
            d["metadata"]["annotations"]["corral.io/preferred-nodes"] = "n0"
    cfg = _config(costModel="quincy")
    session = Session(build_cluster(("t", d) for d in docs), cfg, REGISTRY, T0, 1)
    action = FlowAction(cfg.actions[1].args)
    action.execute(session)
    return session, action


def test_oversubscribed_node_repaired_without_a_resolve() -> None:
    # quincy: both pods prefer n0 and the flow sends both there (8 + 4 GPUs on 8): the check keeps the
    # dearer 8-GPU pod on n0 and places the 4-GPU pod on n1 in place, through the same checks
    session, action = _both_prefer_n0()
    binds = {b.pod: b.node for b in session.close().binds}
    assert binds == {"d/big-0": "n0", "d/small-0": "n1"}
    assert action.stats["failed"] == 1 and action.stats["repaired"] == 1
    assert action.stats["resolves"] == 0 and action.stats["solves"] == 1


def test_many_failed_pods_go_to_a_residual_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    # the same case with in-place repair off (as when more pods fail than REPAIR_MAX): the failed pod
    # goes into a re-solve of the residual network, which places it on n1
    import corral.actions.flow as flow

    monkeypatch.setattr(flow, "REPAIR_MAX", 0)
    session, action = _both_prefer_n0()
    assert {b.pod: b.node for b in session.close().binds} == {"d/big-0": "n0", "d/small-0": "n1"}
    assert action.stats["repaired"] == 0 and action.stats["resolves"] == 1 and action.stats["solves"] == 2


def test_gang_without_room_stays_out_of_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2 nodes of 8 GPUs: a gang of three 8-GPU pods can never be whole this round and is not put in the
    # network; the other job is placed and the gang keeps allocate's reason
    import corral.actions.flow as flow

    seen = []
    original = flow.build_network

    def record(session, jobs, *a, **k):
        seen.append(sorted(j.name for j in jobs))
        return original(session, jobs, *a, **k)

    monkeypatch.setattr(flow, "build_network", record)
    cluster = build_cluster(("t", d) for d in _gang_docs(2, [("wide", 3, 8, 3), ("one", 1, 8, 1)]))
    cfg = _config()
    session = Session(cluster, cfg, REGISTRY, T0, 1)
    FlowAction(cfg.actions[1].args).execute(session)
    decisions = session.close()
    assert [b.pod for b in decisions.binds] == ["d/one-0"]
    assert all("wide" not in names for names in seen) and seen
    assert any(u.podgroup == "d/wide" for u in decisions.unschedulable)


@pytest.fixture()
def files(tmp_path: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "w.csv").write_text(WORKLOAD)
    for mode in ("sequential",):
        (tmp_path / f"flow-{mode}.yaml").write_text(
            'actions: "enqueue, flow, backfill"\nconfigurations:\n- name: flow\n  arguments: {gangMode: '
            f"{mode}}}\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: drf\n"
            "  - name: predicates\n  - name: proportion\n"
        )
    return tmp_path


def test_compare_allocate_and_flow(files: Path) -> None:
    app = typer.Typer()
    register(app)
    out = files / "cmp"
    res = CliRunner().invoke(
        app,
        [
            "compare",
            "default",
            str(files / "flow-sequential.yaml"),
            "--workload",
            str(files / "w.csv"),
            "--cluster",
            str(files / "cluster.yaml"),
            "--output",
            str(out),
            "--no-progress",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.stderr
    rows = {r["config"]: r for r in json.loads((out / "comparison.json").read_text())}
    assert set(rows) == {"default", "flow-sequential"}
    summary = json.loads((out / "flow-sequential" / "summary.json").read_text())
    assert summary["jobs_completed"] == 3


def test_example_configurations_parse() -> None:
    # docs/examples/flow/*.yaml: the default configuration with flow in each gang mode (docs/flow.md)
    import yaml

    folder = Path(__file__).resolve().parents[2] / "docs" / "examples" / "flow"
    modes = {}
    for path in sorted(folder.glob("*.yaml")):
        cfg = parse_config(yaml.safe_load(path.read_text()), REGISTRY, str(path))
        flow = [a for a in cfg.actions if a.name == "flow"]
        assert flow, path
        modes[path.stem] = flow[0].args.gang_mode
    assert modes == {"lowerbound": "lowerbound", "rollback": "rollback", "sequential": "sequential"}
