"""Label selectors, node selector requirements and affinity, parsed once from manifests.

Semantics follow Kubernetes: a LabelSelector ANDs matchLabels and matchExpressions (In, NotIn, Exists,
DoesNotExist); an empty selector matches everything; required node affinity ORs its nodeSelectorTerms and
ANDs the requirements inside a term (Gt and Lt compare integers); ``matchFields`` supports
``metadata.name``.

Inter-pod (anti-)affinity terms follow kube-scheduler's ``newAffinityTerm``
(pkg/scheduler/framework/types.go): a null ``labelSelector`` selects no pod (``LabelSelectorAsSelector(nil)``
is ``labels.Nothing()``); the term's namespaces are the union of ``namespaces`` and those its
``namespaceSelector`` matches, an empty selector ``{}`` matching every namespace, and a null selector with
empty ``namespaces`` meaning the owning pod's own namespace. A non-empty ``namespaceSelector`` is matched
against the labels of the snapshot's ``v1 Namespace`` objects (``Cluster.namespace_labels``): as
kube-scheduler merges the namespaces its lister finds into the term
(``mergeAffinityTermNamespacesIfNotEmpty``), a namespace with no Namespace object matches no such
selector. ``matchLabelKeys``/``mismatchLabelKeys`` are merged
into the label selector as kube-apiserver does at pod creation (``applyMatchLabelKeysAndMismatchLabelKeys``:
``key In (the pod's value)``/``key NotIn (the pod's value)``, keys the pod lacks are skipped).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.errors import InputError

__all__ = [
    "NODE_OPERATORS",
    "Affinity",
    "LabelSelector",
    "PodAffinityTerm",
    "Requirement",
    "parse_affinity",
    "parse_label_selector",
]

LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_OPERATORS = LABEL_OPERATORS + ("Gt", "Lt")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        v = labels.get(self.key)
        if self.op == "In":
            return v is not None and v in self.values
        if self.op == "NotIn":
            return v is None or v not in self.values
        if self.op == "Exists":
            return v is not None
        if self.op == "DoesNotExist":
            return v is None
        if v is None:
            return False
        try:
            n, bound = int(v), int(self.values[0])
        except (ValueError, IndexError):
            return False
        return n > bound if self.op == "Gt" else n < bound


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()
    #: a null selector of a pod affinity term: matches no labels at all
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.nothing and all(r.matches(labels) for r in self.requirements)


@dataclass(frozen=True)
class PodAffinityTerm:
    selector: LabelSelector
    namespaces: tuple[str, ...]  # empty (and not all_namespaces): the pod's own namespace
    topology_key: str
    weight: int = 0  # preferred terms only
    #: ``namespaceSelector: {}``: the term selects pods of every namespace
    all_namespaces: bool = False
    #: a ``namespaceSelector`` with requirements: the namespaces whose labels it matches
    ns_selector: LabelSelector | None = None

    def covers(
        self, namespace: str, own: str, ns_labels: Mapping[str, Mapping[str, str]] | None = None
    ) -> bool:
        """Does the term select pods of ``namespace`` when its owner lives in ``own``? (kube-scheduler's
        ``AffinityTerm.Matches``: ``Namespaces.Has(ns) || NamespaceSelector.Matches(nsLabels)``; the
        owner's namespace only when both are unset.) ``ns_labels``: the labels of every Namespace
        object (a namespace absent from it matches no non-empty selector)."""
        if self.all_namespaces or namespace in self.namespaces:
            return True
        if self.ns_selector is not None:
            labels = ns_labels.get(namespace) if ns_labels is not None else None
            return labels is not None and self.ns_selector.matches(labels)
        return not self.namespaces and namespace == own


@dataclass(frozen=True)
class Affinity:
    # required node affinity: OR over terms, AND inside; None when absent
    node_terms: tuple[tuple[Requirement, ...], ...] | None = None
    node_preferred: tuple[tuple[int, tuple[Requirement, ...]], ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_affinity_preferred: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity_preferred: tuple[PodAffinityTerm, ...] = ()
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def has_pod_terms(self) -> bool:
        return bool(self.pod_affinity or self.pod_anti_affinity)


def _map(value: Any, where: str, path: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"expected a mapping, got {type(value).__name__} {value!r}", obj=where, field=path)
    return value


def _list(value: Any, where: str, path: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"expected a list, got {type(value).__name__} {value!r}", obj=where, field=path)
    return value


def _weight(value: Any, where: str, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).lstrip("-").isdigit():
        raise InputError(f"expected an integer weight, got {value!r}", obj=where, field=path)
    return int(value)


def _requirements(exprs: Any, where: str, path: str, allowed: tuple[str, ...]) -> list[Requirement]:
    if exprs is None:
        return []
    if not isinstance(exprs, list):
        raise InputError("expected a list", obj=where, field=path)
    out = []
    for i, e in enumerate(exprs):
        p = f"{path}[{i}]"
        if not isinstance(e, dict) or "key" not in e or "operator" not in e:
            raise InputError("expected {key, operator, values}", obj=where, field=p)
        op = e["operator"]
        if op not in allowed:
            raise InputError(
                f"unknown operator {op!r} (allowed: {', '.join(allowed)})", obj=where, field=f"{p}.operator"
            )
        values = tuple(str(v) for v in (e.get("values") or ()))
        if op in ("In", "NotIn") and not values:
            raise InputError(f"operator {op} needs values", obj=where, field=f"{p}.values")
        if op in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
            raise InputError(f"operator {op} needs one integer value", obj=where, field=f"{p}.values")
        out.append(Requirement(str(e["key"]), op, values))
    return out


def parse_label_selector(raw: Any, where: str, path: str) -> LabelSelector:
    """A metav1.LabelSelector. ``None`` gives the empty selector (matches everything)."""
    if raw is None:
        return LabelSelector()
    if not isinstance(raw, dict):
        raise InputError("expected a label selector mapping", obj=where, field=path)
    labels = _map(raw.get("matchLabels"), where, f"{path}.matchLabels")
    reqs = [Requirement(str(k), "In", (str(v),)) for k, v in sorted(labels.items())]
    reqs += _requirements(raw.get("matchExpressions"), where, f"{path}.matchExpressions", LABEL_OPERATORS)
    return LabelSelector(tuple(reqs))


def _namespace_selector(term: dict, where: str, p: str) -> tuple[bool, LabelSelector | None]:
    """(every namespace, selector): ``namespaceSelector: {}`` selects every namespace; one with
    requirements is kept to match Namespace objects' labels; null is neither."""
    raw = term.get("namespaceSelector")
    if raw is None:
        return False, None
    sel = parse_label_selector(raw, where, f"{p}.namespaceSelector")
    return (False, sel) if sel.requirements else (True, None)


def _label_keys(term: dict, where: str, p: str, name: str) -> list[str]:
    keys = _list(term.get(name), where, f"{p}.{name}")
    if keys and term.get("labelSelector") is None:
        raise InputError("must not be set when labelSelector is not set", obj=where, field=f"{p}.{name}")
    return [str(k) for k in keys]


def _term_selector(term: dict, where: str, p: str, labels: Mapping[str, str]) -> LabelSelector:
    """The term's label selector with ``matchLabelKeys``/``mismatchLabelKeys`` merged in from the pod's
    own ``labels``, as kube-apiserver merges them at creation (a requirement already there, as in a pod
    read from a live cluster, is not added again), then checked as kube-apiserver validates the merged
    pod: a key in both lists, or a ``matchLabelKeys`` key the selector names twice, is refused."""
    raw = term.get("labelSelector")
    if raw is None:
        _label_keys(term, where, p, "matchLabelKeys")
        _label_keys(term, where, p, "mismatchLabelKeys")
        return LabelSelector(nothing=True)
    sel = parse_label_selector(raw, where, f"{p}.labelSelector")
    match = _label_keys(term, where, p, "matchLabelKeys")
    mismatch = _label_keys(term, where, p, "mismatchLabelKeys")
    for i, key in enumerate(match):
        if key in mismatch:
            raise InputError(
                f"{key!r} is in both matchLabelKeys and mismatchLabelKeys",
                obj=where,
                field=f"{p}.matchLabelKeys[{i}]",
            )
    extra = [Requirement(k, "In", (labels[k],)) for k in match if k in labels]
    extra += [Requirement(k, "NotIn", (labels[k],)) for k in mismatch if k in labels]
    extra = [r for r in extra if r not in sel.requirements]
    seen = {str(k) for k in (raw.get("matchLabels") or {})}
    for key in [str(e["key"]) for e in raw.get("matchExpressions") or ()] + [r.key for r in extra]:
        if key in match and key in seen:
            raise InputError(
                f"{key!r} is in both matchLabelKeys and labelSelector",
                obj=where,
                field=f"{p}.matchLabelKeys[{match.index(key)}]",
            )
        seen.add(key)
    return LabelSelector(sel.requirements + tuple(extra)) if extra else sel


def _pod_terms(
    raw: Any, where: str, path: str, weighted: bool, labels: Mapping[str, str]
) -> tuple[PodAffinityTerm, ...]:
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise InputError("expected a list", obj=where, field=path)
    out = []
    for i, item in enumerate(raw):
        p = f"{path}[{i}]"
        weight = 0
        term = item
        if weighted:
            if not isinstance(item, dict) or "podAffinityTerm" not in item:
                raise InputError("expected {weight, podAffinityTerm}", obj=where, field=p)
            weight = _weight(item.get("weight", 1), where, f"{p}.weight")
            term = item["podAffinityTerm"]
            p += ".podAffinityTerm"
        if not isinstance(term, dict) or not term.get("topologyKey"):
            raise InputError("a pod affinity term needs topologyKey", obj=where, field=f"{p}.topologyKey")
        sel = _term_selector(term, where, p, labels)
        namespaces = tuple(str(n) for n in _list(term.get("namespaces"), where, f"{p}.namespaces"))
        every, ns_sel = _namespace_selector(term, where, p)
        out.append(PodAffinityTerm(sel, namespaces, str(term["topologyKey"]), weight, every, ns_sel))
    return tuple(out)


def parse_affinity(raw: Any, where: str, labels: Mapping[str, str] | None = None) -> Affinity | None:
    """``spec.affinity`` of a pod, or None when it has none that corral uses; ``labels`` are the pod's
    own (its terms' ``matchLabelKeys``/``mismatchLabelKeys`` read them)."""
    own = labels or {}
    if not raw:
        return None
    if not isinstance(raw, dict):
        raise InputError("expected a mapping", obj=where, field="spec.affinity")
    base = "spec.affinity"
    na = _map(raw.get("nodeAffinity"), where, f"{base}.nodeAffinity")
    node_terms = _node_terms(na, where, f"{base}.nodeAffinity")
    preferred = _node_preferred(na, where, f"{base}.nodeAffinity")
    pa = _map(raw.get("podAffinity"), where, f"{base}.podAffinity")
    paa = _map(raw.get("podAntiAffinity"), where, f"{base}.podAntiAffinity")
    R, P = "requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"
    aff = Affinity(
        node_terms=node_terms,
        node_preferred=preferred,
        pod_affinity=_pod_terms(pa.get(R), where, f"{base}.podAffinity.{R}", False, own),
        pod_anti_affinity=_pod_terms(paa.get(R), where, f"{base}.podAntiAffinity.{R}", False, own),
        pod_affinity_preferred=_pod_terms(pa.get(P), where, f"{base}.podAffinity.{P}", True, own),
        pod_anti_affinity_preferred=_pod_terms(paa.get(P), where, f"{base}.podAntiAffinity.{P}", True, own),
    )
    if (
        aff.node_terms is None
        and not aff.node_preferred
        and not aff.has_pod_terms
        and not aff.pod_affinity_preferred
        and not aff.pod_anti_affinity_preferred
    ):
        return None
    return aff


def _node_terms(na: dict, where: str, base: str) -> tuple[tuple[Requirement, ...], ...] | None:
    """The required node selector terms of a ``nodeAffinity`` (None when it has none); ``matchFields``
    may name ``metadata.name`` only (the one field kube-scheduler matches)."""
    rp = f"{base}.requiredDuringSchedulingIgnoredDuringExecution"
    req = _map(na.get("requiredDuringSchedulingIgnoredDuringExecution"), where, rp)
    if not req:
        return None
    terms = []
    for i, term in enumerate(_list(req.get("nodeSelectorTerms"), where, f"{rp}.nodeSelectorTerms")):
        p = f"{rp}.nodeSelectorTerms[{i}]"
        term = _map(term, where, p)
        reqs = _requirements(term.get("matchExpressions"), where, f"{p}.matchExpressions", NODE_OPERATORS)
        for j, f in enumerate(_list(term.get("matchFields"), where, f"{p}.matchFields")):
            f = _map(f, where, f"{p}.matchFields[{j}]")
            if f.get("key") != "metadata.name":
                raise InputError(
                    "only metadata.name is supported in matchFields",
                    obj=where,
                    field=f"{p}.matchFields[{j}].key",
                )
            reqs += [
                Requirement("\x00name", f.get("operator", "In"), tuple(str(v) for v in f.get("values") or ()))
            ]
        terms.append(tuple(reqs))
    return tuple(terms)


def _node_preferred(na: dict, where: str, base: str) -> tuple[tuple[int, tuple[Requirement, ...]], ...]:
    """The weighted preferred node selector terms of a ``nodeAffinity``."""
    preferred = []
    pp = f"{base}.preferredDuringSchedulingIgnoredDuringExecution"
    for i, pt in enumerate(_list(na.get("preferredDuringSchedulingIgnoredDuringExecution"), where, pp)):
        p = f"{pp}[{i}]"
        pt = _map(pt, where, p)
        reqs = _requirements(
            _map(pt.get("preference"), where, f"{p}.preference").get("matchExpressions"),
            where,
            f"{p}.preference.matchExpressions",
            NODE_OPERATORS,
        )
        preferred.append((_weight(pt.get("weight", 1), where, f"{p}.weight"), tuple(reqs)))
    return tuple(preferred)
