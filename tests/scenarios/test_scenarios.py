"""The scenario harness: every ``cases/*.yaml`` is a snapshot (shorthand or raw objects), a config and
the expected decisions; it runs through the real loader and the cycle loop ``corral schedule`` runs
(:func:`corral.framework.cycle.run_cycles`, with kube-scheduler's PodGroup conditions added per cycle as
``corral schedule`` adds them); the harness does not import the command line.

Expected lists are compared as sets of records (cycle ignored unless given). For ``unschedulable`` a
``reason`` is a substring the real reason must contain. ``absent`` lists pods that must not be bound,
evicted or nominated. ``xfail: "reason"`` marks a case whose expectation is right but the code is not
(a known bug, described in the reason).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from corral.framework.config import parse_config
from corral.framework.cycle import run_cycles
from corral.framework.decisions import Decisions
from corral.framework.memo import ClusterHistory
from corral.kube.native_status import native_conditions
from corral.manifests.build import DEFAULT_SCHEDULERS, load_snapshot
from corral.model import Cluster
from corral.model.clock import parse_time
from corral.registry import REGISTRY, default_config
from tests.scenarios.expand import T0, expand

CASES = sorted((Path(__file__).parent / "cases").glob("*.yaml"))


def run_case(case: dict, tmp_path: Path, **history: bool) -> dict:
    """The case's decisions as JSON; ``history`` sets the speed paths' switches
    (:class:`~corral.framework.memo.history.ClusterHistory` fields: ``skip``, ``keep_index``,
    ``check_index``)."""
    snap = tmp_path / "snapshot.yaml"
    snap.write_text(yaml.safe_dump_all(expand(case)))
    config = parse_config(case["config"], REGISTRY, "scenario") if case.get("config") else default_config()
    decisions, _ = run_cycles(
        load_snapshot([snap], DEFAULT_SCHEDULERS),
        config,
        REGISTRY,
        parse_time(str(case.get("now", T0))),
        case.get("cycles", 1),
        float(case.get("period", 1.0)),
        history=ClusterHistory(tracked=case.get("cycles", 1) > 1, **history) if history else None,
        derive=_conditions,
    )
    return decisions.to_json(case.get("cycles", 1))


def suite_decisions(tmp_path: Path, **history: bool) -> dict[str, str]:
    """Every case's decisions (:func:`run_case` with ``history``) as sorted JSON, by case name; a case
    that raises gives its error, so an on/off comparison of a speed path sees it fail the same way."""
    out = {}
    for path in CASES:
        case = yaml.safe_load(path.read_text())
        folder = tmp_path / path.stem
        folder.mkdir(parents=True, exist_ok=True)
        try:
            got = json.dumps(run_case(case, folder, **history), sort_keys=True)
        except Exception as exc:  # noqa: BLE001 - a case that fails fails the same way both times
            got = f"error: {type(exc).__name__}: {exc}"
        out[path.stem] = got
    return out


def _conditions(cluster: Cluster, decisions: Decisions, cycle: int) -> None:
    decisions.conditions.extend(native_conditions(cluster, decisions, cycle))


def _norm(record: dict, expected: dict) -> dict:
    return {k: record.get(k) for k in expected}


def check(out: dict, expect: dict) -> None:
    for section in (
        "binds",
        "evictions",
        "nominations",
        "podgroups",
        "node_locks",
        "warnings",
        "conditions",
        "claim_allocations",
    ):
        if section not in expect:
            continue
        want = expect[section] or []
        got = out[section]
        keys = set().union(*(w.keys() for w in want)) if want else {"pod", "node"}
        got_set = sorted(str(sorted({k: r.get(k) for k in keys if k in r}.items())) for r in got)
        want_set = sorted(str(sorted(w.items())) for w in want)
        assert got_set == want_set, f"{section}: got {got}"
    if "unschedulable" in expect:
        got = {r["podgroup"]: r["reason"] for r in out["unschedulable"]}
        want = expect["unschedulable"] or []
        assert sorted(got) == sorted(w["podgroup"] for w in want), f"unschedulable: got {got}"
        for w in want:
            if "reason" in w:
                assert w["reason"] in got[w["podgroup"]], f"{w['podgroup']}: {got[w['podgroup']]}"
    for pod in expect.get("absent") or []:
        for section in ("binds", "evictions", "nominations"):
            assert pod not in [r["pod"] for r in out[section]], f"{pod} in {section}"
    if "bind_count" in expect:
        assert len(out["binds"]) == expect["bind_count"], out["binds"]


def _param(path: Path):
    try:
        case = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        case = None  # a malformed case fails in its own test, not at collection
    xfail = case.get("xfail") if isinstance(case, dict) else None
    marks = [pytest.mark.xfail(reason=str(xfail), strict=True)] if xfail else []
    return pytest.param(path, marks=marks, id=path.stem)


@pytest.mark.parametrize("path", [_param(p) for p in CASES])
def test_scenario(path: Path, tmp_path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    out = run_case(case, tmp_path)
    check(out, case["expect"])


def test_there_are_enough_scenarios() -> None:
    assert len(CASES) >= 45


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_scenario_is_described(path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    assert isinstance(case.get("description"), str) and case["description"].strip()
    assert "\n" not in case["description"].strip(), "description must be one line"
    assert isinstance(case.get("expect"), dict), "a scenario needs expect:"
