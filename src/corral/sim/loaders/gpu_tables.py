"""Three GPU job tables with run times of their own: Tiresias' job trace, Alibaba's 2025 DLRM serving
instances and Helios' ``cluster_log.csv``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from corral.model.annotations import MODEL_CLASS
from corral.sim.jobspec import GPU, RoleSpec
from corral.sim.loaders.common import Hints, Options, gpu_gangs
from corral.sim.workload import GIB, JobList, assemble_specs, read_table

__all__ = ["load_dlrm", "load_helios", "load_tiresias"]


def load_tiresias(path: str | Path, options: Options | None = None, hints: Hints | None = None) -> JobList:
    """Tiresias' simulator trace (``job_id, num_gpu, submit_time, iterations, model_name, duration,
    interval``; its ``tf_job.csv`` layout also carries the four used columns). A job is named
    ``tiresias-<job_id>``, submits at ``submit_time``, runs ``duration`` seconds and asks for ``num_gpu``
    GPUs, a rigid gang split over nodes like a Philly job (4 cores and 32Gi per GPU: the trace records
    neither). Queue ``default``. ``model_name`` is the job's model class (``corral.io/model-class``, read by the
    speed model of ``simulation.speed``); ``iterations`` and ``interval`` are not used; a repeated
    ``job_id`` is an error (``tf_job.csv`` lists job 10 twice)."""
    hints = hints or Hints()
    table = read_table(path)
    table.require("job_id", "num_gpu", "submit_time", "duration")
    ids = table.text("job_id", None)
    submit = table.number("submit_time", low=0, what="seconds >= 0")
    duration = table.number("duration", low=0, low_open=True, what="a positive number of seconds")
    gpus = table.number("num_gpu", integer=True, low=1, what="an integer number of GPUs >= 1")
    roles, pods = gpu_gangs(gpus, hints.gpus_per_node())
    names = np.array([f"tiresias-{i}" for i in ids.tolist()], dtype=object)
    queues = np.full(len(table), "default", dtype=object)
    models = table.text("model_name", "") if "model_name" in table.frame.columns else None
    classes = None if models is None else [{MODEL_CLASS: m} if m else {} for m in models.tolist()]
    return assemble_specs(
        table, names, submit, duration, queues, np.zeros(len(table)), roles, pods, annotations=classes
    )


DLRM_COLUMNS = (
    "instance_sn",
    "role",
    "cpu_request",
    "gpu_request",
    "memory_request",
    "creation_time",
    "scheduled_time",
    "deletion_time",
)


def load_dlrm(path: str | Path, options: Options | None = None, hints: Hints | None = None) -> JobList:
    """Alibaba's GPU-disaggregated DLRM serving trace (cluster-trace-gpu-v2025): one single-pod job per
    instance, named by ``instance_sn``, queue ``default``, priority 0.

    Per pod: cpu = ``cpu_request`` cores, memory = ``memory_request`` GiB, GPUs = ``gpu_request``. Submit =
    ``creation_time``, or the trace start (0) when it is empty (the instance existed before the trace);
    it runs from ``scheduled_time`` (or its submit time when that is empty) to ``deletion_time``, or to the
    trace's last recorded time when that is empty (deleted after the trace ends). Rows whose run time is
    <= 0 are skipped and counted. ``rdma_*`` (a share of one NIC: no node list says how many a node has),
    ``disk_*``, the ``*_limit`` columns, ``app_name`` and ``max_instance_per_node`` (a per-application
    anti-affinity cap) are not used."""
    table = read_table(path)
    table.require(*DLRM_COLUMNS)
    created = table.number("creation_time", default=np.nan, low=0, what="seconds >= 0")
    scheduled = table.number("scheduled_time", default=np.nan, low=0, what="seconds >= 0")
    deleted = table.number("deletion_time", default=np.nan, low=0, what="seconds >= 0")
    end = float(np.nanmax(np.concatenate([created, scheduled, deleted, [0.0]])))
    submit = np.where(np.isnan(created), 0.0, created)
    start = np.where(np.isnan(scheduled), submit, scheduled)
    duration = np.where(np.isnan(deleted), end, deleted) - start
    positive = duration > 0
    skipped = {} if positive.all() else {"run time <= 0": int((~positive).sum())}
    table.keep(positive)
    submit, duration = submit[positive], duration[positive]
    cpu = table.number("cpu_request", low=0, what="a non-negative number of cores")
    memory = table.number("memory_request", low=0, what="non-negative GiB") * GIB
    gpu = table.number("gpu_request", low=0, what="a non-negative number of GPUs")
    table.text("role", None)
    names = table.text("instance_sn", None)
    cache: dict[tuple[float, float, float], tuple[RoleSpec, ...]] = {}
    roles = []
    for key in zip(gpu.tolist(), cpu.tolist(), memory.tolist()):
        if key not in cache:
            requests = {"cpu": key[1], "memory": key[2]}
            if key[0] > 0:
                requests[GPU] = key[0]
            cache[key] = (RoleSpec(name="", count=1, requests=requests),)
        roles.append(cache[key])
    queues = np.full(len(table), "default", dtype=object)
    ones = np.ones(len(table))
    return assemble_specs(
        table, names, submit, duration, queues, np.zeros(len(table)), roles, ones, skipped=skipped
    )


HELIOS_COLUMNS = ("job_id", "vc", "gpu_num", "cpu_num", "node_num", "submit_time", "duration")


def load_helios(path: str | Path, options: Options | None = None, hints: Hints | None = None) -> JobList:
    """Helios' ``cluster_log.csv`` (SenseTime, SC '21; columns ``job_id, user, vc, gpu_num, cpu_num,
    node_num, state, submit_time, start_time, end_time, duration, queue``). A job is named
    ``helios-<job_id>`` in queue ``vc``, submits at ``submit_time`` and runs ``duration`` seconds (end −
    start). It is a rigid gang of ``node_num`` pods (at least 1) sharing ``gpu_num`` GPUs and ``cpu_num``
    cores evenly (as Slurm spreads a job over its nodes; an uneven split gives the first pods one more);
    memory is not recorded and not requested. CPU-only jobs (``gpu_num`` 0) are kept. Rows whose duration
    is <= 0 (cancelled before they started) are skipped and counted. ``user``, ``state``, ``start_time``,
    ``end_time`` and ``queue`` (the original wait) are not used."""
    table = read_table(path)
    table.require(*HELIOS_COLUMNS)
    duration = table.number("duration", low=0, what="seconds >= 0")
    positive = duration > 0
    skipped = {} if positive.all() else {"duration 0 (never ran)": int((~positive).sum())}
    table.keep(positive)
    duration = duration[positive]
    submit = table.seconds("submit_time")
    gpus = table.number("gpu_num", integer=True, low=0, what="an integer number of GPUs >= 0")
    cpus = table.number("cpu_num", low=0, what="a non-negative number of cores")
    nodes = table.number("node_num", default=1, integer=True, low=0, what="an integer number of nodes >= 0")
    roles = [
        _spread(int(g), c, max(1, int(n))) for g, c, n in zip(gpus.tolist(), cpus.tolist(), nodes.tolist())
    ]
    pods = np.maximum(nodes, 1)
    names = np.array([f"helios-{i}" for i in table.text("job_id", None).tolist()], dtype=object)
    queues = table.text("vc", None)
    return assemble_specs(
        table, names, submit, duration, queues, np.zeros(len(table)), roles, pods, skipped=skipped
    )


_SPREAD: dict[tuple[int, float, int], tuple[RoleSpec, ...]] = {}


def _spread(gpus: int, cpus: float, nodes: int) -> tuple[RoleSpec, ...]:
    key = (gpus, cpus, nodes)
    got = _SPREAD.get(key)
    if got is None:
        base, extra = divmod(gpus, nodes)

        def role(count: int, g: int, name: str) -> RoleSpec:
            requests = {"cpu": cpus / nodes}
            if g:
                requests[GPU] = float(g)
            return RoleSpec(name=name, count=count, requests=requests)

        got = (
            (role(nodes, base, ""),)
            if not extra
            else (role(extra, base + 1, ""), role(nodes - extra, base, "rest"))
        )
        _SPREAD[key] = got
    return got
