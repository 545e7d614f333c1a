"""Clusters from the machine lists that public traces publish, as node shapes of a generator spec
(docs/simulator.md, "Machine lists").

| format | file | columns |
|---|---|---|
| ``philly`` | Philly's ``cluster_machine_list`` | ``machineId, number of GPUs, single GPU mem`` |
| ``philly-revised`` | ``revised_machine_list.csv`` (GPU counts inferred from the GPU-util logs) | ``,machineId,number of GPUs`` |
| ``pai`` | Alibaba PAI 2020 ``pai_machine_spec.csv`` (no header line) | ``machine,gpu_type,cap_cpu,cap_mem,cap_gpu`` |
| ``tiresias`` | Tiresias' cluster specs (``n32g4.csv`` ...) | ``num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node`` |

Machines of the same shape become one :class:`~corral.sim.clusters.NodeShape` (nodes ``<shape>-000`` ...),
in the order the file first lists each shape. Philly's lists record no cpu or memory: those nodes get
corral's default node shape (96 cores, 768Gi), so cpu and memory never bind before GPUs. PAI's ``cap_mem``
is GB, read as GiB (the machines have 384 or 512). GPU models become node labels: PAI's ``gpu_type`` as
``alibabacloud.com/gpu-card-model`` (the label of Alibaba's GPU-2023 node list), Philly's per-GPU memory
as ``nvidia.com/gpu.memory`` in MiB (GPU feature discovery's label). A Tiresias spec is ``num_switch`` x
``num_node_p_switch`` nodes with one topology tier: the switch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from corral.errors import InputError
from corral.sim.tracefile import head_text, read_csv_rows
from corral.sim.workload import TraceTable

__all__ = ["MACHINE_FORMATS", "detect_machines", "read_machines"]

MACHINE_FORMATS = ("philly", "philly-revised", "pai", "tiresias")
PAI_COLUMNS = ["machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu"]
PAI_TYPES = {"P100", "T4", "V100", "V100M32", "MISC", "CPU"}


def detect_machines(path: Path) -> str | None:
    """The machine-list format of ``path`` from its first line, or None."""
    lines = head_text(path, 4096).splitlines()
    first = lines[0].strip() if lines else ""
    cells = [c.strip() for c in first.split(",")]
    if cells[:3] == ["machineId", "number of GPUs", "single GPU mem"]:
        return "philly"
    if cells[:3] == ["", "machineId", "number of GPUs"]:
        return "philly-revised"
    if cells[:2] == ["num_switch", "num_node_p_switch"]:
        return "tiresias"
    for line in lines[:20]:  # headerless: any of the first lines in PAI's shape (the first may be cut)
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 5 and cells[1] in PAI_TYPES:
            return "pai"
    return None


def _gib(text: str) -> float | None:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*GB", text.strip(), re.IGNORECASE)
    return float(match.group(1)) if match else None


def read_machines(path: Path, fmt: str | None = None) -> tuple[list[dict[str, Any]], tuple[int, ...]]:
    """(node shapes as generator-spec mappings, topology tiers) of a machine list. A bad row is an
    InputError naming the file, the row and the column."""
    fmt = fmt or detect_machines(path)
    if fmt not in MACHINE_FORMATS:
        raise InputError(
            f"not a machine list corral knows (formats: {', '.join(MACHINE_FORMATS)})", file=str(path)
        )
    header = PAI_COLUMNS if fmt == "pai" else None
    table = TraceTable(read_csv_rows(path, header=header), str(path))
    if not len(table):
        raise InputError("the machine list has no machines", file=str(path))
    if fmt == "tiresias":
        return _tiresias(table)
    shapes: dict[tuple, dict[str, Any]] = {}
    for key, shape in _machines(table, fmt):
        if key in shapes:
            shapes[key]["count"] += 1
        else:
            shapes[key] = {**shape, "count": 1}
    return list(shapes.values()), ()


def _machines(table: TraceTable, fmt: str) -> list[tuple[tuple, dict[str, Any]]]:
    gpu_column = "cap_gpu" if fmt == "pai" else "number of GPUs"
    gpus = table.number(gpu_column, integer=True, low=0, what="an integer number of GPUs >= 0")
    out = []
    if fmt == "pai":
        cpu = table.number("cap_cpu", low=0, low_open=True, what="a positive number of cores")
        mem = table.number("cap_mem", low=0, low_open=True, what="a positive number of GB")
        kinds = table.text("gpu_type", None)
        for g, c, m, kind in zip(gpus.astype(int).tolist(), cpu.tolist(), mem.tolist(), kinds.tolist()):
            name = f"{kind.lower()}-{c:g}c-{m:g}g-{g}gpu"
            shape = {"name": name, "gpus": g, "cpu": c, "memory": f"{m:g}Gi"}
            shape["labels"] = {"alibabacloud.com/gpu-card-model": kind}
            out.append(((name,), shape))
        return out
    memory = table.text("single GPU mem", None) if fmt == "philly" else np.full(len(table), "", dtype=object)
    for index, (g, text) in enumerate(zip(gpus.astype(int).tolist(), memory.tolist())):
        labels: Mapping[str, str] = {}
        name = f"gpu{g}"
        if text:
            gib = _gib(text)
            if gib is None:
                table.fail(index, "single GPU mem", f"expected GB such as 24GB, got {text!r}")
            labels = {"nvidia.com/gpu.memory": str(int(gib * 1024))}
            name = f"gpu{g}-{gib:g}gb"
        out.append(((name,), {"name": name, "gpus": g, "labels": dict(labels)}))
    return out


def _tiresias(table: TraceTable) -> tuple[list[dict[str, Any]], tuple[int, ...]]:
    if len(table) != 1:
        table.fail(1, "num_switch", "a Tiresias cluster spec has one row")
    values = {}
    for column, what in (
        ("num_switch", "an integer >= 1"),
        ("num_node_p_switch", "an integer >= 1"),
        ("num_gpu_p_node", "an integer >= 0"),
        ("num_cpu_p_node", "an integer >= 1"),
        ("mem_p_node", "GB >= 1"),
    ):
        low = 0 if column == "num_gpu_p_node" else 1
        values[column] = float(table.number(column, low=low, integer=column != "mem_p_node", what=what)[0])
    per_switch = int(values["num_node_p_switch"])
    shape = {
        "name": "node",
        "count": int(values["num_switch"]) * per_switch,
        "gpus": int(values["num_gpu_p_node"]),
        "cpu": values["num_cpu_p_node"],
        "memory": f"{values['mem_p_node']:g}Gi",
    }
    return [shape], (per_switch,)
