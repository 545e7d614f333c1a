"""The incremental model of ``corral run`` (:mod:`corral.kube.model`): after cycles have run on it and
objects changed, the cluster it hands to the next cycle is, field by field and in the same order, the
cluster a full assembly of the same cache builds (for every case of the scenario suite), and bad objects
are still logged once and left out."""

from __future__ import annotations

import copy
import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest
import yaml

from corral.framework.config import parse_config
from corral.framework.cycle import run_cycle
from corral.kube.api import RESOURCES
from corral.kube.cache import WatchCache
from corral.kube.logs import Log
from corral.kube.runner import dry_run_assume
from corral.model import Cluster, Job, Task
from corral.model.clock import parse_time
from corral.model.subjobs import SubJob
from corral.registry import REGISTRY, default_config
from tests.scenarios.expand import T0, expand

CASES = sorted((Path(__file__).parent.parent / "scenarios" / "cases").glob("*.yaml"))
TYPES = {(r.kind, r.api_version): r for r in RESOURCES}


def _value(v: object) -> object:
    if isinstance(v, np.ndarray):
        return (v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, (Job, Task)):
        return ("ref", type(v).__name__, v.uid)
    if isinstance(v, dict):
        return tuple((k, _value(x)) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return tuple(_value(x) for x in v)
    if isinstance(v, SubJob):  # a sub-group: by its fields (its pods by reference)
        return ("SubJob", _fields(v))
    return v


def _fields(obj: object) -> tuple:
    return tuple((f.name, _value(getattr(obj, f.name))) for f in dataclasses.fields(obj))  # type: ignore[arg-type]


def fingerprint(c: Cluster) -> dict:
    """Everything of the cluster a cycle can read, with the order of every collection."""
    n = c.nodes
    return {
        "resources": list(c.resources.names),
        "nodes": [
            _value(x)
            for x in (
                n.names,
                n.allocatable,
                n.used,
                n.releasing,
                n.pipelined,
                n.labels,
                n.taints,
                n.unschedulable,
                n.down,
                n.locked_for,
                getattr(n, "annotations", None),
            )
        ],
        "tasks": [(uid, _fields(t)) for uid, t in c.tasks.items()],
        "jobs": [(uid, _fields(j)) for uid, j in c.jobs.items()],
        "queues": [(name, _fields(q)) for name, q in c.queues.items()],
        "hypernodes": [(name, _fields(h)) for name, h in c.hypernodes.hypernodes.items()],
        "classes": [_fields(p) for p in c.priority_classes.values()],
        "pdbs": [(p.key, p.namespace, p.min_available, p.max_unavailable) for p in c.pdbs],
        "foreign": [t.uid for t in c.foreign],
        "namespaces": sorted((k, sorted(v.items())) for k, v in c.namespace_labels.items()),
        # the reader's and the assembly's warnings (corral run tells them): the same, in any order
        "warnings": sorted((w.obj, w.field, w.message) for w in c.notes.warnings),
    }


def _cache(objects: list[dict]) -> WatchCache:
    cache = WatchCache(None, Log(stream=io.StringIO()))
    by_type: dict = {r: [] for r in RESOURCES}
    for o in objects:
        r = TYPES.get((o.get("kind"), o.get("apiVersion")))
        if r is not None:
            by_type[r].append(copy.deepcopy(o))
    for r, items in by_type.items():
        cache.replace(r, items)
    return cache


def _fresh(cache: WatchCache) -> Cluster:
    """A full assembly of what ``cache`` holds now (a second cache with the same stores, assumptions)."""
    other = WatchCache(None, Log(stream=io.StringIO()))
    with cache.lock:
        for r, s in cache.stores.items():  # parsed again: the reader's warnings made afresh
            other.replace(r, [e.raw for e in s.values()])
        other.assumed = dict(cache.assumed)
    return other.build()[0]


def _pods(cache: WatchCache) -> list[dict]:
    return [e.raw for e in cache.stores[TYPES[("Pod", "v1")]].values()]


def _changes(cache: WatchCache, step: int) -> None:
    """Changes a live cluster sees: a pod deleted, one relabelled, one added, a podgroup's annotations
    changed, a node's labels and taints changed."""
    pod_type = TYPES[("Pod", "v1")]
    pods = _pods(cache)
    if not pods:
        return
    victim = pods[step % len(pods)]
    cache.event(pod_type, "DELETED", victim)
    if len(pods) > 1:
        changed = copy.deepcopy(pods[(step + 1) % len(pods)])
        changed.setdefault("metadata", {}).setdefault("labels", {})["corral-test"] = str(step)
        cache.event(pod_type, "MODIFIED", changed)
    added = copy.deepcopy(victim)
    added["metadata"]["name"] = f"{added['metadata']['name']}-again{step}"
    added["metadata"]["uid"] = f"uid-again-{step}-{added['metadata'].get('uid')}"
    cache.event(pod_type, "ADDED", added)
    node_type = TYPES[("Node", "v1")]
    for e in list(cache.stores[node_type].values())[step - 1 : step]:
        node = copy.deepcopy(e.raw)
        node.setdefault("metadata", {}).setdefault("labels", {})["corral-test"] = str(step)
        if step == 2:
            node.setdefault("spec", {})["taints"] = [{"key": "corral-test", "effect": "NoSchedule"}]
        cache.event(node_type, "MODIFIED", node)
    for r in RESOURCES:
        if r.kind == "PodGroup":
            for e in list(cache.stores[r].values())[:1]:
                pg = copy.deepcopy(e.raw)
                pg.setdefault("metadata", {}).setdefault("annotations", {})["corral-test"] = str(step)
                cache.event(r, "MODIFIED", pg)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_incremental_model_is_the_full_assembly(path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    config = parse_config(case["config"], REGISTRY, "scenario") if case.get("config") else default_config()
    now = parse_time(str(case.get("now", T0)))
    cache = _cache(expand(case))
    try:
        cluster = cache.build()[0]
    except Exception as exc:  # noqa: BLE001 - a case the loader rejects is out of scope here
        pytest.skip(f"the loader rejects the case: {exc}")
    seen = set()
    for step in range(3):
        decisions = run_cycle(cluster, config, REGISTRY, now + step, step + 1)
        if step == 0:
            cluster = cache.build()[0]  # nothing changed: the cycle's changes undone
            seen.add(cache.model.last)
            assert fingerprint(cluster) == fingerprint(_fresh(cache))
            decisions = run_cycle(cluster, config, REGISTRY, now + step, step + 1)
        dry_run_assume(cache, decisions, now + step)
        if step:
            _changes(cache, step)
        cluster = cache.build()[0]
        seen.add(cache.model.last)
        assert fingerprint(cluster) == fingerprint(_fresh(cache)), f"step {step}, {cache.model.last}"
        assert cache.model.pending == sum(
            1 for t in cluster.tasks.values() if t.managed and t.status.value in ("Pending", "Pipelined")
        )
    assert "unchanged" in seen


def test_incremental_steps_are_taken() -> None:
    """Pod changes rebuild one job, not the cluster; a node change assembles everything."""
    case = yaml.safe_load((Path(__file__).parent.parent / "scenarios" / "cases" / CASES[0].name).read_text())
    cache = _cache(expand(case))
    cache.build()
    assert cache.model.last == "full"
    cache.build()
    assert cache.model.last == "unchanged"
    _changes(cache, 1)
    cache.build()
    assert cache.model.last == "incremental" and cache.model.rebuilt >= 1
    node_type = TYPES[("Node", "v1")]
    node = copy.deepcopy(next(iter(cache.stores[node_type].values())).raw)
    cache.event(node_type, "MODIFIED", {**node, "metadata": {**node["metadata"], "resourceVersion": "99"}})
    cache.build()
    assert cache.model.last == "unchanged"  # a heartbeat: the node reads the same
    node["metadata"].setdefault("labels", {})["new"] = "label"
    cache.event(node_type, "MODIFIED", node)
    cluster = cache.build()[0]
    assert cache.model.last == "incremental"  # node rows and the HyperNode tree built again
    assert fingerprint(cluster) == fingerprint(_fresh(cache))
    extra = copy.deepcopy(node)
    extra["metadata"]["name"] = "zz-new-node"
    cache.event(node_type, "ADDED", extra)
    cache.build()
    assert cache.model.last == "full" and cache.model.reason == "a node was added or removed"


def _objects() -> list[dict]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "10"}},
        },
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ns"},
            "spec": {"minMember": 1},
        },
    ] + [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"p{i}",
                "namespace": "ns",
                "uid": f"u{i}",
                "annotations": {"scheduling.k8s.io/group-name": "g"},
                "creationTimestamp": T0,
            },
            "spec": {
                "schedulerName": "corral",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
            "status": {"phase": "Pending"},
        }
        for i in range(3)
    ]


