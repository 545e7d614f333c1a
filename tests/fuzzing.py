"""A seeded mutator of corral's inputs and a checker of what corral does with them (SPEC.md §5).

Shared by ``tests/test_fuzz.py`` (a few hundred cases in the suite) and ``benchmarks/fuzz_inputs.py``
(10,000 cases with an exit-code histogram). Each case is built from one integer seed, so a failure is
reproduced by its seed alone. Mutations, applied one to three at a time, to the built-in example
snapshot, a scheduler configuration, and a simulator cluster spec and trace:

- structural: delete a field, swap a value's type, huge and malformed numbers and quantities, unicode,
  markup and control characters in names, duplicate objects, deep nesting;
- textual: a YAML alias bomb or a recursive alias, truncation (a half-written file), flipped bytes,
  binary garbage, a byte-order mark or UTF-16/UTF-32 encoding, integers of thousands of digits.

A case passes when corral exits 0 or 2, prints no traceback and no "internal error", prints exactly
one ``error:`` line when it exits 2, lets no RuntimeWarning escape, and leaves no half-written report
(the output folder is absent or complete, no temporary folder beside it).
"""

from __future__ import annotations

import copy
import json
import random
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "src" / "corral" / "examples" / "snapshot.yaml"
NOW = "2026-01-01T00:00:00Z"

CONFIG = {
    "actions": "enqueue, allocate, preempt, reclaim, backfill",
    "configurations": [{"name": "enqueue", "arguments": {"overcommit-factor": 1.2}}],
    "tiers": [
        {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
        {
            "plugins": [
                {"name": "drf"},
                {"name": "predicates"},
                {"name": "proportion"},
                {"name": "nodeorder", "arguments": {"leastrequested.weight": 1}},
                {"name": "binpack", "arguments": {"binpack.weight": 10}},
            ]
        },
    ],
}
CLUSTER = {"nodes": [{"name": "gpu", "count": 4, "gpus": 8}], "topology": {"tiers": [2]}}
TRACE = [
    ["name", "submit", "duration", "queue", "pods", "gpu"],
    ["a", "0", "100", "q1", "1", "8"],
    ["b", "0", "100", "q2", "2", "8"],
    ["c", "10", "50", "q1", "1", "4"],
    ["d", "20", "300", "q2", "4", "8"],
]

NAMES = [
    "[bold]x[/",
    "[/]",
    "a\x1b[31mred",
    "\u202eevil",
    "ünï",
    "x" * 300,
    "",
    " ",
    "a/b",
    "n\ny",
    "node-0",
    "default",
    "\x00",
    "[link=http://x]y[/link]",
]
QUANTITIES = [
    "1e999999999",
    "-1",
    "12Zi",
    "9" * 5000,
    "9" * 60,
    ".5m",
    "NaN",
    "inf",
    "1e-999999",
    "0x10",
    "1.5Gi",
    "0",
    "",
    " 8 ",
    "8Ei",
    "100Ei",
    "1" * 30 + "Ki",
    "1e308",
]
SCALARS: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**31,
    2**64,
    10**300,
    1.5,
    float("inf"),
    float("nan"),
    "",
    "x",
    "-1",
    "1e400",
    [],
    {},
    ["a"],
    {"a": 1},
    "2026-13-45T99:00:00Z",
]


