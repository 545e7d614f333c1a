"""The ``minruntime`` plugin (seed 002, SPEC.md §3.4): resolution over the queue tree (the seed's five
worked examples), protection at one second either side of its end, elastic victims and the scenario
validator, the plugin arguments, and queue overrides read from KAI and Volcano snapshots."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from corral.errors import ConfigError, InputError
from corral.framework.config import parse_config
from corral.framework.session import Session
from corral.manifests import build_cluster, load_snapshot
from corral.model import Job, TaskStatus
from corral.model.clock import format_time, parse_time
from corral.plugins.minruntime import (
    START_ANNOTATIONS,
    MinRuntimePlugin,
    is_elastic,
    resolve_min_runtime,
    rule_for,
    start_time,
)
from corral.registry import REGISTRY

NOW = parse_time("2026-01-01T12:00:00Z")
LAST_START = "kai.scheduler/last-start-timestamp"


# --- the seed's two trees ---------------------------------------------------------------------------
def _q(parent: str | None = None, preempt: float | None = None, reclaim: float | None = None) -> Any:
    return SimpleNamespace(parent=parent, preempt_min_runtime=preempt, reclaim_min_runtime=reclaim)


#: Reclaim example: A -> B(600s) -> C -> leaf1(0s), leaf2(180s); B -> D(60s) -> leaf3.
RECLAIM_TREE = {
    "A": _q(),
    "B": _q("A", reclaim=600),
    "C": _q("B"),
    "D": _q("B", reclaim=60),
    "leaf1": _q("C", reclaim=0),
    "leaf2": _q("C", reclaim=180),
    "leaf3": _q("D"),
}
#: Preempt example: A -> B(600s) -> C -> leaf1(300s), leaf2.
PREEMPT_TREE = {
    "A": _q(),
    "B": _q("A", preempt=600),
    "C": _q("B"),
    "leaf1": _q("C", preempt=300),
    "leaf2": _q("C"),
}

#: (tree, preemptor's leaf queue, victim's leaf queue, action, the seed's answer in seconds)
SEED_EXAMPLES = [
    pytest.param(RECLAIM_TREE, "leaf1", "leaf3", "reclaim", 60.0, id="reclaim-1-leaf1-vs-leaf3-60s"),
    pytest.param(RECLAIM_TREE, "leaf1", "leaf2", "reclaim", 180.0, id="reclaim-2-leaf1-vs-leaf2-180s"),
    pytest.param(RECLAIM_TREE, "leaf3", "leaf1", "reclaim", 600.0, id="reclaim-3-leaf3-vs-leaf1-600s"),
    pytest.param(PREEMPT_TREE, "leaf1", "leaf1", "preempt", 300.0, id="preempt-1-leaf1-300s"),
    pytest.param(PREEMPT_TREE, "leaf2", "leaf2", "preempt", 600.0, id="preempt-2-leaf2-600s"),
]


@pytest.mark.parametrize("tree,preemptor,victim,action,want", SEED_EXAMPLES)
def test_seed_examples_resolve(tree, preemptor, victim, action, want) -> None:
    assert resolve_min_runtime(tree, preemptor, victim, action, {}) == want
    # the gang actions follow the same rules
    assert resolve_min_runtime(tree, preemptor, victim, "gang" + action, {}) == want
    assert resolve_min_runtime(tree, preemptor, victim, "gang-" + action, {}) == want


def test_reclaim_resolve_method_queue_uses_the_victims_leaf() -> None:
    d = {"reclaim": 7.0}
    assert resolve_min_runtime(RECLAIM_TREE, "leaf1", "leaf3", "reclaim", d, "queue") == 60.0  # leaf3 -> D
    assert resolve_min_runtime(RECLAIM_TREE, "leaf1", "leaf2", "reclaim", d, "queue") == 180.0
    # example 3 differs: leaf1's own 0s applies instead of C's inherited 600s
    assert resolve_min_runtime(RECLAIM_TREE, "leaf3", "leaf1", "reclaim", d, "queue") == 0.0
    assert resolve_min_runtime(RECLAIM_TREE, "leaf3", "leaf1", "reclaim", d, "lca") == 600.0


def test_defaults_apply_when_no_queue_sets_a_value() -> None:
    d = {"preempt": 30.0, "reclaim": 45.0}
    tree = {"A": _q(), "x": _q("A"), "y": _q("A")}
    assert resolve_min_runtime(tree, "x", "x", "preempt", d) == 30.0
    assert resolve_min_runtime(tree, "x", "y", "reclaim", d) == 45.0
    assert resolve_min_runtime(tree, "x", "y", "reclaim", {}) == 0.0
    # a preempt setting never answers a reclaim and vice versa
    assert resolve_min_runtime(PREEMPT_TREE, "leaf1", "leaf2", "reclaim", d) == 45.0
    assert resolve_min_runtime(RECLAIM_TREE, "leaf1", "leaf1", "preempt", d) == 30.0


def test_reclaim_edge_cases() -> None:
    tree = {"A": _q(reclaim=100), "a1": _q("A", reclaim=10), "Z": _q(reclaim=500), "z1": _q("Z")}
    # separate trees meet at a virtual root: one level down towards the victim is its top queue
    assert resolve_min_runtime(tree, "a1", "z1", "reclaim", {}) == 500.0
    assert resolve_min_runtime(tree, "z1", "a1", "reclaim", {}) == 100.0
    # the same queue: no step down possible, the queue's own resolution
    assert resolve_min_runtime(tree, "a1", "a1", "reclaim", {}) == 10.0
    # preemptor in an ancestor of the victim: one level below it
    assert resolve_min_runtime(tree, "A", "a1", "reclaim", {}) == 10.0
    # a queue that is not in the tree stands alone
    assert resolve_min_runtime(tree, "a1", "ghost", "reclaim", {"reclaim": 3}) == 3.0


def test_rule_for_actions() -> None:
    assert rule_for("preempt") == rule_for("GangPreempt") == rule_for("gang-preempt") == "preempt"
    assert rule_for("reclaim") == rule_for("gangreclaim") == rule_for("gang_reclaim") == "reclaim"
    assert rule_for("consolidate", "q", "q") == "preempt"
    assert rule_for("consolidate", "q", "r") == "reclaim"
    with pytest.raises(ValueError):
        resolve_min_runtime(RECLAIM_TREE, "leaf1", "leaf3", "reclaim", {}, "nearest")


# --- sessions over real snapshots ------------------------------------------------------------------
class _Registry:
    """REGISTRY plus this plugin (until the owner registers it)."""

    def plugin_class(self, name: str):
        return MinRuntimePlugin if name == "minruntime" else REGISTRY.plugin_class(name)

    def action_class(self, name: str):
        return REGISTRY.action_class(name)

    def plugin_names(self):
        return sorted(set(REGISTRY.plugin_names()) | {"minruntime"})

    def action_names(self):
        return REGISTRY.action_names()

    def canonical_action(self, name: str) -> str:
        return REGISTRY.canonical_action(name)


REG = _Registry()


def _config(args: dict | None = None, **switches: bool):
    plugin: dict = {"name": "minruntime", **switches}
    if args is not None:
        plugin["arguments"] = args
    return parse_config({"actions": "allocate", "tiers": [{"plugins": [plugin]}]}, REG, "test")


def _node(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}},
    }


def _vqueue(name: str, parent: str | None = None, **spec: Any) -> dict:
    ann = spec.pop("annotations", None)
    meta: dict = {"name": name}
    if ann:
        meta["annotations"] = ann
    if parent:
        spec["parent"] = parent
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": meta, "spec": spec}


def _kqueue(name: str, parent: str | None = None, **spec: Any) -> dict:
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def _job(
    name: str,
    queue: str,
    *,
    running: int = 0,
    pending: int = 0,
    min_member: int | None = None,
    annotations: dict | None = None,
    node: str = "n1",
) -> list[dict]:
    pods = []
    for i in range(running + pending):
        spec: dict = {
            "schedulerName": "corral",
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
        }
        status: dict = {"phase": "Pending"}
        if i < running:
            spec["nodeName"] = node
            status = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{i}",
                    "namespace": "default",
                    "annotations": {"scheduling.k8s.io/group-name": name},
                },
                "spec": spec,
                "status": status,
            }
        )
    pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {"minMember": running + pending if min_member is None else min_member, "queue": queue},
        "status": {"phase": "Running" if running else "Inqueue"},
    }
    return [pg] + pods


def _session(objects: list[dict], args: dict | None = None, now: float = NOW, **switches: bool) -> Session:
    cluster = build_cluster([("test.yaml", o) for o in [_node("n1"), _node("n2")] + objects])
    return Session(cluster, _config(args, **switches), REG, now)


def _started(seconds_ago: float) -> dict:
    return {LAST_START: format_time(NOW - seconds_ago)}


def _tree_queues(tree: dict, kai: bool = False) -> list[dict]:
    """The seed's tree as Volcano (spec fields) or KAI queues."""
    out = []
    for name, q in tree.items():
        spec: dict = {}
        if q.preempt_min_runtime is not None:
            spec["preemptMinRuntime"] = f"{int(q.preempt_min_runtime)}s"
        if q.reclaim_min_runtime is not None:
            spec["reclaimMinRuntime"] = f"{int(q.reclaim_min_runtime)}s"
        out.append((_kqueue if kai else _vqueue)(name, q.parent, **spec))
    return out


