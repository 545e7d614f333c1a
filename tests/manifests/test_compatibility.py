"""docs/compatibility.md against the peers' own CRD schemas (../shared/peers/, see its README): every
property path of every schema has a status in the table, and every row names a path of its schema — so
a new CRD release shows up here as a failing test, not as a field corral drops without a word."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "compatibility.md"
PEERS = ROOT.parent / "shared" / "peers"
STATUSES = {"honoured", "refused", "warned", "inert"}

#: schema file -> the table's heading ("Kind — `group/version`")
SCHEMAS = {
    "volcano/scheduling.volcano.sh_podgroups.yaml": "PodGroup",
    "volcano/scheduling.volcano.sh_queues.yaml": "Queue",
    "volcano/topology.volcano.sh_hypernodes.yaml": "HyperNode",
    "volcano/batch.volcano.sh_jobs.yaml": "Job",
    "kai/scheduling.run.ai_podgroups.yaml": "PodGroup",
    "kai/scheduling.run.ai_queues.yaml": "Queue",
    "kai/kai.scheduler_topologies.yaml": "Topology",
}

#: Kubernetes' own kinds (docs/compatibility.md, "Kubernetes' own gang API"): (kind, apiVersion) -> the
#: release and file of their schema in the kubernetes-validate package
NATIVE = {
    ("Workload", "scheduling.k8s.io/v1alpha1"): ("1.35.0", "workload-scheduling-v1alpha1.json"),
    ("Workload", "scheduling.k8s.io/v1alpha2"): ("1.36.0", "workload-scheduling-v1alpha2.json"),
    ("PodGroup", "scheduling.k8s.io/v1alpha2"): ("1.36.0", "podgroup-scheduling-v1alpha2.json"),
    ("Workload", "scheduling.k8s.io/v1alpha3"): ("1.37.0", "workload-scheduling-v1alpha3.json"),
    ("Workload", "scheduling.k8s.io/v1beta1"): ("1.37.0", "workload-scheduling-v1beta1.json"),
    ("PodGroup", "scheduling.k8s.io/v1alpha3"): ("1.37.0", "podgroup-scheduling-v1alpha3.json"),
    ("PodGroup", "scheduling.k8s.io/v1beta1"): ("1.37.0", "podgroup-scheduling-v1beta1.json"),
    ("CompositePodGroup", "scheduling.k8s.io/v1alpha3"): (
        "1.37.0",
        "compositepodgroup-scheduling-v1alpha3.json",
    ),
    # Dynamic Resource Allocation (docs/compatibility.md, "Dynamic Resource Allocation")
    ("ResourceSlice", "resource.k8s.io/v1"): ("1.37.0", "resourceslice-resource-v1.json"),
    ("DeviceClass", "resource.k8s.io/v1"): ("1.37.0", "deviceclass-resource-v1.json"),
    ("ResourceClaim", "resource.k8s.io/v1"): ("1.37.0", "resourceclaim-resource-v1.json"),
    ("ResourceClaimTemplate", "resource.k8s.io/v1"): ("1.37.0", "resourceclaimtemplate-resource-v1.json"),
}

#: a table's heading: "Kind — `group/version`", or several versions sharing one table
_HEADING = re.compile(r"^###\s+(\w+)\s+—\s+(`[^`]+`(?:,\s*`[^`]+`)*)\s*$")
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*([a-z]+)\s*\|(.*)\|\s*$")


def tables(text: str) -> dict[tuple[str, str], dict[str, tuple[str, str]]]:
    """(kind, apiVersion) -> {path: (status, text)} from the document's tables."""
    out: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}
    current: dict[str, tuple[str, str]] | None = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = {}
            for version in re.findall(r"`([^`]+)`", heading.group(2)):
                assert (heading.group(1), version) not in out, f"{version} twice"
                out[(heading.group(1), version)] = current
            continue
        if line.startswith("#"):  # any other heading ends the table
            current = None
            continue
        row = _ROW.match(line)
        if row and current is not None:
            assert row.group(1) not in current, f"{row.group(1)} twice"
            current[row.group(1)] = (row.group(2), row.group(3).strip())
    return out


def schema_paths(
    schema: dict, prefix: str = "", defs: dict | None = None, seen: frozenset[str] = frozenset()
) -> list[str]:
    """Every property path of an openAPIV3Schema: ``.`` nests, ``[]`` list items, ``*`` map values.
    With ``defs`` (a JSON schema's ``$defs``), ``$ref`` is followed, but for apimachinery's own types
    (ObjectMeta, Condition, Quantity, Time: leaves, as a CRD's schema has them) and a type within itself."""
    if defs is not None and "$ref" in schema:
        name = schema["$ref"].rpartition("/")[2]
        if name.startswith("io.k8s.apimachinery.") or name in seen:
            return []
        schema, seen = defs[name], seen | {name}
    out: list[str] = []
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{name}" if prefix else name
        out.append(path)
        out.extend(schema_paths(sub, path, defs, seen))
    if isinstance(schema.get("items"), dict):
        out.extend(schema_paths(schema["items"], prefix + "[]", defs, seen))
    if isinstance(schema.get("additionalProperties"), dict):
        out.extend(schema_paths(schema["additionalProperties"], prefix + ".*", defs, seen))
    return out


