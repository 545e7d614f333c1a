"""Namespace labels in ``corral run``'s incremental model (:mod:`corral.kube.model`): what a non-empty
``namespaceSelector`` of an inter-pod affinity term matches (``Cluster.namespace_labels``).

While no pod of the model has such a selector, nothing the model builds reads the labels: a Namespace
added, removed or relabelled only updates them (the pods that come with a selector later are built
with the labels as they are then). Once some pod has one, a Namespace change assembles the model
afresh — the simplest correct invalidation of every pod the change may concern."""

from __future__ import annotations

from typing import Any

from corral.manifests.records import PodRec

__all__ = ["relabel", "uses_namespace_selector"]


def uses_namespace_selector(rec: PodRec) -> bool:
    """Does one of the pod's inter-pod terms have a non-empty ``namespaceSelector``?"""
    aff = rec.affinity
    if aff is None:
        return False
    terms = (
        aff.pod_affinity
        + aff.pod_anti_affinity
        + aff.pod_affinity_preferred
        + aff.pod_anti_affinity_preferred
    )
    return any(t.ns_selector is not None for t in terms)


def relabel(
    records: dict[tuple[str, str], Any],
    labels: dict[str, dict[str, str]],
    changes: list[tuple[Any, str, Any]],
) -> tuple[dict[str, dict[str, str]], list[tuple[Any, str, Any]]]:
    """Take the Namespace changes of ``changes`` (``(type, key, record or None)``; a record is
    ``(name, labels)``) into ``records`` and a new dict of ``labels`` (the old one may be a cycle's);
    the labels after, and the other changes."""
    out = dict(labels)
    for r, key, rec in changes:
        if r.kind != "Namespace":
            continue
        old = records.pop((r.name, key), None)
        if old is not None:
            out.pop(old[0], None)
        if rec is not None:
            records[(r.name, key)] = rec
            out[rec[0]] = rec[1]
    return out, [c for c in changes if c[0].kind != "Namespace"]