@pytest.mark.parametrize("tree,preemptor,victim,action,want", SEED_EXAMPLES)
@pytest.mark.parametrize("kai", [False, True], ids=["volcano", "kai"])
def test_seed_examples_protect_until_the_end(tree, preemptor, victim, action, want, kai) -> None:
    """One second before the end of protection the victim is filtered out; one second after it is not."""
    for offset, allowed in ((want - 1, False), (want + 1, True), (want, True)):
        objs = (
            _tree_queues(tree, kai)
            + _job("pre", preemptor, pending=1)
            + _job("vic", victim, running=1, annotations=_started(offset))
        )
        s = _session(objs)
        pre, vic = s.cluster.jobs["default/pre"], s.cluster.jobs["default/vic"]
        plugin = s.plugin("minruntime")
        assert plugin._min_runtime(pre, vic, action) == want
        assert s.victim_filter(pre, vic, action) is allowed, (offset, allowed)
        assert s.victim_filter(pre, vic, "gang" + action) is allowed
        # the validator agrees for the non-elastic victim
        assert s.scenario_valid(pre, [vic], list(vic.tasks), action) is allowed
        until = plugin._protected_until(pre, vic, action)
        assert (until is None) is allowed
        if until is not None:
            assert until == NOW - offset + want


def test_job_without_start_time_is_not_protected() -> None:
    s = _session(
        [_vqueue("q", preemptMinRuntime="1h")] + _job("pre", "q", pending=1) + _job("vic", "q", running=1)
    )
    pre, vic = s.cluster.jobs["default/pre"], s.cluster.jobs["default/vic"]
    assert start_time(vic) is None
    assert s.victim_filter(pre, vic, "preempt")


