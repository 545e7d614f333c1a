"""Base classes for plugins and actions. A plugin implements any of the Protocols of
:mod:`corral.framework.extension`; an action implements ``execute(session)``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from corral.framework.config import NoArgs

if TYPE_CHECKING:
    from corral.framework.session import Session

__all__ = ["Action", "Plugin"]


class Plugin:
    """One instance per plugin per session. ``Args`` is the frozen dataclass of its arguments."""

    name: ClassVar[str] = ""
    Args: ClassVar[type] = NoArgs

    def __init__(self, session: Session, args: Any, switches: dict[str, bool]) -> None:
        self.session = session
        self.args = args
        self.switches = switches

    def switch(self, name: str, default: bool = True) -> bool:
        return self.switches.get(name, default)

    def on_session_open(self) -> None:
        """Build derived state from the session (shares, indexes)."""

    def on_session_close(self) -> None:
        """Release what was built."""


class Action:
    """An action runs once per cycle over the session."""

    name: ClassVar[str] = ""
    Args: ClassVar[type] = NoArgs

    def __init__(self, args: Any) -> None:
        self.args = args

    def execute(self, session: Session) -> None:
        raise NotImplementedError
