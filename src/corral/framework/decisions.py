"""Decisions: what a cycle asks the world to do (SPEC.md §4). Flat records, ordered, JSON-ready."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from corral.model.notes import Note

__all__ = [
    "Bind",
    "Decisions",
    "Eviction",
    "FieldWarning",
    "NodeLock",
    "Nomination",
    "PodGroupUpdate",
    "Unschedulable",
]


@dataclass(frozen=True)
class Bind:
    """Put ``pod`` on ``node``. ``podgroup`` (``namespace/name``; "" for a pod of no podgroup) is the gang
    the pod belongs to: a sink issues a gang's binds together (:class:`~corral.framework.cycle.DecisionSink`)
    without looking the pod up in a model. Added after ``cycle``: the JSON record gains a key, loses none."""

    pod: str
    node: str
    cycle: int
    podgroup: str = ""


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
    annotations: dict[Any, Any]
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


@dataclass(frozen=True)
class FieldWarning:
    """A field of a podgroup corral accepts but does not act on (:mod:`corral.framework.notices`),
    listed once, in the first cycle (``corral run``: in the cycle it is first seen)."""

    podgroup: str
    field: str
    warning: str
    cycle: int

    def note(self) -> Note:
        """The warning as the one warning channel carries it (:class:`corral.model.notes.Note`)."""
        return Note(f"PodGroup {self.podgroup}", self.field, self.warning)


@dataclass
class Decisions:
    binds: list[Bind] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    nominations: list[Nomination] = field(default_factory=list)
    podgroups: list[PodGroupUpdate] = field(default_factory=list)
    node_locks: list[NodeLock] = field(default_factory=list)
    unschedulable: list[Unschedulable] = field(default_factory=list)
    warnings: list[FieldWarning] = field(default_factory=list)
    #: conditions of Kubernetes' own PodGroups (scheduling.k8s.io), as kube-scheduler writes them; added by
    #: the front ends after the cycle (corral.kube.native_status), not by the session
    conditions: list[Any] = field(default_factory=list)
    #: Dynamic Resource Allocation: the devices each claim of a bound pod gets (corral.dra.records)
    claim_allocations: list[Any] = field(default_factory=list)
    #: the pods the cycle's operations changed, with their state (status, nomination) before the first
    #: change, set by ``Session.close`` (None: unknown); lets ``apply_decisions`` and the simulator's
    #: change test look at what changed instead of every pod. Never part of the JSON.
    touched: list[Any] | None = field(default=None, repr=False, compare=False)
    #: the uids of the jobs the session changed (a pod operated on, the phase moved, an annotation
    #: written), set by ``Session.close`` (None: unknown); ``corral run`` puts back only those. Never JSON.
    changed_jobs: set[str] | None = field(default=None, repr=False, compare=False)
    #: the earliest instant at which the clock alone may change what this cycle's actions decided, when
    #: an action whose answer moves with the clock says so (``timeslice`` under ``las``:
    #: corral.actions.common.timeslice_clock); None: none said. The simulator plans its heartbeat by it.
    #: Never JSON.
    clock_horizon: float | None = field(default=None, repr=False, compare=False)

    def extend(self, other: Decisions) -> None:
        for name in (
            "binds",
            "evictions",
            "nominations",
            "podgroups",
            "node_locks",
            "unschedulable",
            "warnings",
            "conditions",
            "claim_allocations",
        ):
            getattr(self, name).extend(getattr(other, name))

    def to_json(self, cycles: int) -> dict[str, Any]:
        """The object of ``corral schedule -o json`` (SPEC.md §4): public, fields never renamed."""
        return {
            "cycles": cycles,
            "binds": _records(self.binds),
            "evictions": _records(self.evictions),
            "nominations": _records(self.nominations),
            "podgroups": _records(self.podgroups),
            "node_locks": _records(self.node_locks),
            "unschedulable": _records(self.unschedulable),
            "warnings": _records(self.warnings),
            "conditions": _records(self.conditions),
            "claim_allocations": _records(self.claim_allocations),
        }


_SCALARS = (str, int, float, bool, type(None))


def _records(items: list[Any]) -> list[dict[str, Any]]:
    """``asdict`` of each decision; a record of plain values (most: tens of thousands of binds on a
    large cluster) is read field by field rather than through ``asdict``'s deep copy."""
    out = []
    for x in items:
        names = _FIELDS.get(type(x))
        if names is None:
            names = _FIELDS[type(x)] = tuple(f.name for f in fields(x))
        row = {n: getattr(x, n) for n in names}
        out.append(row if all(type(v) in _SCALARS for v in row.values()) else asdict(x))
    return out


_FIELDS: dict[type, tuple[str, ...]] = {}
