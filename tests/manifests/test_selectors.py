"""Label selectors, node-selector requirements and affinity parsing (corral.manifests.selectors)."""

from __future__ import annotations

import pytest

from corral.errors import InputError
from corral.manifests.selectors import PodAffinityTerm, Requirement, parse_affinity, parse_label_selector

R = "requiredDuringSchedulingIgnoredDuringExecution"
P = "preferredDuringSchedulingIgnoredDuringExecution"


@pytest.mark.parametrize(
    "op, values, labels, hit",
    [
        ("In", ("a", "b"), {"k": "a"}, True),
        ("In", ("a",), {"k": "c"}, False),
        ("In", ("a",), {}, False),
        ("NotIn", ("a",), {"k": "b"}, True),
        ("NotIn", ("a",), {}, True),
        ("NotIn", ("a",), {"k": "a"}, False),
        ("Exists", (), {"k": ""}, True),
        ("Exists", (), {}, False),
        ("DoesNotExist", (), {}, True),
        ("DoesNotExist", (), {"k": "x"}, False),
        ("Gt", ("5",), {"k": "6"}, True),
        ("Gt", ("5",), {"k": "5"}, False),
        ("Gt", ("5",), {"k": "x"}, False),
        ("Gt", ("5",), {}, False),
        ("Lt", ("5",), {"k": "-1"}, True),
        ("Lt", ("5",), {"k": "5"}, False),
    ],
)
def test_requirement(op: str, values: tuple, labels: dict, hit: bool) -> None:
    assert Requirement("k", op, values).matches(labels) is hit


def test_label_selector_ands_labels_and_expressions() -> None:
    sel = parse_label_selector(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
        },
        "Pod p",
        "spec.x",
    )
    assert sel.matches({"app": "web"})
    assert sel.matches({"app": "web", "tier": "fe"})
    assert not sel.matches({"app": "web", "tier": "db"})
    assert not sel.matches({"tier": "fe"})


def test_empty_selector_matches_everything() -> None:
    assert parse_label_selector(None, "x", "p").matches({})
    assert parse_label_selector({}, "x", "p").matches({"a": "b"})


@pytest.mark.parametrize(
    "raw, field",
    [
        ("app=web", "spec.sel"),
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            "spec.sel.matchExpressions[0].operator",
        ),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "spec.sel.matchExpressions[0].values"),
        ({"matchExpressions": [{"operator": "Exists"}]}, "spec.sel.matchExpressions[0]"),
        ({"matchExpressions": "a"}, "spec.sel.matchExpressions"),
        ({"matchLabels": ["a"]}, "spec.sel.matchLabels"),
    ],
)
def test_label_selector_errors(raw: object, field: str) -> None:
    with pytest.raises(InputError) as err:
        parse_label_selector(raw, "Pod ns/p", "spec.sel")
    assert err.value.field == field and err.value.obj == "Pod ns/p"


def test_no_affinity_is_none() -> None:
    assert parse_affinity(None, "Pod p") is None
    assert parse_affinity({}, "Pod p") is None
    assert parse_affinity({"nodeAffinity": {}}, "Pod p") is None


def test_node_affinity_terms_or_and_match_fields() -> None:
    aff = parse_affinity(
        {
            "nodeAffinity": {
                R: {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "zone", "operator": "In", "values": ["a", "b"]},
                                {"key": "mem", "operator": "Gt", "values": ["10"]},
                            ]
                        },
                        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},
                    ]
                },
                P: [
                    {"weight": 7, "preference": {"matchExpressions": [{"key": "ssd", "operator": "Exists"}]}}
                ],
            }
        },
        "Pod p",
    )
    assert aff is not None and len(aff.node_terms) == 2
    assert [r.op for r in aff.node_terms[0]] == ["In", "Gt"]
    (name_req,) = aff.node_terms[1]
    assert name_req.op == "NotIn" and name_req.values == ("n1",)
    assert aff.node_preferred == ((7, (Requirement("ssd", "Exists"),)),)
    assert not aff.has_pod_terms