def test_corral_start_time_annotation_and_precedence() -> None:
    s = _session(
        [_vqueue("q", preemptMinRuntime="1h")]
        + _job("pre", "q", pending=1)
        + _job("vic", "q", running=1, annotations={"corral.io/start-time": format_time(NOW - 60)})
    )
    pre, vic = s.cluster.jobs["default/pre"], s.cluster.jobs["default/vic"]
    assert not s.victim_filter(pre, vic, "preempt")
    # kai.scheduler/last-start-timestamp wins over corral.io/start-time
    vic.annotations[LAST_START] = format_time(NOW - 7200)
    assert s.victim_filter(pre, vic, "preempt")
    assert START_ANNOTATIONS[0] == LAST_START


def test_start_stamped_during_the_cycle_protects_at_once() -> None:
    """allocate stamps jobs it starts; a later action in the same cycle sees the stamp."""
    from corral.actions.common.jobs import LAST_START as written

    assert written == LAST_START
    s = _session(
        [_vqueue("q", preemptMinRuntime="10m")] + _job("pre", "q", pending=1) + _job("vic", "q", running=1)
    )
    pre, vic = s.cluster.jobs["default/pre"], s.cluster.jobs["default/vic"]
    assert s.victim_filter(pre, vic, "preempt")
    s.ledger.annotate(vic, written, format_time(s.now))
    assert not s.victim_filter(pre, vic, "preempt")


def test_malformed_start_time_is_bad_input() -> None:
    with pytest.raises(InputError) as err:
        _session([_vqueue("q")] + _job("vic", "q", running=1, annotations={LAST_START: "yesterday"}))
    assert "PodGroup default/vic" in str(err.value) and LAST_START in str(err.value)


