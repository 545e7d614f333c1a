"""Hostile and broken input (SPEC.md §5): every class ends in one ``error:`` line naming the file (and
the object and field where there is one) and exit code 2, within bounded time and memory — alias bombs,
deep nesting, huge numbers, binary files, odd encodings, out-of-range configuration values."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from corral.cli import app
from corral.inputs import decode, depth_bound, load_json, load_yaml_all

NOW = "2026-01-01T00:00:00Z"
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8", "pods": "110"}},
}
NODE_YAML = yaml.safe_dump(NODE)
CONFIG = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
BOMB = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10))


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def one_error(res, *parts: str) -> str:
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.output and len(lines[0]) < 400, lines[0]
    for part in parts:
        assert part in lines[0], (part, lines[0])
    return lines[0]


def schedule(path: Path, *extra: str):
    return run("schedule", str(path), "--now", NOW, *extra)


def write(tmp: Path, name: str, data: str | bytes) -> Path:
    p = tmp / name
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


# -- alias bombs, recursion, nesting ------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["annotation", "quantity"])
def test_alias_bomb_in_a_snapshot_fails_fast(tmp_path: Path, where: str) -> None:
    field = (
        "metadata:\n  name: n1\n  annotations: {a: *l9}\n"
        if where == "annotation"
        else "metadata: {name: n1}\nstatus:\n  allocatable: {cpu: *l9}\n"
    )
    text = (
        "apiVersion: v1\nkind: Node\nx:\n"
        + "".join("  " + line + "\n" for line in ("l0: &l0 lol\n" + BOMB).splitlines())
        + field
    )
    one_error(
        schedule(write(tmp_path, "bomb.yaml", text)), "bomb.yaml", "aliases expand", "CORRAL_MAX_ALIAS_NODES"
    )


def test_alias_bomb_in_a_config(tmp_path: Path) -> None:
    cfg = write(tmp_path, "c.yaml", "x: &l0 [a]\n" + BOMB + CONFIG)
    one_error(
        run("validate", str(write(tmp_path, "s.yaml", NODE_YAML)), "--config", str(cfg)),
        "c.yaml",
        "aliases expand",
    )


def test_a_few_aliases_are_fine(tmp_path: Path) -> None:
    text = (
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: &l {zone: a}},\n"
        "   status: {allocatable: &a {cpu: '8', pods: '110'}}}\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: *l}, status: {allocatable: *a}}\n"
    )
    res = run("validate", str(write(tmp_path, "s.yaml", text)))
    assert res.exit_code == 0, res.output
    assert "2 nodes" in res.stdout


def test_recursive_alias(tmp_path: Path) -> None:
    one_error(schedule(write(tmp_path, "r.yaml", NODE_YAML + "x: &a [*a]\n")), "r.yaml", "recursive")


@pytest.mark.parametrize("style", ["flow", "block", "json"])
def test_deep_nesting_inside_an_object(tmp_path: Path, style: str) -> None:
    n = 50_000
    if style == "flow":
        text = NODE_YAML + "x: " + "[" * n + "]" * n + "\n"
    elif style == "block":
        text = NODE_YAML + "x:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(400))
    else:
        text = json.dumps(NODE)[:-1] + ', "x": ' + "[" * n + "]" * n + "}"
    path = write(tmp_path, "deep.json" if style == "json" else "deep.yaml", text)
    one_error(schedule(path), path.name, "nesting deeper than the limit of 200", "CORRAL_MAX_DEPTH")


def test_deep_nesting_in_a_config(tmp_path: Path) -> None:
    cfg = write(tmp_path, "c.yaml", CONFIG + "x: " + "{a: " * 20_000 + "1" + "}" * 20_000 + "\n")
    one_error(
        run("validate", str(write(tmp_path, "s.yaml", NODE_YAML)), "--config", str(cfg)),
        "c.yaml",
        "nesting deeper",
    )


def test_the_depth_limit_can_be_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "d.yaml", NODE_YAML + "x: " + "[" * 300 + "]" * 300 + "\n")
    one_error(schedule(path), "nesting deeper")
    monkeypatch.setenv("CORRAL_MAX_DEPTH", "400")
    assert schedule(path).exit_code == 0
    monkeypatch.setenv("CORRAL_MAX_DEPTH", "lots")
    one_error(schedule(path), "CORRAL_MAX_DEPTH")


def test_the_depth_limit_can_be_raised_past_the_yaml_parsers_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libyaml has a nesting ceiling of its own (1,000 levels in 0.2.6); corral's limit still decides."""
    path = write(tmp_path, "d.yaml", NODE_YAML + "x: " + "[" * 1500 + "]" * 1500 + "\n")
    one_error(schedule(path), "nesting deeper than the limit of 200", "CORRAL_MAX_DEPTH")
    monkeypatch.setenv("CORRAL_MAX_DEPTH", "1400")
    one_error(schedule(path), "nesting deeper than the limit of 1400", "CORRAL_MAX_DEPTH")
    monkeypatch.setenv("CORRAL_MAX_DEPTH", "1600")
    assert schedule(path).exit_code == 0
    broken = write(tmp_path, "b.yaml", NODE_YAML + "x: " + "[" * 1500 + "}" + "]" * 1500 + "\n")
    one_error(schedule(broken), "b.yaml", "malformed YAML at line")


