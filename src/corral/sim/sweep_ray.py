"""The Ray executor of ``corral sweep`` (``--executor ray``; the optional extra ``corral[ray]``).

Each cell is one Ray task of one CPU running :func:`corral.sim.sweep_cell.run_cell`; this process waits for
them one at a time (``ray.wait``) and hands each finished cell to ``done``, which writes it, so the cell
store is written only here, as with the process pool. Where Ray runs:

* ``address`` (``--address`` or the spec's ``address``), else the ``RAY_ADDRESS`` environment variable
  — both read by ``ray.init`` itself, as Ray documents: an existing cluster. Its workers need corral
  installed and the spec's files at the same paths (a shared file system). An address of the form
  ``[ray://]HOST:PORT`` is first checked to answer at all (a TCP connection within
  :data:`PROBE_SECONDS`): ``ray.init`` retries an address where nothing listens for many minutes
  (20 attempts of about 40 s each in Ray 2.60) before it gives up, so a mistyped address would look like
  a hung sweep. A cluster that asks for a token (Ray's token authentication) and a driver without one
  is one line saying so, and so is a worker that cannot import corral;
* neither: a local instance started here with ``workers`` CPUs and stopped at the end (no dashboard).

If Ray was already initialised (a notebook, a test), that instance is used and left running.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from corral.errors import CorralError, InputError
from corral.sim.sweep_cell import run_cell

if TYPE_CHECKING:
    from corral.sim.sweep_spec import Cell

__all__ = ["PROBE_SECONDS", "run_on_ray"]

#: how long a cluster's head may take to accept a TCP connection before the address is refused
PROBE_SECONDS = 5.0
#: ``HOST:PORT``, ``ray://HOST:PORT`` or ``[IPv6]:PORT``: the forms that name one head to probe
_HOST_PORT = re.compile(r"(?:ray://)?(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:/\[\]]+)):(?P<port>\d{1,5})/?")


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError(
            "the Ray executor needs Ray: pip install 'corral[ray]' (or use --executor local)",
            field="--executor",
        ) from None
    return ray


def _probe(address: str, field: str) -> None:
    """Refuse ``address`` when it names a head (``[ray://]HOST:PORT``) that does not accept a TCP
    connection within :data:`PROBE_SECONDS`. Other forms (``auto``, ``local``) are Ray's to read."""
    match = _HOST_PORT.fullmatch(address.strip())
    if match is None:
        return
    host, port = match["v6"] or match["host"], int(match["port"])
    try:
        with socket.create_connection((host, port), timeout=PROBE_SECONDS):
            pass
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise InputError(
            f"no Ray cluster answers at {address} ({why}); start its head (ray start --head) or fix the address",
            field=field,
        ) from None


def _reach_error(exc: BaseException) -> str:
    """What ``ray.init`` failing says, in one line; a token the cluster asks for and the driver lacks
    (Ray's token authentication) is named with what to set."""
    chain: list[str] = []
    cause: BaseException | None = exc
    while cause is not None and len(chain) < 8:
        chain.append(f"{type(cause).__name__}: {cause}")
        cause = cause.__cause__ or cause.__context__
    text = " ".join(chain)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "AuthenticationError" in text or "InvalidAuthToken" in text:
        return (
            f"{first}: the cluster uses token authentication; set RAY_AUTH_MODE=token and give its token "
            "(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token), as Ray documents"
        )
    return first


_NO_CORRAL = re.compile(r"No module named '?corral\b")


def _unwrap(exc: BaseException, cell: Cell) -> BaseException:
    """A task's CorralError as itself (Ray wraps what a task raised in a RayTaskError). A worker that
    cannot import corral (a cluster node without it: Ray reports the task's function or argument as
    not deserialisable, ``No module named 'corral'``) is one line saying what the cluster needs."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, CorralError):
        return cause
    if _NO_CORRAL.search(f"{exc} {cause}"):
        return InputError(
            f"cell {cell.folder_name}: a Ray worker cannot import corral (No module named 'corral'); "
            "install corral, the same version, on every node of the cluster",
            field="--executor",
        )
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
        where = address if address is not None else os.environ.get("RAY_ADDRESS") or None
        field = "--address" if address is not None else "RAY_ADDRESS" if where else "--executor"
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if where is None:
            kwargs["num_cpus"] = workers
        else:
            _probe(where, field)
        try:
            ray.init(address=address, **kwargs)
        except Exception as exc:  # noqa: BLE001 - whatever keeps Ray from starting, as one line
            raise InputError(f"cannot start or reach Ray: {_reach_error(exc)}", field=field) from None
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
                    raise _unwrap(exc, cell) from None
                done(cell, figures)
        finally:
            for ref in pending:
                ray.cancel(ref)
    finally:
        if started:
            ray.shutdown()
