"""Reading a trace file's bytes and rows, the same way for every workload loader and machine list.

Contracts (docs/input.md, docs/traces.md):

* **Compression by content.** A file whose first bytes are gzip's magic (``1f 8b``) is decompressed,
  whatever its name; a file named ``.gz`` that is not gzip is read as it is. The decompressed size is
  held to the same limit as a file's size (``CORRAL_MAX_INPUT_BYTES``), so a gzip bomb is one error.
* **Table kind by content.** Parquet (magic ``PAR1``) is read as Parquet; anything else is text (UTF-8,
  with or without a byte-order mark, or UTF-16 with one: ``corral.inputs.decode``).
* **Every row whole.** A CSV row with fewer fields than the header is an error naming its data row
  (1-based, the header not counted) and the first column it lacks — never a row whose missing cells
  quietly take defaults (a truncated ``gpu`` cell would make a 0-GPU job). A row with more fields than
  the header is an error too.
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from pathlib import Path

import pandas as pd

from corral.errors import InputError
from corral.inputs import decode, limits

__all__ = [
    "GZIP_MAGIC",
    "PARQUET_MAGIC",
    "head_text",
    "read_bytes",
    "read_csv_rows",
    "read_frame",
    "read_lines",
]

GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"


def _raw(path: Path, bound: int) -> bytes:
    if not path.exists():
        raise InputError("no such file", file=str(path))
    if not path.is_file():
        raise InputError("not a file", file=str(path))
    size = path.stat().st_size
    if size > bound:
        raise InputError(
            f"the file is {size} bytes, more than the limit of {bound} (raise it with CORRAL_MAX_INPUT_BYTES)",
            file=str(path),
        )
    try:
        with path.open("rb") as handle:
            return handle.read(bound + 1)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None


def read_bytes(path: str | Path) -> bytes:
    """The file's bytes, gunzipped when they start with gzip's magic (by content, not by name)."""
    p, bound = Path(path), limits().max_bytes
    data = _raw(p, bound)
    if not data.startswith(GZIP_MAGIC):
        return data
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
            out = handle.read(bound + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"cannot read: gzip data is damaged ({exc})", file=str(path)) from None
    if len(out) > bound:
        raise InputError(
            f"the file decompresses to more than the limit of {bound} bytes (raise it with "
            "CORRAL_MAX_INPUT_BYTES)",
            file=str(path),
        )
    return out


def read_lines(path: str | Path) -> list[str]:
    """The decoded text of the file (gunzipped by content) as lines without their line ends."""
    return decode(read_bytes(path), str(path), InputError).splitlines()


def _too_short(path: str, header: list[str], row: int, fields: list[str]) -> InputError:
    if len(fields) < len(header):
        missing = header[len(fields)].strip() or f"column {len(fields) + 1}"
        return InputError(
            f"truncated row: {len(fields)} of the header's {len(header)} fields (no value for {missing!r})",
            file=path,
            obj=f"row {row}",
            field=missing,
        )
    return InputError(
        f"{len(fields)} fields, more than the header's {len(header)}", file=path, obj=f"row {row}"
    )


def read_csv_rows(path: str | Path, *, delimiter: str = ",", header: list[str] | None = None) -> pd.DataFrame:
    """A delimited text table as a DataFrame of stripped strings (ids such as ``6214e9`` stay text).

    With ``header`` the file has no header line and every row must have exactly that many fields;
    otherwise the first line is the header. Blank lines are skipped (their rows are not counted).
    A row with a different number of fields is an InputError naming the row.
    """
    text = decode(read_bytes(path), str(path), InputError)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, skipinitialspace=True)
    try:
        rows = [r for r in reader if len(r) > 1 or (r and r[0].strip())]  # blank lines are not rows
    except csv.Error as exc:
        raise InputError(f"cannot read trace: {exc}", file=str(path)) from None
    if header is None:
        if not rows:
            raise InputError("cannot read trace: the file is empty (no header line)", file=str(path))
        header, rows = [c.strip() for c in rows[0]], rows[1:]
        seen = {c for i, c in enumerate(header) if c in header[:i]}
        if seen:
            raise InputError(f"the header names column {sorted(seen)[0]!r} twice", file=str(path))
    width = len(header)
    for index, fields in enumerate(rows, start=1):
        if len(fields) != width:
            raise _too_short(str(path), header, index, fields)
    frame = pd.DataFrame(rows, columns=header, dtype=object) if rows else pd.DataFrame(columns=header)
    return frame.apply(lambda col: col.str.strip()) if rows else frame.astype(str)


def read_frame(path: str | Path) -> pd.DataFrame:
    """A CSV (any name; gzip by content) or Parquet (by its magic) table. CSV cells stay text."""
    p = Path(path)
    data = read_bytes(p)
    if data.startswith(PARQUET_MAGIC):
        try:
            return pd.read_parquet(io.BytesIO(data))
        except (ValueError, OSError) as exc:  # pyarrow's parse errors are ValueErrors or OSErrors
            raise InputError(f"cannot read trace: {exc}", file=str(path)) from None
    if p.name.lower().endswith((".parquet", ".pq")):
        raise InputError(
            "cannot read trace: not a Parquet file (it lacks the PAR1 magic bytes)", file=str(path)
        )
    head = data[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head[:1] in (b"{", b"["):
        raise InputError(
            "unknown trace format: the file looks like JSON (expected CSV or Parquet, gzip-compressed or not)",
            file=str(path),
        )
    return read_csv_rows(p)


def head_text(path: str | Path, size: int = 65536) -> str:
    """Up to ``size`` characters from the start of the file (gunzipped by content), for telling formats
    apart; undecodable bytes are replaced (the loader that reads the whole file reports them)."""
    p = Path(path)
    try:
        with p.open("rb") as handle:
            data = handle.read(size)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    if data.startswith(GZIP_MAGIC):
        try:
            data = zlib.decompressobj(wbits=31).decompress(data, size)
        except zlib.error:
            data = b""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")
