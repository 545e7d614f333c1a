"""The optional parts of an install (pyproject.toml's extras) and the one-line refusal when a command
needs one that is missing.

``pip install corral`` is the core (``corral schedule``, ``validate``, ``queues``, ``what-if``); each
front end's libraries are an extra: ``live`` (``corral run``), ``sim`` (``corral simulate``,
``compare`` and ``sweep``), ``flow`` (the ``flow`` action outside the simulator), ``fast-yaml`` (rapidyaml, the fast
path for large YAML snapshots; without it libyaml reads them), ``dra`` (the CEL library that evaluates the
device selectors of Dynamic Resource Allocation; ``live`` includes it). A command that needs a missing extra
exits with code 2 and one line naming it and the ``pip install`` that adds it, instead of an import
error in the middle of a run.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.framework.config import Config

__all__ = ["EXTRAS", "missing", "require", "require_for_config"]

#: extra -> the (module, distribution) pairs it installs
EXTRAS: dict[str, tuple[tuple[str, str], ...]] = {
    "live": (("kubernetes", "kubernetes"), ("prometheus_client", "prometheus-client")),
    "sim": (
        ("pandas", "pandas"),
        ("pyarrow", "pyarrow"),
        ("matplotlib", "matplotlib"),
        ("ortools", "ortools"),
    ),
    "flow": (("ortools", "ortools"),),
    "fast-yaml": (("ryml", "rapidyaml"),),
    "dra": (("cel", "common-expression-language"),),
}

#: actions that need an extra to run
ACTION_EXTRAS = {"flow": "flow"}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None
        return False


def missing(extra: str) -> list[str]:
    """The distributions of ``extra`` that cannot be imported here."""
    return [dist for module, dist in EXTRAS[extra] if not _importable(module)]


def require(extra: str, what: str) -> None:
    """Raise :class:`ConfigError` (exit code 2) naming ``what`` and the install that adds ``extra``
    when one of its libraries is missing."""
    gone = missing(extra)
    if gone:
        raise ConfigError(
            f"{what} needs {', '.join(gone)}, which this install of corral leaves out: "
            f"pip install 'corral[{extra}]'"
        )


def require_for_config(config: Config) -> None:
    """The extras the actions of ``config`` need (the ``flow`` action: OR-Tools)."""
    for action in config.actions:
        extra = ACTION_EXTRAS.get(action.name)
        if extra is not None:
            require(extra, f"the {action.name!r} action of {config.source}")
