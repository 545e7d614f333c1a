"""The Ray executor of ``corral sweep`` (``--executor ray``; the optional extra ``corral[ray]``).

Each cell is one Ray task of one CPU running :func:`corral.sim.sweep_cell.run_cell`; this process waits for
them one at a time (``ray.wait``) and hands each finished cell to ``done``, which writes it, so the cell
store is written only here, as with the process pool. Where Ray runs:

* ``address`` (``--address`` or the spec's ``address``), else the ``RAY_ADDRESS`` environment variable
  — both read by ``ray.init`` itself, as Ray documents: an existing cluster. Its workers need corral
  installed and the spec's files at the same paths (a shared file system);
* neither: a local instance started here with ``workers`` CPUs and stopped at the end (no dashboard).

If Ray was already initialised (a notebook, a test), that instance is used and left running.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from corral.errors import CorralError, InputError
from corral.sim.sweep_cell import run_cell

if TYPE_CHECKING:
    from corral.sim.sweep_spec import Cell

__all__ = ["run_on_ray"]


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError(
            "the Ray executor needs Ray: pip install 'corral[ray]' (or use --executor local)",
            field="--executor",
        ) from None
    return ray


def _unwrap(exc: BaseException) -> BaseException:
    """A task's CorralError as itself (Ray wraps what a task raised in a RayTaskError)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, CorralError):
        return cause
    return exc


def run_on_ray(
    cells: Sequence[Cell],
    workers: int,
    address: str | None,
    done: Callable[[Cell, dict[str, Any]], None],
) -> None:
    """Run ``cells`` as Ray tasks; call ``done(cell, figures)`` for each as it finishes. A task that
    failed stops the sweep with its error; tasks still queued are cancelled."""
    if not cells:
        return
    ray = _ray()
    started = not ray.is_initialized()
    if started:
        local = address is None and not os.environ.get("RAY_ADDRESS")
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if local:
            kwargs["num_cpus"] = workers
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise InputError(f"cannot start or reach Ray: {exc}", field="--address") from None
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_cell)
        pending = {task.remote(cell): cell for cell in cells}
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                cell = pending.pop(ready[0])
                try:
                    figures = ray.get(ready[0])
                except Exception as exc:  # noqa: BLE001 - a task's own error, re-raised unwrapped
                    raise _unwrap(exc) from None
                done(cell, figures)
        finally:
            for ref in pending:
                ray.cancel(ref)
    finally:
        if started:
            ray.shutdown()
