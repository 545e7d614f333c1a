"""Configuration checks shared by the reservation's actions (``elect`` and ``reserve``)."""

from __future__ import annotations

from typing import NoReturn

from corral.errors import ConfigError
from corral.framework.config import Config
from corral.framework.reservation import parse_lock_nodes

__all__ = ["check_order"]


def check_order(config: Config, file: str) -> None:
    """Reject an action order under which the reservation cannot work, naming the file and the rule."""
    names = [a.name for a in config.actions]

    def fail(rule: str) -> NoReturn:
        raise ConfigError(
            f"{rule} (actions: {', '.join(names)}; Volcano's orders: 'elect, enqueue, reserve, "
            "allocate, backfill' or 'enqueue, elect, allocate, backfill, reserve')",
            file=file,
            field="actions",
        )

    plugin = config.plugin("reservation")
    if plugin is None:
        fail("elect and reserve need the reservation plugin in the tiers")
    lock_nodes = getattr(plugin.args, "lock_nodes", "")
    try:
        parse_lock_nodes(lock_nodes, 1)
    except ValueError:
        raise ConfigError(
            f"expected a node count N or a percentage N% (0-100), got {lock_nodes!r}",
            file=file,
            field="reservation.arguments.lockNodes",
        ) from None
    if "reserve" in names and "elect" not in names:
        fail("reserve needs elect before it")
    if "elect" in names and "reserve" in names and names.index("reserve") < names.index("elect"):
        fail("reserve must come after elect")
    for placer in ("allocate", "flow"):  # flow takes allocate's place (seed 004)
        if "elect" in names and placer in names and names.index("elect") > names.index(placer):
            fail(f"elect must come before {placer}")