def paths_of(obj: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and list indexes) into ``obj``, the empty path first."""
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += paths_of(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += paths_of(v, prefix + (i,))
    return out


def _set(root: Any, path: tuple, value: Any, delete: bool = False) -> Any:
    if not path:
        return value
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        parent.pop(path[-1], None)
    elif delete and isinstance(parent, list):
        parent.pop(path[-1])
    else:
        parent[path[-1]] = value
    return root


def _get(root: Any, path: tuple) -> Any:
    for key in path:
        root = root[key]
    return root


def _nest(value: Any, depth: int, rng: random.Random) -> Any:
    for _ in range(depth):
        value = [value] if rng.random() < 0.5 else {"k": value}
    return value


def mutate_structure(doc: Any, rng: random.Random) -> Any:
    """One structural mutation of a parsed document (changed in place and returned)."""
    paths = [p for p in paths_of(doc) if p]
    if not paths:
        return doc
    path = rng.choice(paths)
    kind = rng.randrange(7)
    try:
        if kind == 0:
            return _set(doc, path, None, delete=True)
        if kind == 1:
            return _set(doc, path, rng.choice(SCALARS))
        if kind == 2:
            return _set(doc, path, rng.choice(QUANTITIES))
        if kind == 3:
            name_paths = [p for p in paths if p[-1] in ("name", "namespace", "queue", "parentQueue")] or paths
            return _set(doc, rng.choice(name_paths), rng.choice(NAMES))
        if kind == 4 and isinstance(doc, list):
            doc.append(copy.deepcopy(rng.choice(doc)))  # a duplicate object
            return doc
        if kind == 5:
            return _set(doc, path, _nest(_get(doc, path), rng.choice([3, 50, 250]), rng))
        return _set(doc, path, rng.choice(NAMES + QUANTITIES))
    except (KeyError, IndexError, TypeError):
        return doc


def _bomb(rng: random.Random) -> str:
    width, levels = rng.choice([(9, 9), (10, 8), (4, 20)])
    lines = ["b0: &b0 lol"]
    for i in range(1, levels + 1):
        lines.append(f"b{i}: &b{i} [{', '.join([f'*b{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def mutate_text(text: str, rng: random.Random, yaml_doc: bool = True) -> bytes:
    """One textual mutation; the result is the file's bytes."""
    kind = rng.randrange(9)
    if kind == 0 and yaml_doc:
        # an alias bomb, in a document of its own or spliced into an object as an extra key
        bomb = _bomb(rng)
        if rng.random() < 0.5:
            return (text + "\n---\n" + bomb + "top: *b5\n").encode()
        indented = "".join("  " + line + "\n" for line in bomb.splitlines())
        return text.replace(
            "metadata:\n", "x:\n" + indented + "metadata:\n  annotations: {a: *b5}\n", 1
        ).encode()
    if kind == 1 and yaml_doc:
        return (text + "\n---\nx: &r [*r]\n").encode()
    if kind == 2:
        return text.encode()[: rng.randrange(len(text.encode()) + 1)]  # half-written
    if kind == 3:
        data = bytearray(text.encode())
        for _ in range(rng.randint(1, 8)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if kind == 4:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 3000)))
    if kind == 5:
        return rng.choice(
            [
                b"\xef\xbb\xbf" + text.encode(),
                text.encode("utf-16"),
                text.encode("utf-16-le"),
                text.encode("utf-32"),
                text.encode("latin-1", "replace"),
            ]
        )
    if kind == 6:
        return text.replace("'8'", "9" * rng.choice([400, 4400, 20000]), 1).encode()
    if kind == 7:
        depth = rng.choice([300, 5000, 60000])
        return (text + "\n---\n" + "x: " + "[" * depth + "]" * depth + "\n").encode()
    return text.encode()


@dataclass
class Outcome:
    seed: int
    target: str
    exit_code: int | None
    problem: str = ""  # empty when the case passed
    seconds: float = 0.0
    stderr: str = ""
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problem


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _dump(objs: Any, rng: random.Random) -> str | None:
    unicode = rng.random() < 0.5
    try:
        if isinstance(objs, list):
            return yaml.dump_all(objs, Dumper=_DUMPER, allow_unicode=unicode)
        return yaml.dump(objs, Dumper=_DUMPER, allow_unicode=unicode)
    except (yaml.YAMLError, RecursionError, ValueError):
        return None


def make_file(base: Any, rng: random.Random, *, csv: bool = False, mutate: bool = True) -> bytes:
    """The bytes of one mutated input file: 0-3 structural mutations, sometimes a textual one (none of
    either when not ``mutate``)."""
    if not mutate:
        return (_csv(base) if csv else (_dump(base, rng) or "")).encode()
    doc = copy.deepcopy(base)
    for _ in range(rng.randint(0, 3)):
        doc = mutate_structure(doc, rng)
    text = _csv(doc) if csv else (_dump(doc, rng) or _dump(base, rng) or "")
    if rng.random() < 0.35:
        return mutate_text(text, rng, yaml_doc=not csv)
    return text.encode()