def test_the_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "s.yaml", NODE_YAML)
    monkeypatch.setenv("CORRAL_MAX_INPUT_BYTES", "100")
    one_error(schedule(path), "s.yaml", "limit of 100", "CORRAL_MAX_INPUT_BYTES")


def test_depth_is_checked_on_the_fast_path_too() -> None:
    text = "a: " + "[x, " * 250 + "]" * 250  # no anchor, bound within the C loader's safe range
    assert depth_bound(text) <= 2000
    with pytest.raises(Exception, match="nesting deeper"):
        load_yaml_all(text, "t")
    assert load_yaml_all("a: " + "[x, " * 150 + "]" * 150, "t")


def test_json_depth() -> None:
    with pytest.raises(Exception, match="nesting deeper"):
        load_json("[" * 201 + "]" * 201, "t")
    assert load_json("[" * 200 + "]" * 200, "t")


# -- numbers -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,parts",
    [
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: %s}}\n"
            % ("9" * 5000),
            ("more digits",),
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: %s}}\n"
            % ("9" * 300),
            ("Node n1", "status.allocatable", "larger than the limit"),
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '1e999999999'}}\n",
            ("Node n1", "larger than the limit"),
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: .inf}}\n",
            ("Node n1", "larger than the limit"),
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 2}}\n---\n"
            "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: pg}\n"
            "spec: {minMember: %s}\n" % ("9" * 200),
            ("PodGroup default/pg", "spec.minMember"),
        ),
    ],
)
def test_huge_numbers(tmp_path: Path, text: str, parts: tuple) -> None:
    line = one_error(schedule(write(tmp_path, "n.yaml", text)), "n.yaml", *parts)
    assert "9" * 100 not in line  # a hostile value is cut short in the message


@pytest.mark.parametrize("value", ["1e308", ".nan", ".inf", "1e400"])
def test_config_numbers_are_range_checked(tmp_path: Path, value: str) -> None:
    cfg = write(
        tmp_path,
        "c.yaml",
        'actions: "enqueue, allocate"\nconfigurations:\n- name: enqueue\n'
        f"  arguments: {{overcommit-factor: {value}}}\ntiers: []\n",
    )
    one_error(
        run("validate", str(write(tmp_path, "s.yaml", NODE_YAML)), "--config", str(cfg)),
        "c.yaml",
        "overcommit-factor",
    )


# -- encodings -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le-bom", "utf-16-be-bom"])
@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_accepted_encodings(tmp_path: Path, encoding: str, fmt: str) -> None:
    text = (NODE_YAML if fmt == "yaml" else json.dumps(NODE)) + ("\n# café\n" if fmt == "yaml" else "")
    if encoding == "utf-16-le-bom":
        data = codecs.BOM_UTF16_LE + text.encode("utf-16-le")
    elif encoding == "utf-16-be-bom":
        data = codecs.BOM_UTF16_BE + text.encode("utf-16-be")
    else:
        data = text.encode(encoding)
    res = run("validate", str(write(tmp_path, f"s.{fmt}", data)))
    assert res.exit_code == 0, res.output
    assert "1 nodes" in res.stdout


