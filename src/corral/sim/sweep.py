"""``corral sweep``: run every cell of a sweep spec (:mod:`corral.sim.sweep_spec`) in parallel, keep
each finished cell on disk, and write the tables and the page of the whole sweep
(:mod:`corral.sim.sweep_report`).

How cells run, as the research simulators run their grids (Gavel's and Lucid's process pools, Sia on
Ray):

* ``local`` (default): a pool of ``workers`` processes (:class:`concurrent.futures.ProcessPoolExecutor`,
  started with ``spawn``); with one worker the cells run in this process, one after another;
* ``ray``: one Ray task per cell (:mod:`corral.sim.sweep_ray`) on a local instance of ``workers`` CPUs,
  or on the cluster at ``--address`` / ``RAY_ADDRESS``.

A cell (:mod:`corral.sim.sweep_cell`) is the same :func:`corral.sim.runs.run_config` that
``corral simulate`` runs, on inputs :func:`corral.sim.runs.prepare` built from the cell's workload, window, scale, cluster and seed; the
seed draws a synthetic workload and is added to a noisy estimate model's seed (``simulation.estimates``),
so seeds differ wherever the run draws random numbers. A worker returns the cell's figures and its
per-job records; this process writes them into ``cells/<name>-<digest>/`` through a hidden temporary
folder renamed into place, so a cell on disk is always whole, and a cell found there with the same
digest is not run again (an interrupted sweep resumes where it stopped). The results of a cell do not
depend on where or alongside what it ran: a sweep on two workers writes the same bytes as one on one.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corral.errors import InputError
from corral.sim.sweep_cell import run_cell

if TYPE_CHECKING:
    from corral.sim.sweep_spec import Cell, SweepSpec

__all__ = ["SWEEP_MARKER", "CellStore", "check_sweep_folder", "run_cell", "run_sweep"]

SWEEP_MARKER = "sweep.json"
# ------------------------------------------------------------------------------------- the cell store


class CellStore:
    """The ``cells/`` folder of a sweep: one subfolder per finished cell, ``cell.json`` (everything but
    the jobs) and ``jobs.parquet``, each cell renamed into place whole."""

    def __init__(self, folder: Path) -> None:
        self.root = folder / "cells"

    def path(self, cell: Cell) -> Path:
        return self.root / cell.folder_name

    def done(self, cell: Cell) -> bool:
        return (self.path(cell) / "cell.json").is_file()

    def clean(self) -> None:
        """Remove what an interrupted write left behind (hidden temporary folders)."""
        if self.root.is_dir():
            for p in self.root.glob(".tmp-*"):
                shutil.rmtree(p, ignore_errors=True)

    def save(self, cell: Cell, figures: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
        try:
            record = {k: v for k, v in figures.items() if k != "jobs"}
            (tmp / "jobs.parquet").write_bytes(figures["jobs"])
            (tmp / "cell.json").write_text(json.dumps(_finite(record), indent=2) + "\n", encoding="utf-8")
            os.chmod(tmp, 0o755)
            target = self.path(cell)
            if target.exists():  # a cell run twice at once (two sweeps in one folder): keep the first
                shutil.rmtree(tmp)
                return
            os.rename(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def load(self, cell: Cell) -> dict[str, Any]:
        record: dict[str, Any] = json.loads((self.path(cell) / "cell.json").read_text(encoding="utf-8"))
        return {**record, "key": cell.key, "folder": cell.folder_name}


def _finite(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def check_sweep_folder(folder: Path) -> None:
    """A sweep writes into an empty or missing folder, or one an earlier sweep wrote (it holds
    ``sweep.json``); anything else is refused."""
    if not folder.exists():
        return
    if not folder.is_dir():
        raise InputError("exists and is not a folder; choose another --output", file=str(folder))
    if any(folder.iterdir()) and not (folder / SWEEP_MARKER).is_file():
        raise InputError(
            "exists and is not a corral sweep; choose another --output (a sweep resumes only in its own folder)",
            file=str(folder),
        )


# ----------------------------------------------------------------------------------------- executors

Done = Callable[["Cell", dict[str, Any]], None]


def _run_here(cells: Sequence[Cell], done: Done) -> None:
    for cell in cells:
        done(cell, run_cell(cell))


def _run_pool(cells: Sequence[Cell], workers: int, done: Done) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # cells are submitted as workers free up, in spec order, so that a cell's inputs cached in a
    # worker are usually the next cell's too. Each worker is one CPU, as a Ray task is (Ray sets
    # OMP_NUM_THREADS=1 in its workers): numpy's BLAS threads in N workers would contend for N CPUs.
    saved = {k: os.environ.get(k) for k in _ONE_THREAD}
    os.environ.update({k: "1" for k, v in saved.items() if v is None})
    try:
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
        _drain(pool, cells, workers, done)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)


_ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _drain(pool: Any, cells: Sequence[Cell], workers: int, done: Done) -> None:
    from concurrent.futures import FIRST_COMPLETED, wait

    todo = list(cells)[::-1]
    running: dict[Any, Cell] = {}
    try:
        while todo or running:
            while todo and len(running) < workers:
                cell = todo.pop()
                running[pool.submit(run_cell, cell)] = cell
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                cell = running.pop(future)
                done(cell, future.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_sweep(
    spec: SweepSpec,
    folder: Path,
    *,
    executor: str | None = None,
    workers: int | None = None,
    address: str | None = None,
    progress: Callable[[int, int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the cells of ``spec`` not yet in ``folder`` and return every cell's record, in spec order.
    ``executor``, ``workers`` and ``address`` (the command line's) win over the spec's; an ``address``
    asks for the Ray executor (refused beside ``executor="local"``). ``RAY_ADDRESS`` is read only by the
    Ray executor. ``progress(done, reused, total)`` is called as cells finish. A cell's bad input stops the sweep
    with that error (the cells finished so far are kept)."""
    if address is not None and executor == "local":
        raise InputError(
            "a Ray cluster's address needs the Ray executor: use --executor ray, or drop --address",
            field="--address",
        )
    executor = executor or ("ray" if address is not None else spec.executor)
    workers = workers or spec.workers
    check_sweep_folder(folder)
    preflight(spec)
    folder.mkdir(parents=True, exist_ok=True)
    store = CellStore(folder)
    store.clean()
    where = address or spec.address or os.environ.get("RAY_ADDRESS") or None
    _write_marker(spec, folder, executor, workers, where if executor == "ray" else None)
    todo = [c for c in spec.cells if not store.done(c)]
    reused = len(spec.cells) - len(todo)
    count = [reused]

    def done(cell: Cell, figures: dict[str, Any]) -> None:
        store.save(cell, figures)
        count[0] += 1
        if progress:
            progress(count[0], reused, len(spec.cells))

    if progress:
        progress(reused, reused, len(spec.cells))
    if executor == "ray":
        from corral.sim.sweep_ray import run_on_ray

        run_on_ray(todo, workers, address or spec.address, done)
    elif workers <= 1 or len(todo) <= 1:
        _run_here(todo, done)
    else:
        _run_pool(todo, min(workers, len(todo)), done)
    return [store.load(c) for c in spec.cells]


