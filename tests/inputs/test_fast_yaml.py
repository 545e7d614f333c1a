"""The rapidyaml fast path (corral.inputs.fast_yaml) gives exactly what the PyYAML loader gives, or
steps aside: on every YAML file of the project, on generated documents full of YAML 1.1/1.2 traps, and on
broken text (where the PyYAML loader's error must be the one raised). It is taken for a bench-style
snapshot, refused for what it cannot carry, and absent rapidyaml changes nothing but speed."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.errors import InputError
from corral.inputs import fast_yaml, load_yaml, load_yaml_all
from corral.inputs.construction import c_documents

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not fast_yaml.available(), reason="rapidyaml has no wheel here")


@contextmanager
def fast_path(switch: str) -> Iterator[None]:
    """``CORRAL_FAST_YAML`` set to ``switch`` for the block."""
    before = os.environ.get("CORRAL_FAST_YAML")
    os.environ["CORRAL_FAST_YAML"] = switch
    try:
        yield
    finally:
        if before is None:
            del os.environ["CORRAL_FAST_YAML"]
        else:
            os.environ["CORRAL_FAST_YAML"] = before


def fast(text: str) -> list | None:
    """The fast path forced on for any size."""
    with fast_path("1"):
        return fast_yaml.load_all(text, c_documents, min_chars=0)


def reference(text: str, switch: str = "0") -> tuple[str, object]:
    """The public loader's documents or its error message; by default the PyYAML loader alone."""
    with fast_path(switch):
        try:
            return "ok", load_yaml_all(text, "t")
        except InputError as exc:
            return "error", str(exc)


def same_or_refused(text: str) -> bool:
    """The fast path gives the reference's documents (``True``), or steps aside (``False``); it never
    gives other values, nor values where the reference fails."""
    got = fast(text)
    if got is None:
        return False
    outcome, expected = reference(text)
    assert outcome == "ok", (text, expected, got)
    assert repr(got) == repr(expected), (text, expected, got)  # repr: 1 is not 1.0 nor True
    return True


# -- every YAML file of the project ----------------------------------------------------------------------
def _project_yaml() -> list[Path]:
    roots = [
        ROOT / "tests",
        ROOT / "docs" / "examples",
        ROOT / "src" / "corral" / "examples",
        ROOT.parent / "shared" / "examples",
    ]
    return sorted(p for r in roots if r.is_dir() for p in r.rglob("*") if p.suffix in (".yaml", ".yml"))


def test_every_project_yaml_file_loads_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    files = _project_yaml()
    assert len(files) > 100
    taken = [p for p in files if same_or_refused(p.read_text(encoding="utf-8"))]
    assert len(taken) >= len(files) * 3 // 4, f"the fast path took only {len(taken)} of {len(files)} files"
    monkeypatch.setattr(fast_yaml, "MIN_CHARS", 0)  # the public loader, fast path on, for every file
    for p in files:
        text = p.read_text(encoding="utf-8")
        assert repr(reference(text, "1")) == repr(reference(text)), p


