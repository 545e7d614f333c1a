"""The C loader's own construction (corral.inputs.construction.FastConstruction) builds exactly what PyYAML's
SafeConstructor builds, and hands every document it does not cover back to it (same values, same errors)."""

from __future__ import annotations

import pytest
import yaml

from corral.errors import InputError
from corral.inputs import load_yaml_all
from corral.inputs.construction import FastCLoader

DOCS = [
    "a: 1\nb: -0x1F\nc: 0o17\nd: 1_000\ne: 1.5e3\nf: .inf\ng: .NaN\nh: true\ni: No\nj: ~\nk: null\nl:\n",
    "when: 2026-01-01T00:00:00Z\nday: 2026-01-02\nquoted: '2026-01-01'\nname: \"x\"\n",
    "list: [1, two, {three: 3}, [4, [5]]]\nempty: {}\nnone: []\n",
    "- a\n- - b\n  - c: d\n- {e: [f, {g: h}]}\n",
    "1: one\n2.5: float key\ntrue: bool key\nnull: null key\n2026-01-01: date key\n",
    "dup: 1\ndup: 2\n",
    "base: &b {x: 1}\nuse:\n  <<: *b\n  y: 2\n",  # anchors: the bounded loader
    "base: {x: 1}\nuse:\n  <<: {x: 3}\n  y: 2\n",  # merge key without an anchor
    "= : eq key\n",
    "s: !!set {a, b}\no: !!omap [{a: 1}, {b: 2}]\np: !!pairs [{a: 1}]\n",
    "b: !!binary aGVsbG8=\nstr: !!str 12\nint: !!int '12'\nfloat: !!float '1'\n",
    "text: |\n  line one\n  line two\nfolded: >\n  a\n  b\n",
    "",
    "--- 1\n--- [a]\n---\n---\nx: y\n",
    "sexagesimal: 1:30\nocto: 017\n",
]


@pytest.mark.parametrize("text", DOCS)
def test_same_values_as_pyyaml(text: str) -> None:
    expected = [d for d in yaml.load_all(text, Loader=yaml.SafeLoader) if d is not None]
    got = load_yaml_all(text, "t")
    assert repr(got) == repr(expected)  # repr: NaN != NaN, and types must match (1 vs 1.0)
    if "&" not in text:
        assert repr([d for d in yaml.load_all(text, Loader=FastCLoader) if d is not None]) == repr(expected)


@pytest.mark.parametrize(
    "text",
    ["a: !custom 1\n", "? [a, b]\n: 1\n", "? {a: 1}\n: 1\n", "a: !!int x\n", "use:\n  <<: [1]\n"],
)
def test_same_errors_as_pyyaml(text: str) -> None:
    """corral's loader fails where PyYAML's safe loader fails, and its one line carries PyYAML's own
    problem (read from PyYAML at test time: the test does not depend on the library's wording)."""
    with pytest.raises((yaml.YAMLError, ValueError, TypeError)) as reference:
        list(yaml.load_all(text, Loader=yaml.SafeLoader))
    problem = getattr(reference.value, "problem", None) or str(reference.value).splitlines()[0]
    with pytest.raises(InputError) as got:
        load_yaml_all(text, "t")
    assert problem.split(":")[0] in str(got.value)


def test_too_many_digits_is_corrals_own_error() -> None:
    with pytest.raises(InputError, match="more digits than the limit"):
        load_yaml_all("a: %s\n" % ("9" * 5000), "t")


def test_plain_scalars_resolve_alike_when_repeated() -> None:
    text = "".join(f"- {v}\n" for v in ["1", "x", "true", "1", "x", "true", "'1'", "~", "~"])
    assert load_yaml_all(text, "t") == [[1, "x", True, 1, "x", True, "1", None, None]]
