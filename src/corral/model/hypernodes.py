"""The HyperNode tree (Volcano ``topology.volcano.sh/v1alpha1``): network domains over nodes.

Tier 1 is the leaf switch; higher tiers contain lower ones. Each hypernode resolves to a boolean node
mask (the union of its member nodes and member hypernodes). A node may belong to at most one hypernode
per tier in well-formed input; corral does not require it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["HyperNode", "HyperNodeTree"]


@dataclass(eq=False)
class HyperNode:
    name: str
    tier: int
    # members as parsed: (type, selector kind, value) — type Node|HyperNode; kind exact|regex|label
    members: list[tuple[str, str, object]] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    parent: str | None = None
    mask: np.ndarray | None = None


class HyperNodeTree:
    """Resolved hypernodes. ``by_tier[t]`` lists names of tier t sorted by name."""

    def __init__(self, hypernodes: dict[str, HyperNode]) -> None:
        self.hypernodes = hypernodes
        self.by_tier: dict[int, list[str]] = {}
        for name in sorted(hypernodes):
            self.by_tier.setdefault(hypernodes[name].tier, []).append(name)

    def __bool__(self) -> bool:
        return bool(self.hypernodes)

    @property
    def tiers(self) -> list[int]:
        return sorted(self.by_tier)

    def domains(self, tier: int) -> list[HyperNode]:
        return [self.hypernodes[n] for n in self.by_tier.get(tier, [])]

    def node_domain(self, node: int, tier: int) -> str | None:
        """Name of the tier-``tier`` hypernode holding node row ``node`` (first by name)."""
        for name in self.by_tier.get(tier, []):
            if self.hypernodes[name].mask[node]:  # type: ignore[index]
                return name
        return None

    def lca_tier(self, nodes: np.ndarray) -> int | None:
        """The lowest tier at which one hypernode holds every node row in ``nodes`` (None: none does)."""
        if len(nodes) == 0:
            return None
        for tier in self.tiers:
            for hn in self.domains(tier):
                if hn.mask[nodes].all():  # type: ignore[index]
                    return tier
        return None
