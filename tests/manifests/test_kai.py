"""KAI-Scheduler's objects onto the model (corral.manifests.kai and kai_kinds): Topology levels as
domains, topology constraints, sub-group trees, the queue label, GPU-sharing annotations, and what
``corral validate`` says about fields accepted and not acted on."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from corral.cli import app
from corral.errors import InputError
from corral.model.subgroups import SubGroup, SubGroupTree
from tests.manifests.test_build import build, node, pod, podgroup

KAI = "scheduling.run.ai/v2alpha2"


def topo(name: str = "t", *levels: tuple[str, str]) -> dict:
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": lb, **({"alias": al} if al else {})} for lb, al in levels]},
    }


def labelled(name: str, **labels: str) -> dict:
    n = node(name)
    n["metadata"]["labels"] = labels
    return n


def kai_pod(name: str, group: str, sub: str | None = None, **ann: str) -> dict:
    labels = {"kai.scheduler/subgroup-name": sub} if sub else {}
    return pod(name, meta={"labels": labels, "annotations": {"pod-group-name": group, **ann}})


def test_topology_domains_nest_per_level_and_skip_unlabelled_nodes() -> None:
    c = build(
        labelled("a", zone="z1", rack="r1"),
        labelled("b", zone="z2", rack="r1"),
        labelled("c", zone="z1", rack="r1"),
        labelled("d", zone="z1"),  # no rack: not part of the topology
        topo("t", ("zone", ""), ("rack", "rk")),
    )
    hns = c.hypernodes.hypernodes
    names = {n: sorted(np.array(c.nodes.names)[hn.mask]) for n, hn in hns.items()}
    # rack r1 of zone z1 and of zone z2 are two domains (KAI calcDomainId)
    assert names["t:zone=z1/rk=r1"] == ["a", "c"] and names["t:zone=z2/rk=r1"] == ["b"]
    assert names["t:zone=z1"] == ["a", "c"] and names["t:"] == ["a", "b", "c"]
    assert {hns["t:zone=z1/rk=r1"].tier, hns["t:zone=z1"].tier, hns["t:"].tier} == {1, 2, 3}
    assert all(hn.family == "t" for hn in hns.values())


def test_constraint_levels_by_label_or_alias() -> None:
    c = build(
        labelled("a", zone="z1", rack="r1"),
        topo("t", ("zone", ""), ("rack", "rk")),
        podgroup(
            "h", api=KAI, phase=None, topologyConstraint={"topology": "t", "requiredTopologyLevel": "rk"}
        ),
        podgroup(
            "s",
            api=KAI,
            phase=None,
            topologyConstraint={
                "topology": "t",
                "requiredTopologyLevel": "zone",
                "preferredTopologyLevel": "rack",
            },
        ),
        podgroup(
            "p", api=KAI, phase=None, topologyConstraint={"topology": "t", "preferredTopologyLevel": "rack"}
        ),
        podgroup(
            "x", api=KAI, phase=None, topologyConstraint={"topology": "nope", "requiredTopologyLevel": "rk"}
        ),
        podgroup(
            "y", api=KAI, phase=None, topologyConstraint={"topology": "t", "requiredTopologyLevel": "row"}
        ),
    )
    h, s, p = c.jobs["default/h"], c.jobs["default/s"], c.jobs["default/p"]
    assert (h.topology_mode, h.topology_tier, h.topology_low_tier, h.topology_family) == ("hard", 1, 1, "t")
    assert (s.topology_mode, s.topology_tier, s.topology_low_tier) == ("hard", 2, 1)
    assert (p.topology_mode, p.topology_tier, p.topology_low_tier) == ("soft", None, 1)
    assert c.jobs["default/x"].invalid_reason == "the podgroup: requested topology 'nope' does not exist"
    assert "'row' is not a level of topology 't'" in c.jobs["default/y"].invalid_reason


def test_subgroups_all_required_become_roles() -> None:
    c = build(
        node(),
        podgroup(
            "g",
            api=KAI,
            phase=None,
            minSubGroup=2,
            subGroups=[{"name": "a", "minMember": 2}, {"name": "b", "minMember": 3}],
        ),
        kai_pod("p0", "g", "a"),
        kai_pod("p1", "g", "b"),
        kai_pod("stray", "g", "c"),
    )
    g = c.jobs["default/g"]
    assert g.min_task_member == {"a": 2, "b": 3} and g.min_member == 5 and g.subgroups is None
    assert sorted(t.role for t in g.tasks) == ["a", "b"]  # the stray pod is left out, as KAI does
    assert any("Pod default/stray" in n and "names no leaf sub-group" in n for n in c.notes.warning_lines())


def test_subgroup_tree_minsubgroup() -> None:
    groups = {
        "ab": SubGroup("ab", children=["a", "b"], min_subgroup=1),
        "a": SubGroup("a", parent="ab", min_member=2),
        "b": SubGroup("b", parent="ab", min_member=1),
        "c": SubGroup("c", min_member=3),
    }
    tree = SubGroupTree(groups, root_min=None)
    assert not tree.all_required()
    assert tree.fewest_pods() == 4  # b (1) for ab, and c (3)
    assert tree.satisfied({"b": 1, "c": 3}) and not tree.satisfied({"a": 2, "c": 2})
    assert tree.leaves_under("ab") == {"a", "b"}


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"subGroups": [{"name": "a"}]}, "spec.subGroups[0].minMember"),
        ({"subGroups": [{"name": "a", "minMember": 1, "parent": "zz"}]}, "spec.subGroups[0].parent"),
        (
            {"subGroups": [{"name": "a", "minMember": 1}, {"name": "a", "minMember": 1}]},
            "spec.subGroups[1].name",
        ),
        ({"preemptibility": "sometimes"}, "spec.preemptibility"),
    ],
)
def test_bad_subgroups_refused(spec: dict, field: str) -> None:
    with pytest.raises(InputError) as exc:
        build(node(), podgroup("g", api=KAI, phase=None, **spec))
    assert exc.value.field == field


@pytest.mark.parametrize(
    "ann, field",
    [
        ({"gpu-fraction": "1.5"}, "metadata.annotations.gpu-fraction"),
        ({"gpu-fraction": "half"}, "metadata.annotations.gpu-fraction"),
        ({"gpu-memory": "-3"}, "metadata.annotations.gpu-memory"),
        (
            {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"},
            "metadata.annotations.gpu-fraction-num-devices",
        ),
    ],
)
def test_bad_gpu_annotations_refused(ann: dict, field: str) -> None:
    with pytest.raises(InputError) as exc:
        build(node(), pod("p", meta={"annotations": ann}))
    assert exc.value.field == field


def test_gpu_fraction_charges_the_gpu_total() -> None:
    c = build(
        node(), pod("p", meta={"annotations": {"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"}})
    )
    t = c.tasks["p"] if "p" in c.tasks else next(iter(c.tasks.values()))
    assert t.gpu_share == (2, 0.25, 0.0)
    assert t.request[c.resources.pos("nvidia.com/gpu")] == 500 and not t.best_effort


def test_queue_label_and_preemptibility() -> None:
    c = build(
        node(),
        podgroup(
            "g",
            api=KAI,
            phase=None,
            meta={"labels": {"kai.scheduler/queue": "team"}},
            preemptibility="non-preemptible",
        ),
        pod("bare", meta={"labels": {"kai.scheduler/queue": "missing"}}),
    )
    g = c.jobs["default/g"]
    assert g.queue == "team" and g.invalid_reason == "queue 'team' does not exist" and not g.preemptable
    assert c.jobs["default/bare"].invalid_reason == "queue 'missing' does not exist"


def test_validate_warns_per_object(tmp_path) -> None:
    objs = [
        node(),
        podgroup(
            "g",
            api=KAI,
            phase=None,
            markUnschedulable=True,
            topologyConstraint={"requiredTopologyLevel": "rack"},
            subGroups=[{"name": "a", "minMember": 1, "minSubGroup": 2}],
        ),
        kai_pod("p", "g", "a", **{"gpu-fraction": "0.5"}),
    ]
    snap = tmp_path / "s.yaml"
    snap.write_text(yaml.safe_dump_all(objs))
    conf = tmp_path / "c.yaml"
    conf.write_text(
        yaml.safe_dump(
            {
                "actions": "enqueue, allocate",
                "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}]}],
            }
        )
    )
    out = CliRunner().invoke(app, ["validate", str(snap), "--config", str(conf)])
    assert out.exit_code == 0, out.output
    warnings = [line for line in out.output.splitlines() if line.startswith("warning: ")]
    assert not any("markUnschedulable" in w for w in warnings)  # inert: changes no decision
    assert any("PodGroup default/g: spec.topologyConstraint names no topology" in w for w in warnings)
    assert any("spec.subGroups[0].minSubGroup is not used" in w for w in warnings)
    assert any("Pod default/p: its GPU-sharing annotations" in w and "gpushare" in w for w in warnings)