def test_bad_object_logged_once_left_out_and_back_when_fixed() -> None:
    cache = _cache(_objects())
    cache.build()
    pod_type = TYPES[("Pod", "v1")]
    bad = copy.deepcopy(cache.stores[pod_type]["ns/p1"].raw)
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    for _ in range(3):
        cache.event(pod_type, "MODIFIED", bad)
        cluster = cache.build()[0]
        assert cache.model.last in ("incremental", "unchanged")
        assert "u1" not in cluster.tasks and set(cluster.tasks) == {"u0", "u2"}
    lines = [line for line in cache.log.stream.getvalue().splitlines() if "ns/p1" in line]  # type: ignore[attr-defined]
    assert len(lines) == 1 and "spec.containers[0].resources.requests.cpu" in lines[0]
    good = copy.deepcopy(bad)
    good["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    cache.event(pod_type, "MODIFIED", good)
    cluster = cache.build()[0]
    assert set(cluster.tasks) == {"u0", "u1", "u2"} and list(cluster.tasks) == ["u0", "u1", "u2"]
    assert fingerprint(cluster) == fingerprint(_fresh(cache))


def test_duplicate_uid_falls_back_to_the_full_assembly() -> None:
    cache = _cache(_objects())
    cache.build()
    pod_type = TYPES[("Pod", "v1")]
    twin = copy.deepcopy(cache.stores[pod_type]["ns/p1"].raw)
    twin["metadata"]["name"] = "p9"  # the uid of p1
    cache.event(pod_type, "ADDED", twin)
    cluster = cache.build()[0]
    assert cache.model.last == "full"
    assert len([t for t in cluster.tasks.values() if t.uid == "u1"]) == 1
    assert "duplicate pod" in cache.log.stream.getvalue()  # type: ignore[attr-defined]
    assert fingerprint(cluster) == fingerprint(_fresh(cache))


def test_jobs_keep_the_loader_order() -> None:
    """Jobs without a podgroup follow their first pod: deleting a job's first pod can move it behind
    another job, as a full assembly orders them."""

    def pod(name: str, group: str | None) -> dict:
        meta: dict = {"name": name, "namespace": "ns", "uid": f"u-{name}", "creationTimestamp": T0}
        if group:
            meta["annotations"] = {"scheduling.k8s.io/group-name": group}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {"schedulerName": "corral", "containers": [{"name": "c"}]},
            "status": {"phase": "Pending"},
        }

    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "8"}},
    }
    cache = _cache([node, pod("b", "x"), pod("c", None), pod("d", "x")])
    assert list(cache.build()[0].jobs) == ["ns/x", "ns/c"]
    pod_type = TYPES[("Pod", "v1")]
    cache.event(pod_type, "DELETED", cache.stores[pod_type]["ns/b"].raw)
    cluster = cache.build()[0]
    assert cache.model.last == "incremental"
    assert list(cluster.jobs) == ["ns/c", "ns/x"] == list(_fresh(cache).jobs)
    cache.event(pod_type, "ADDED", pod("a", "x"))
    cluster = cache.build()[0]
    assert list(cluster.jobs) == ["ns/x", "ns/c"]
    assert [t.name for t in cluster.jobs["ns/x"].tasks] == ["a", "d"]
    assert fingerprint(cluster) == fingerprint(_fresh(cache))