def _csv(rows: Any) -> str:
    if not isinstance(rows, list):
        return str(rows)
    lines = []
    for row in rows:
        cells = row if isinstance(row, list) else [row]
        lines.append(",".join(json.dumps(c) if not isinstance(c, str) else c for c in cells))
    return "\n".join(lines) + "\n"


_SNAPSHOT: list = []


def snapshot_objects() -> list:
    """The example snapshot's objects (parsed once; callers copy before changing them)."""
    if not _SNAPSHOT:
        _SNAPSHOT.extend(
            d for d in yaml.load_all(SNAPSHOT.read_text(), Loader=yaml.CSafeLoader) if d is not None
        )
    return _SNAPSHOT


def schedule_case(seed: int) -> tuple[list[str], dict[str, bytes]]:
    """The arguments and files of one ``corral schedule`` case."""
    rng = random.Random(seed)
    files = {"snap.yaml": make_file(snapshot_objects(), rng)}
    args = ["schedule", "{dir}/snap.yaml", "--now", NOW, "--cycles", str(rng.choice([1, 2]))]
    if rng.random() < 0.4:
        files["config.yaml"] = make_file(CONFIG, rng)
        args += ["--config", "{dir}/config.yaml"]
    args += ["-o", rng.choice(["json", "table"])]
    return args, files


def simulate_case(seed: int) -> tuple[list[str], dict[str, bytes]]:
    """The arguments and files of one ``corral simulate`` case (a mutated cluster spec and trace)."""
    rng = random.Random(seed)
    which = rng.choice(["cluster", "trace", "both", "neither"])
    files = {
        "cluster.yaml": make_file(CLUSTER, rng, mutate=which in ("cluster", "both")),
        "trace.csv": make_file(TRACE, rng, csv=True, mutate=which in ("trace", "both")),
    }
    args = [
        "simulate",
        "--cluster",
        "{dir}/cluster.yaml",
        "--workload",
        "{dir}/trace.csv",
        "--until",
        "2h",
        "--no-progress",
        "-o",
        "{dir}/out/report",
    ]
    if rng.random() < 0.2:
        files["config.yaml"] = make_file(CONFIG, rng)
        args += ["--config", "{dir}/config.yaml"]
    if rng.random() < 0.3:
        option = rng.choice(
            [
                "--schedule-period",
                "--scale",
                "--startup-delay",
                "--grace-period",
                "--until",
                "--checkpoint-interval",
                "--start",
                "--end",
                "--seed",
                "--restart-policy",
            ]
        )
        args += [option, rng.choice(OPTION_VALUES)]
    return args, files


OPTION_VALUES = [
    "0",
    "-1",
    "1e300",
    "1e-300",
    "nan",
    "inf",
    "1e9",
    "10",
    "0.5",
    "1d",
    "36h",
    "x",
    "",
    "9" * 5000,
    "pods",
    "job",
    "1e-9",
]


CASES: dict[str, Callable[[int], tuple[list[str], dict[str, bytes]]]] = {
    "schedule": schedule_case,
    "simulate": simulate_case,
}


def _check_report(folder: Path, exit_code: int) -> str:
    out = folder / "out"
    if not out.exists():
        return ""
    leftovers = [p.name for p in out.iterdir() if p.name != "report"]
    if leftovers:
        return f"temporary files left beside the report: {leftovers}"
    report = out / "report"
    if report.exists() and not ((report / "index.html").is_file() and (report / ".corral-report").is_file()):
        return "a half-written report"
    if exit_code == 0 and not report.exists():
        return "exit 0 without a report"
    return ""


# Informational lines corral may print on stderr beside the one error line (escaped like it).
NOTICES = ("skipped objects corral does not serve", "pods bound to nodes not in the snapshot")


