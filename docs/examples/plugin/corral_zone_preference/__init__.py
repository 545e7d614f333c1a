"""An example corral plugin from outside the package (docs/plugins.md, "Writing a plugin"): node order
that prefers the nodes of some zones (the ``topology.kubernetes.io/zone`` label, or another label).

Installed with ``pip install docs/examples/plugin``, it registers itself through the ``corral.plugins``
entry point (see pyproject.toml beside this package) and is configured like any plugin::

    tiers:
    - plugins:
      - name: zone-preference
        arguments:
          zone-preference.zones: eu-west-1a,eu-west-1b
          zone-preference.weight: 2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from corral.framework.config import arg
from corral.framework.extension import NodeOrder
from corral.framework.hints import ROW, CacheHints, ScoreScope
from corral.framework.plugin import Plugin
from corral.model import Task

__all__ = ["ZonePreferencePlugin"]


@dataclass(frozen=True)
class ZonePreferenceArgs:
    zones: str = arg("zone-preference.zones", "", "comma-separated zones whose nodes are preferred")
    label: str = arg("zone-preference.label", "topology.kubernetes.io/zone", "the node label naming the zone")
    weight: float = arg(
        "zone-preference.weight", 1.0, "score of a preferred node, times 100", kind="float", minimum=0
    )


class ZonePreferencePlugin(Plugin, NodeOrder, CacheHints):
    """NodeOrder: 100 × ``weight`` on the nodes of the preferred zones, 0 elsewhere (summed with the
    other plugins' scores). Its cache hints say the score of a node depends on that node alone, and on
    nothing of the pod, so corral keeps the scores per pod signature and refreshes them row by row."""

    name = "zone-preference"
    Args = ZonePreferenceArgs

    def on_session_open(self) -> None:
        zones = [z.strip() for z in self.args.zones.split(",") if z.strip()]
        nodes = self.session.cluster.nodes
        preferred = (
            nodes.label_mask(self.args.label, "In", zones) if zones else np.zeros(len(nodes), dtype=bool)
        )
        self._score = np.where(preferred, 100.0 * self.args.weight, 0.0)

    # -- NodeOrder ----------------------------------------------------------------------------------
    def node_order(self, task: Task, nodes: np.ndarray) -> np.ndarray:
        return self._score[nodes]

    # -- CacheHints -------------------------------------------------------------------------------
    def sign_pod(self, task: Task) -> tuple[Any, ...] | None:
        return ()  # the score reads nothing of the pod

    def score_scope(self, task: Task) -> ScoreScope:
        return ROW  # a node's score is a function of that node alone