def preflight(spec: SweepSpec) -> None:
    """Check every configuration (as ``corral compare`` does) and every cluster before any cell runs:
    a bad one is its one-line error now, not after an hour of other cells. Workloads are read by the
    cells themselves (reading a trace twice would cost more than it saves)."""
    from corral.sim.clusters import load_cluster
    from corral.sim.runs import load_config

    for path in spec.configs.values():
        load_config(path)
    for path in spec.clusters.values():
        if path is not None:
            load_cluster(path)


def _write_marker(spec: SweepSpec, folder: Path, executor: str, workers: int, address: str | None) -> None:
    from corral.files import atomic_write

    described = {
        "spec": str(spec.file),
        "name": spec.name,
        "configs": {k: str(v) if v else "default (built-in)" for k, v in spec.configs.items()},
        "baseline": spec.baseline,
        "workloads": [
            {
                "name": w.name,
                "file": str(w.file) if w.file else "built-in example",
                "format": w.format,
                "windows": [list(x) for x in w.windows],
                "scales": list(w.scales),
                "queues": list(w.queues),
            }
            for w in spec.workloads
        ],
        "clusters": {k: str(v) if v else "built-in example" for k, v in spec.clusters.items()},
        "seeds": list(spec.seeds),
        "options": spec.options,
        "size_buckets": list(spec.size_buckets),
        "executor": executor,
        "workers": workers,
        "address": address,  # the Ray cluster the cells ran on (None: a local pool or instance)
        "cells": len(spec.cells),
    }
    atomic_write(folder / SWEEP_MARKER, json.dumps(described, indent=2) + "\n")
