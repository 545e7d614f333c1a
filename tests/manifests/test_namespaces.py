"""``v1 Namespace`` objects: their labels are what a non-empty ``namespaceSelector`` of an inter-pod
affinity term matches (``Cluster.namespace_labels``); the rest of the object is inert. A snapshot with
such a selector and no Namespace object at all gets a warning naming the pod and the field."""

from __future__ import annotations

import pytest

from corral.errors import InputError
from corral.manifests import build_cluster
from tests.scenarios.expand import expand

TERM = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"app": "db"}},
                "namespaceSelector": {"matchLabels": {"team": "ml"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}


def _build(objects: list[dict], affinity: dict | None = TERM):
    case = {
        "nodes": [{"name": "n1"}],
        "jobs": [{"name": "web", "pods": [{"cpu": 1, **({"affinity": affinity} if affinity else {})}]}],
        "objects": objects,
    }
    return build_cluster(("snap.yaml", d) for d in expand(case))


def test_namespace_labels_are_read() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "data", "labels": {"team": "ml"}}}
    bare = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "default"},
        "status": {"phase": "Active"},
    }
    cluster = _build([ns, bare])
    assert cluster.namespace_labels == {"data": {"team": "ml"}, "default": {}}
    assert not [n for n in cluster.notes.warnings if "namespaceSelector" in n.field]


def test_selector_without_namespace_objects_is_warned_about() -> None:
    cluster = _build([])
    (note,) = [n for n in cluster.notes.warnings if "namespaceSelector" in n.field]
    assert note.obj == "Pod default/web-0"
    assert "no Namespace objects" in note.message and "matches no namespace" in note.message


def test_no_warning_without_selector() -> None:
    assert not [n for n in _build([], None).notes.warnings if "namespaceSelector" in n.field]


def test_bad_namespace_labels_are_refused_by_name() -> None:
    bad = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "data", "labels": ["team"]}}
    with pytest.raises(InputError) as err:
        _build([bad])
    assert err.value.obj == "Namespace data" and err.value.field == "metadata.labels"
