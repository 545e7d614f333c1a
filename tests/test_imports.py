"""The package's import graph (DESIGN.md, "The target plan"): no import circle anywhere in ``corral``, no
arrow from ``model/`` or ``inputs/`` up, and no import of a private name across packages.

Every import counts: module-level ones, those under ``if TYPE_CHECKING:`` and those inside functions (an
import moved into a function to dodge a circle at start-up is still an arrow between the two modules).
An import names a module of the package (``import corral.sim.report``, ``from corral.sim import report``,
``from .report import x``); ``from corral.sim.report import summarize`` is an arrow to
``corral.sim.report``, ``from corral.model import Cluster`` one to the package ``corral.model`` (its
``__init__``). The packages a dotted name passes through are not arrows: Python initialises them, but a
package importing its own submodules is not a circle.

A private name is one that starts with ``_`` (not a dunder): ``from corral.manifests.build import _nodes``
in ``corral.kube.model`` reaches into another package's insides, so each package shows the others only
public names (a module's package is its folder: ``corral.sim.loaders.swf`` importing ``_assemble`` from
``corral.sim.workload`` crosses from ``corral.sim.loaders`` into ``corral.sim``). Within one package a
module may share private helpers with its siblings.

The checker is the code below, read from the source files (no module is imported); its own tests build
small packages in a temporary folder, so a checker that finds nothing cannot pass for a clean package.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

#: what ``corral.model`` may import besides itself: the floor below it (DESIGN.md), which imports
#: nothing of corral
MODEL_MAY_IMPORT = frozenset({"corral.errors", "corral.terminal"})
#: what ``corral.inputs`` (bounded reading, floor 2 beside the model) may import besides itself
INPUTS_MAY_IMPORT = MODEL_MAY_IMPORT

#: private names imported across packages that are still to be made public (their owners' modules),
#: as ``importer -> module.name``; the check fails on any other, so the list can only shrink
KNOWN_PRIVATE_IMPORTS: frozenset[str] = frozenset()

Graph = dict[str, dict[str, list[int]]]


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root`` by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _known(name: str, known: Mapping[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package (None: none is)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(name: str, path: Path, known: Mapping[str, Path]) -> dict[str, list[int]]:
    """The modules of the package that module ``name`` imports, each with the lines that import it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: dict[str, list[int]] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [_known(alias.name, known) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.append(full if full in known else _known(base, known))
        for target in dict.fromkeys(targets):  # one line per import statement
            if target is not None and target != name:
                out.setdefault(target, []).append(node.lineno)
    return out


def graph(root: Path) -> tuple[Graph, dict[str, Path]]:
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}, known


