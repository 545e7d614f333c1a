"""``corral sweep --executor ray`` on a Ray cluster: a real head node started with Ray's own CLI (``ray
start --head``, as a cluster's head is started), reached through ``--address`` and through
``RAY_ADDRESS``, by the ``corral`` command in a fresh interpreter (as a user runs it), writes the same
cells, byte for byte, as the local process pool. Skipped cleanly where Ray (the extra ``corral[ray]``)
is not installed."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.sim.sweep import run_sweep
from corral.sim.sweep_spec import load_sweep_spec
from tests.sim.test_sweep import CLUSTER, SJF_NOISY, SMALL, WORKLOAD, _cells

pytest.importorskip("ray")

#: the head's environment and the driver's: no token authentication (Ray 2.5x turns it on for a head
#: when ~/.ray holds a token, and a driver given an explicit address does not turn it on: the test must
#: not depend on what the machine's home folder holds), no usage report, no cluster found by chance
_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def _ray_cli() -> str:
    beside = Path(sys.executable).with_name("ray")
    found = str(beside) if beside.is_file() else shutil.which("ray")
    if found is None:
        pytest.skip("the ray command is not installed beside this interpreter")
    return found


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN")}
    return env | _ENV | extra


def _stop(head: subprocess.Popen) -> None:
    """``ray start --block`` stops the processes it started on SIGTERM; anything of its process group
    (its own session) still alive after that is killed."""
    if head.poll() is None:
        head.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            head.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(head.pid, signal.SIGKILL)
    head.wait(timeout=10)


@pytest.fixture()
def files(tmp_path: Path) -> Path:
    """The small sweep of test_sweep.py: 2 configs × 2 seeds of 24 jobs on 2 nodes."""
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "w.csv").write_text(WORKLOAD)
    (tmp_path / "sjf.yaml").write_text(SJF_NOISY)
    (tmp_path / "sweep.yaml").write_text(SMALL)
    return tmp_path


@contextlib.contextmanager
def _head(cpus: int, **env: str) -> Iterator[tuple[str, Path]]:
    """A one-node Ray cluster started as a cluster's head is (``ray start --head``), stopped at the end:
    its GCS address and its session folder. The temporary folder is short: Ray's Unix sockets live
    under it and a socket path is limited to 107 bytes."""
    ray = _ray_cli()
    temp = Path(tempfile.mkdtemp(prefix="corral-ray-"))
    log = (temp / "head.log").open("w")
    head = subprocess.Popen(
        [ray, "start", "--head", "--block", "--port=0", f"--temp-dir={temp}", f"--num-cpus={cpus}"]
        + ["--include-dashboard=false", "--disable-usage-stats"],
        env=_env(**env),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        address_file = temp / "ray_current_cluster"
        deadline = time.monotonic() + 60
        while not (address_file.is_file() and address_file.read_text().strip()):
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail("ray start --head did not start:\n" + (temp / "head.log").read_text())
            time.sleep(0.2)
        yield address_file.read_text().strip(), temp / "session_latest"
    finally:
        _stop(head)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture()
def ray_head() -> Iterator[tuple[str, Path]]:
    """A cluster of 2 CPUs without token authentication."""
    with _head(2) as head:
        yield head


def _corral(folder: Path, out: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    code = "from corral.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "sweep", str(folder / "sweep.yaml"), "-o", str(folder / out)]
        + ["--no-progress", "--executor", "ray", *args],
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=folder,
    )


def _drivers(session: Path) -> set[str]:
    """The process ids of the drivers that connected to the cluster (Ray writes a log per driver into
    the session's logs folder of the node it joined)."""
    return {p.stem.rsplit("_", 1)[-1] for p in (session / "logs").glob("python-core-driver-*.log")}


def test_a_sweep_runs_on_a_ray_cluster_by_address_and_by_ray_address(files: Path, ray_head) -> None:
    address, session = ray_head
    run_sweep(load_sweep_spec(files / "sweep.yaml"), files / "pool", workers=2)

    by_flag = _corral(files, "flag", "--address", address)
    assert by_flag.returncode == 0, by_flag.stderr
    by_env = _corral(files, "env", RAY_ADDRESS=address)
    assert by_env.returncode == 0, by_env.stderr

    pool = _cells(files / "pool")
    assert len(pool) == 4 and _cells(files / "flag") == pool and _cells(files / "env") == pool
    # both ran on this cluster, not on a local instance of their own
    assert "Connecting to existing Ray cluster" in by_flag.stderr + by_env.stderr
    assert len(_drivers(session)) == 2
    assert list((session / "logs").glob("worker-*.out"))
    # what ran says where: sweep.json and the page name the cluster
    for out in ("flag", "env"):
        assert json.loads((files / out / "sweep.json").read_text())["address"] == address
        assert f"ray, on the cluster at <code>{address}</code>" in (files / out / "index.html").read_text()


ONE_CELL = "configs: [default]\nworkloads: [w.csv]\nclusters: [cluster.yaml]\n"


def test_a_cluster_with_token_authentication(files: Path) -> None:
    """Ray's token authentication (Ray turns it on for ``ray start --head`` when the machine holds a
    token): a driver without the token is refused by the cluster, which corral says in one line with
    what to set; given the token as Ray documents (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN), the sweep runs
    there. (RAY_NUM_REDIS_GET_RETRIES=1: Ray retries a refused connection 20 times, a second apart.)"""
    (files / "sweep.yaml").write_text(ONE_CELL)
    token = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    home = files / "home"  # no ~/.ray/auth_token for the driver to find
    home.mkdir()
    with _head(1, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token) as (address, _):
        refused = _corral(
            files, "refused", "--address", address, HOME=str(home), RAY_NUM_REDIS_GET_RETRIES="1"
        )
        admitted = _corral(
            files,
            "admitted",
            "--address",
            address,
            HOME=str(home),
            RAY_AUTH_MODE="token",
            RAY_AUTH_TOKEN=token,
        )
    assert refused.returncode == 2, refused.stderr
    error = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "token authentication" in error[0] and "RAY_AUTH_MODE=token" in error[0], error
    assert admitted.returncode == 0, admitted.stderr
    assert len(list((files / "admitted" / "cells").iterdir())) == 1
