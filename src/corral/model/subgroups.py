"""KAI-Scheduler sub-groups of a PodGroup (``scheduling.run.ai/v2alpha2`` ``spec.subGroups``).

KAI's model (``pkg/scheduler/api/podgroup_info/subgroup_info``: ``FromPodGroup``, ``SubGroupSet``,
``PodSet``): the sub-groups form a tree under the PodGroup. A sub-group that is some other sub-group's
``parent`` is a *set*; the others are *leaves* (pod sets). Pods join a leaf by the pod label
``kai.scheduler/subgroup-name``. A leaf is satisfied when at least ``minMember`` of its pods are placed; a
set (and the PodGroup itself, the root) when at least ``minSubGroup`` of its direct members are
satisfied — every direct member when ``minSubGroup`` is unset. The PodGroup starts only when the root is
satisfied; its own ``minMember`` is not used once sub-groups are given.

Each sub-group may carry its own topology constraint: all the pods of the leaves under it must share one
domain of the required level (:class:`SubGroupConstraint`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SUBGROUP_LABEL", "SubGroup", "SubGroupConstraint", "SubGroupTree"]

#: The pod label naming the (leaf) sub-group a pod belongs to (KAI ``commonconstants.SubGroupLabelKey``).
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"


@dataclass(frozen=True)
class SubGroupConstraint:
    """A sub-group's topology constraint resolved onto corral's topology domains: ``mode`` "hard"
    (``requiredTopologyLevel``) or "soft" (``preferredTopologyLevel`` only), the KAI topology
    (``family`` of the domains), the highest tier the pods may spread over (hard) and the tier of the
    preferred level."""

    subgroup: str
    mode: str
    family: str
    tier: int
    preferred_tier: int | None = None


@dataclass
class SubGroup:
    name: str
    parent: str = ""  # "" is the PodGroup (the root)
    min_member: int | None = None  # leaves
    min_subgroup: int | None = None  # sets; None: every direct member
    children: list[str] = field(default_factory=list)
    constraint: SubGroupConstraint | None = None

    @property
    def leaf(self) -> bool:
        return not self.children


@dataclass
class SubGroupTree:
    """The sub-groups of one PodGroup; ``root_min`` is the PodGroup's ``minSubGroup`` (None: all)."""

    groups: dict[str, SubGroup]
    root_min: int | None = None

    def top(self) -> list[str]:
        return sorted(n for n, g in self.groups.items() if not g.parent)

    def leaves(self) -> list[str]:
        return sorted(n for n, g in self.groups.items() if g.leaf)

    def leaves_under(self, name: str) -> set[str]:
        g = self.groups[name]
        if g.leaf:
            return {name}
        out: set[str] = set()
        for c in g.children:
            out |= self.leaves_under(c)
        return out

    def _needed(self, members: list[str], minimum: int | None) -> int:
        return len(members) if minimum is None else min(minimum, len(members))

    def satisfied(self, counts: dict[str, int]) -> bool:
        """Is the PodGroup satisfied with ``counts`` placed pods per leaf (KAI
        ``SubGroupSet.IsMinRequirementSatisfied``)?"""
        top = self.top()
        return sum(1 for n in top if self._ok(n, counts)) >= self._needed(top, self.root_min)

    def _ok(self, name: str, counts: dict[str, int]) -> bool:
        g = self.groups[name]
        if g.leaf:
            return counts.get(name, 0) >= (g.min_member or 0)
        done = sum(1 for c in g.children if self._ok(c, counts))
        return done >= self._needed(g.children, g.min_subgroup)

    def all_required(self) -> bool:
        """Every leaf is needed (no ``minSubGroup`` below its number of members): the PodGroup is
        satisfied exactly when every leaf reaches its minMember."""
        if self.root_min is not None and self.root_min < len(self.top()):
            return False
        return all(
            g.min_subgroup is None or g.min_subgroup >= len(g.children)
            for g in self.groups.values()
            if not g.leaf
        )

    def fewest_pods(self) -> int:
        """The fewest placed pods that can satisfy the PodGroup (the cheapest members of each set)."""
        return self._cost_of(self.top(), self.root_min)

    def _cost_of(self, members: list[str], minimum: int | None) -> int:
        costs = sorted(self._cost(m) for m in members)
        return sum(costs[: self._needed(members, minimum)])

    def _cost(self, name: str) -> int:
        g = self.groups[name]
        return (g.min_member or 0) if g.leaf else self._cost_of(g.children, g.min_subgroup)

    def constraints_of(self, leaf: str) -> list[SubGroupConstraint]:
        """The topology constraints a pod of ``leaf`` is under: its own, then each ancestor's."""
        out = []
        cur: str = leaf
        while cur:
            g = self.groups[cur]
            if g.constraint is not None:
                out.append(g.constraint)
            cur = g.parent
        return out

    def short_of(self, counts: dict[str, int]) -> list[str]:
        """The leaves below their minMember (for reasons), by name."""
        return [
            f"{n} has {counts.get(n, 0)} of minMember {self.groups[n].min_member or 0}"
            for n in self.leaves()
            if counts.get(n, 0) < (self.groups[n].min_member or 0)
        ]