@pytest.mark.parametrize(
    "data,message",
    [
        (codecs.BOM_UTF32_LE + NODE_YAML.encode("utf-32-le"), "UTF-32"),
        (NODE_YAML.encode("utf-16-le"), "without a byte-order mark"),
        ("name: café\n".encode("latin-1") + NODE_YAML.encode(), "not UTF-8 text (byte 0xe9"),
        (bytes(range(256)) * 40, "not a text file"),
    ],
)
def test_refused_encodings(tmp_path: Path, data: bytes, message: str) -> None:
    one_error(schedule(write(tmp_path, "s.yaml", data)), "s.yaml", message)


def test_binary_garbage_config(tmp_path: Path) -> None:
    cfg = write(tmp_path, "c.yaml", bytes(range(128, 256)) * 10)
    one_error(
        run("validate", str(write(tmp_path, "s.yaml", NODE_YAML)), "--config", str(cfg)),
        "c.yaml",
        "not UTF-8",
    )


def test_decode_drops_the_bom() -> None:
    assert decode(codecs.BOM_UTF8 + b"a: 1", "f") == "a: 1"
    assert decode("a: 1".encode("utf-16"), "f") == "a: 1"


# -- the simulator's inputs --------------------------------------------------------------------------------
def test_simulator_cluster_and_workload_specs(tmp_path: Path) -> None:
    import typer

    from corral.commands.simulate import register

    sim = typer.Typer()
    register(sim)
    bomb = write(tmp_path, "cluster.yaml", "x: &l0 [a]\n" + BOMB + "nodes:\n- {name: n, count: 2, gpus: 8}\n")
    res = CliRunner().invoke(
        sim, ["simulate", "--cluster", str(bomb), "-o", str(tmp_path / "r"), "--no-progress"]
    )
    one_error(res, "cluster.yaml", "aliases expand")
    spec = write(tmp_path, "w.yaml", codecs.BOM_UTF32_LE + b"\0\0\0\0")
    res = CliRunner().invoke(
        sim, ["simulate", "--workload", str(spec), "-o", str(tmp_path / "r"), "--no-progress"]
    )
    one_error(res, "w.yaml", "UTF-32")
    assert not (tmp_path / "r").exists()


# -- what reaches the terminal ------------------------------------------------------------------------------
EVIL = (
    'apiVersion: v1\nkind: Pod\nmetadata: {name: "[bold]evil[/", namespace: default}\n'
    'spec: {schedulerName: corral, containers: [{name: c, resources: {requests: {cpu: "1"}}}]}\n---\n'
    'apiVersion: v1\nkind: Pod\nmetadata: {name: "red\\e[31mX\\u202e\\r", namespace: default}\n'
    'spec: {schedulerName: corral, containers: [{name: c, resources: {requests: {cpu: "100"}}}]}\n'
)