# -- the bench-style snapshot takes the fast path ---------------------------------------------------------
def bench_snapshot(nodes: int = 64) -> str:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_allocate import generate
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return yaml.dump_all(generate(nodes, 3 * nodes, nodes // 4, 2 * nodes, 7), Dumper=yaml.SafeDumper)


def test_bench_snapshot_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    text = bench_snapshot()
    assert len(text) >= fast_yaml.MIN_CHARS
    got = fast(text)
    assert got is not None, "a yaml.dump_all snapshot must not fall back"
    assert repr(got) == repr(reference(text)[1])
    calls = []
    real = fast_yaml._documents
    monkeypatch.setattr(fast_yaml, "_documents", lambda *a: calls.append(1) or real(*a))
    assert repr(reference(text, "1")[1]) == repr(got) and calls  # the public loader took it


def test_kubectl_style_quantities_take_the_fast_path() -> None:
    pod = (
        "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: p{i}\n    creationTimestamp: "
        '"2026-01-01T00:00:00Z"\n  spec:\n    containers:\n    - name: c\n      ports:\n'
        "      - containerPort: 8080\n      resources:\n        requests:\n          cpu: 500m\n"
        "          memory: 10Gi\n          nvidia.com/gpu: 1\n      securityContext:\n"
        "        privileged: false\n    priority: -5\n    ratio: 0.25\n"
    )
    text = "apiVersion: v1\nkind: List\nitems:\n" + "".join(pod.format(i=i) for i in range(50))
    got = fast(text)
    assert got is not None
    assert got == reference(text)[1]
    assert got[0]["items"][3]["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "500m",
        "memory": "10Gi",
        "nvidia.com/gpu": 1,
    }


@pytest.mark.parametrize(
    "text",
    [
        "a: yes\n",
        "a: Off\n",
        "a: ~\n",
        "a: !!str 1\n",
        "a: &x 1\nb: *x\n",
        "base: {x: 1}\nuse:\n  <<: {x: 3}\n",
        "a: 012\n",
        "a: 0x1F\n",
        "a: 1_000\n",
        "a: 1:20\n",
        "a: 1e3\n",
        "a: .inf\n",
        "a: -.Inf\n",
        "a: .NaN\n",
        "a: nan\n",
        "a: 2017-01-01\n",
        "1: one\n",
        "true: t\n",
        "{1: a}\n",
        "? a\n: b\n",
        "%YAML 1.1\n---\na: 1\n",
        "a:\tb\n",
        "a: 1\n...\nb: 2\n",
        "- [a]    - [b]\n",
        "k: @x\n",
        "k: |\n  a",
        "a: 1.5e3\n",
        "a: +1\n",
        "a: 01.5\n",
        "= : x\n",
        "a: \x85b\n",
        'k: "\\0"\n',
    ],
)
def test_refused_texts_fall_back(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert fast(text) is None
    monkeypatch.setattr(fast_yaml, "MIN_CHARS", 0)
    assert repr(reference(text, "1")) == repr(reference(text))


@pytest.mark.parametrize(
    "text",
    [
        "a: b: c\n",
        "k: [a,\n",
        "k: 'x\n",
        "- a\n-b\n",
        "a:\n  b: 1\n c: 2\n",
        'k: "\\q"\n',
        "]\n",
        "`x\n",
        "k: v\n...\nx: y\n",
        "a: %s\n" % ("9" * 5000),
        "a: \x07\n",
    ],
)
def test_broken_text_keeps_the_pyyaml_error(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert fast(text) is None
    monkeypatch.setattr(fast_yaml, "MIN_CHARS", 0)
    on, off = reference(text, "1"), reference(text)
    assert on == off and on[0] == "error"


def test_documents_and_empty_documents() -> None:
    cases = {
        "a: 1\n": [{"a": 1}],
        "---\na: 1\n---\n---\nb: [2]\n": [{"a": 1}, {"b": [2]}],
        "--- 1\n--- x\n": [1, "x"],
        "---\n": [],
        "--- \n---\n": [],
        "apiVersion: v1\nkind: List\nitems:\n- {kind: Node}\n": [
            {"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node"}]}
        ],
    }
    for text, docs in cases.items():
        assert fast(text) == docs == reference(text)[1], text
    for text in ("", "# only a comment\n", "\n\n"):  # no JSON at all: the PyYAML loader decides
        assert fast(text) is None and reference(text, "1") == ("ok", [])
    assert load_yaml("---\n", "t") is None


def test_without_rapidyaml_the_loader_still_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ryml", None)  # `import ryml` raises ImportError
    text = bench_snapshot()
    assert not fast_yaml.available()
    assert fast(text) is None
    _outcome, docs = reference(text, "1")
    assert len(docs) > 100 and docs[0]["kind"] == "Node"


def test_rapidyaml_parse_errors_stay_off_the_terminal(capfd: pytest.CaptureFixture[str]) -> None:
    # rapidyaml's C++ handler prints its parse errors on descriptor 2; "k: \"x\"#c" is one it refuses
    # and PyYAML reads
    assert fast_yaml._documents(fast_yaml._ryml(), b"a: b: c\n") is None
    assert fast('k: "x"#c\n') is None
    assert capfd.readouterr().err == ""


# -- generated documents ------------------------------------------------------------------------------------
NASTY = [
    "yes",
    "No",
    "ON",
    "off",
    "true",
    "False",
    "null",
    "NULL",
    "~",
    "0x1F",
    "-0x1F",
    "012",
    "0o17",
    "0b101",
    "1_000",
    "1:20",
    "-1:20",
    "190:20:30.15",
    "1e3",
    "1.5e3",
    "1.5e+3",
    "1E-3",
    ".5",
    "-.5",
    "1.",
    "+1",
    "-0",
    "00",
    "0.0",
    ".inf",
    "-.Inf",
    ".NaN",
    "nan",
    "inf",
    "Infinity",
    "2017-01-01",
    "2001-12-14t21:59:43.10-05:00",
    "2001-1-1",
    "10Gi",
    "500m",
    "1Ti",
    "8080",
    "-5",
    "3.14",
    "1e999",
    "9" * 30,
    "a b",
    "x:y",
    "a#b",
    "50%",
    "--flag=1",
    "-",
    "'",
    '"',
    "é",
    "a\\b",
    "",
    " ",
    "1,2",
    "1 2",
    "http://x:80/a?b=c",
    ".",
    ".hidden",
    "0.5.1",
    "v1.2",
    "--- x",
    "...",
    "- x",
    "? x",
    "# c",
    "[a]",
    "{a}",
]
WORDS = st.sampled_from(NASTY) | st.text(alphabet="ab01-.:_ #'\"\\é~", max_size=6)


def _plain_ok(s: str) -> bool:
    return (
        bool(s)
        and s == s.strip()
        and "\n" not in s
        and not s.startswith(tuple("-?:,[]{}#&*!|>'\"%@`"))
        and ": " not in s
        and " #" not in s
        and not s.endswith(":")
    )


def scalar(s: str, style: str, indent: int) -> str:
    pad = " " * (indent + 2)
    if style == "plain" and _plain_ok(s):
        return s
    if style == "single":
        return "'" + s.replace("'", "''") + "'"
    if style in ("|", "|-", "|+", ">", ">-") and s.strip() and "\n" not in s and not s.startswith(" "):
        return f"{style}\n{pad}{s}\n{pad}{s}" + ("\n" if style.endswith("+") else "")
    if style == "multi" and _plain_ok(s) and _plain_ok(s + "x"):
        return f"{s}\n{pad}{s}x"
    escaped = json.dumps(s, ensure_ascii=style == "ascii")
    return escaped.replace("\\u00e9", "\\xe9") if style == "ascii" else escaped


def flow(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{flow(k)}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    s = str(value)
    return s if _plain_ok(s) and not any(c in s for c in ",[]{}") else json.dumps(s)


STYLES = st.sampled_from(["plain", "plain", "single", "double", "ascii", "|", "|-", "|+", ">", ">-", "multi"])
LEAF = st.tuples(WORDS, STYLES)
TREES = st.recursive(
    LEAF,
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.dictionaries(WORDS, kids, max_size=3)
        | st.tuples(st.just("flow"), st.lists(WORDS, max_size=3) | st.dictionaries(WORDS, WORDS, max_size=2))
    ),
    max_leaves=12,
)


def render(node: object, indent: int = 0) -> str:
    """Block YAML for ``node`` at ``indent``: the text after a ``key:`` or ``-`` (with its line break)."""
    pad = " " * indent
    if isinstance(node, tuple) and node[0] == "flow":
        return " " + flow(node[1]) + "\n"
    if isinstance(node, tuple):
        return " " + scalar(node[0], node[1], indent) + "\n"
    if isinstance(node, list):
        if not node:
            return " []\n"
        return "\n" + "".join(f"{pad}-{render(item, indent + 2)}" for item in node)
    if not node:
        return " {}\n"
    return "\n" + "".join(
        f"{pad}{scalar(k, 'plain', indent)}:{render(v, indent + 2)}" for k, v in node.items()
    )


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(st.dictionaries(WORDS, TREES, min_size=1, max_size=4) | st.just({}), min_size=1, max_size=3))
def test_generated_documents_load_alike(docs: list) -> None:
    text = "".join("---" + (render(d, 0) if d else "\n") for d in docs)
    same_or_refused(text)
    same_or_refused(text.replace("---\n", "", 1))


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(LEAF, min_size=1, max_size=8), st.sampled_from(["- ", "k{i}: ", "{i}: ", "'{i}': "]))
def test_generated_scalars_load_alike(leaves: list, form: str) -> None:
    text = "".join(form.format(i=i) + scalar(s, style, 0) + "\n" for i, (s, style) in enumerate(leaves))
    same_or_refused(text)


