"""Parsers of KAI-Scheduler's own fields (kai-scheduler/KAI-Scheduler ``pkg/apis``): a PodGroup's
topology constraint, minSubGroup and subGroups, the ``Topology`` kind, and the GPU-sharing pod annotations
(``pkg/common/resources`` ``ParsePodGPUFractionRequest``). Records keep them as written; ``manifests.kai``
resolves them against the snapshot."""

from __future__ import annotations

from typing import Any

from corral.manifests.fields import Obj
from corral.manifests.records import PodGroupRec, SubGroupRec, TopologyRec

__all__ = [
    "GPU_FRACTION",
    "GPU_FRACTION_DEVICES",
    "GPU_MEMORY_MIB",
    "KAI_QUEUE_LABEL",
    "kai_gpu_share",
    "kai_podgroup",
    "topology",
]

#: KAI's queue label on pods and podgroups (what KAI's quickstart and pod-grouper use)
KAI_QUEUE_LABEL = "kai.scheduler/queue"
#: KAI's GPU-sharing pod annotations (KAI ``pkg/common/constants``)
GPU_FRACTION = "gpu-fraction"
GPU_MEMORY_MIB = "gpu-memory"
GPU_FRACTION_DEVICES = "gpu-fraction-num-devices"


def _topology_constraint(o: Obj, raw: Any, path: str) -> tuple[str, str, str]:
    tc = o.mapping(raw, path)
    return (
        o.string(tc.get("topology"), f"{path}.topology"),
        o.string(tc.get("requiredTopologyLevel"), f"{path}.requiredTopologyLevel"),
        o.string(tc.get("preferredTopologyLevel"), f"{path}.preferredTopologyLevel"),
    )


def kai_podgroup(o: Obj, rec: PodGroupRec, spec: dict) -> None:
    """KAI's topologyConstraint, minSubGroup and subGroups (``v2alpha2.PodGroupSpec``), as written;
    build.py resolves them against the Topology objects and the pods."""
    rec.kai = True
    rec.min_member_given = spec.get("minMember") is not None
    pre = spec.get("preemptibility")
    if pre is not None:  # KAI: non-preemptible podgroups are never victims
        if pre not in ("preemptible", "non-preemptible"):
            raise o.error(
                f"unknown preemptibility {pre!r} (allowed: preemptible, non-preemptible)",
                "spec.preemptibility",
            )
        rec.preemptibility = pre
    rec.topology_name, rec.required_level, rec.preferred_level = _topology_constraint(
        o, spec.get("topologyConstraint"), "spec.topologyConstraint"
    )
    if spec.get("minSubGroup") is not None:
        rec.min_subgroup = o.integer(spec["minSubGroup"], "spec.minSubGroup", minimum=0)
    seen: set[str] = set()
    for i, sg in enumerate(o.listof(spec.get("subGroups"), "spec.subGroups")):
        p = f"spec.subGroups[{i}]"
        sg = o.mapping(sg, p)
        name = o.string(sg.get("name"), f"{p}.name").lower()
        if not name:
            raise o.error("a sub-group needs a name", f"{p}.name")
        if name in seen:
            raise o.error(f"sub-group {name!r} is given twice", f"{p}.name")
        seen.add(name)
        mm, msg = sg.get("minMember"), sg.get("minSubGroup")
        rec.subgroups.append(
            SubGroupRec(
                name=name,
                parent=o.string(sg.get("parent"), f"{p}.parent").lower(),
                min_member=None if mm is None else o.integer(mm, f"{p}.minMember", minimum=0),
                min_subgroup=None if msg is None else o.integer(msg, f"{p}.minSubGroup", minimum=0),
                topology_name="",
                required_level="",
                preferred_level="",
            )
        )
        sub = rec.subgroups[-1]
        if sg.get("topologyConstraint") is not None:
            sub.topology_name, sub.required_level, sub.preferred_level = _topology_constraint(
                o, sg["topologyConstraint"], f"{p}.topologyConstraint"
            )


def topology(o: Obj) -> TopologyRec:
    spec = o.section("spec")
    levels: list[tuple[str, str]] = []
    raw = o.listof(spec.get("levels"), "spec.levels")
    if not raw:
        raise o.error("a Topology needs at least one level", "spec.levels")
    for i, lv in enumerate(raw):
        lv = o.mapping(lv, f"spec.levels[{i}]")
        label = o.string(lv.get("nodeLabel"), f"spec.levels[{i}].nodeLabel")
        if not label:
            raise o.error("a level needs nodeLabel", f"spec.levels[{i}].nodeLabel")
        if label in {lb for lb, _ in levels}:
            raise o.error(f"nodeLabel {label!r} is given twice", f"spec.levels[{i}].nodeLabel")
        levels.append((label, o.string(lv.get("alias"), f"spec.levels[{i}].alias")))
    return TopologyRec(o.name, levels, o.file)


def kai_gpu_share(o: Obj, ann: dict[str, str], requests: dict[str, float]) -> tuple[int, float, float] | None:
    """KAI's GPU-sharing request from the pod annotations (KAI ``ParsePodGPUFractionRequest``):
    ``gpu-fraction`` (a portion of one device, 0 < f < 1) wins over ``gpu-memory`` (MiB of one device's
    memory, a positive integer); ``gpu-fraction-num-devices`` (a positive integer, default 1) asks for
    that share on each of so many devices. ``(devices, portion, memory in milli-bytes)`` or None."""
    frac, mem = ann.get(GPU_FRACTION, ""), ann.get(GPU_MEMORY_MIB, "")
    count = ann.get(GPU_FRACTION_DEVICES)
    if not frac and not mem:
        return None
    devices = 1
    if count is not None:
        try:
            devices = int(count)
        except ValueError:
            devices = 0
        if devices <= 0:
            raise o.error(
                f"expected a positive integer, got {count!r}", f"metadata.annotations.{GPU_FRACTION_DEVICES}"
            )
    if requests.get("nvidia.com/gpu"):
        raise o.error(
            "a pod that shares a GPU by annotation must not request nvidia.com/gpu as well (KAI refuses "
            "it); drop the request or the annotation",
            f"metadata.annotations.{GPU_FRACTION if frac else GPU_MEMORY_MIB}",
        )
    if frac:
        try:
            portion = float(frac)
        except ValueError:
            portion = -1.0
        if not 0 < portion < 1:
            raise o.error(
                f"expected a number between 0 and 1 (exclusive), got {frac!r}",
                f"metadata.annotations.{GPU_FRACTION}",
            )
        return devices, portion, 0.0
    if not mem.isdigit() or int(mem) <= 0:
        raise o.error(
            f"expected a positive whole number of MiB, got {mem!r}", f"metadata.annotations.{GPU_MEMORY_MIB}"
        )
    return devices, 0.0, int(mem) * 1048576 * 1000.0
