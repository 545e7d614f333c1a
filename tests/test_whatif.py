"""``corral whatif`` (src/corral/whatif.py): the next cycle with a job submitted, writing nothing — and it
agrees with what ``corral schedule`` decides once the job is in the snapshot, over the scenario suite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from corral.cli import app, schedule_snapshot
from corral.commands.whatif import what_if
from corral.errors import CorralError
from corral.framework.config import parse_config
from corral.manifests.build import DEFAULT_SCHEDULERS
from corral.model.clock import parse_time
from corral.registry import REGISTRY, default_config
from tests.scenarios.expand import T0, expand
from tests.scenarios.test_scenarios import CASES


def _key(doc: dict[str, Any]) -> tuple[str, str, str]:
    meta = doc.get("metadata") or {}
    return doc.get("kind", ""), meta.get("namespace", ""), meta.get("name", "")


def _split(case: dict[str, Any], job: dict[str, Any], tmp: Path) -> tuple[Path, Path, Path]:
    """The case's snapshot with and without ``job``, and the job's own objects."""
    full = expand(case)
    rest = expand({**case, "jobs": [j for j in case["jobs"] if j is not job]})
    kept = {_key(d) for d in rest}
    paths = tmp / "full.yaml", tmp / "rest.yaml", tmp / "job.yaml"
    for path, docs in zip(paths, (full, rest, [d for d in full if _key(d) not in kept])):
        path.write_text(yaml.safe_dump_all(docs))
    return paths


def _pending_job(case: dict[str, Any]) -> dict[str, Any] | None:
    """The last job of a one-cycle case whose pods all wait (no node), as a user would submit it."""
    if case.get("cycles", 1) != 1 or case.get("objects") or not case.get("jobs"):
        return None
    for job in reversed(case["jobs"]):
        groups = job.get("pods") or []
        if groups and not any(g.get("nodes") or g.get("nominated") for g in groups) and not job.get("phase"):
            return job
    return None


AGREEMENT = [c for c in CASES if _pending_job(yaml.safe_load(c.read_text()))]


@pytest.mark.parametrize("path", AGREEMENT, ids=[c.stem for c in AGREEMENT])
def test_whatif_agrees_with_the_next_cycle(path: Path, tmp_path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    job = _pending_job(case)
    assert job is not None
    full, rest, job_file = _split(case, job, tmp_path)
    config = parse_config(case["config"], REGISTRY, "scenario") if case.get("config") else default_config()
    now = parse_time(str(case.get("now", T0)))
    try:
        answer = what_if(job_file, [rest], config, now, DEFAULT_SCHEDULERS)
    except CorralError as exc:  # the rest does not stand alone (e.g. another object names the job)
        pytest.skip(f"the case does not split: {exc}")
    decided = schedule_snapshot([full], config, now).to_json(1)
    docs = list(yaml.safe_load_all(job_file.read_text()))
    pods = {f"{_key(d)[1] or 'default'}/{_key(d)[2]}" for d in docs if d.get("kind") == "Pod"}
    mine = set(answer.podgroups)
    assert answer.binds == [(b["pod"], b["node"]) for b in decided["binds"] if b["pod"] in pods]
    assert answer.nominations == [
        (n["pod"], n["node"]) for n in decided["nominations"] if n["pod"] in pods and n["node"]
    ]
    assert sorted(answer.evictions) == sorted(
        (e["pod"], e["node"], e["action"]) for e in decided["evictions"] if e["preemptor"] in mine
    )
    assert answer.reasons == {
        u["podgroup"]: u["reason"] for u in decided["unschedulable"] if u["podgroup"] in mine
    }


def test_agreement_covers_many_cases() -> None:
    assert len(AGREEMENT) >= 40


SNAP = {
    "nodes": [{"name": "n1"}, {"name": "n2"}],
    "jobs": [{"name": "run", "priority": 10, "pods": [{"count": 1, "gpu": 8, "nodes": ["n1"]}]}],
}


def _files(tmp: Path, job: dict[str, Any]) -> tuple[str, str]:
    snap, job_file = tmp / "snap.yaml", tmp / "job.yaml"
    snap.write_text(yaml.safe_dump_all(expand(SNAP)))
    full = expand({**SNAP, "jobs": [*SNAP["jobs"], job]})
    base = {_key(d) for d in expand(SNAP)}
    job_file.write_text(yaml.safe_dump_all([d for d in full if _key(d) not in base]))
    return str(job_file), str(snap)


def test_a_job_that_fits_starts_now_exit_0(tmp_path: Path) -> None:
    job, snap = _files(tmp_path, {"name": "try", "pods": [{"count": 1, "gpu": 8}]})
    res = CliRunner().invoke(app, ["whatif", job, snap, "--now", T0, "-o", "json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["wouldStart"] is True and got["binds"] == [{"pod": "default/try-0", "node": "n2"}]
    assert got["podgroups"][0]["startsNow"] is True and got["podgroups"][0]["expected"] is None


def test_a_job_that_waits_exit_3_with_reason_and_expected_start(tmp_path: Path) -> None:
    job, snap = _files(tmp_path, {"name": "try", "pods": [{"count": 2, "gpu": 8}]})
    cfg = tmp_path / "c.yaml"
    raw = yaml.safe_load(
        yaml.safe_dump(__import__("corral.registry", fromlist=["DEFAULT_CONFIG"]).DEFAULT_CONFIG)
    )
    raw["forecast"] = {"defaultRuntime": "1h"}
    cfg.write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(app, ["whatif", job, snap, "--now", T0, "-c", str(cfg), "-o", "json"])
    assert res.exit_code == 3, res.output
    got = json.loads(res.stdout)["podgroups"][0]
    assert got["startsNow"] is False and "pods placed" in got["reason"]
    assert (
        got["expected"]["basis"] == "after default/run finishes (past its expected end)"
        or got["expected"]["expectedStart"]
    )
    table = CliRunner().invoke(app, ["whatif", job, snap, "--now", T0, "-c", str(cfg)])
    assert table.exit_code == 3 and "What if it were submitted now" in table.stdout


def test_nothing_new_is_a_clear_error(tmp_path: Path) -> None:
    snap, job = tmp_path / "snap.yaml", tmp_path / "job.yaml"
    snap.write_text(yaml.safe_dump_all(expand(SNAP)))
    job.write_text(yaml.safe_dump_all(expand({"nodes": [{"name": "n3"}]})))
    res = CliRunner().invoke(app, ["whatif", str(job), str(snap), "--now", T0])
    assert res.exit_code == 2 and "expected a new job" in res.stderr and "Traceback" not in res.output
