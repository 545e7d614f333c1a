"""What carrying out one cycle's decisions did (:mod:`corral.kube.apply`): the outcome of every write
by kind of decision, read by the PodGroup writes, the queue metrics and the runner's log."""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

__all__ = ["ApplyReport"]


@dataclass
class ApplyReport:
    """What happened to each kind of decision: ``done`` / ``skipped`` / ``refused`` / ``failed`` /
    ``uncertain`` lists; gangs partly bound, and gangs released."""

    outcomes: dict[str, dict[str, list[str]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    partial_gangs: dict[str, list[str]] = field(default_factory=dict)
    released: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, kind: str, outcome: str, what: str) -> None:
        with self.lock:
            self.outcomes[kind][outcome].append(what)

    def get(self, kind: str, outcome: str) -> list[str]:
        return list(self.outcomes.get(kind, {}).get(outcome, []))