def judge(exit_code: int | None, stdout: str, stderr: str) -> str:
    """What is wrong with one run's outcome ('' when nothing)."""
    text = stdout + stderr
    if "Traceback" in text:
        return "traceback"
    if "internal error" in text or exit_code == 1:
        return "internal error (exit 1)"
    if exit_code not in (0, 2):
        return f"exit code {exit_code}"
    lines = [x for x in stderr.splitlines() if x.strip()]
    notices = [x for x in lines if x.startswith(NOTICES)]
    if any(not x.isprintable() or len(x) > 2000 for x in notices):
        return "an unescaped or unbounded notice"
    if exit_code == 2:
        errors = [x for x in lines if x not in notices]
        if len(errors) != 1 or not errors[0].startswith("error: ") or not errors[0].isprintable():
            return "exit 2 without exactly one (escaped) error line"
    elif "Warning" in stderr:
        return "a warning reached stderr"
    return ""


def run_in_process(target: str, seed: int) -> Outcome:
    """Run one case through the CLI in this process (fast); RuntimeWarnings count as failures."""
    from typer.testing import CliRunner

    from corral.cli import app

    args, files = CASES[target](seed)
    folder = Path(tempfile.mkdtemp(prefix="corral-fuzz-"))
    try:
        for name, data in files.items():
            (folder / name).write_bytes(data)
        argv = [a.replace("{dir}", str(folder)) for a in args]
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = CliRunner().invoke(app, argv)
        seconds = time.perf_counter() - start
        problem = judge(res.exit_code, res.stdout, res.stderr)
        if not problem and res.exception is not None and not isinstance(res.exception, SystemExit):
            problem = f"exception {type(res.exception).__name__}: {res.exception}"
        runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
        if not problem and runtime:
            problem = f"RuntimeWarning: {runtime[0].message} ({runtime[0].filename}:{runtime[0].lineno})"
        problem = problem or _check_report(folder, res.exit_code)
        return Outcome(seed, target, res.exit_code, problem, seconds, res.stderr[-2000:], files)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_subprocess(target: str, seed: int, timeout: float = 60.0, memory_mb: int = 6000) -> Outcome:
    """Run one case as ``corral`` in a child process with a time and memory bound."""
    import resource
    import subprocess
    import sys

    args, files = CASES[target](seed)
    folder = Path(tempfile.mkdtemp(prefix="corral-fuzz-"))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))

    try:
        for name, data in files.items():
            (folder / name).write_bytes(data)
        argv = [a.replace("{dir}", str(folder)) for a in args]
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-c", "from corral.cli import main; main()", *argv],
                capture_output=True,
                text=True,
                timeout=timeout,
                preexec_fn=limit,
                cwd=folder,
                errors="replace",
            )
        except subprocess.TimeoutExpired:
            return Outcome(seed, target, None, f"hang: more than {timeout:g} s", timeout, "", files)
        seconds = time.perf_counter() - start
        problem = judge(proc.returncode, proc.stdout, proc.stderr)
        if proc.returncode < 0:
            problem = f"killed by signal {-proc.returncode}"
        problem = problem or _check_report(folder, proc.returncode)
        return Outcome(seed, target, proc.returncode, problem, seconds, proc.stderr[-2000:], files)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def reproducer(outcome: Outcome) -> str:
    """A shell recipe that rebuilds the failing case's files and runs it."""
    return (
        f'python -c \'import sys; sys.path.insert(0, "."); from tests.fuzzing import write_case; '
        f'write_case("{outcome.target}", {outcome.seed}, "/tmp/case")\' && '
        f"cat /tmp/case/command.txt  # then run that command"
    )


def write_case(target: str, seed: int, folder: str) -> list[str]:
    """Write one case's files into ``folder`` and its command line into ``command.txt``."""
    args, files = CASES[target](seed)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out / name).write_bytes(data)
    argv = ["corral"] + [a.replace("{dir}", str(out)) for a in args]
    (out / "command.txt").write_text(" ".join(json.dumps(a) if " " in a else a for a in argv) + "\n")
    return argv
