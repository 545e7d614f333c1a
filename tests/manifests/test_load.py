"""Reading snapshot files (corral.manifests.load): YAML/JSON, streams, List wrappers, directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corral.errors import InputError
from corral.manifests.load import read_objects


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def names(objs: list) -> list[str]:
    return [o["metadata"]["name"] for _, o in objs]


def test_multi_document_yaml_skips_empty_documents(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        "---\napiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\n---\n"
        "apiVersion: v1\nkind: Node\nmetadata: {name: b}\n...\n"
    )
    objs = read_objects([f])
    assert names(objs) == ["a", "b"] and {file for file, _ in objs} == {str(f)}


def test_list_wrappers_nest(tmp_path: Path) -> None:
    f = tmp_path / "list.yaml"
    inner = {"apiVersion": "v1", "kind": "NodeList", "items": [node("c")]}
    f.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node("a"), node("b"), inner]}))
    assert names(read_objects([f])) == ["a", "b", "c"]


def test_json_file_and_json_array(tmp_path: Path) -> None:
    f = tmp_path / "s.json"
    f.write_text(json.dumps(node("a")))
    g = tmp_path / "arr.json"
    g.write_text(json.dumps([node("b"), node("c")]))
    assert names(read_objects([f, g])) == ["a", "b", "c"]


def test_json_content_in_a_yaml_file(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(node("a")))
    assert names(read_objects([f])) == ["a"]


def test_directory_recursive_in_name_order_ignoring_other_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.yaml").write_text(json.dumps(node("b")))
    (tmp_path / "a.yml").write_text(json.dumps(node("a")))
    (tmp_path / "sub" / "c.json").write_text(json.dumps(node("c")))
    (tmp_path / "notes.txt").write_text("not yaml: [")
    assert names(read_objects([tmp_path])) == ["a", "b", "c"]


def test_files_keep_the_given_order(tmp_path: Path) -> None:
    (tmp_path / "1.yaml").write_text(json.dumps(node("one")))
    (tmp_path / "2.yaml").write_text(json.dumps(node("two")))
    assert names(read_objects([tmp_path / "2.yaml", tmp_path / "1.yaml"])) == ["two", "one"]


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("bad.yaml", "a: [1,\n", "malformed YAML at line"),
        ("bad.json", '{"a": 1,}', "malformed JSON at line 1"),
        ("scalar.yaml", "42\n", "expected a Kubernetes object"),
        ("list.yaml", "- 1\n- 2\n", "expected a Kubernetes object"),
    ],
)
def test_malformed(tmp_path: Path, name: str, text: str, message: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(InputError) as err:
        read_objects([f])
    assert err.value.file == str(f) and message in err.value.message


def test_missing_path_and_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_objects([tmp_path / "nope.yaml"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"no \.yaml"):
        read_objects([tmp_path / "empty"])


def test_not_utf8(tmp_path: Path) -> None:
    f = tmp_path / "bin.yaml"
    f.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(InputError) as err:
        read_objects([f])
    assert err.value.file == str(f)
