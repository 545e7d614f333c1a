"""The predicates' answers for pods alike but for their namespace are not shared when placed pods'
required anti-affinity may select them (plugins/predicates.py ``sign_pod``): the anti-affinity terms
select by namespace (kube-scheduler's ``AffinityTerm.Matches``), so the skip of jobs known to fail, which
keys on the signature, must not skip the pod of the other namespace."""

from __future__ import annotations

from pathlib import Path

import yaml

from corral.framework.cycle import run_cycle
from corral.framework.memo import ClusterHistory
from corral.manifests.build import DEFAULT_SCHEDULERS, load_snapshot
from corral.model.clock import parse_time
from corral.registry import REGISTRY, default_config
from tests.scenarios.expand import T0, expand

CASE = (
    Path(__file__).parents[1] / "scenarios/cases/predicates_existing_pod_anti_affinity_namespace_per_pod.yaml"
)


def test_skip_without_reasons_tells_namespaces_apart(tmp_path: Path) -> None:
    snap = tmp_path / "snapshot.yaml"
    snap.write_text(yaml.safe_dump_all(expand(yaml.safe_load(CASE.read_text()))))
    cluster = load_snapshot([snap], DEFAULT_SCHEDULERS)
    decisions = run_cycle(
        cluster,
        default_config(),
        REGISTRY,
        parse_time(T0),
        1,
        explain=False,
        history=ClusterHistory(skip=True),
    )
    binds = {(b["pod"], b["node"]) for b in decisions.to_json(1)["binds"]}
    assert binds == {("team-b/noisy-0", "n1")}
