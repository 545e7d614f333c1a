"""The scheduling framework: Session, Statement, extension points, configuration, decisions."""

from corral.framework.config import Config, load_config_file, parse_config
from corral.framework.cycle import apply_decisions, run_cycle
from corral.framework.decisions import Decisions
from corral.framework.extension import Domain, Purpose, Vote
from corral.framework.plugin import Action, Plugin
from corral.framework.session import Session
from corral.framework.statement import Statement

__all__ = [
    "Action",
    "Config",
    "Decisions",
    "Domain",
    "Plugin",
    "Purpose",
    "Session",
    "Statement",
    "Vote",
    "apply_decisions",
    "load_config_file",
    "parse_config",
    "run_cycle",
]