def test_pending_count_follows_changes() -> None:
    cache = _cache(_objects())
    cache.build()
    assert cache.model.pending == 3
    pod_type = TYPES[("Pod", "v1")]
    bound = copy.deepcopy(cache.stores[pod_type]["ns/p0"].raw)
    bound["spec"]["nodeName"] = "n1"
    bound["status"] = {"phase": "Running"}
    cache.event(pod_type, "MODIFIED", bound)
    cache.event(pod_type, "DELETED", cache.stores[pod_type]["ns/p2"].raw)
    cluster = cache.build()[0]
    assert cache.model.last == "incremental" and cache.model.pending == 1
    assert cache.model.pending == sum(
        1 for t in cluster.tasks.values() if t.managed and t.status.value == "Pending"
    )


def test_node_label_change_moves_hypernode_membership() -> None:
    def node(name: str, rack: str) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"rack": rack}},
            "status": {"allocatable": {"cpu": "8"}},
        }

    hn = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "rack-a"},
        "spec": {
            "tier": 1,
            "members": [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "a"}}}}],
        },
    }
    cache = _cache([node("n1", "a"), node("n2", "b"), hn])
    cluster = cache.build()[0]
    assert cluster.hypernodes.hypernodes["rack-a"].mask.tolist() == [True, False]
    cache.event(TYPES[("Node", "v1")], "MODIFIED", node("n2", "a"))
    cluster = cache.build()[0]
    assert cache.model.last == "incremental"
    assert cluster.hypernodes.hypernodes["rack-a"].mask.tolist() == [True, True]
    assert fingerprint(cluster) == fingerprint(_fresh(cache))


