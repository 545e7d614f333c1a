"""Exact solvers used to judge the heuristics (OR-Tools CP-SAT): :mod:`corral.solvers.oracle` chooses
the victims of least work lost for one preemptor gang (seed 000 cost model)."""

from corral.solvers.oracle import (
    OracleResult,
    allowed_domains,
    candidate_victims,
    pod_work,
    queue_slack,
    solve_by_rules,
    solve_gang_eviction,
    waiting_pods,
    work_lost,
)

__all__ = [
    "OracleResult",
    "allowed_domains",
    "candidate_victims",
    "pod_work",
    "queue_slack",
    "solve_by_rules",
    "solve_gang_eviction",
    "waiting_pods",
    "work_lost",
]
