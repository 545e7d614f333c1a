"""Pollux's evaluation workloads (``simulator/workloads*/workload-N.csv`` of the OSDI '21 artifact):
``name, time, application, num_replicas, batch_size`` — real Philly submit times of day, a deep-learning
application assigned by the job's GPU time, and its initial replicas.

The files give no run time: Pollux derives progress from measured per-application throughput profiles.
corral needs a table ``durations=FILE`` (CSV ``application, duration`` and optionally ``num_replicas``:
seconds the job runs uninterrupted; a row with ``num_replicas`` applies to jobs of that many replicas,
a row without it to every other). ``num_replicas`` GPUs form a rigid gang split over nodes like a Philly
job (Pollux's own jobs are elastic; corral replays the initial allocation). Queue ``default``;
``batch_size`` is not used. ``application`` is each job's model class (``corral.io/model-class``, read
by the speed model of ``simulation.speed``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from corral.model.annotations import MODEL_CLASS
from corral.sim.loaders.common import Hints, Options, gpu_gangs
from corral.sim.workload import JobList, assemble_specs, read_table

__all__ = ["OPTIONS", "load_pollux", "read_durations"]

OPTIONS = {"durations": "CSV application,duration[,num_replicas]: seconds each application runs"}


def read_durations(path: Path) -> dict[tuple[str, int | None], float]:
    """``{(application, replicas or None): seconds}`` from a durations table."""
    table = read_table(path)
    table.require("application", "duration")
    apps = table.text("application", None)
    seconds = table.number("duration", low=0, low_open=True, what="a positive number of seconds")
    replicas = table.number("num_replicas", default=np.nan, integer=True, low=1, what="an integer >= 1")
    out: dict[tuple[str, int | None], float] = {}
    for index, (app, secs, n) in enumerate(zip(apps.tolist(), seconds.tolist(), replicas.tolist())):
        key = (app, None if np.isnan(n) else int(n))
        if key in out:
            table.fail(index, "application", f"a second duration for {app!r}")
        out[key] = secs
    return out


def load_pollux(path: str | Path, options: Options | None = None, hints: Hints | None = None) -> JobList:
    """Load one Pollux workload; see the module doc. An application the durations table does not cover is
    an InputError naming the row."""
    options = options or Options("pollux", {}, OPTIONS)
    hints = hints or Hints()
    table = read_table(path)
    table.require("name", "time", "application", "num_replicas")
    durations = read_durations(
        options.path(
            "durations", Path(path), "a Pollux workload gives no run times: it needs a durations table"
        )
    )
    submit = table.number("time", low=0, what="seconds >= 0")
    replicas = table.number("num_replicas", integer=True, low=1, what="an integer number of replicas >= 1")
    apps = table.text("application", None)
    duration = np.empty(len(table))
    for index, (app, n) in enumerate(zip(apps.tolist(), replicas.astype(int).tolist())):
        got = durations.get((app, n), durations.get((app, None)))
        if got is None:
            table.fail(index, "application", f"the durations table has no row for {app!r}")
        duration[index] = got
    names = table.text("name", None)
    roles, pods = gpu_gangs(replicas, hints.gpus_per_node())
    queues = np.full(len(table), "default", dtype=object)
    classes = [{MODEL_CLASS: app} for app in apps.tolist()]
    return assemble_specs(
        table, names, submit, duration, queues, np.zeros(len(table)), roles, pods, annotations=classes
    )
