"""Plugins from outside the package (src/corral/registry.py, docs/plugins.md): the example plugin of
docs/examples/plugin is found through its ``corral.plugins`` entry point, checked like a built-in one,
and changes decisions when configured; a package that breaks the contract is refused in one line."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.errors import ConfigError
from corral.framework.config import parse_config
from corral.framework.cycle import run_cycle
from corral.registry import make_registry
from tests.framework.fakes import NOW, cluster, node, pod, podgroup

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "plugin"


def _distribution(root: Path, name: str, entry_points: str) -> None:
    """An installed distribution as pip leaves it: a ``.dist-info`` with its entry points."""
    info = root / f"{name}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


@pytest.fixture
def on_path(tmp_path: Path) -> Iterator[Path]:
    sys.path[:0] = [str(tmp_path), str(EXAMPLE)]
    try:
        yield tmp_path
    finally:
        for p in (str(tmp_path), str(EXAMPLE)):
            sys.path.remove(p)
        for mod in [m for m in sys.modules if m.startswith(("corral_zone_preference", "broken_plugin"))]:
            del sys.modules[mod]


def test_the_example_plugin_loads_through_its_entry_point_and_decides(on_path: Path) -> None:
    text = (EXAMPLE / "pyproject.toml").read_text()
    line = next(x for x in text.splitlines() if x.startswith("zone-preference =")).replace('"', "")
    _distribution(on_path, "corral_zone_preference", f"[corral.plugins]\n{line}\n")
    registry = make_registry()
    cls = registry.plugin_class("zone-preference")
    assert cls is not None and cls.__module__ == "corral_zone_preference"
    assert make_registry(entry_points=False).plugin_class("zone-preference") is None

    zone = "topology.kubernetes.io/zone"

    def placed(plugins: list[dict]) -> str:
        c = cluster(
            node("a1", labels={zone: "a"}),
            node("b1", labels={zone: "b"}),
            podgroup("job"),
            pod("job-0", 1, group="job"),
        )
        conf = parse_config({"actions": "allocate", "tiers": [{"plugins": plugins}]}, registry, "test")
        (bind,) = run_cycle(c, conf, registry, NOW).binds
        return bind.node

    base = [{"name": "gang"}, {"name": "predicates"}]
    assert placed(base) == "a1"  # ties go to the first node
    prefer_b = {"name": "zone-preference", "arguments": {"zone-preference.zones": "b"}}
    assert placed([*base, prefer_b]) == "b1"


def test_a_package_that_breaks_the_contract_is_refused_in_one_line(on_path: Path) -> None:
    (on_path / "broken_plugin.py").write_text(
        "from corral.framework.extension import JobOrder\n"
        "from corral.framework.plugin import Plugin\n\n\n"
        "class Broken(Plugin, JobOrder):\n"
        "    name = 'broken'\n\n"
        "    def job_order(self, a, b):\n"
        "        return 0\n\n"
        "    def jb_order(self, a, b):\n"
        "        return 0\n"
    )
    _distribution(on_path, "broken_plugin", "[corral.plugins]\nbroken = broken_plugin:Broken\n")
    with pytest.raises(ConfigError, match=r"entry point 'broken' .*public method 'jb_order' belongs to no"):
        make_registry().plugin_names()


def test_an_entry_point_must_not_take_a_built_in_name(on_path: Path) -> None:
    _distribution(
        on_path,
        "corral_zone_preference",
        "[corral.plugins]\ngang = corral_zone_preference:ZonePreferencePlugin\n",
    )
    with pytest.raises(ConfigError, match=r"the class is named 'zone-preference'; name the entry point"):
        make_registry().plugin_names()
