"""Durations and times (corral.model.clock) and the typed accessors of manifest objects (corral.manifests.fields)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from corral.errors import InputError
from corral.manifests.fields import Obj
from corral.model.clock import format_time, parse_duration, parse_time

T0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("90s", 90),
        ("5m", 300),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("250ms", 0.25),
        ("2d", 172800),
        ("1h0m10s", 3610),
        ("100us", 1e-4),
        ("10ns", 1e-8),
        ("0s", 0),
        ("42", 42),
        ("2.5", 2.5),
        (90, 90),
        (1.5, 1.5),
    ],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "5x", "m5", "5 m", "-5s", "1h-5m", "s", True, None, [], -3])
def test_parse_duration_rejects(bad: object) -> None:
    with pytest.raises(InputError) as err:
        parse_duration(bad, file="f.yaml", obj="Queue q", field="spec.preemptMinRuntime")
    assert err.value.describe().startswith("f.yaml: Queue q: field spec.preemptMinRuntime: ")


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00z",
        "2026-01-01T01:00:00+01:00",
        "2026-01-01T00:00:00",
        "2026-01-01T00:00:00.000Z",
        "2026-01-01 00:00:00Z",
    ],
)
def test_parse_time(text: str) -> None:
    assert parse_time(text) == T0


def test_parse_time_accepts_datetimes_yaml_already_parsed() -> None:
    assert parse_time(datetime(2026, 1, 1, tzinfo=UTC)) == T0
    assert parse_time(datetime(2026, 1, 1)) == T0  # naive means UTC


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01T00:00:00Z", "", 1767225600, None])
def test_parse_time_rejects(bad: object) -> None:
    with pytest.raises(InputError):
        parse_time(bad, field="--now")


def test_format_time_round_trip() -> None:
    assert format_time(T0) == "2026-01-01T00:00:00Z"
    assert parse_time(format_time(T0 + 3661)) == T0 + 3661


def test_obj_identity_and_errors() -> None:
    o = Obj({"metadata": {"name": "p", "namespace": "ns"}}, "snap.yaml", "Pod", True)
    assert o.ident == "Pod ns/p"
    err = o.error("bad", "spec.x")
    assert err.describe() == "snap.yaml: Pod ns/p: field spec.x: bad"
    n = Obj({"metadata": {"name": "n1", "namespace": "ignored"}}, "snap.yaml", "Node", False)
    assert n.ident == "Node n1"
    assert Obj({"metadata": {"name": "p"}}, "f", "Pod", True).namespace == "default"


@pytest.mark.parametrize(
    "raw, field",
    [
        ({}, "metadata"),
        ({"metadata": "x"}, "metadata"),
        ({"metadata": {}}, "metadata.name"),
        ({"metadata": {"name": ""}}, "metadata.name"),
    ],
)
def test_obj_needs_metadata_and_name(raw: dict, field: str) -> None:
    with pytest.raises(InputError) as err:
        Obj(raw, "f.yaml", "Node", False)
    assert err.value.field == field and err.value.file == "f.yaml"


def test_obj_accessors() -> None:
    o = Obj({"metadata": {"name": "x"}, "spec": 3}, "f", "Queue", False)
    with pytest.raises(InputError, match="expected a mapping"):
        o.section("spec")
    assert o.strmap({"a": 1, "b": None}, "p") == {"a": "1", "b": ""}
    with pytest.raises(InputError):
        o.strmap(["a"], "metadata.labels")
    assert o.integer("3", "p") == 3
    with pytest.raises(InputError):
        o.integer("x", "p")
    with pytest.raises(InputError):
        o.integer(True, "p")
    with pytest.raises(InputError):
        o.integer(-1, "p", minimum=0)
    assert o.number("1.5", "p") == 1.5
    with pytest.raises(InputError):
        o.number("many", "p")
    assert o.mapping(None, "p") == {} and o.listof(None, "p") == []
    with pytest.raises(InputError):
        o.listof("x", "p")
    assert o.string(None, "p") == "" and o.string(5, "p") == "5"
    with pytest.raises(InputError):
        o.string(["a"], "p")
    assert o.boolean(None, "p", True) is True and o.boolean("false", "p", True) is False
    with pytest.raises(InputError):
        o.boolean("maybe", "p", True)