def test_defaults_and_switch() -> None:
    objs = (
        [_vqueue("q")] + _job("pre", "q", pending=1) + _job("vic", "q", running=1, annotations=_started(599))
    )
    s = _session(objs, {"defaultPreemptMinRuntime": "10m", "defaultReclaimMinRuntime": 5})
    pre, vic = s.cluster.jobs["default/pre"], s.cluster.jobs["default/vic"]
    assert not s.victim_filter(pre, vic, "preempt")  # 599 s of 600
    assert s.victim_filter(pre, vic, "reclaim")  # 599 s of 5
    s = _session(objs, {"defaultPreemptMinRuntime": "10m"}, enableVictimFilter=False)
    assert s.victim_filter(s.cluster.jobs["default/pre"], s.cluster.jobs["default/vic"], "preempt")
    s = _session(objs)  # defaults 0: never protected
    assert s.victim_filter(s.cluster.jobs["default/pre"], s.cluster.jobs["default/vic"], "preempt")


def test_reclaim_resolve_method_queue_in_a_session() -> None:
    objs = (
        _tree_queues(RECLAIM_TREE)
        + _job("pre", "leaf3", pending=1)
        + _job("vic", "leaf1", running=1, annotations=_started(100))
    )
    lca = _session(objs)
    assert not lca.victim_filter(lca.cluster.jobs["default/pre"], lca.cluster.jobs["default/vic"], "reclaim")
    queue = _session(objs, {"reclaimResolveMethod": "queue"})
    assert queue.victim_filter(
        queue.cluster.jobs["default/pre"], queue.cluster.jobs["default/vic"], "reclaim"
    )


def test_arguments_are_validated() -> None:
    with pytest.raises(ConfigError, match="reclaimResolveMethod"):
        _config({"reclaimResolveMethod": "nearest"})
    with pytest.raises(ConfigError, match="duration"):
        _config({"defaultPreemptMinRuntime": "soon"})
    with pytest.raises(ConfigError, match="unknown argument"):
        _config({"preemptMinRuntime": "5m"})
    args = (
        _config({"defaultPreemptMinRuntime": "1h30m", "defaultReclaimMinRuntime": "90s"})
        .plugin("minruntime")
        .args
    )
    assert (args.default_preempt, args.default_reclaim, args.reclaim_resolve_method) == (5400.0, 90.0, "lca")


# --- elastic victims ------------------------------------------------------------------------------
def _elastic(started: float, running: int = 4, min_member: int = 2):
    objs = (
        [_vqueue("q", preemptMinRuntime="10m")]
        + _job("pre", "q", pending=1)
        + _job("vic", "q", running=running, min_member=min_member, annotations=_started(started))
    )
    s = _session(objs)
    return s, s.cluster.jobs["default/pre"], s.cluster.jobs["default/vic"]


def test_elastic_victim_passes_the_filter_even_when_protected() -> None:
    s, pre, vic = _elastic(started=60)
    assert is_elastic(vic)
    assert s.plugin("minruntime")._protected(pre, vic, "preempt")
    assert s.victim_filter(pre, vic, "preempt")


def test_elastic_validator_keeps_min_member_while_protected() -> None:
    s, pre, vic = _elastic(started=60)
    tasks = sorted(vic.tasks, key=lambda t: t.name)
    assert s.scenario_valid(pre, [vic], tasks[:1], "preempt")
    assert s.scenario_valid(pre, [vic], tasks[:2], "preempt")  # 2 left = minMember
    assert not s.scenario_valid(pre, [vic], tasks[:3], "preempt")  # 1 left < minMember
    assert not s.scenario_valid(pre, [vic], tasks, "preempt")
    # victims may be passed without tasks of theirs, and tasks without their job in victims
    assert s.scenario_valid(pre, [vic], [], "preempt")
    assert not s.scenario_valid(pre, [], tasks[:3], "preempt")


def test_elastic_validator_counts_only_running_or_bound_pods() -> None:
    s, pre, vic = _elastic(started=60)
    tasks = sorted(vic.tasks, key=lambda t: t.name)
    tasks[3].status = TaskStatus.RELEASING  # already going: does not count towards minMember
    assert s.scenario_valid(pre, [vic], tasks[:1], "preempt")
    assert not s.scenario_valid(pre, [vic], tasks[:2], "preempt")
    # a scenario whose evictions were already applied (Releasing) is judged the same
    tasks[0].status = tasks[1].status = TaskStatus.RELEASING
    assert not s.scenario_valid(pre, [vic], tasks[:2], "preempt")