def circles(arrows: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without
    recursion), each sorted; in the order found."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in arrows:
        if start in index:
            continue
        work = [(start, iter(list(arrows.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, rest = work[-1]
            for nxt in rest:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(list(arrows.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def describe(component: list[str], arrows: Graph, known: Mapping[str, Path]) -> str:
    """One circle with the import lines that make it, for the failure message."""
    lines = [f"circle of {len(component)} modules:"]
    for name in component:
        for target, at in sorted(arrows[name].items()):
            if target in component:
                where = ", ".join(str(n) for n in at)
                lines.append(f"  {name} -> {target}  ({known[name].name} line {where})")
    return "\n".join(lines)


def upward_from(arrows: Graph, package: str, may: frozenset[str]) -> list[str]:
    """Every arrow from ``package`` (or a module in it) to a module outside it and ``may``."""

    def inside(name: str) -> bool:
        return name == package or name.startswith(package + ".")

    return [
        f"{name} -> {target} (line {', '.join(map(str, at))})"
        for name, targets in sorted(arrows.items())
        if inside(name)
        for target, at in sorted(targets.items())
        if not inside(target) and target not in may
    ]


def upward_from_model(arrows: Graph) -> list[str]:
    """Every arrow from ``corral.model`` (or a module in it) to a module outside it and its floor."""
    return upward_from(arrows, "corral.model", MODEL_MAY_IMPORT)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _package_of(module: str, known: Mapping[str, Path]) -> str:
    """The package a module belongs to: itself for a package (``__init__.py``), else its folder."""
    return module if known[module].name == "__init__.py" else module.rpartition(".")[0]


def _private_modules(dotted: str, known: Mapping[str, Path]) -> list[tuple[str, str]]:
    """The private modules along ``dotted`` as (their package, their name)."""
    parts = dotted.split(".")
    return [
        (".".join(parts[:i]), parts[i])
        for i in range(1, len(parts))
        if _private(parts[i]) and ".".join(parts[: i + 1]) in known
    ]


def private_imports(root: Path) -> dict[str, list[int]]:
    """Every import of a private name from a module of another package, as ``importer -> module.name``
    with its lines. A private module (``from corral.sim import _impl``, ``import corral.sim._impl``)
    counts as a private name of its package."""
    known = modules(root)
    found: dict[str, list[int]] = {}
    for name, path in known.items():
        here = _package_of(name, known)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            hits: list[tuple[str, str]] = []  # (the package or module that holds it, private name)
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = here.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                hits += _private_modules(base, known)
                source = _known(base, known)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in known:
                        hits += _private_modules(full, known)[-1:] if _private(alias.name) else []
                    elif source is not None and _private(alias.name):
                        hits.append((source, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    hits += _private_modules(alias.name, known)
            for source, private in dict.fromkeys(hits):
                if _package_of(source, known) != here:
                    found.setdefault(f"{name} -> {source}.{private}", []).append(node.lineno)
    return found


#: the package's sources in this checkout (``corral`` is a namespace package: it has no ``__file__``)
ROOT = Path(__file__).resolve().parents[1] / "src" / "corral"


@functools.cache
def _corral() -> tuple[Graph, dict[str, Path]]:
    return graph(ROOT)


# ----------------------------------------------------------------------------------------- the package


def test_no_import_circle_in_corral() -> None:
    arrows, known = _corral()
    assert len(known) > 100  # the package itself was read, not an empty folder
    found = circles(arrows)
    assert not found, "\n\n".join(describe(c, arrows, known) for c in found)


def test_model_imports_only_itself_and_the_floor_below() -> None:
    arrows, _ = _corral()
    assert any(n.startswith("corral.model.") for n in arrows)
    assert upward_from_model(arrows) == []


def test_inputs_imports_only_itself_and_the_floor_below() -> None:
    arrows, _ = _corral()
    assert "corral.inputs.documents" in arrows
    assert upward_from(arrows, "corral.inputs", INPUTS_MAY_IMPORT) == []


def test_the_config_loader_reads_through_inputs_not_manifests() -> None:
    arrows, _ = _corral()
    config = arrows["corral.framework.config"]
    assert "corral.inputs" in config
    assert [t for t in config if t == "corral.manifests" or t.startswith("corral.manifests.")] == []


#: the clock's names (DESIGN.md: the clock lives in the model) and the one module they come from
CLOCK = frozenset({"parse_time", "format_time", "parse_duration", "annotated_duration", "PARSED_TIMES"})


def test_the_clock_is_imported_from_the_model_only() -> None:
    """No re-export of the clock stands in for ``corral.model.clock`` (e.g. ``corral.manifests.fields``)."""
    elsewhere = []
    for name, path in modules(ROOT).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("corral")
                and node.module != "corral.model.clock"
                and CLOCK & {a.name for a in node.names}
            ):
                elsewhere.append(f"{name} line {node.lineno}: from {node.module}")
    assert elsewhere == []


def test_no_private_name_imported_across_packages() -> None:
    found = private_imports(ROOT)
    new = {k: v for k, v in found.items() if k not in KNOWN_PRIVATE_IMPORTS}
    assert not new, "\n".join(
        f"{k} (line {', '.join(map(str, v))}): make the name public" for k, v in new.items()
    )


def test_the_floor_below_model_imports_nothing_of_corral() -> None:
    arrows, _ = _corral()
    for name in MODEL_MAY_IMPORT:
        assert arrows[name] == {}, name


# ------------------------------------------------------------------------------------------ the checker


def _package(tmp_path: Path, files: Mapping[str, str]) -> Path:
    root = tmp_path / "corral"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_checker_finds_a_circle_through_type_checking_and_function_imports(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "sim/__init__.py": "",
            "sim/engine.py": "from corral.sim.metrics import EngineMetrics\n",
            "sim/metrics.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from corral.sim.speed import SpeedTracker\n"
            ),
            "sim/speed.py": "def rate():\n    from corral.sim import engine\n    return engine\n",
            "sim/report.py": "from corral.sim.engine import x\n",
        },
    )
    arrows, known = graph(root)
    assert circles(arrows) == [["corral.sim.engine", "corral.sim.metrics", "corral.sim.speed"]]
    text = describe(circles(arrows)[0], arrows, known)
    assert "corral.sim.speed -> corral.sim.engine  (speed.py line 2)" in text


def test_checker_resolves_relative_imports_and_packages(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "kube/__init__.py": "from .apply import Applier\n",
            "kube/apply.py": "from . import podgroups\n",
            "kube/podgroups.py": "from ..kube.apply import ApplyReport\n",
            "manifests/__init__.py": "",
            "manifests/kinds.py": "import corral.manifests.native as native\n",
            "manifests/native.py": "from corral.manifests import kinds\n",
        },
    )
    arrows, _ = graph(root)
    assert arrows["corral.kube"] == {"corral.kube.apply": [1]}
    assert sorted(map(sorted, circles(arrows))) == [
        ["corral.kube.apply", "corral.kube.podgroups"],
        ["corral.manifests.kinds", "corral.manifests.native"],
    ]


def test_checker_passes_a_package_without_circles(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "errors.py": "",
            "model/__init__.py": "from corral.model.cluster import Cluster\n",
            "model/cluster.py": "from corral.errors import InputError\n",
            "sim/__init__.py": "",
            "sim/engine.py": "from corral.model import Cluster\nimport numpy\n",
        },
    )
    arrows, _ = graph(root)
    assert circles(arrows) == []
    assert upward_from_model(arrows) == []


def test_checker_finds_an_arrow_from_model_up(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "model/__init__.py": "",
            "model/work.py": "def f():\n    from corral.manifests.fields import parse_time\n",
            "manifests/__init__.py": "",
            "manifests/fields.py": "",
        },
    )
    arrows, _ = graph(root)
    assert upward_from_model(arrows) == ["corral.model.work -> corral.manifests.fields (line 2)"]


def test_checker_finds_private_names_imported_across_packages(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "manifests/__init__.py": "from corral.manifests.build import _nodes as nodes\n",
            "manifests/build.py": "def _nodes(): ...\n",
            "manifests/load.py": "from corral.manifests.build import _nodes\n",  # same package: allowed
            "kube/__init__.py": "",
            "kube/model.py": (
                "from typing import TYPE_CHECKING\n"
                "from corral.manifests.build import __all__, _nodes, build\n"
                "if TYPE_CHECKING:\n"
                "    from ..manifests import _hidden\n"
                "def f():\n"
                "    import corral.manifests._hidden\n"
            ),
            "manifests/_hidden.py": "",
            "sim/__init__.py": "",
            "sim/workload.py": "",
            "sim/loaders/__init__.py": "",
            "sim/loaders/swf.py": "from corral.sim.workload import _assemble\n",
        },
    )
    assert private_imports(root) == {
        "corral.kube.model -> corral.manifests._hidden": [4, 6],
        "corral.kube.model -> corral.manifests.build._nodes": [2],
        "corral.sim.loaders.swf -> corral.sim.workload._assemble": [1],
    }
