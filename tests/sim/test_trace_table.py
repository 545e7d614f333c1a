"""Unit tests of corral.sim.trace_table: a trace's cells read as checked arrays, every bad cell one
InputError naming the file, the 1-based data row and the column. The loaders built on it are tested in
test_workload.py and test_trace_formats.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from corral.errors import InputError
from corral.sim.trace_table import TraceTable, read_table


def _table(**columns: list) -> TraceTable:
    return TraceTable(pd.DataFrame(columns), "t.csv")


def test_numbers_take_their_default_and_refuse_what_is_not_allowed() -> None:
    t = _table(pods=["2", " ", "3"])
    assert t.number("pods", default=1, integer=True, low=1).tolist() == [2.0, 1.0, 3.0]
    assert t.number("missing", default=7).tolist() == [7.0, 7.0, 7.0]
    with pytest.raises(InputError) as err:
        _table(pods=["2", "1.5"]).number("pods", integer=True, what="an integer")
    assert (err.value.file, err.value.obj, err.value.field) == ("t.csv", "row 2", "pods")
    with pytest.raises(InputError, match="missing value"):
        t.number("pods")  # no default: a blank cell is an error
    with pytest.raises(InputError, match="at most 1e"):
        _table(x=["1e11"]).number("x")


def test_quantities_read_kubernetes_suffixes() -> None:
    t = _table(memory=["4Gi", "500", ""], cpu=["500m", "2", "1"])
    assert t.quantity("memory", default=0.0, what="bytes").tolist() == [4 * 2**30, 500.0, 0.0]
    assert t.quantity("cpu", default=1.0, what="cores").tolist() == [0.5, 2.0, 1.0]
    with pytest.raises(InputError) as err:
        _table(memory=["4Gi", "lots"]).quantity("memory", default=0.0, what="bytes")
    assert err.value.obj == "row 2"


def test_seconds_read_numbers_or_times_and_keep_row_numbers_after_keep(tmp_path: Path) -> None:
    assert _table(t=["0", "90.5"]).seconds("t").tolist() == [0.0, 90.5]
    stamps = _table(t=["1970-01-01 00:01:00", "1970-01-01T00:02:00Z"]).seconds("t")
    assert np.array_equal(stamps, [60.0, 120.0])
    path = tmp_path / "trace.csv"
    path.write_text("name,t\na,2017-10-01 00:00:00\nb,2017-10-01 00:00:10\nc,soon\n")
    table = read_table(path)
    table.keep(np.array([False, True, True]))
    with pytest.raises(InputError) as err:
        table.seconds("t")
    assert (err.value.file, err.value.obj, err.value.field) == (str(path), "row 3", "t")