def test_names_are_shown_not_obeyed_in_tables(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", NODE_YAML + "---\n" + EVIL)
    res = schedule(path)
    assert res.exit_code == 0, res.output
    assert "[bold]evil[/" in res.stdout
    assert "\x1b" not in res.stdout and "\u202e" not in res.stdout and "\r" not in res.stdout
    assert "red\\x1b[31mX\\u202e\\r" in res.stdout.replace("\n", "").replace("│", "").replace(" ", "")


def test_json_output_is_unaffected(tmp_path: Path) -> None:
    res = schedule(write(tmp_path, "s.yaml", NODE_YAML + "---\n" + EVIL), "-o", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert "default/[bold]evil[/" in json.dumps(data)
    assert "red\\u001b[31mX\\u202e\\r" in json.dumps(data)  # the string itself, as JSON escapes it


def test_errors_escape_what_came_from_input(tmp_path: Path) -> None:
    text = (
        'apiVersion: v1\nkind: Node\nmetadata: {name: "n\\e[2J\\nfake: ok"}\n'
        'status: {allocatable: {cpu: "lots"}}\n'
    )
    line = one_error(schedule(write(tmp_path, "s.yaml", text)), "Node n\\x1b[2J\\nfake: ok")
    assert "\x1b" not in line


def test_tables_fit_the_terminal() -> None:
    import io

    from rich.console import Console

    from corral.commands.tables import print_decisions
    from corral.framework.decisions import Decisions

    d = Decisions()
    schedule_text = "x" * 300
    from corral.framework.decisions import Bind

    d.binds.append(Bind(f"default/{schedule_text}", "n1", 1))
    out = io.StringIO()
    print_decisions(d, 1, Console(file=out, width=60))
    assert max(len(line) for line in out.getvalue().splitlines()) <= 60


# -- HyperNode patterns -------------------------------------------------------------------------------------
def hypernode(pattern: str) -> str:
    return (
        "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: hn}\n"
        f"spec:\n  tier: 1\n  members:\n  - type: Node\n    selector: {{regexMatch: {{pattern: {json.dumps(pattern)}}}}}\n"
    )


def test_catastrophic_pattern_is_linear(tmp_path: Path) -> None:
    node = dict(NODE, metadata={"name": "a" * 50_000 + "!"})
    text = yaml.safe_dump(node) + "---\n" + yaml.safe_dump(NODE) + "---\n" + hypernode("(a+)+$")
    res = run("validate", str(write(tmp_path, "s.yaml", text)))  # Python's re: minutes; RE2: at once
    assert res.exit_code == 0, res.output
    assert "1 hypernodes" in res.stdout


@pytest.mark.parametrize("pattern", ["(a)\\1", "(?<=a)b", "[", "x" * 5000])
def test_patterns_outside_re2_are_bad_input(tmp_path: Path, pattern: str) -> None:
    text = NODE_YAML + "---\n" + hypernode(pattern)
    one_error(schedule(write(tmp_path, "s.yaml", text)), "HyperNode hn", "regexMatch.pattern", "bad pattern")


def test_a_pattern_that_is_not_a_string(tmp_path: Path) -> None:
    text = NODE_YAML + "---\n" + hypernode("x").replace('"x"', "[1, 2]")
    one_error(schedule(write(tmp_path, "s.yaml", text)), "HyperNode hn", "regexMatch.pattern")


def test_trace_size_limit_and_huge_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import typer

    from corral.commands.simulate import register

    sim = typer.Typer()
    register(sim)
    trace = write(tmp_path, "w.csv", "name,submit,duration,queue,pods,gpu\na,0,1e300,q1,1,8\n")
    res = CliRunner().invoke(
        sim, ["simulate", "--workload", str(trace), "-o", str(tmp_path / "r"), "--no-progress"]
    )
    one_error(res, "w.csv", "duration", "at most 1e+10")
    monkeypatch.setenv("CORRAL_MAX_INPUT_BYTES", "10")
    res = CliRunner().invoke(
        sim, ["simulate", "--workload", str(trace), "-o", str(tmp_path / "r"), "--no-progress"]
    )
    one_error(res, "w.csv", "limit of 10")
    assert not (tmp_path / "r").exists()


def test_the_skipped_objects_notice_is_escaped_and_short(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = NODE_YAML + '---\napiVersion: v1\nkind: "Evil\\e[2J' + "x" * 300 + '"\nmetadata: {name: "a\\rb"}\n'
    res = run("validate", str(write(tmp_path, "s.yaml", text)))
    assert res.exit_code == 0, res.output
    notice = [x for x in caplog.messages if x.startswith("skipped objects")]
    assert len(notice) == 1 and "\x1b" not in notice[0] and "\r" not in notice[0]
    assert "Evil\\x1b[2J" in notice[0] and len(notice[0]) < 300


@pytest.mark.parametrize("value", ["true", "7", "{a: 1}"])
def test_config_sections_of_the_wrong_type(tmp_path: Path, value: str) -> None:
    cfg = write(tmp_path, "c.yaml", f'actions: "enqueue, allocate"\nconfigurations: {value}\ntiers: []\n')
    one_error(
        run("validate", str(write(tmp_path, "s.yaml", NODE_YAML)), "--config", str(cfg)),
        "c.yaml",
        "configurations",
    )
