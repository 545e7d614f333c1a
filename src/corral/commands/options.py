"""What the commands read the same way: the scheduler configuration (``--config``: :func:`load_config`
for ``corral schedule``, ``validate``, ``whatif``, ``queues`` and ``run``; :func:`named_config` for the
simulator's ``simulate`` and ``compare``, which also check its ``simulation`` section), the clock
(``--now``: :func:`parse_now`), the output format (``--output``: :func:`check_output`) and the built-in
example snapshot. The scheduling core is imported by the functions that use it: registering the commands
must not cost ``corral --help`` its import time."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from corral.errors import InputError

if TYPE_CHECKING:
    from corral.framework.config import Config

__all__ = ["EXAMPLE", "check_output", "load_config", "named_config", "parse_now"]

#: the snapshot ``corral schedule``, ``whatif`` and ``queues`` read when given none
EXAMPLE = Path(__file__).parent.parent / "examples" / "snapshot.yaml"


def check_output(output: str) -> None:
    """``--output`` of the snapshot commands: ``json`` or ``table``."""
    if output not in ("json", "table"):
        raise InputError(f"expected json or table, got {output!r}", field="--output")


def load_config(path: Path | None) -> Config:
    """``--config``: the file read against the registry (None: the built-in configuration); an action
    whose optional library this install leaves out is one line, exit code 2."""
    from corral.extras import require_for_config
    from corral.framework.config import load_config_file
    from corral.registry import REGISTRY, default_config

    config = default_config() if path is None else load_config_file(path, REGISTRY)
    require_for_config(config)  # an action whose library this install leaves out: one line, exit 2
    return config


def named_config(path: Path | None) -> tuple[str, Config]:
    """``--config`` of ``corral simulate`` and ``compare``: the configuration and the name its results go
    by (:func:`corral.sim.runs.load_config`: ``default`` is the built-in one; the ``simulation`` section is
    checked before any run)."""
    from corral.sim.runs import load_config as load_named

    return load_named(path)


def parse_now(text: str | None) -> float:
    """``--now``: an RFC 3339 time as seconds since the epoch (None: this second)."""
    if text is None:
        return float(int(time.time()))
    from corral.model.clock import parse_time

    try:
        return parse_time(text)
    except Exception:
        raise InputError(
            f"expected an RFC 3339 time such as 2026-01-01T00:00:00Z, got {text!r}", field="--now"
        ) from None
