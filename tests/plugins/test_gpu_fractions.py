"""KAI GPU-sharing books (corral.plugins.gpu_fractions): device portions, binpack, whole GPUs, memory
over the node's device memory, release and reconcile."""

from __future__ import annotations

import numpy as np

from corral.model import TaskStatus
from corral.plugins.gpu_fractions import FractionBooks
from tests.manifests.test_build import build, node, pod


def gpu_node(name: str, gpus: str, memory: str | None = None) -> dict:
    n = node(name, cpu="8", memory="32Gi", pods="110", **{"nvidia.com/gpu": gpus})
    if memory:
        n["metadata"]["labels"] = {"nvidia.com/gpu.memory": memory}
    return n


def shared(name: str, node_name: str | None = None, **ann: str) -> dict:
    p = pod(name, meta={"annotations": ann})
    if node_name:
        p["spec"]["nodeName"] = node_name
        p["status"] = {"phase": "Running"}
    return p


def test_running_pods_fill_devices_and_binpack_new_ones() -> None:
    c = build(
        gpu_node("n1", "2", "16000"),
        shared("a", "n1", **{"gpu-fraction": "0.5"}),
        shared("b", "n1", **{"gpu-memory": "4000"}),  # a quarter of a 16000 MiB device
        shared("new", **{"gpu-fraction": "0.25"}),
        shared("big", **{"gpu-fraction": "0.8"}),
        shared("pair", **{"gpu-fraction": "0.2", "gpu-fraction-num-devices": "2"}),
    )
    books = FractionBooks(c)
    assert np.allclose(books.device_free(0), [0.25, 1.0])  # a and b binpacked on device 0
    new, big, pair = (c.tasks[f"default/{k}"] for k in ("new", "big", "pair"))
    assert books.fits(new)[0] and books.fits(big)[0] and books.fits(pair)[0]
    new.status, new.node = TaskStatus.ALLOCATED, 0
    books.reconcile(new)
    assert np.allclose(books.device_free(0), [0.0, 1.0])  # the fullest device that fits
    assert not books.fits(pair)[0]  # 0.2 on two devices: only one has room
    new.status, new.node = TaskStatus.PENDING, -1
    books.reconcile(new)
    assert np.allclose(books.device_free(0), [0.25, 1.0])


def test_whole_gpus_need_unshared_devices_and_memory_needs_the_label() -> None:
    c = build(
        gpu_node("n1", "2"),
        shared("a", "n1", **{"gpu-fraction": "0.1"}),
        pod("whole", containers=[{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]),
        shared("mem", **{"gpu-memory": "100"}),
    )
    books = FractionBooks(c)
    assert not books.fits(c.tasks["default/whole"])[0]  # one of the two devices is shared
    assert books.capacity_fits(c.tasks["default/whole"])[0]
    assert not books.fits(c.tasks["default/mem"])[0]  # no nvidia.com/gpu.memory label: device memory unknown