def test_pod_affinity_terms() -> None:
    aff = parse_affinity(
        {
            "podAffinity": {
                R: [
                    {
                        "labelSelector": {"matchLabels": {"app": "db"}},
                        "topologyKey": "zone",
                        "namespaces": ["data"],
                    }
                ]
            },
            "podAntiAffinity": {
                P: [{"weight": 3, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]
            },
        },
        "Pod p",
    )
    assert aff.has_pod_terms
    (term,) = aff.pod_affinity
    assert (
        term.topology_key == "zone" and term.namespaces == ("data",) and term.selector.matches({"app": "db"})
    )
    (pref,) = aff.pod_anti_affinity_preferred
    # a null labelSelector selects no pod (kube's LabelSelectorAsSelector(nil) is labels.Nothing())
    assert pref.weight == 3 and not pref.selector.matches({"anything": "x"}) and not pref.selector.matches({})


@pytest.mark.parametrize(
    "raw, field",
    [
        (
            {
                "nodeAffinity": {
                    R: {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["x"]}]}
                        ]
                    }
                }
            },
            f"spec.affinity.nodeAffinity.{R}.nodeSelectorTerms[0].matchFields[0].key",
        ),
        (
            {
                "nodeAffinity": {
                    R: {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "m", "operator": "Lt", "values": ["1", "2"]}]}
                        ]
                    }
                }
            },
            f"spec.affinity.nodeAffinity.{R}.nodeSelectorTerms[0].matchExpressions[0].values",
        ),
        ({"podAffinity": {R: [{"labelSelector": {}}]}}, f"spec.affinity.podAffinity.{R}[0].topologyKey"),
        ({"podAffinity": {P: [{"topologyKey": "zone"}]}}, f"spec.affinity.podAffinity.{P}[0]"),
        ({"podAntiAffinity": {R: {"topologyKey": "zone"}}}, f"spec.affinity.podAntiAffinity.{R}"),
        ({"nodeAffinity": "yes"}, "spec.affinity.nodeAffinity"),
        ("yes", "spec.affinity"),
    ],
)
def test_affinity_errors(raw: object, field: str) -> None:
    with pytest.raises(InputError) as err:
        parse_affinity(raw, "Pod ns/p")
    assert err.value.field == field


