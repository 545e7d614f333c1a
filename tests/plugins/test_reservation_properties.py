"""Property tests (hypothesis) for the reservation of seed 001 over random snapshots and several cycles:

- at most one target at a time, and every lock belongs to it;
- no pod of another job is bound or nominated onto a node locked for the target, except a planned
  backfill: it has an estimate and ends no later than the target's planned start, or it fits in what the
  target leaves free at that start (the plan as it stood when the locks were set);
- once the target runs (or is gone) its locks are released the next time ``reserve`` runs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.framework.config import parse_config
from corral.framework.cycle import apply_decisions
from corral.framework.reservation import TARGET_SINCE, current_target, expected_runtime, lock_owners
from corral.framework.session import Session
from corral.manifests.build import load_snapshot
from corral.model.clock import parse_time
from corral.model.resources import EPS
from corral.registry import REGISTRY
from tests.scenarios.expand import T0, expand

ESTIMATES = [None, "10m", "40m", "2h"]


@st.composite
def snapshots(draw):
    n_nodes = draw(st.integers(2, 4))
    nodes = [{"name": f"n{i}"} for i in range(n_nodes)]
    jobs = []
    for i in range(n_nodes):
        used = draw(st.integers(0, 8))
        if used:
            est = draw(st.sampled_from(ESTIMATES))
            job = {
                "name": f"run{i}",
                "phase": "Running",
                "priority": draw(st.integers(0, 2)),
                "pods": [{"gpu": used, "nodes": [f"n{i}"], "started": "2025-12-31T23:30:00Z"}],
            }
            if est:
                job["annotations"] = {"corral.io/expected-runtime": est}
            jobs.append(job)
    for i in range(draw(st.integers(1, 5))):
        est = draw(st.sampled_from(ESTIMATES))
        job = {
            "name": f"w{i}",
            "priority": draw(st.integers(0, 3)),
            "created": f"2025-12-31T2{draw(st.integers(0, 3))}:00:00Z",
            "pods": [{"gpu": draw(st.integers(1, 8)), "count": draw(st.integers(1, 2))}],
        }
        if est:
            job["annotations"] = {"corral.io/expected-runtime": est}
        if draw(st.booleans()):
            job["phase"] = "Pending"
        jobs.append(job)
    args = {
        "lockMode": draw(st.sampled_from(["cluster", "multi-node", "single-node"])),
        "plan": draw(st.booleans()),
    }
    if draw(st.booleans()):
        args["timeout"] = "30m"
    return {"nodes": nodes, "jobs": jobs}, args


def _config(args: dict):
    return parse_config(
        {
            "actions": "elect, enqueue, reserve, allocate, backfill, preempt",
            "tiers": [
                {
                    "plugins": [
                        {"name": "priority"},
                        {"name": "gang", "enablePreemptable": False},
                        {"name": "conformance"},
                        {"name": "reservation", "arguments": args},
                    ]
                },
                {"plugins": [{"name": "predicates"}, {"name": "proportion"}, {"name": "nodeorder"}]},
            ],
        },
        REGISTRY,
        "property",
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_reservation_invariants(drawn) -> None:
    case, args = drawn
    config = _config(args)
    with tempfile.TemporaryDirectory() as tmp:
        snap = Path(tmp) / "snap.yaml"
        snap.write_text(yaml.safe_dump_all(expand(case)))
        cluster = load_snapshot([snap])
    now = parse_time(T0)
    for cycle in range(1, 5):
        session = Session(cluster, config, REGISTRY, now, cycle)
        seen = None
        for ac in config.actions:
            REGISTRY.action_class(ac.name)(ac.args).execute(session)
            if ac.name == "reserve":
                seen = _after_reserve(session, args)
        decisions = session.close()
        _check_placements(session, decisions, seen)
        apply_decisions(cluster, decisions, now)
        waiting_targets = [
            j
            for j in cluster.jobs.values()
            if j.annotations.get(TARGET_SINCE) and j.ready_count() < j.min_member
        ]
        assert len(waiting_targets) <= 1
        now += 1200.0


def _after_reserve(session: Session, args: dict):
    """Locks right after ``reserve``: only for the waiting target; the plan as the later actions see it."""
    cluster = session.cluster
    owners = lock_owners(cluster.nodes)
    target = current_target(cluster)
    held = set(owners[owners != ""].tolist())
    if target is None:
        assert not held, f"locks {held} without a waiting target"
        return None
    assert held <= {target.uid}, f"locks {held} while the target is {target.uid}"
    plugin = session.plugin("reservation")
    locked = owners == target.uid
    if not locked.any():
        return None
    plan = plugin._plan_of() if args["plan"] else None
    return target, locked, (None if plan is None else (plan.start, plan.spare.copy()))


def _check_placements(session: Session, decisions, seen) -> None:
    if seen is None:
        return
    target, locked, plan = seen
    nodes = session.cluster.nodes
    by_key = {t.key: t for t in session.cluster.tasks.values()}
    charged = np.zeros_like(nodes.allocatable)
    for rec in list(decisions.binds) + [n for n in decisions.nominations if n.node]:
        task = by_key[rec.pod]
        row = nodes.index[rec.node]
        if task.job is target or not locked[row]:
            continue
        assert plan is not None, f"{rec.pod} placed on locked {rec.node} without a plan"
        start, spare = plan
        est = expected_runtime(task)
        assert est is not None and np.isfinite(start), f"{rec.pod} on locked {rec.node} without an estimate"
        if session.now + est <= start + 1e-6:
            continue
        charged[row] += task.request
        assert (charged[row] <= spare[row] + EPS).all(), (
            f"{rec.pod} takes capacity the target needs on {rec.node}"
        )
