"""Property tests of the ``flow`` action (seed 004, SPEC.md §3.6 and §5) on the random clusters of
tests/test_properties.py: no over-commit, no gang bound below minMember, required anti-affinity
respected, ``lowerbound`` never placing fewer pods than ``rollback``, and the same input giving the same
decisions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.framework.config import parse_config
from corral.framework.cycle import run_cycle
from corral.registry import DEFAULT_CONFIG, REGISTRY
from tests.test_properties import (
    SETTINGS,
    T_NOW,
    Snap,
    _cluster,
    assert_no_overcommit,
    assert_no_partial_gang,
    snapshots,
)

MODES = st.sampled_from(["lowerbound", "rollback", "sequential"])
MODELS = st.sampled_from(["trivial", "quincy", "spread", "topology"])


def flow_config(mode: str, model: str = "trivial", actions: str = "enqueue, flow, backfill"):
    raw = {
        **DEFAULT_CONFIG,
        "actions": actions,
        "configurations": [{"name": "flow", "arguments": {"gangMode": mode, "costModel": model}}],
    }
    return parse_config(raw, REGISTRY, "flow-properties")


def _run(snap: Snap, mode: str, model: str = "trivial", actions: str = "enqueue, flow, backfill"):
    return run_cycle(_cluster(snap), flow_config(mode, model, actions), REGISTRY, T_NOW, 1)


@settings(max_examples=60, **SETTINGS)
@given(snapshots(), MODES, MODELS)
def test_flow_never_overcommits(snap: Snap, mode: str, model: str) -> None:
    assert_no_overcommit(snap, _run(snap, mode, model))


@settings(max_examples=60, **SETTINGS)
@given(snapshots(), MODES, MODELS)
def test_flow_never_binds_a_gang_below_min_member(snap: Snap, mode: str, model: str) -> None:
    assert_no_partial_gang(snap, _run(snap, mode, model))


def _spread_jobs(snap: Snap) -> set[str]:
    out = set()
    for d in snap.docs:
        if d["kind"] == "Pod" and d["spec"].get("affinity"):
            out.add(d["metadata"]["annotations"]["scheduling.k8s.io/group-name"])
    return out


@settings(max_examples=50, **SETTINGS)
@given(snapshots(), MODES)
def test_flow_respects_required_anti_affinity(snap: Snap, mode: str) -> None:
    spread = {f"default/{j}" for j in _spread_jobs(snap)}
    seen: set[tuple[str, str]] = set()
    for b in _run(snap, mode).binds:
        job = snap.job_of[b.pod]
        if job in spread:
            assert (job, b.node) not in seen, f"two pods of {job} on {b.node} despite anti-affinity"
            seen.add((job, b.node))


def _placed(decisions) -> int:
    return len(decisions.binds) + sum(1 for n in decisions.nominations if n.node)


@settings(max_examples=60, **SETTINGS)
@given(snapshots(), MODELS)
def test_lowerbound_places_at_least_as_many_as_rollback(snap: Snap, model: str) -> None:
    """The guarantee is flow's own: what ``backfill`` places afterwards depends on which pod slots the
    two answers left (a found case: equal flow placements, one best-effort pod fewer after backfill), so
    the round is ``enqueue, flow``."""
    lower = _run(snap, "lowerbound", model, "enqueue, flow")
    assert _placed(lower) >= _placed(_run(snap, "rollback", model, "enqueue, flow"))


@settings(max_examples=40, **SETTINGS)
@given(snapshots(), MODES, MODELS)
def test_flow_is_deterministic(snap: Snap, mode: str, model: str) -> None:
    a, b = _run(snap, mode, model), _run(snap, mode, model)
    assert a.to_json(1) == b.to_json(1)