def test_namespace_label_change_assembles_everything() -> None:
    """A Namespace's labels are what a namespaceSelector matches: a label change assembles the cluster
    again (the simplest correct invalidation, docs/kubernetes.md), and the pod follows the new labels; a
    change that reads the same (status) changes nothing."""
    path = (
        Path(__file__).parent.parent
        / "scenarios/cases/predicates_pod_affinity_namespace_selector_labels.yaml"
    )
    cache = _cache(expand(yaml.safe_load(path.read_text())))

    def web_node(cluster: Cluster) -> str | None:
        out = run_cycle(cluster, default_config(), REGISTRY, parse_time(T0), 1).to_json(1)
        return next((b["node"] for b in out["binds"] if b["pod"] == "default/web-0"), None)

    assert web_node(cache.build()[0]) == "n2"
    ns_type = TYPES[("Namespace", "v1")]
    data = copy.deepcopy(cache.stores[ns_type]["data"].raw)
    cache.event(ns_type, "MODIFIED", {**data, "status": {"phase": "Active"}})
    cache.build()
    assert cache.model.last == "unchanged"
    shop = copy.deepcopy(cache.stores[ns_type]["shop"].raw)
    data["metadata"]["labels"] = {"team": "web"}
    shop["metadata"]["labels"] = {"team": "ml"}
    cache.event(ns_type, "MODIFIED", data)
    cache.event(ns_type, "MODIFIED", shop)
    cluster = cache.build()[0]
    assert cache.model.last == "full" and cache.model.reason == "a Namespace changed"
    assert cluster.namespace_labels["shop"] == {"team": "ml"}
    assert fingerprint(cluster) == fingerprint(_fresh(cache))
    assert web_node(cluster) == "n3"


def test_namespace_change_without_selector_pods_assembles_nothing() -> None:
    """While no pod has a namespaceSelector, a Namespace change only updates the labels; a pod that
    comes with one later is built with the labels as they are then."""
    path = (
        Path(__file__).parent.parent
        / "scenarios/cases/predicates_pod_affinity_namespace_selector_labels.yaml"
    )
    case = yaml.safe_load(path.read_text())
    web = next(j for j in case["jobs"] if j["name"] == "web")
    case["jobs"] = [j for j in case["jobs"] if j["name"] not in ("web", "guard")]
    cache = _cache(expand(case))
    cache.build()
    ns_type = TYPES[("Namespace", "v1")]
    data = copy.deepcopy(cache.stores[ns_type]["data"].raw)
    data["metadata"]["labels"] = {"team": "web"}
    shop = copy.deepcopy(cache.stores[ns_type]["shop"].raw)
    shop["metadata"]["labels"] = {"team": "ml"}
    cache.event(ns_type, "MODIFIED", data)
    cache.event(ns_type, "MODIFIED", shop)
    cluster = cache.build()[0]
    assert cache.model.last == "unchanged" and cluster.namespace_labels["shop"] == {"team": "ml"}
    assert fingerprint(cluster) == fingerprint(_fresh(cache))
    for doc in expand({"nodes": [], "jobs": [web]}):
        if doc["kind"] in ("Pod", "PodGroup"):
            cache.event(TYPES[(doc["kind"], doc["apiVersion"])], "ADDED", doc)
    cluster = cache.build()[0]
    assert cache.model.last == "incremental" and cache.model.selector_pods == 1
    assert fingerprint(cluster) == fingerprint(_fresh(cache))
    out = run_cycle(cluster, default_config(), REGISTRY, parse_time(T0), 1).to_json(1)
    assert [(b["pod"], b["node"]) for b in out["binds"]] == [("default/web-0", "n3")]
