"""Tiny fake plugins and a test-only registry, so framework tests do not depend on the real plugins."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral.framework.config import arg, parse_config
from corral.framework.extension import POINTS
from corral.framework.plugin import Action, Plugin
from corral.manifests.build import build_cluster
from corral.registry import Registry

NOW = 1767225600.0  # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class KnobArgs:
    flag: bool = arg("knob.flag", False, "a switch-like argument")
    count: int = arg("knob.count", 1, "an integer")
    weight: float = arg("knob.weight", 1.0, "a number", kind="float")
    mode: str = arg("knob.mode", "fast", "one of a few words", choices=("fast", "slow"))
    grace: float = arg("knob.grace", 30.0, "a duration", kind="duration")
    per: dict = arg("knob.per.", {}, "per-resource weights", prefix=True, kind="float")


class KnobPlugin(Plugin):
    name = "knob"
    Args = KnobArgs


@dataclass(frozen=True)
class WaitArgs:
    rounds: int = arg("rounds", 1, "how many rounds")


class NoopAction(Action):
    name = "noop"


class WaitAction(Action):
    name = "wait"
    Args = WaitArgs


def make_plugin(name: str, **methods: Callable) -> type:
    """A Plugin class called ``name`` whose extension-point methods are the given callables (without
    ``self``), declaring every point whose methods are all given. Calls are recorded on the class in
    ``calls`` as (method, args)."""
    calls: list[tuple[str, tuple]] = []

    def wrap(meth: str, fn: Callable) -> Callable:
        def bound(self: Any, *args: Any) -> Any:
            calls.append((meth, args))
            return fn(*args)

        return bound

    body = {"name": name, "calls": calls, **{m: wrap(m, f) for m, f in methods.items()}}
    bases = tuple(p.protocol for p in POINTS if all(m in methods for m in p.methods))
    return type(f"Fake_{name}", (Plugin, *bases), body)


def registry(*plugins: type, actions: tuple[type, ...] = (NoopAction, WaitAction)) -> Registry:
    return Registry(
        actions={a.name: a for a in actions},
        plugins={p.name: p for p in (KnobPlugin, *plugins)},
        aliases={"no-op": "noop"},
    )


def config(reg: Registry, *tiers: list, actions: str = "noop") -> Any:
    return parse_config({"actions": actions, "tiers": [{"plugins": list(t)} for t in tiers]}, reg, "test")


def node(name: str, gpu: int = 8, labels: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": str(gpu), "pods": "10"}},
    }


def pod(
    name: str,
    gpu: int = 1,
    *,
    node_name: str = "",
    group: str = "",
    phase: str = "Pending",
    nominated: str = "",
    created: str = "2026-01-01T00:00:00Z",
    deleting: bool = False,
) -> dict:
    meta: dict = {"name": name, "namespace": "default", "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = created
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict = {
        "schedulerName": "corral",
        "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpu)}}}],
    }
    status: dict = {"phase": phase}
    if node_name:
        spec["nodeName"] = node_name
    if nominated:
        status["nominatedNodeName"] = nominated
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def podgroup(
    name: str, min_member: int = 1, created: str = "2026-01-01T00:00:00Z", queue: str = "default"
) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
        "spec": {"minMember": min_member, "queue": queue},
        "status": {"phase": "Inqueue"},
    }


def queue(name: str, created: str = "2026-01-01T00:00:00Z") -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {},
    }


def cluster(*objs: dict):
    return build_cluster([("test.yaml", o) for o in objs])


def small_cluster():
    """Two nodes; a running pod on n1, a releasing one on n2, two pending pods (one nominated)."""
    return cluster(
        node("n1"),
        node("n2"),
        podgroup("run"),
        pod("run-0", 2, node_name="n1", group="run", phase="Running"),
        podgroup("gone"),
        pod("gone-0", 4, node_name="n2", group="gone", phase="Running", deleting=True),
        podgroup("wait", 2),
        pod("wait-0", 1, group="wait"),
        pod("wait-1", 3, group="wait", nominated="n2"),
    )
