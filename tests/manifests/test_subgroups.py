"""PodGroup spec.subGroupPolicy and networkTopology.highestTierName as read from manifests (Volcano
``getSubJobMatchValues``, ``updateJobTier``, the admission check of both tier fields)."""

from __future__ import annotations

import pytest

from corral.errors import InputError
from corral.manifests.build import build_cluster
from tests.scenarios.expand import expand


def _cluster(job: dict, hypernodes: list | None = None):
    case = {"nodes": [{"name": "n1"}], "jobs": [job], "hypernodes": hypernodes or []}
    return build_cluster([("t.yaml", d) for d in expand(case)])


def test_pods_split_by_selector_and_label_values_first_policy_wins() -> None:
    job = {
        "name": "j",
        "subGroupPolicy": [
            {
                "name": "worker",
                "subGroupSize": 2,
                "labelSelector": {"matchLabels": {"role": "worker"}},
                "matchLabelKeys": ["replica"],
            },
            {"name": "all", "minSubGroups": 1},
        ],
        "pods": [
            {"count": 2, "labels": {"role": "worker", "replica": "a"}},
            {"count": 1, "labels": {"role": "worker", "replica": "b"}},
            {"count": 1, "labels": {"role": "worker"}},  # no replica value: not worker's, taken by all
            {"count": 1, "labels": {"role": "ps"}},
        ],
    }
    j = _cluster(job).jobs["default/j"]
    got = {sj.name: sorted(t.name for t in sj.tasks) for sj in j.subjobs}
    assert got == {"worker-a": ["j-0", "j-1"], "worker-b": ["j-2"], "all": ["j-3", "j-4"]}
    assert [sj.size for sj in j.subjobs] == [2, 2, 1]
    assert all(t.subjob is not None for t in j.tasks)


def test_highest_tier_name_resolves_by_hypernode_tier_name() -> None:
    hns = [{"name": "s1", "tier": 1, "tierName": "leaf", "nodes": ["n1"]}]
    job = {
        "name": "j",
        "networkTopology": {"mode": "hard", "highestTierName": "leaf"},
        "subGroupPolicy": [{"name": "p", "networkTopology": {"mode": "hard", "highestTierName": "leaf"}}],
        "pods": [{"count": 1}],
    }
    j = _cluster(job, hns).jobs["default/j"]
    assert j.topology_tier == 1 and j.subgroup_policies[0].topology_tier == 1
    assert not j.invalid_reason


def test_both_tier_fields_refused_by_name() -> None:
    job = {
        "name": "j",
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "leaf"},
        "pods": [{"count": 1}],
    }
    with pytest.raises(InputError, match=r"spec\.networkTopology\.highestTierName"):
        _cluster(job)


def test_subgroup_policy_needs_a_unique_name() -> None:
    job = {"name": "j", "subGroupPolicy": [{"name": "p"}, {"name": "p"}], "pods": [{"count": 1}]}
    with pytest.raises(InputError, match=r"spec.subGroupPolicy\[1\].name"):
        _cluster(job)
