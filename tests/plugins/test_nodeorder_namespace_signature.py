"""The ``nodeorder`` plugin's cache signature tells apart pods alike but for their namespace when they
have only *preferred* inter-pod terms: such a term selects pods of the pod's own namespace unless it
names others (kube-scheduler's ``newAffinityTerm``), so the same spec scores nodes differently in two
namespaces, and a signature shared by the two would let one pod's kept scores stand for the other's
(framework/hints.py: two pods with one signature get the same answer from every signing plugin)."""

from __future__ import annotations

import numpy as np

from corral.framework.session import Session
from corral.manifests import build_cluster
from corral.model.clock import parse_time
from corral.registry import REGISTRY, default_config
from tests.scenarios.expand import expand

NOW = parse_time("2026-01-01T12:00:00Z")

PREFERRED = {
    "podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "kubernetes.io/hostname",
                },
            }
        ]
    }
}


def _session() -> Session:
    case = {
        "nodes": [{"name": "n1"}, {"name": "n2"}],
        "jobs": [
            {
                "name": "db",
                "namespace": "a",
                "phase": "Running",
                "pods": [{"cpu": 1, "labels": {"app": "db"}, "nodes": ["n1"]}],
            },
            {"name": "web", "namespace": "a", "pods": [{"cpu": 1, "affinity": PREFERRED}]},
            {"name": "web", "namespace": "b", "pods": [{"cpu": 1, "affinity": PREFERRED}]},
        ],
    }
    cluster = build_cluster(("test", d) for d in expand(case))
    return Session(cluster, default_config(), REGISTRY, NOW)


def test_same_spec_in_two_namespaces_scores_apart_and_signs_apart() -> None:
    s = _session()
    (in_a,) = s.cluster.jobs["a/web"].tasks
    (in_b,) = s.cluster.jobs["b/web"].tasks
    (plugin,) = [p for p in s.implementers("NodeOrder") if p.name == "nodeorder"]
    rows = np.arange(len(s.cluster.nodes))
    score_a, score_b = plugin.node_order(in_a, rows), plugin.node_order(in_b, rows)
    assert score_a[0] > score_b[0]  # a's pod is drawn to its namespace's db pod on n1; b's is not
    assert plugin.sign_pod(in_a) != plugin.sign_pod(in_b)
    assert s.signature(in_a, "NodeOrder") != s.signature(in_b, "NodeOrder")
    assert in_a.klass != in_b.klass  # not interchangeable for the actions either
