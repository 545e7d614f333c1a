"""The HyperNode tree (Volcano ``topology.volcano.sh/v1alpha1``): network domains over nodes.

Tier 1 is the leaf switch; higher tiers contain lower ones. Each hypernode resolves to a boolean node
mask (the union of its member nodes and member hypernodes). A node may belong to at most one hypernode
per tier in well-formed input; corral does not require it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["HyperIndex", "HyperNode", "HyperNodeTree"]


@dataclass(eq=False)
class HyperNode:
    name: str
    tier: int
    # members as parsed: (type, selector kind, value) — type Node|HyperNode; kind exact|regex|label
    members: list[tuple[str, str, object]] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    parent: str | None = None
    mask: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # set when the tree resolves
    tier_name: str = ""  # spec.tierName
    #: "" for a Volcano HyperNode; the name of the KAI Topology whose level this domain is
    family: str = ""


class HyperIndex:
    """Every hypernode's member rows in one flat array, for per-hypernode sums in one vectorised pass.

    Hypernodes are numbered in (tier, name) order: ``names[h]``, ``tier[h]``; the rows of hypernode
    ``h`` are ``flat[starts[h]:starts[h] + sizes[h]]``. :meth:`sums` adds a per-node column over every
    hypernode at once (``np.add.reduceat``), so a question such as "which domains have room for this
    gang" costs one pass over the memberships instead of one Python loop per hypernode.
    """

    def __init__(self, tree: HyperNodeTree) -> None:
        order = [tree.hypernodes[n] for t in tree.tiers for n in tree.by_tier[t]]
        self.names = [hn.name for hn in order]
        self.nodes = list(order)
        self.tier = np.array([hn.tier for hn in order], dtype=np.int64)
        families = sorted({hn.family for hn in order})
        self.family_names = families
        self.family = np.array([families.index(hn.family) for hn in order], dtype=np.int64)
        rows = [np.flatnonzero(hn.mask) for hn in order]
        self.sizes = np.array([len(r) for r in rows], dtype=np.int64)
        self.flat = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        self.starts = (
            np.concatenate(([0], np.cumsum(self.sizes)[:-1])).astype(np.int64)
            if rows
            else np.zeros(0, dtype=np.int64)
        )

    def __len__(self) -> int:
        return len(self.names)

    def sums(self, values: np.ndarray) -> np.ndarray:
        """Per hypernode, the sum of ``values`` (one row per node; 1-D or 2-D) over its member nodes."""
        if not len(self.names):
            return np.zeros((0,) + values.shape[1:])
        if not self.flat.size:
            return np.zeros((len(self.names),) + values.shape[1:])
        picked = values[self.flat]
        out = np.add.reduceat(picked, np.minimum(self.starts, len(self.flat) - 1), axis=0)
        out[self.sizes == 0] = 0  # reduceat gives the next element for an empty run
        return out

    def of_family(self, family: str) -> np.ndarray:
        """Mask of the hypernodes of ``family`` ("": Volcano's; else a KAI Topology's domains)."""
        if family not in self.family_names:
            return np.zeros(len(self.names), dtype=bool)
        return self.family == self.family_names.index(family)

    def containing(self, rows: np.ndarray, n_nodes: int) -> np.ndarray:
        """Hypernodes holding every node row in ``rows`` (all of them when ``rows`` is empty)."""
        rows = np.unique(rows)
        if not rows.size:
            return np.ones(len(self.names), dtype=bool)
        mark = np.zeros(n_nodes)
        mark[rows] = 1.0
        return self.sums(mark) >= len(rows) - 0.5


class HyperNodeTree:
    """Resolved hypernodes. ``by_tier[t]`` lists names of tier t sorted by name."""

    def __init__(self, hypernodes: dict[str, HyperNode]) -> None:
        self.hypernodes = hypernodes
        self.by_tier: dict[int, list[str]] = {}
        for name in sorted(hypernodes):
            self.by_tier.setdefault(hypernodes[name].tier, []).append(name)
        self._index: HyperIndex | None = None

    def index(self) -> HyperIndex:
        """The flat membership index (built on first use; the tree does not change afterwards)."""
        if self._index is None:
            self._index = HyperIndex(self)
        return self._index

    def __bool__(self) -> bool:
        return bool(self.hypernodes)

    @property
    def tiers(self) -> list[int]:
        return sorted(self.by_tier)

    def tier_names(self) -> dict[str, int]:
        """``spec.tierName`` -> tier (Volcano's HyperNodeTierNameMap); a name given to HyperNodes of
        several tiers stands for the lowest of them, so that a hard constraint by name never allows more
        than one of its HyperNodes' tiers."""
        out: dict[str, int] = {}
        for hn in self.hypernodes.values():
            if hn.tier_name:
                out[hn.tier_name] = min(out.get(hn.tier_name, hn.tier), hn.tier)
        return out

    def domains(self, tier: int, family: str | None = None) -> list[HyperNode]:
        """The hypernodes of ``tier`` (of one ``family`` when given: "" Volcano's, else a KAI
        Topology's)."""
        out = [self.hypernodes[n] for n in self.by_tier.get(tier, [])]
        return out if family is None else [hn for hn in out if hn.family == family]

    def family_tiers(self, family: str) -> list[int]:
        """The tiers that hold hypernodes of ``family``."""
        return sorted({hn.tier for hn in self.hypernodes.values() if hn.family == family})

    def node_domain(self, node: int, tier: int) -> str | None:
        """Name of the tier-``tier`` hypernode holding node row ``node`` (first by name)."""
        for name in self.by_tier.get(tier, []):
            if self.hypernodes[name].mask[node]:
                return name
        return None

    def lca_tier(self, nodes: np.ndarray) -> int | None:
        """The lowest tier at which one hypernode holds every node row in ``nodes`` (None: none does)."""
        if len(nodes) == 0:
            return None
        for tier in self.tiers:
            for hn in self.domains(tier):
                if hn.mask[nodes].all():
                    return tier
        return None
