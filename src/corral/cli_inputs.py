"""What the commands read the same way (``corral schedule``, ``whatif``, ``queues``, ``run``): the scheduler
configuration (``--config``) and the clock (``--now``). The scheduling core is imported by the functions
that use it: registering the commands must not cost ``corral --help`` its import time."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from corral.errors import InputError

if TYPE_CHECKING:
    from corral.framework.config import Config

__all__ = ["load_config", "parse_now"]


def load_config(path: Path | None) -> Config:
    """``--config``: the file read against the registry (None: the built-in configuration); an action
    whose optional library this install leaves out is one line, exit code 2."""
    from corral.extras import require_for_config
    from corral.framework.config import load_config_file
    from corral.registry import REGISTRY, default_config

    config = default_config() if path is None else load_config_file(path, REGISTRY)
    require_for_config(config)  # an action whose library this install leaves out: one line, exit 2
    return config


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
