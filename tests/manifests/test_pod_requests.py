"""A pod's request (Kubernetes ``resourcehelper.PodRequests``): containers summed, init containers as
steps, sidecar init containers (``restartPolicy: Always``, KEP-753) summed with the main containers and
counted in every later init step."""

from __future__ import annotations

import pytest
import yaml


def _sidecar_pod(inits: list, main_cpu: str = "1") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "schedulerName": "corral",
            "initContainers": inits,
            "containers": [{"name": "main", "resources": {"requests": {"cpu": main_cpu}}}],
        },
    }


def _init(cpu: str, sidecar: bool = False) -> dict:
    c = {"name": f"i{cpu}", "resources": {"requests": {"cpu": cpu}}}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


@pytest.mark.parametrize(
    "inits,main,want",
    [
        ([_init("2")], "1", 2.0),  # classic init: max(1, 2)
        ([_init("2", sidecar=True)], "1", 3.0),  # sidecar: summed with main (issue example)
        ([_init("1", sidecar=True), _init("3")], "1", 4.0),  # a later init runs beside the sidecar: 1+3
        ([_init("3"), _init("1", sidecar=True)], "1", 3.0),  # an earlier init does not: max(3, 1+1)
        ([_init("1", sidecar=True), _init("1", sidecar=True), _init("1")], "0", 3.0),
    ],
)
def test_sidecar_init_containers_are_charged_like_kubernetes(tmp_path, inits, main, want) -> None:
    from corral.manifests.build import load_snapshot

    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n"},
        "status": {"allocatable": {"cpu": "64", "pods": "10"}},
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump_all([node, _sidecar_pod(inits, main)]))
    cluster = load_snapshot([path])
    task = next(iter(cluster.tasks.values()))
    cpu = cluster.resources.get("cpu")
    assert task.request[cpu] / 1000 == want