def test_affinity_is_hashable_for_equivalence_classes() -> None:
    raw = {
        "nodeAffinity": {
            R: {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    assert hash(parse_affinity(raw, "a")) == hash(parse_affinity(raw, "b"))
    assert parse_affinity(raw, "a") == parse_affinity(raw, "b")


def _term(labels: dict | None = None, **term: object) -> PodAffinityTerm:
    aff = parse_affinity(
        {"podAntiAffinity": {R: [{"topologyKey": "zone", **term}]}}, "Pod ns/p", labels or {}
    )
    assert aff is not None
    (t,) = aff.pod_anti_affinity
    return t


def test_term_namespaces_follow_kube_scheduler() -> None:
    own = _term(labelSelector={})
    assert own.covers("ns", "ns") and not own.covers("other", "ns")
    listed = _term(labelSelector={}, namespaces=["a", "b"])
    assert listed.covers("a", "ns") and listed.covers("b", "ns") and not listed.covers("ns", "ns")
    for every in (
        _term(labelSelector={}, namespaceSelector={}),
        _term(namespaces=["a"], namespaceSelector={}),
    ):
        assert every.all_namespaces and every.covers("x", "ns") and every.covers("ns", "ns")
    assert _term(namespaceSelector={"matchLabels": {}, "matchExpressions": []}).all_namespaces


def test_term_namespace_selector_matches_namespace_labels() -> None:
    """kube-scheduler's ``getNamespacesFromPodAffinityTerm``: ``namespaces`` ∪ the Namespace objects
    the selector matches; with a selector, the owner's namespace only if it matches; a namespace with
    no Namespace object matches no selector."""
    labels = {"a": {"team": "ml"}, "b": {"team": "web"}, "ns": {}}
    sel = _term(labelSelector={}, namespaceSelector={"matchLabels": {"team": "ml"}})
    assert sel.ns_selector is not None and not sel.all_namespaces
    assert sel.covers("a", "ns", labels) and not sel.covers("b", "ns", labels)
    assert not sel.covers("ns", "ns", labels)  # not the owner's own namespace by default
    assert not sel.covers("a", "ns", {}) and not sel.covers("a", "ns")  # no Namespace objects
    both = _term(labelSelector={}, namespaces=["b"], namespaceSelector={"matchLabels": {"team": "ml"}})
    assert both.covers("a", "ns", labels) and both.covers("b", "ns", labels)
    assert not both.covers("ns", "ns", labels)
    gone = _term(
        labelSelector={},
        namespaceSelector={"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]},
    )
    assert gone.covers("ns", "x", labels) and not gone.covers("missing", "x", labels)


@pytest.mark.parametrize(
    "term, field",
    [
        (
            {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Is"}]}},
            "namespaceSelector.matchExpressions[0].operator",
        ),
        ({"namespaceSelector": "all"}, "namespaceSelector"),
        ({"namespaces": "a"}, "namespaces"),
        ({"matchLabelKeys": ["v"]}, "matchLabelKeys"),
        ({"mismatchLabelKeys": ["v"]}, "mismatchLabelKeys"),
        ({"labelSelector": {}, "matchLabelKeys": "v"}, "matchLabelKeys"),
        (
            {
                "labelSelector": {"matchExpressions": [{"key": "v", "operator": "Exists"}] * 2},
                "matchLabelKeys": ["v"],
            },
            "matchLabelKeys[0]",
        ),
        ({"labelSelector": {}, "matchLabelKeys": ["v"], "mismatchLabelKeys": ["v"]}, "matchLabelKeys[0]"),
    ],
)
def test_term_fields_refused_by_name(term: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        _term(**term)
    assert err.value.obj == "Pod ns/p"
    assert err.value.field == f"spec.affinity.podAntiAffinity.{R}[0].{field}"


def test_match_label_keys_merge_the_pods_own_values() -> None:
    labels = {"app": "web", "version": "v2", "tenant": "a"}
    t = _term(
        labels,
        labelSelector={"matchLabels": {"app": "web"}},
        matchLabelKeys=["version", "absent"],
        mismatchLabelKeys=["tenant"],
    )
    assert t.selector.matches({"app": "web", "version": "v2", "tenant": "b"})
    assert not t.selector.matches({"app": "web", "version": "v1", "tenant": "b"})  # matchLabelKeys: In
    assert not t.selector.matches({"app": "web", "version": "v2", "tenant": "a"})  # mismatch: NotIn
    # a key the pod lacks adds nothing; a pod without the mismatched key's label is not excluded by it
    assert t.selector.matches({"app": "web", "version": "v2"})
    assert _term(labelSelector={"matchLabels": {"app": "web"}}, matchLabelKeys=["version"]).selector == (
        parse_label_selector({"matchLabels": {"app": "web"}}, "Pod ns/p", "x")
    )


def test_match_label_keys_checked_on_the_merged_selector() -> None:
    """kube-apiserver validates the pod after merging: a key in matchLabels and matchLabelKeys is refused
    once the merge adds it; a selector the merge already went through (a live pod) is taken as it is."""
    with pytest.raises(InputError) as err:
        _term({"v": "2"}, labelSelector={"matchLabels": {"v": "1"}}, matchLabelKeys=["x", "v"])
    assert err.value.field == f"spec.affinity.podAntiAffinity.{R}[0].matchLabelKeys[1]"
    merged = {"matchExpressions": [{"key": "v", "operator": "In", "values": ["2"]}]}
    t = _term({"v": "2"}, labelSelector=merged, matchLabelKeys=["v"])
    assert t.selector == parse_label_selector(merged, "Pod ns/p", "x")
    # the pod lacks the key: nothing is merged, nothing refused
    assert _term({}, labelSelector={"matchLabels": {"v": "1"}}, matchLabelKeys=["v"]).selector.matches(
        {"v": "1"}
    )
