"""API answers are input like any file: a hostile answer is an error, never a crash."""

from __future__ import annotations

import pytest

from corral.errors import InputError
from corral.kube.api import _json, _message


def test_deeply_nested_answer_is_refused_not_a_recursion_error():
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(InputError):
        _json(deep, "/api/v1/pods")


def test_huge_integer_answer_is_refused():
    with pytest.raises(InputError):
        _json(b'{"a": ' + b"9" * 10_000 + b"}", "/api/v1/pods")


def test_error_message_of_a_hostile_body_is_cut_short():
    assert _message(b"[" * 100_000) == ("[" * 200)
    assert _message(b'{"message": "pods is forbidden"}') == "pods is forbidden"
