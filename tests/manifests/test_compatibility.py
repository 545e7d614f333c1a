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

_HEADING = re.compile(r"^###\s+(\w+)\s+—\s+`([^`]+)`\s*$")
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*([a-z]+)\s*\|(.*)\|\s*$")


def tables(text: str) -> dict[tuple[str, str], dict[str, tuple[str, str]]]:
    """(kind, apiVersion) -> {path: (status, text)} from the document's tables."""
    out: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}
    current: dict[str, tuple[str, str]] | None = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = out.setdefault((heading.group(1), heading.group(2)), {})
            continue
        if line.startswith("#"):  # any other heading ends the table
            current = None
            continue
        row = _ROW.match(line)
        if row and current is not None:
            assert row.group(1) not in current, f"{row.group(1)} twice"
            current[row.group(1)] = (row.group(2), row.group(3).strip())
    return out


def schema_paths(schema: dict, prefix: str = "") -> list[str]:
    """Every property path of an openAPIV3Schema: ``.`` nests, ``[]`` list items, ``*`` map values."""
    out: list[str] = []
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{name}" if prefix else name
        out.append(path)
        out.extend(schema_paths(sub, path))
    if isinstance(schema.get("items"), dict):
        out.extend(schema_paths(schema["items"], prefix + "[]"))
    if isinstance(schema.get("additionalProperties"), dict):
        out.extend(schema_paths(schema["additionalProperties"], prefix + ".*"))
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
    assert len(found) == len(SCHEMAS)
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
