"""Kubernetes' own gang API (:mod:`corral.manifests.native`, :mod:`corral.manifests.native_composite`)
readied for the assembly: the steps :mod:`corral.manifests.build` runs over the records of every kind, and
what ``corral validate`` reports having read of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.manifests.dra import DRA_KINDS, dra_lines
from corral.manifests.native import native_topologies, workload_podgroups
from corral.manifests.native_composite import assemble_composites

if TYPE_CHECKING:
    from corral.manifests.records import PodGroupRec
    from corral.model.hypernodes import HyperNodeTree
    from corral.model.notes import Notes

__all__ = ["composite_redirect", "native_records", "read_lines", "report_read"]


def read_lines(records: dict[str, list]) -> list[str]:
    """What ``corral validate`` reports it read of Kubernetes' own gang API."""
    groups = [g for g in records.get("PodGroup", []) if g.native is not None]
    workloads = records.get("Workload", [])
    composites = records.get("CompositePodGroup", [])
    if not groups and not workloads and not composites:
        return []
    versions = sorted(
        {g.native.api for g in groups} | {w.api for w in workloads} | {c.api for c in composites}
    )
    gangs = sum(1 for g in groups if g.min_member > 1 or g.native.topology_key)
    v1 = [g for g in groups if not g.native.condition]
    return [
        f"read Kubernetes' gang API ({', '.join(versions)}): {len(workloads)} Workloads, "
        f"{len(groups) - len(v1)} PodGroups, {len(composites)} CompositePodGroups (each tree one gang), "
        f"{len(v1)} pod groups of v1alpha1 Workloads named by pods' "
        f"spec.workloadRef; {gangs} with a gang minimum above 1 or a topology constraint"
    ]


def native_records(by_kind: dict[str, list], hypernodes: HyperNodeTree | None) -> HyperNodeTree | None:
    """Ready the records of Kubernetes' gang API for the assembly (``by_kind`` is changed): the podgroup
    records of 1.35's groups pods name, one record per composite tree, and a single-level topology per
    node label a constraint names. Returns ``hypernodes``, or None when that kept tree has no domains of
    such a label (it is built again)."""
    if any(p.workload_ref is not None for p in by_kind["Pod"]):  # 1.35: groups named by pods
        by_kind["PodGroup"] = by_kind["PodGroup"] + workload_podgroups(by_kind["Workload"], by_kind["Pod"])
    if by_kind["CompositePodGroup"] or any(
        g.native is not None and g.native.parent for g in by_kind["PodGroup"]
    ):
        by_kind["PodGroup"] = assemble_composites(by_kind["CompositePodGroup"], by_kind["PodGroup"])
    labels = native_topologies(by_kind["PodGroup"])
    if labels:
        by_kind["Topology"] = by_kind["Topology"] + labels
        if hypernodes is not None and not {t.name for t in labels} <= {
            hn.family for hn in hypernodes.hypernodes.values()
        }:
            return None
    return hypernodes


def composite_redirect(groups: list[PodGroupRec]) -> dict[str, str]:
    """``ns/<PodGroup>`` -> ``ns/<root composite>`` for every PodGroup under a composite (its pods join the
    root's job)."""
    return {
        f"{g.namespace}/{leaf}": f"{g.namespace}/{g.name}"
        for g in groups
        if g.native is not None and g.native.composite is not None
        for leaf in g.native.composite.leaves
    }


def report_read(by_kind: dict[str, list], notes: Notes) -> None:
    """What ``corral validate`` reports having read of Kubernetes' gang API and of DRA objects."""
    lines, warnings = dra_lines([r for kind in DRA_KINDS for r in by_kind.get(kind, [])])
    for line in read_lines(by_kind) + lines:
        notes.read(line)
    for obj, path, message in warnings:
        notes.warn(obj, path, message)
