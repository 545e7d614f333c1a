"""The configurations around DRA: Volcano's DRA predicate switch calls for the dra plugin, and a
configuration without it says, per podgroup, that its claims are not allocated."""

from __future__ import annotations

from pathlib import Path

import yaml

from corral.cli import schedule_snapshot
from corral.framework.config import parse_config
from corral.model.clock import parse_time
from corral.registry import REGISTRY
from tests.scenarios.expand import T0, expand

CASE = Path(__file__).parents[1] / "scenarios" / "cases" / "dra_two_pods_never_share_a_device.yaml"


def _config(predicates: dict) -> dict:
    return {
        "actions": "enqueue, allocate",
        "tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"}, predicates]}],
    }


def test_volcano_s_dra_predicate_switch_brings_the_dra_plugin() -> None:
    on = parse_config(
        _config({"name": "predicates", "arguments": {"predicate.DynamicResourceAllocationEnable": True}}),
        REGISTRY,
    )
    assert "dra" in [p.name for tier in on.tiers for p in tier]
    off = parse_config(_config({"name": "predicates"}), REGISTRY)
    assert "dra" not in [p.name for tier in off.tiers for p in tier]


def test_without_the_dra_plugin_claims_are_named_as_not_allocated(tmp_path: Path) -> None:
    snap = tmp_path / "s.yaml"
    snap.write_text(yaml.safe_dump_all(expand(yaml.safe_load(CASE.read_text()))))
    config = parse_config(_config({"name": "predicates"}), REGISTRY)
    out = schedule_snapshot([snap], config, parse_time(T0), 1, 1.0).to_json(1)
    warned = {w["podgroup"] for w in out["warnings"] if w["field"] == "pods' spec.resourceClaims"}
    assert warned == {"default/first-0", "default/second-0"}
    assert not out["claim_allocations"]
    with_dra = parse_config(
        _config({"name": "predicates", "arguments": {"predicate.DynamicResourceAllocationEnable": True}}),
        REGISTRY,
    )
    out = schedule_snapshot([snap], with_dra, parse_time(T0), 1, 1.0).to_json(1)
    assert not [w for w in out["warnings"] if w["field"] == "pods' spec.resourceClaims"]
    assert [b["pod"] for b in out["binds"]] == ["default/first-0"]


def test_the_table_output_lists_claim_allocations(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from corral.cli import app

    case = Path(__file__).parents[1] / "scenarios" / "cases" / "dra_claim_on_node_with_device.yaml"
    snap = tmp_path / "s.yaml"
    snap.write_text(yaml.safe_dump_all(expand(yaml.safe_load(case.read_text()))))
    out = CliRunner().invoke(app, ["schedule", str(snap), "--now", T0])
    assert out.exit_code == 0, out.output
    assert "Claim allocations (1)" in out.output
    assert "gpu=gpu.example.com/n2/gpu-1" in out.output and "1 claim allocations" in out.output


def test_the_simulator_counts_a_dra_cluster_s_gpus(tmp_path: Path) -> None:
    """A snapshot whose nodes publish their GPUs as ResourceSlices (class extendedResourceName
    nvidia.com/gpu, no claims, nodes advertising no nvidia.com/gpu) is a simulator cluster with them."""
    from corral.sim.clusters import load_cluster

    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": n},
            "status": {"allocatable": {"cpu": "64"}},
        }
        for n in ("n1", "n2")
    ]
    klass = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
            "extendedResourceName": "nvidia.com/gpu",
        },
    }
    slices = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{n}-gpus"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": n,
                "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": f"gpu-{k}"} for k in range(k_)],
            },
        }
        for n, k_ in (("n1", 8), ("n2", 4))
    ]
    snap = tmp_path / "cluster.yaml"
    snap.write_text(yaml.safe_dump_all([*nodes, klass, *slices]))
    template = load_cluster(snap)
    c = template.cluster
    assert list(c.nodes.allocatable[:, c.resources.pos("nvidia.com/gpu")] / 1000) == [8.0, 4.0]
    assert "12 GPUs" in template.description
