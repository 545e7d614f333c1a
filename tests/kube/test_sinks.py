"""The live scheduler's two :class:`~corral.framework.cycle.DecisionSink` implementations: the API server
(:class:`~corral.kube.apply.Applier`) and the dry run (:class:`~corral.kube.dryrun.DryRun`), one of which
the runner carries every cycle's decisions out through; the applier groups a gang's binds by the podgroup
each bind names."""

from __future__ import annotations

from corral.framework.cycle import DecisionSink
from corral.framework.decisions import Bind, Decisions
from corral.kube.apply import Applier
from corral.kube.dryrun import DryRun
from corral.manifests.build import build_cluster
from tests.kube.fakeapi import FakeAPI
from tests.kube.test_live import NOW
from tests.scenarios.expand import expand


def _cluster(server: FakeAPI) -> None:
    server.add_all(
        expand(
            {
                "nodes": [{"name": "n1"}, {"name": "n2"}],
                "jobs": [{"name": "train", "pods": [{"count": 2, "gpu": 8}]}],
            }
        )
    )


def test_the_runner_carries_decisions_out_through_one_sink(server: FakeAPI, runner_factory) -> None:
    live, dry = runner_factory(now=NOW), runner_factory(now=NOW, dry_run=True)
    assert isinstance(live.sink, Applier) and live.sink is live.applier
    assert isinstance(dry.sink, DryRun) and dry.sink.cache is dry.cache
    assert isinstance(live.sink, DecisionSink) and isinstance(dry.sink, DecisionSink)


def test_a_dry_run_assumes_through_its_sink(server: FakeAPI, runner_factory) -> None:
    _cluster(server)
    r = runner_factory(now=NOW, dry_run=True, cycles=1)
    r.start()
    assert r.cache.wait_synced(5)
    res = r.cycle(NOW)
    assert sorted(b.pod for b in res.decisions.binds) == ["default/train-0", "default/train-1"]
    assert not server.bindings  # nothing written
    assert r.cache.find("Pod", "default/train-0")[1]["spec"]["nodeName"]  # assumed in the cache


def test_the_applier_groups_a_gangs_binds_by_their_podgroup(server: FakeAPI, runner_factory) -> None:
    """One bind of the gang refused twice: the gang is reported partly bound, by the podgroup its binds
    name, though the model it is given holds no job (the applier does not look the pods up)."""
    _cluster(server)
    server.fail("POST", r"/pods/train-1/binding$", 409, count=2)
    r = runner_factory(now=NOW)
    r.start()
    assert r.cache.wait_synced(5)
    binds = [
        Bind("default/train-0", "n1", 1, "default/train"),
        Bind("default/train-1", "n2", 1, "default/train"),
    ]
    report = r.applier.apply(Decisions(binds=binds), build_cluster([]), NOW)
    assert report.partial_gangs == {"default/train": ["default/train-1"]}
    assert [p for p, _n in server.bindings] == ["default/train-0"]
