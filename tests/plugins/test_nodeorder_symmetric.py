"""``nodeorder``'s inter-pod score counts placed pods' own terms toward the incoming pod
(kube-scheduler's InterPodAffinity ``processExistingPod``), normalises as kube-scheduler's
``NormalizeScore`` does, and declares the score ``"all"`` for a pod some pod's term may select."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from corral.errors import ConfigError
from corral.framework.config import parse_config
from corral.framework.session import Session
from corral.manifests import build_cluster
from corral.model.clock import parse_time
from corral.plugins.nodeorder import _normalised
from corral.registry import REGISTRY
from tests.scenarios.expand import expand

NOW = parse_time("2026-01-01T12:00:00Z")


def _term(kind: str, weight: int, app: str) -> dict[str, Any]:
    return {
        kind: {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": weight,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": app}},
                        "topologyKey": "zone",
                    },
                }
            ]
        }
    }


def _session(owner_affinity: dict[str, Any], owner_phase: str = "Running", **args: Any) -> Session:
    owner: dict[str, Any] = {"cpu": 1, "affinity": owner_affinity}
    if owner_phase == "Running":
        owner["nodes"] = ["n2"]
    case = {
        "nodes": [
            {"name": "n1", "labels": {"zone": "a"}},
            {"name": "n2", "labels": {"zone": "b"}},
            {"name": "n3", "labels": {"zone": "b"}},
            {"name": "n4"},
        ],
        "jobs": [
            {"name": "owner", "phase": owner_phase, "pods": [owner]},
            {"name": "web", "pods": [{"cpu": 1, "labels": {"app": "web"}}]},
            {"name": "web", "namespace": "other", "pods": [{"cpu": 1, "labels": {"app": "web"}}]},
            {"name": "plain", "pods": [{"cpu": 1, "labels": {"app": "batch"}}]},
        ],
    }
    cluster = build_cluster(("test", d) for d in expand(case))
    config = parse_config(
        {
            "actions": "allocate",
            "tiers": [
                {
                    "plugins": [
                        {
                            "name": "nodeorder",
                            "arguments": {
                                "leastrequested.weight": 0,
                                "balancedresource.weight": 0,
                                "podaffinity.weight": 1,
                                **args,
                            },
                        }
                    ]
                }
            ],
        },
        REGISTRY,
        "test",
    )
    return Session(cluster, config, REGISTRY, NOW)


def _scores(s: Session, job: str) -> list[float]:
    (task,) = s.cluster.jobs[job].tasks
    plugin = s.plugin("nodeorder")
    assert plugin is not None
    return plugin.node_order(task, np.arange(len(s.cluster.nodes))).tolist()


def test_a_placed_pods_preferred_affinity_scores_its_zone_for_the_pods_it_selects() -> None:
    s = _session(_term("podAffinity", 10, "web"))
    assert _scores(s, "default/web") == [0.0, 100.0, 100.0, 0.0]
    assert _scores(s, "other/web") == [0.0, 0.0, 0.0, 0.0]  # the term selects its owner's namespace
    assert _scores(s, "default/plain") == [0.0, 0.0, 0.0, 0.0]


def test_a_placed_pods_preferred_anti_affinity_scores_its_zone_down() -> None:
    s = _session(_term("podAntiAffinity", 10, "web"))
    assert _scores(s, "default/web") == [100.0, 0.0, 0.0, 100.0]


def test_an_unplaced_owner_scores_nothing_yet_but_makes_the_scope_all() -> None:
    s = _session(_term("podAffinity", 10, "web"), owner_phase="Inqueue")
    assert _scores(s, "default/web") == [0.0, 0.0, 0.0, 0.0]
    (web,) = s.cluster.jobs["default/web"].tasks
    (plain,) = s.cluster.jobs["default/plain"].tasks
    plugin = s.plugin("nodeorder")
    assert plugin is not None
    assert plugin.score_scope(web) == "all"  # the owner may be placed during the session
    assert plugin.score_scope(plain) == "row"
    assert s.score_key(web) is None and s.score_key(plain) is not None


def test_a_placed_pods_required_affinity_counts_with_the_hard_weight_only() -> None:
    required = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}
            ]
        }
    }
    assert _scores(_session(required), "default/web") == [0.0, 0.0, 0.0, 0.0]
    assert _scores(_session(required, **{"podaffinity.hardPodAffinityWeight": 5}), "default/web") == [
        0.0,
        100.0,
        100.0,
        0.0,
    ]


def test_the_hard_weight_is_refused_outside_kube_schedulers_range() -> None:
    with pytest.raises(ConfigError, match="0-100"):
        _session({}, **{"podaffinity.hardPodAffinityWeight": 101})


def test_normalised_over_the_candidates_as_kube_scheduler() -> None:
    # 100 * (s - min) / (max - min), truncated; no anchor at 0
    assert _normalised(np.array([2.0, 3.0, 5.0])).tolist() == [0.0, 33.0, 100.0]
    assert _normalised(np.array([-4.0, 0.0, 4.0])).tolist() == [0.0, 50.0, 100.0]
    assert _normalised(np.array([7.0, 7.0])).tolist() == [0.0, 0.0]