BENIGN = st.text(alphabet="abcxyz019 .-_/é\\\"'#:,", max_size=8)
BENIGN_TREES = st.recursive(
    st.tuples(BENIGN, STYLES),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(BENIGN, kids, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(st.dictionaries(BENIGN, BENIGN_TREES, min_size=1, max_size=4), min_size=1, max_size=3))
def test_generated_strings_load_alike(docs: list) -> None:
    """Strings without number-like or boolean-like words: quoting, escapes, block and folded scalars,
    multi-line plain scalars go through the fast path and must come out the same."""
    same_or_refused("".join("---" + render(d, 0) for d in docs))


def test_generated_documents_are_mostly_taken() -> None:
    """Not a fast path that always steps aside: most plain Kubernetes-like scalars go through it."""
    leaves = ["10Gi", "500m", "8080", "3.14", "-5", "x", "a b", "0.0", "1Ti", "http://x:80/a"]
    taken = sum(
        same_or_refused("".join(f"k{i}: {v}\n" for i, v in enumerate(leaves[j:] + leaves[:j])))
        for j in range(len(leaves))
    )
    assert taken == len(leaves)


# -- the command ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tail", ["broken: [a, b\n", "x: 9%s\n" % ("9" * 5000), "- a\n-b\n"])
def test_a_large_broken_snapshot_fails_with_the_pyyaml_message(
    tmp_path: Path, tail: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_hostile_input import one_error, schedule, write

    path = write(tmp_path, "big.yaml", bench_snapshot() + "---\n" + tail)
    assert path.stat().st_size >= fast_yaml.MIN_CHARS
    monkeypatch.setenv("CORRAL_FAST_YAML", "1")
    on = one_error(schedule(path), "big.yaml")
    monkeypatch.setenv("CORRAL_FAST_YAML", "0")
    assert on == one_error(schedule(path), "big.yaml")


def test_a_large_snapshot_schedules_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_hostile_input import schedule, write

    path = write(tmp_path, "big.yaml", bench_snapshot())
    outputs = []
    for switch in ("1", "0"):
        monkeypatch.setenv("CORRAL_FAST_YAML", switch)
        res = schedule(path, "-o", "json")
        assert res.exit_code == 0, res.output
        outputs.append(json.loads(res.stdout))
    assert outputs[0] == outputs[1] and outputs[0]["binds"]
