"""The simulator takes the workloads users submit (corral.sim.manifest_workload): a Volcano Job and a
KAI batch Job become jobs submitted at their creation time and running for corral.io/duration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from corral.commands.simulate import register
from corral.errors import InputError
from corral.sim.manifest_workload import load_manifest_workload, looks_like_manifests

CLUSTER = "nodes:\n- {name: n, count: 2, gpus: 8}\ntopology: {tiers: [2]}\n"


def volcano_job(name: str, created: str, duration: str | None = "10m", **spec) -> dict:
    ann = {"corral.io/duration": duration} if duration else {}
    tpl = {
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8", "cpu": "4"}}}]
        }
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": "u",
            "creationTimestamp": created,
            "annotations": ann,
        },
        "spec": {"minAvailable": 2, "tasks": [{"name": "worker", "replicas": 2, "template": tpl}], **spec},
    }


def kai_job(created: str) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "k",
            "namespace": "default",
            "uid": "k1",
            "creationTimestamp": created,
            "annotations": {"corral.io/duration": "300"},
        },
        "spec": {
            "parallelism": 1,
            "template": {
                "spec": {
                    "schedulerName": "kai-scheduler",
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
                }
            },
        },
    }


def write(tmp_path: Path, *objects: dict) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump_all(list(objects)))
    return path


def test_jobs_from_submitted_workloads(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        kai_job("2026-01-01T00:05:00Z"),
        volcano_job("a", "2026-01-01T00:00:00Z", networkTopology={"mode": "hard", "highestTierAllowed": 1}),
    )
    specs = load_manifest_workload(path)
    assert [s.name for s in specs] == ["a-u", "pg-k-k1"]
    a, k = specs
    assert (a.submit, a.duration, a.queue, a.min_pods, a.topology) == (0.0, 600.0, "default", 2, ("hard", 1))
    assert [(r.name, r.count, dict(r.requests), r.min_count) for r in a.roles] == [
        ("worker", 2, {"cpu": 4.0, "nvidia.com/gpu": 8.0}, 2)
    ]
    assert (k.submit, k.duration, k.queue, k.min_pods) == (300.0, 300.0, "default-queue", 1)
    assert "corral.io/duration" not in a.annotations


def test_a_job_without_a_duration_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_manifest_workload(write(tmp_path, volcano_job("a", "2026-01-01T00:00:00Z", duration=None)))
    assert err.value.field == "metadata.annotations.corral.io/duration" and err.value.obj == "PodGroup ml/a-u"


def test_manifests_are_told_from_a_synthetic_spec() -> None:
    assert looks_like_manifests("apiVersion: v1\nkind: Pod\n")
    assert not looks_like_manifests("jobs: 100\narrival: {rate: 2}\n")


def test_simulate_takes_a_volcano_job(tmp_path: Path) -> None:
    app = typer.Typer()
    register(app)
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    workload = write(
        tmp_path,
        volcano_job("a", "2026-01-01T00:00:00Z"),
        volcano_job("b", "2026-01-01T00:01:00Z", duration="5m"),
    )
    out = tmp_path / "report"
    args = ["simulate", "--workload", str(workload), "--cluster", str(tmp_path / "cluster.yaml")]
    res = CliRunner().invoke(app, [*args, "--output", str(out), "--no-progress"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["jobs_total"] == 2 and summary["jobs_completed"] == 2