def test_elastic_validator_after_protection_ends() -> None:
    s, pre, vic = _elastic(started=601)
    assert s.scenario_valid(pre, [vic], list(vic.tasks), "preempt")
    s, pre, vic = _elastic(started=599)
    assert not s.scenario_valid(pre, [vic], list(vic.tasks), "preempt")


def test_elastic_by_pending_pods_and_by_roles() -> None:
    objs = (
        [_vqueue("q", preemptMinRuntime="10m")]
        + _job("pre", "q", pending=1)
        + _job("vic", "q", running=2, pending=2, min_member=2, annotations=_started(60))
    )
    s = _session(objs)
    pre, vic = s.cluster.jobs["default/pre"], s.cluster.jobs["default/vic"]
    assert is_elastic(vic) and s.victim_filter(pre, vic, "preempt")
    running = [t for t in vic.tasks if t.status is TaskStatus.RUNNING]
    assert not s.scenario_valid(pre, [vic], running[:1], "preempt")  # only minMember run: none may go
    gang = Job(uid="x/y", name="y", namespace="x", min_member=2, min_task_member={"a": 2, "b": 1})
    assert is_elastic(gang)
    assert not is_elastic(Job(uid="x/z", name="z", namespace="x", min_member=0))


def test_protected_non_elastic_job_in_a_scenario_is_rejected() -> None:
    objs = (
        [_vqueue("q", preemptMinRuntime="10m")]
        + _job("pre", "q", pending=1)
        + _job("vic", "q", running=2, annotations=_started(60))
        + _job("old", "q", running=1, annotations=_started(3600))
    )
    s = _session(objs)
    pre, vic, old = (s.cluster.jobs[f"default/{n}"] for n in ("pre", "vic", "old"))
    assert not s.victim_filter(pre, vic, "preempt")
    assert s.victim_filter(pre, old, "preempt")
    assert s.scenario_valid(pre, [old], list(old.tasks), "preempt")
    assert not s.scenario_valid(pre, [old, vic], list(old.tasks) + vic.tasks[:1], "preempt")


# --- queue overrides from snapshots ---------------------------------------------------------------
def test_kai_and_volcano_queue_overrides_are_parsed(tmp_path: Path) -> None:
    docs = [
        _node("n1"),
        _kqueue("kai-top", preemptMinRuntime="5m0s", reclaimMinRuntime="1h"),
        _kqueue("kai-leaf", "kai-top", reclaimMinRuntime=90),
        _vqueue(
            "vc-ann",
            annotations={"corral.io/preempt-min-runtime": "2m", "corral.io/reclaim-min-runtime": "30s"},
        ),
        _vqueue(
            "vc-spec",
            preemptMinRuntime="1m30s",
            reclaimMinRuntime="0s",
            annotations={"corral.io/preempt-min-runtime": "9m"},
        ),  # the spec field wins
        _vqueue("vc-none", weight=2),
    ]
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    queues = load_snapshot([path]).queues
    got = {
        n: (queues[n].preempt_min_runtime, queues[n].reclaim_min_runtime)
        for n in ("kai-top", "kai-leaf", "vc-ann", "vc-spec", "vc-none")
    }
    assert got == {
        "kai-top": (300.0, 3600.0),
        "kai-leaf": (None, 90.0),
        "vc-ann": (120.0, 30.0),
        "vc-spec": (90.0, 0.0),
        "vc-none": (None, None),
    }
    # and the plugin's pure resolution reads them as loaded
    assert resolve_min_runtime(queues, "kai-leaf", "kai-leaf", "preempt", {}) == 300.0
    assert resolve_min_runtime(queues, "vc-ann", "kai-leaf", "reclaim", {}) == 3600.0


@pytest.mark.parametrize(
    "doc,field",
    [
        (_kqueue("bad", preemptMinRuntime="forever"), "spec.preemptMinRuntime"),
        (
            _vqueue("bad", annotations={"corral.io/reclaim-min-runtime": "-5s"}),
            "metadata.annotations.corral.io/reclaim-min-runtime",
        ),
        (_vqueue("bad", reclaimMinRuntime=-1), "spec.reclaimMinRuntime"),
    ],
)
def test_bad_queue_override_names_the_field(tmp_path: Path, doc: dict, field: str) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all([_node("n1"), doc]))
    with pytest.raises(InputError) as err:
        load_snapshot([path])
    assert "Queue bad" in str(err.value) and field in str(err.value)
