"""Fixtures of the ``corral run`` tests: an in-process API server and runners wired to it through the real
``kubernetes`` client (no patching of the client anywhere)."""

from __future__ import annotations

import io

import pytest

from corral.kube.api import KubeAPI, load_client
from corral.kube.logs import Log
from corral.kube.metrics import Metrics
from corral.kube.runner import Runner, RunOptions
from corral.registry import default_config
from tests.kube.fakeapi import FakeAPI

FAST = {
    "backoff": (0.02, 0.2),
    "lease": (1.0, 0.6, 0.1),
    "watch_timeout": 30,
    "sync_timeout": 10.0,
    "queue_metrics_interval": 0.0,  # every cycle
}


@pytest.fixture(autouse=True)
def check_kept_indexes(monkeypatch):
    """Every kept index of ``corral run`` (the model's, the applier's, the runner's) is compared with a
    walk over every job each time it is used (``CORRAL_CHECK_INDEX=1``, :mod:`corral.kube.jobfacts`)."""
    monkeypatch.setenv("CORRAL_CHECK_INDEX", "1")


@pytest.fixture
def server():
    srv = FakeAPI().start()  # bookmarks once a minute, history trimmed: as a real API server
    yield srv
    srv.stop()


def make_runner(srv: FakeAPI, config=None, **opts) -> Runner:
    """A runner on ``srv``; options as :class:`RunOptions` with fast test timings."""
    options = RunOptions(**{**FAST, **opts})
    api = KubeAPI(load_client(host=srv.url), timeout=10.0)
    return Runner(
        api, config or default_config(), options, Log(stream=io.StringIO()), Metrics(), out=io.StringIO()
    )


@pytest.fixture
def runner_factory(server):
    made: list[Runner] = []

    def factory(config=None, **opts) -> Runner:
        r = make_runner(server, config, **opts)
        made.append(r)
        return r

    yield factory
    for r in made:
        r.stop()