def covering(path: str, rows: dict[str, tuple[str, str]]) -> str | None:
    """The row that gives ``path`` its status: its own, else the nearest ``X.**`` above it."""
    if path in rows:
        return path
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        subtree = ".".join(parts[:i]) + ".**"
        if subtree in rows:
            return subtree
    return None


def test_every_row_has_a_known_status() -> None:
    found = tables(DOC.read_text())
    assert len(found) == len(SCHEMAS) + len(NATIVE)
    for key, rows in found.items():
        assert rows, key
        for path, (status, text) in rows.items():
            assert status in STATUSES, f"{key} {path}: {status}"
            assert text, f"{key} {path}: no reading given"
            if status in ("refused", "warned") and not path.endswith("**"):
                assert '"' in text or "as `" in text, f"{key} {path}: the message is quoted"


def test_the_parser_reads_its_own_format() -> None:
    text = "### Queue — `g/v1`\n| field | status | x |\n|---|---|---|\n| `spec.a` | inert | why |\n## next\n| `b` | honoured | x |\n"
    assert tables(text) == {("Queue", "g/v1"): {"spec.a": ("inert", "why")}}
    rows = {"spec.t.**": ("honoured", "x"), "spec.t": ("honoured", "y")}
    assert covering("spec.t.spec.containers[].name", rows) == "spec.t.**"
    assert covering("spec.u", rows) is None


def _check(key: tuple[str, str], paths: list[str]) -> None:
    rows = tables(DOC.read_text()).get(key)
    assert rows is not None, f"docs/compatibility.md has no table for {key}"
    missing = [p for p in paths if covering(p, rows) is None]
    assert not missing, f"{key}: fields without a status in docs/compatibility.md: {missing}"
    stale = [r for r in rows if not r.endswith("**") and r not in paths]
    stale += [r for r in rows if r.endswith("**") and not any(p.startswith(r[:-2]) for p in paths)]
    assert not stale, f"{key}: rows naming no field of the schema: {stale}"


@pytest.mark.parametrize(
    "key", sorted(NATIVE), ids=[f"{k}-{v.rpartition('/')[2]}" for k, v in sorted(NATIVE)]
)
def test_every_native_schema_field_has_a_status(key: tuple[str, str]) -> None:
    """Kubernetes' own kinds, per release, from the schemas of the kubernetes-validate package."""
    import json

    kv = pytest.importorskip("kubernetes_validate")
    release, file = NATIVE[key]
    folder = Path(kv.__file__).parent / "kubernetes-json-schema" / f"v{release}-local"
    schema = json.loads((folder / file).read_text())
    assert schema["x-kubernetes-group-version-kind"][0]["kind"] == key[0]
    defs = json.loads((folder / "_definitions.json").read_text())["$defs"]
    _check(key, schema_paths(schema, defs=defs))


def test_the_walk_follows_references() -> None:
    defs = {"a.B": {"properties": {"x": {"type": "string"}, "self": {"$ref": "#/$defs/a.B"}}}}
    schema = {
        "properties": {"spec": {"$ref": "#/$defs/a.B"}, "metadata": {"$ref": "#/$defs/io.k8s.apimachinery.M"}}
    }
    assert schema_paths(schema, defs=defs) == ["spec", "spec.x", "spec.self", "metadata"]


@pytest.mark.skipif(not PEERS.is_dir(), reason="the peers' schemas (../shared/peers) are not here")
@pytest.mark.parametrize("schema_file", sorted(SCHEMAS))
def test_every_schema_field_has_a_status(schema_file: str) -> None:
    crd = yaml.safe_load((PEERS / schema_file).read_text())
    found = tables(DOC.read_text())
    group = crd["spec"]["group"]
    for version in crd["spec"]["versions"]:
        if not version.get("served", True):
            continue
        key = (crd["spec"]["names"]["kind"], f"{group}/{version['name']}")
        assert key[0] == SCHEMAS[schema_file]
        rows = found.get(key)
        assert rows is not None, f"docs/compatibility.md has no table for {key}"
        paths = schema_paths(version["schema"]["openAPIV3Schema"])
        missing = [p for p in paths if covering(p, rows) is None]
        assert not missing, f"{key}: fields without a status in docs/compatibility.md: {missing}"
        stale = [r for r in rows if not r.endswith("**") and r not in paths]
        stale += [r for r in rows if r.endswith("**") and not any(p.startswith(r[:-2]) for p in paths)]
        assert not stale, f"{key}: rows naming no field of the schema: {stale}"
