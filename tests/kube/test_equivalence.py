"""Quality bar: ``corral run --dry-run`` on an API server loaded with a scenario's objects decides what
``corral schedule`` decides on the same objects as a snapshot, for every case of the scenario suite."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from corral.cli import schedule_snapshot
from corral.framework.config import parse_config
from corral.manifests.build import DEFAULT_SCHEDULERS
from corral.manifests.workloads import expand_workloads
from corral.model.clock import parse_time
from corral.model.notes import Notes
from corral.registry import REGISTRY, default_config
from tests.kube.conftest import make_runner
from tests.kube.fakeapi import _BY_KIND as SERVED_KINDS
from tests.kube.fakeapi import FakeAPI
from tests.scenarios.expand import T0, expand

CASES = sorted((Path(__file__).parent.parent / "scenarios" / "cases").glob("*.yaml"))


@pytest.fixture(scope="module")
def shared_server():
    srv = FakeAPI(bookmark_interval=0.1).start()
    yield srv
    srv.stop()


def _reset(srv: FakeAPI) -> None:
    with srv.lock:
        for store in srv.store.values():
            store.clear()
        for h in srv.history.values():
            h.clear()
        srv.rv += 1000
        srv.oldest = srv.rv
        srv.trimmed = dict.fromkeys(srv.trimmed, 0)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_dry_run_decides_as_schedule(path: Path, tmp_path: Path, shared_server: FakeAPI) -> None:
    case = yaml.safe_load(path.read_text())
    # in a live cluster the workloads users submit (Volcano Jobs, KAI's batch Jobs and JobSets) are
    # expanded by their controllers: the API server holds the PodGroups and pods they make
    objects = [raw for _f, raw in expand_workloads([("case", o) for o in expand(case)], Notes())]
    config = parse_config(case["config"], REGISTRY, "scenario") if case.get("config") else default_config()
    now = parse_time(str(case.get("now", T0)))
    cycles, period = case.get("cycles", 1), float(case.get("period", 1.0))
    snap = tmp_path / "snapshot.yaml"
    snap.write_text(yaml.safe_dump_all(objects))
    try:
        want = schedule_snapshot([snap], config, now, cycles, period).to_json(cycles)
    except Exception as exc:  # noqa: BLE001 - a case the snapshot path rejects is out of scope here
        pytest.skip(f"snapshot path rejects the case: {exc}")
    _reset(shared_server)
    # objects of kinds corral does not watch (another group's PodGroup, a Deployment) live in resources
    # the live scheduler never lists, as on a real API server; the snapshot path skips them too
    # the API server serves a stored object in every version it serves: a v1alpha3 PodGroup is a v1beta1 one
    objects = [
        {**o, "apiVersion": "scheduling.k8s.io/v1beta1"}
        if (o.get("kind"), o.get("apiVersion")) == ("PodGroup", "scheduling.k8s.io/v1alpha3")
        else o
        for o in objects
    ]
    shared_server.add_all([o for o in objects if (o.get("kind"), o.get("apiVersion")) in SERVED_KINDS])
    runner = make_runner(
        shared_server,
        config,
        dry_run=True,
        cycles=cycles,
        now=now,
        period=0.0,
        clock_step=period,
        schedulers=DEFAULT_SCHEDULERS,  # what `corral schedule` serves by default
    )
    try:
        runner.start()
        got = runner.run().to_json(cycles)
    finally:
        runner.stop()
    assert got == want
