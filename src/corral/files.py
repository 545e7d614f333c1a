"""Writing files and report folders without ever losing what was there (SPEC.md §5).

- :func:`atomic_write` writes a file beside its destination and renames it into place: a reader sees
  the old file or the new one, never half of one.
- :func:`atomic_folder` fills a fresh hidden sibling of a report folder and swaps it into place only once
  it is complete. A folder that is there already is replaced only if corral wrote it (it holds the
  :data:`MARKER` file, or — for reports written before the marker existed — nothing but report files);
  any other non-empty folder is refused unless ``force`` is given, and the folder that holds the
  current directory is refused always (replacing it would pull the ground from under the shell).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from corral.errors import InputError

__all__ = ["MARKER", "atomic_folder", "atomic_write", "check_output_folder", "is_report"]

MARKER = ".corral-report"
_REPORT_FILES = {
    "index.html",
    "summary.json",
    "meta.json",
    "jobs.csv",
    "jobs.json",
    "queues.csv",
    "cluster.csv",
    "queue_summary.csv",
    "comparison.json",
    "comparison.csv",
    "breakdown.csv",
    "breakdown.json",
    "reasons.csv",
    "longest_waits.csv",
    MARKER,
}


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary sibling and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def is_report(folder: Path) -> bool:
    """Whether ``folder`` is a report corral wrote: it holds the marker, or (older reports) an
    ``index.html`` and nothing but the files and per-config subfolders corral writes."""
    if (folder / MARKER).is_file():
        return True
    names = {p.name: p for p in folder.iterdir()}
    if "index.html" not in names:
        return False
    for name, p in names.items():
        if p.is_dir():
            if not is_report(p):
                return False
        elif name not in _REPORT_FILES and not name.endswith(".png"):
            return False
    return True


def check_output_folder(folder: str | Path, force: bool = False, *, shown: str | None = None) -> None:
    """Refuse (InputError) a destination :func:`atomic_folder` would not replace; called before a long
    run too, so that a refusal costs nothing."""
    shown, folder = shown or str(folder), Path(folder).resolve()
    if not folder.exists():
        return
    if not folder.is_dir():
        raise InputError("exists and is not a folder; choose another --output", file=shown)
    cwd = Path.cwd().resolve()
    if folder == cwd or folder in cwd.parents:
        raise InputError(
            "is the current folder (or holds it); write the report to a new subfolder "
            "such as ./corral-report",
            file=shown,
        )
    if not force and any(folder.iterdir()) and not is_report(folder):
        raise InputError(
            "exists and is not a corral report; choose another --output, or pass --force "
            "to replace it and everything in it",
            file=shown,
        )


def atomic_folder(folder: str | Path, fill: Callable[[Path], object], *, force: bool = False) -> Path:
    """Run ``fill`` on a fresh hidden sibling of ``folder``, then swap it into place: remove nothing
    until the new report is complete, and restore the old one if the final rename fails. The folder
    gets the :data:`MARKER` file. Returns the folder's resolved path."""
    shown, folder = str(folder), Path(folder).resolve()  # resolve: "." has no name to rename
    try:
        check_output_folder(folder, force, shown=shown)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
        try:
            os.chmod(tmp, 0o755)
            fill(tmp)
            (tmp / MARKER).write_text(
                "written by corral; replaced by the next report written here\n", encoding="utf-8"
            )
            _swap(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    except OSError as exc:
        raise InputError(f"cannot write report: {exc.strerror or exc}", file=shown) from None
    return folder


def _swap(tmp: Path, folder: Path) -> None:
    if not folder.exists():
        tmp.rename(folder)
        return
    graveyard = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old-", dir=folder.parent))
    folder.rename(graveyard / "previous")
    try:
        tmp.rename(folder)
    except OSError:
        (graveyard / "previous").rename(folder)
        raise
    shutil.rmtree(graveyard, ignore_errors=True)
