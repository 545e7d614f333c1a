"""The fixtures of Kubernetes' own gang API and of DRA (the ``native_*`` and ``dra_*`` scenario cases, expanded as the
loader reads them) against the schemas of their Kubernetes release, from the ``kubernetes-validate``
package (strict: no field the schema does not have): the objects corral is tested with are shaped
exactly as the API server takes them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.scenarios.expand import expand

kv = pytest.importorskip("kubernetes_validate")

_DIR = Path(__file__).resolve().parents[1] / "scenarios" / "cases"
CASES = sorted([*_DIR.glob("native_*.yaml"), *_DIR.glob("dra_*.yaml")])
#: the release whose schema holds each API version of the gang API
RELEASE = {"v1alpha1": "1.35.0", "v1alpha2": "1.36.0", "v1alpha3": "1.37.0", "v1beta1": "1.37.0"}


def _release(obj: dict) -> str | None:
    """The Kubernetes release to check ``obj`` against; None for objects not of these APIs."""
    api, kind = obj.get("apiVersion", ""), obj.get("kind")
    if api.startswith("scheduling.k8s.io/") and kind != "PriorityClass":
        return RELEASE[api.rpartition("/")[2]]
    if api.startswith("resource.k8s.io/"):
        return "1.37.0"
    if kind == "Pod":
        spec = obj.get("spec") or {}
        if "workloadRef" in spec:
            return "1.35.0"
        if "schedulingGroup" in spec or "resourceClaims" in spec:
            return "1.37.0"
    return None


def test_there_are_fixtures() -> None:
    assert len(CASES) >= 6


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_fixture_matches_its_release_schema(path: Path) -> None:
    checked = 0
    for obj in expand(yaml.safe_load(path.read_text())):
        release = _release(obj)
        if release is None:
            continue
        kv.validate(obj, release, strict=True)
        checked += 1
    assert checked, f"{path.name}: no object of Kubernetes' gang or DRA API"


def test_a_misshapen_object_fails_the_check() -> None:
    """The check can fail: a PodGroup written with Volcano's minMember is not a scheduling.k8s.io one."""
    bad = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "x", "namespace": "default"},
        "spec": {"minMember": 2, "schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    with pytest.raises(kv.utils.ValidationError):
        kv.validate(bad, "1.37.0", strict=True)
