"""Decisions: what a cycle asks the world to do (SPEC.md §4). Flat records, ordered, JSON-ready."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Bind", "Eviction", "Nomination", "PodGroupUpdate", "NodeLock", "Unschedulable", "Decisions"]


@dataclass(frozen=True)
class Bind:
    pod: str
    node: str
    cycle: int


@dataclass(frozen=True)
class Eviction:
    pod: str
    node: str
    action: str
    preemptor: str
    cycle: int


@dataclass(frozen=True)
class Nomination:
    pod: str
    node: str
    cycle: int


@dataclass(frozen=True)
class PodGroupUpdate:
    podgroup: str
    phase: str
    annotations: dict
    cycle: int


@dataclass(frozen=True)
class NodeLock:
    node: str
    job: str
    cycle: int


@dataclass(frozen=True)
class Unschedulable:
    podgroup: str
    reason: str
    cycle: int


@dataclass
class Decisions:
    binds: list[Bind] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    nominations: list[Nomination] = field(default_factory=list)
    podgroups: list[PodGroupUpdate] = field(default_factory=list)
    node_locks: list[NodeLock] = field(default_factory=list)
    unschedulable: list[Unschedulable] = field(default_factory=list)
    #: the pods the cycle's operations changed, with their state (status, nomination) before the first
    #: change, set by ``Session.close`` (None: unknown); lets ``apply_decisions`` and the simulator's
    #: change test look at what changed instead of every pod. Never part of the JSON.
    touched: list | None = field(default=None, repr=False, compare=False)

    def extend(self, other: "Decisions") -> None:
        for name in ("binds", "evictions", "nominations", "podgroups", "node_locks", "unschedulable"):
            getattr(self, name).extend(getattr(other, name))

    def to_json(self, cycles: int) -> dict[str, Any]:
        """The object of ``corral schedule -o json`` (SPEC.md §4): public, fields never renamed."""
        return {
            "cycles": cycles,
            "binds": [asdict(x) for x in self.binds],
            "evictions": [asdict(x) for x in self.evictions],
            "nominations": [asdict(x) for x in self.nominations],
            "podgroups": [asdict(x) for x in self.podgroups],
            "node_locks": [asdict(x) for x in self.node_locks],
            "unschedulable": [asdict(x) for x in self.unschedulable],
        }
