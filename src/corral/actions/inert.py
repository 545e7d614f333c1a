"""Volcano actions that corral accepts with no effect (the reason for each is in
:data:`corral.framework.volcano.INERT_ACTIONS` and docs/configuration.md), so that a Volcano
configuration naming them loads and runs unchanged."""

from __future__ import annotations

from corral.framework.plugin import Action
from corral.framework.session import Session
from corral.framework.volcano import INERT_ACTIONS

__all__ = ["INERT_ACTION_CLASSES"]


def _inert(action_name: str) -> type[Action]:
    def execute(self: Action, session: Session) -> None:
        return None

    return type(
        f"Inert_{action_name}",
        (Action,),
        {
            "name": action_name,
            "execute": execute,
            "__doc__": f"``{action_name}``: accepted with no effect: {INERT_ACTIONS[action_name]}.",
        },
    )


INERT_ACTION_CLASSES: tuple[type[Action], ...] = tuple(_inert(n) for n in sorted(INERT_ACTIONS))
