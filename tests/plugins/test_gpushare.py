"""The ``gpushare`` plugin (seed 003, SPEC.md §3.2): devices read from nodes, assignment of placed pods at
session open, the one-device predicate, allocate/evict/revert keeping devices, the simulation points in
both ``keepDeviceOnReAdd`` modes (the seed's GPU story), and full preempt cycles."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from corral.errors import ConfigError, InputError
from corral.framework.config import parse_config
from corral.framework.cycle import apply_decisions, run_cycle
from corral.framework.session import Session
from corral.manifests import build_cluster, load_snapshot
from corral.model import TaskStatus
from corral.model.clock import parse_time
from corral.plugins.gpushare import GPU_INDEX, GpuSharePlugin
from corral.registry import REGISTRY

NOW = parse_time("2026-01-01T12:00:00Z")
GI = 2**30 * 1000.0  # one Gi in milli-units
MEM = "volcano.sh/gpu-memory"


class _Registry:
    """REGISTRY plus this plugin (until the owner registers it)."""

    def plugin_class(self, name: str):
        return GpuSharePlugin if name == "gpushare" else REGISTRY.plugin_class(name)

    def action_class(self, name: str):
        return REGISTRY.action_class(name)

    def plugin_names(self):
        return sorted(set(REGISTRY.plugin_names()) | {"gpushare"})

    def action_names(self):
        return REGISTRY.action_names()

    def canonical_action(self, name: str) -> str:
        return REGISTRY.canonical_action(name)


REG = _Registry()


# --- objects ----------------------------------------------------------------------------------------
def node(
    name: str,
    gpus: int = 2,
    *,
    per: str | None = None,
    total: str | None = None,
    number: int | None = None,
    labels: dict | None = None,
    annotations: dict | None = None,
) -> dict:
    alloc: dict[str, str] = {"cpu": "64", "memory": "256Gi", "pods": "110"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    if total:
        alloc[MEM] = total
    if number is not None:
        alloc["volcano.sh/gpu-number"] = str(number)
    labels = dict(labels or {})
    if per:
        labels["volcano.sh/gpu-memory-per-device"] = per
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
        "status": {"allocatable": alloc},
    }


def pod(
    name: str,
    mem: str | None = "4Gi",
    *,
    on: str | None = None,
    index: int | None = None,
    prio: int = 0,
    created: str = "2026-01-01T00:00:00Z",
    nominated: str | None = None,
    deleting: bool = False,
    cpu: str = "1",
) -> dict:
    req = {"cpu": cpu}
    if mem:
        req[MEM] = mem
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": name,
        "creationTimestamp": created,
        "annotations": {},
    }
    if index is not None:
        meta["annotations"][GPU_INDEX] = str(index)
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:00:00Z"
    spec: dict[str, Any] = {
        "schedulerName": "corral",
        "priority": prio,
        "containers": [{"name": "c", "resources": {"requests": req}}],
    }
    status: dict[str, Any] = {"phase": "Pending"}
    if on:
        spec["nodeName"] = on
        status = {"phase": "Running", "startTime": "2026-01-01T01:00:00Z"}
    if nominated:
        status["nominatedNodeName"] = nominated
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def config(actions: str = "enqueue, allocate", keep: bool | None = None, *, predicates: bool = True) -> Any:
    gs: dict[str, Any] = {"name": "gpushare"}
    if keep is not None:
        gs["arguments"] = {"keepDeviceOnReAdd": keep}
    second = ([{"name": "predicates"}] if predicates else []) + [gs]
    return parse_config(
        {
            "actions": actions,
            "tiers": [
                {
                    "plugins": [
                        {"name": "priority"},
                        {"name": "gang", "enablePreemptable": False, "enableReclaimable": False},
                        {"name": "conformance"},
                    ]
                },
                {"plugins": second},
            ],
        },
        REG,
        "test",
    )


def cluster(objects: list[dict]):
    return build_cluster([("test.yaml", o) for o in objects])


def session(objects: list[dict], keep: bool | None = None, actions: str = "enqueue, allocate") -> Session:
    return Session(cluster(objects), config(actions, keep), REG, NOW)


def plugin(s: Session) -> GpuSharePlugin:
    p = s.plugin("gpushare")
    assert isinstance(p, GpuSharePlugin)
    return p


def task(s: Session, uid: str):
    return s.cluster.tasks[uid]


def row(s: Session, name: str) -> int:
    return s.cluster.nodes.index[name]


def seed_story(keep: bool | None = None, actions: str = "enqueue, allocate, preempt") -> Session:
    """Seed 003: node with 2 GPUs of 8Gi; A (4Gi) on GPU 0, B (4Gi) on GPU 1; C needs 8Gi."""
    return session(
        [
            node("n1", 2, per="8Gi"),
            pod("a", "4Gi", on="n1", index=0, prio=10),
            pod("b", "4Gi", on="n1", index=1, prio=20),
            pod("c", "8Gi", prio=100),
        ],
        keep,
        actions,
    )


# --- devices and the loader --------------------------------------------------------------------------
def test_devices_from_label_annotation_total_and_gpu_number() -> None:
    s = session(
        [
            node("lab", 2, per="8Gi"),
            node("ann", 4, per="8Gi", annotations={"volcano.sh/gpu-memory-per-device": "16Gi"}),
            node("tot", 4, total="32Gi"),
            node("num", 0, total="24Gi", number=3),
            node("one", 0, total="10Gi"),
            node("cpu", 0),
            pod("p", "1Gi"),
        ]
    )
    p = plugin(s)
    want = {"lab": (2, 8), "ann": (4, 16), "tot": (4, 8), "num": (3, 8), "one": (1, 10), "cpu": (0, 0)}
    for name, (count, size) in want.items():
        r = row(s, name)
        assert p.devices[r] == count, name
        assert list(p._device_free(r)) == [size * GI] * count, name


def test_loader_advertises_gpu_memory_from_the_per_device_label() -> None:
    c = cluster(
        [
            node("lab", 2, per="8Gi"),
            node("given", 2, per="8Gi", total="10Gi"),
            node("cpu", 0, per="8Gi"),
            pod("p", "1Gi"),
        ]
    )
    col = c.resources.pos(MEM)
    alloc = {n: c.nodes.allocatable[c.nodes.index[n], col] for n in ("lab", "given", "cpu")}
    assert alloc == {"lab": 16 * GI, "given": 10 * GI, "cpu": 0.0}
    assert c.nodes.annotations[c.nodes.index["lab"]] == {}  # node annotations are kept


def test_loader_rejects_a_bad_per_device_quantity() -> None:
    with pytest.raises(InputError, match="gpu-memory-per-device"):
        cluster([node("n1", 2, annotations={"volcano.sh/gpu-memory-per-device": "eight"}), pod("p", "1Gi")])


def test_inert_without_gpu_memory_requests() -> None:
    s = session([node("n1", 2, per="8Gi"), pod("p", None)])
    p = plugin(s)
    assert p.predicate(task(s, "p")).all()
    assert p.simulate_predicate(task(s, "p"), 0)
    assert p.explain(task(s, "p")) == []


# --- assignment at open ------------------------------------------------------------------------------
def test_open_honours_gpu_index_then_first_fit_by_creation_then_name() -> None:
    s = session(
        [
            node("n1", 2, per="8Gi"),
            pod("late", "4Gi", on="n1", created="2026-01-01T03:00:00Z"),
            pod("early-b", "4Gi", on="n1", created="2026-01-01T01:00:00Z"),
            pod("early-a", "2Gi", on="n1", created="2026-01-01T01:00:00Z"),
            pod("pinned", "6Gi", on="n1", index=1, created="2026-01-01T05:00:00Z"),
        ]
    )
    p = plugin(s)
    r = row(s, "n1")
    # pinned takes GPU 1 first; then early-a (2Gi) and early-b (4Gi) fill GPU 0; late fits nowhere -> freest
    assert p._device_of(task(s, "pinned")) == (r, 1)
    assert p._device_of(task(s, "early-a")) == (r, 0)
    assert p._device_of(task(s, "early-b")) == (r, 0)
    assert p._device_of(task(s, "late")) == (r, 0)
    assert list(p._device_free(r)) == [-2 * GI, 2 * GI]


def test_open_counts_nominations_not_releasing_pods_and_bad_index_falls_back() -> None:
    s = session(
        [
            node("n1", 2, per="8Gi"),
            pod("gone", "8Gi", on="n1", index=0, deleting=True),
            pod("nom", "8Gi", nominated="n1", created="2026-01-01T00:00:00Z"),
            pod("run", "4Gi", on="n1", index=7, created="2026-01-01T02:00:00Z"),
        ]
    )
    p = plugin(s)
    r = row(s, "n1")
    assert task(s, "gone").status is TaskStatus.RELEASING and p._device_of(task(s, "gone")) is None
    assert task(s, "nom").status is TaskStatus.PIPELINED
    # running pods go before nominations: run (index 7 out of range) first fit on GPU 0, nom on GPU 1
    assert p._device_of(task(s, "run")) == (r, 0)
    assert p._device_of(task(s, "nom")) == (r, 1)
    # the nominated pod passes on its own node (its own share counts as free), others do not
    assert p.predicate(task(s, "nom"))[r]
    assert p.simulate_predicate(task(s, "nom"), r)


# --- predicate ---------------------------------------------------------------------------------------
def test_predicate_needs_one_device_with_the_memory() -> None:
    s = session(
        [
            node("split", 2, per="8Gi"),
            node("packed", 2, per="8Gi"),
            node("small", 2, per="4Gi"),
            node("cpu", 0),
            pod("s0", "4Gi", on="split", index=0),
            pod("s1", "4Gi", on="split", index=1),
            pod("p0", "4Gi", on="packed"),
            pod("p1", "4Gi", on="packed"),
            pod("big", "8Gi"),
            pod("mid", "4Gi"),
            pod("plain", None),
        ]
    )
    p = plugin(s)
    names = s.cluster.nodes.names
    got = dict(zip(names, p.predicate(task(s, "big")).tolist()))
    assert got == {"cpu": False, "packed": True, "small": False, "split": False}
    got = dict(zip(names, p.predicate(task(s, "mid")).tolist()))
    assert got == {"cpu": False, "packed": True, "small": True, "split": True}
    assert p.predicate(task(s, "plain")).all()
    # resolvable: a device big enough once pods are gone
    assert dict(zip(names, p.resolvable(task(s, "big")).tolist())) == {
        "cpu": False,
        "packed": True,
        "small": False,
        "split": True,
    }
    [(mask, why)] = p.explain(task(s, "big"))
    assert mask.tolist() == (~p.predicate(task(s, "big"))).tolist()
    assert why == "node(s) had no single GPU device with 8Gi of GPU memory free"
    # the session combines it with the others
    assert not s.predicate(task(s, "big"))[row(s, "split")]


# --- events: allocate, evict, revert -----------------------------------------------------------------
def test_allocate_binpacks_onto_the_fullest_device_and_discard_releases() -> None:
    s = session(
        [
            node("n1", 3, per="8Gi"),
            pod("r0", "2Gi", on="n1", index=0),
            pod("r2", "5Gi", on="n1", index=2),
            pod("new", "3Gi"),
        ]
    )
    p = plugin(s)
    r = row(s, "n1")
    before = p.free.copy()
    stmt = s.statement()
    stmt.allocate(task(s, "new"), r)
    assert p._device_of(task(s, "new")) == (r, 2)  # 3Gi free on GPU 2 is the fullest that fits
    assert list(p._device_free(r)) == [6 * GI, 8 * GI, 0.0]
    stmt.discard()
    assert p._device_of(task(s, "new")) is None
    assert np.array_equal(p.free, before)


def test_reverted_eviction_restores_the_same_device() -> None:
    # after evicting a, binpack would pick GPU 1 (6Gi free) for a 4Gi pod; the revert must put a back on GPU 0
    s = session(
        [node("n1", 2, per="8Gi"), pod("a", "4Gi", on="n1", index=0), pod("b", "2Gi", on="n1", index=1)]
    )
    p = plugin(s)
    r = row(s, "n1")
    before = p.free.copy()
    stmt = s.statement()
    stmt.evict(task(s, "a"), "test")
    assert p._device_of(task(s, "a")) is None
    assert list(p._device_free(r)) == [8 * GI, 6 * GI]
    stmt.discard()
    assert p._device_of(task(s, "a")) == (r, 0)
    assert np.array_equal(p.free, before)


def test_reverted_move_restores_the_first_device() -> None:
    s = session(
        [
            node("n1", 2, per="8Gi"),
            node("n2", 2, per="8Gi"),
            pod("x", "4Gi", on="n1", index=1),
            pod("p", "4Gi"),
        ]
    )
    p = plugin(s)
    n1, n2 = row(s, "n1"), row(s, "n2")
    t = task(s, "p")
    stmt = s.statement()
    stmt.pipeline(t, n1)
    assert p._device_of(t) == (n1, 1)  # binpack: next to x
    mark = stmt.save()
    stmt.allocate(t, n2)
    assert p._device_of(t) == (n2, 0)
    assert list(p._device_free(n1)) == [8 * GI, 4 * GI]
    stmt.restore(mark)
    assert p._device_of(t) == (n1, 1)
    stmt.discard()
    assert p._device_of(t) is None
    assert list(p._device_free(n1)) == [8 * GI, 4 * GI]


def test_clearing_an_earlier_nomination_frees_its_device_and_reverting_restores_it() -> None:
    s = session(
        [
            node("n1", 2, per="8Gi"),
            pod("nom", "8Gi", nominated="n1", prio=1),
            pod("x", "2Gi", on="n1", index=1),
            pod("c", "8Gi", prio=100),
        ]
    )
    p = plugin(s)
    r = row(s, "n1")
    nom, c = task(s, "nom"), task(s, "c")
    assert p._device_of(nom) == (r, 0)
    assert not p.predicate(c)[r]
    stmt = s.statement()
    stmt.clear_nomination(nom)  # fires no event: the plugin notices by version
    assert p.predicate(c)[r]
    assert p._device_of(nom) is None
    stmt.discard()
    assert not p.predicate(c)[r]
    assert p._device_of(nom) == (r, 0)


# --- simulation points: the seed's story ------------------------------------------------------------
def test_seed_story_keep_device_makes_preemption_necessary() -> None:
    s = seed_story()
    p = plugin(s)
    r = row(s, "n1")
    a, c = task(s, "a"), task(s, "c")
    assert not s.simulate_predicate(c, r)  # 4Gi free on each GPU
    s.simulate_remove(a, r)
    assert p._device_of(a) is None
    assert s.simulate_predicate(c, r)  # GPU 0 is whole again
    s.simulate_add(a, r)
    assert p._device_of(a) == (r, 0)  # topology preserved
    assert not s.simulate_predicate(c, r)  # so A must go: preemption is necessary


def test_seed_story_binpack_readd_moves_a_and_preemption_looks_unnecessary() -> None:
    s = seed_story(keep=False)
    p = plugin(s)
    r = row(s, "n1")
    a, c = task(s, "a"), task(s, "c")
    s.simulate_remove(a, r)
    assert s.simulate_predicate(c, r)
    s.simulate_add(a, r)
    assert p._device_of(a) == (r, 1)  # binpack: the fuller GPU, beside B
    assert s.simulate_predicate(c, r)  # C "still fits": judged unnecessary


def test_simulate_add_without_history_binpacks_and_is_idempotent() -> None:
    s = session([node("n1", 2, per="8Gi"), pod("x", "6Gi", on="n1", index=1), pod("p", "2Gi")])
    p = plugin(s)
    r = row(s, "n1")
    t = task(s, "p")
    s.simulate_add(t, r)
    assert p._device_of(t) == (r, 1)
    s.simulate_add(t, r)
    assert list(p._device_free(r)) == [8 * GI, 0.0]
    s.simulate_remove(t, r)
    s.simulate_remove(t, r)
    assert list(p._device_free(r)) == [8 * GI, 2 * GI]


def test_keep_device_even_when_it_now_overflows() -> None:
    # a re-add restores, it does not choose: the device is kept even if something else took the room
    s = session([node("n1", 2, per="8Gi"), pod("a", "4Gi", on="n1", index=0), pod("q", "6Gi")])
    p = plugin(s)
    r = row(s, "n1")
    a, q = task(s, "a"), task(s, "q")
    s.simulate_remove(a, r)
    s.simulate_add(q, r)  # binpack: both 8Gi free -> GPU 0
    s.simulate_add(a, r)
    assert p._device_of(a) == (r, 0)
    assert list(p._device_free(r)) == [-2 * GI, 8 * GI]


# --- whole cycles ------------------------------------------------------------------------------------
def _decisions(s_objects: list[dict], keep: bool | None, cycles: int = 1):
    c = cluster(s_objects)
    cfg = config("enqueue, allocate, preempt", keep)
    out = []
    for n in range(1, cycles + 1):
        d = run_cycle(c, cfg, REG, NOW + n, n)
        out.append(d)
        apply_decisions(c, d, NOW + n)
    return c, out


SEED_OBJECTS = [
    node("n1", 2, per="8Gi"),
    pod("a", "4Gi", on="n1", index=0, prio=10),
    pod("b", "4Gi", on="n1", index=1, prio=20),
    pod("c", "8Gi", prio=100),
]


def test_seed_story_preempt_cycle_keep_device() -> None:
    c, (d1, d2) = _decisions(SEED_OBJECTS, None, cycles=2)
    assert [(e.pod, e.node, e.action) for e in d1.evictions] == [("default/a", "n1", "preempt")]
    assert [(m.pod, m.node) for m in d1.nominations] == [("default/c", "n1")]
    assert [(b.pod, b.node) for b in d2.binds] == [("default/c", "n1")]
    assert not d2.evictions
    # the device chosen is written back (as Volcano writes at bind): C took GPU 0, where A was
    assert c.tasks["c"].annotations[GPU_INDEX] == "0"


def test_seed_story_preempt_cycle_binpack_readd_evicts_nothing() -> None:
    _, (d1,) = _decisions(SEED_OBJECTS, False)
    assert d1.evictions == []


def test_device_annotation_carries_the_binpack_choice_to_the_next_cycle() -> None:
    # first fit at the next open would put p on GPU 0; the annotation keeps it on GPU 1 beside x
    c = cluster([node("n1", 2, per="8Gi"), pod("x", "6Gi", on="n1", index=1), pod("p", "2Gi")])
    cfg = config()
    d = run_cycle(c, cfg, REG, NOW, 1)
    apply_decisions(c, d, NOW)
    assert c.tasks["p"].status is TaskStatus.RUNNING and c.tasks["p"].annotations[GPU_INDEX] == "1"
    s = Session(c, cfg, REG, NOW + 1, 2)
    assert plugin(s)._device_of(c.tasks["p"]) == (0, 1)
    assert list(plugin(s)._device_free(0)) == [8 * GI, 0.0]


def test_scenario_file_shape_runs_through_load_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(SEED_OBJECTS))
    s = Session(load_snapshot([path]), config(), REG, NOW)
    assert plugin(s)._device_of(s.cluster.tasks["b"]) == (0, 1)


# --- configuration -----------------------------------------------------------------------------------
def test_arguments_are_validated() -> None:
    assert plugin(seed_story()).args.keep_device is True
    assert plugin(seed_story(keep=False)).args.keep_device is False
    with pytest.raises(ConfigError, match="true or false"):
        parse_config(
            {
                "actions": "allocate",
                "tiers": [{"plugins": [{"name": "gpushare", "arguments": {"keepDeviceOnReAdd": "maybe"}}]}],
            },
            REG,
            "t",
        )
    with pytest.raises(ConfigError, match="keepDeviceOnReAdd"):
        parse_config(
            {
                "actions": "allocate",
                "tiers": [{"plugins": [{"name": "gpushare", "arguments": {"keepDevice": True}}]}],
            },
            REG,
            "t",
        )


def test_simulate_switch_turns_the_simulation_points_off() -> None:
    cfg = parse_config(
        {"actions": "allocate", "tiers": [{"plugins": [{"name": "gpushare", "enableSimulate": False}]}]},
        REG,
        "t",
    )
    s = Session(cluster(SEED_OBJECTS), cfg, REG, NOW)
    assert s.fns("SimulatePredicate") == [] and len(s.fns("Predicate")) == 1


# --- speed -------------------------------------------------------------------------------------------
def test_predicate_is_vectorised_over_many_nodes() -> None:
    n = 2000
    objs = [node(f"n{i:05d}", 8, per="80Gi") for i in range(n)]
    objs += [pod(f"r{i:05d}", "40Gi", on=f"n{i % n:05d}") for i in range(2 * n)]
    objs += [pod("big", "80Gi"), pod("half", "40Gi")]
    s = Session(cluster(objs), config(), REG, NOW)
    p = plugin(s)
    big, half = s.cluster.tasks["big"], s.cluster.tasks["half"]
    t0 = time.perf_counter()
    for _ in range(200):
        mb, mh = p.predicate(big), p.predicate(half)
    elapsed = time.perf_counter() - t0
    assert mb.all() and mh.all()  # 2 pods of 40Gi per node fill one 80Gi device (first fit)
    assert elapsed < 1.0, elapsed
