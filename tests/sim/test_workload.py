"""Tests of corral.sim.workload: the trace loaders, the synthetic generator and the shaping helpers."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from corral.errors import InputError
from corral.sim.formats import load_trace
from corral.sim.jobspec import GPU
from corral.sim.synthetic import SyntheticSpec, synthetic
from corral.sim.workload import (
    CORRAL_COLUMNS,
    JobList,
    filter_jobs,
    load_alibaba,
    load_corral_trace,
    load_philly,
    scale_arrivals,
)

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
GIB = 2**30


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text.lstrip("\n"))
    return path


def assert_input_error(exc: InputError, path: Path, row: int | None, field: str) -> None:
    """The error names the file, the 1-based data row and the field, in its attributes and its line."""
    assert exc.file == str(path)
    assert exc.field == field
    assert exc.exit_code == 2
    text = str(exc)
    assert str(path) in text and f"field {field}" in text
    if row is not None:
        assert exc.obj == f"row {row}"
        assert f"row {row}" in text


# ------------------------------------------------------------------------------------- corral schema


def test_minimal_trace_takes_defaults(tmp_path):
    path = write(tmp_path, "submit,duration\n5,60\n")
    [job] = load_corral_trace(path)
    assert (job.name, job.submit, job.duration, job.queue, job.priority) == ("job-1", 0.0, 60.0, "default", 0)
    assert job.num_pods == 1 and job.min_member == 1 and job.topology is None
    assert dict(job.roles[0].requests) == {"cpu": 1.0, "memory": 4.0 * GIB}
    assert GPU not in job.roles[0].requests
    assert job.source == f"{path} row 1"


def test_full_trace_is_rebased_sorted_and_converted(tmp_path):
    path = write(
        tmp_path,
        """
name,submit,duration,queue,priority,pods,min_member,gpu,cpu,memory,topology_mode,topology_tier
b,1100,3600,research,10,4,3,8,32,256Gi,hard,2
a,1100,60,dev,-5,1,,0.5,500m,536870912,,
c,1000,7200,,,2,,8,4,16G,soft,
d,1200,30,dev,0,2,,1,1,1Gi,,3
""",
    )
    jobs = load_corral_trace(path)
    assert [j.name for j in jobs] == ["c", "a", "b", "d"]  # by submit, then name
    assert [j.submit for j in jobs] == [0.0, 100.0, 100.0, 200.0]
    c, a, b, d = jobs
    assert c.queue == "default" and c.priority == 0 and c.min_member == 2
    assert c.roles[0].requests == {"cpu": 4.0, "memory": 16e9, GPU: 8.0}
    assert c.topology == ("soft", 1)
    assert a.priority == -5 and a.roles[0].requests == {"cpu": 0.5, "memory": 2.0**29, GPU: 0.5}
    assert b.num_pods == 4 and b.min_pods == 3 and b.gpus == 32 and b.topology == ("hard", 2)
    assert d.topology == ("hard", 3)


def test_submit_as_times(tmp_path):
    path = write(
        tmp_path,
        """
name,submit,duration
x,2026-01-05 09:00:00,10
y,2026-01-05T09:02:00Z,10
z,2026-01-05T10:05:00.5+01:00,10
""",
    )
    assert [(j.name, j.submit) for j in load_corral_trace(path)] == [("x", 0.0), ("y", 120.0), ("z", 300.5)]


def test_model_class_column_names_the_speed_model_row(tmp_path):
    path = write(tmp_path, "name,submit,duration,model_class\nx,0,10,imagenet\ny,1,10,\n")
    x, y = load_corral_trace(path)
    assert x.annotations == {"corral.io/model-class": "imagenet"} and y.annotations == {}


@pytest.mark.parametrize(
    "body, row, field, fragment",
    [
        ("submit,duration\n0,10\n1,-5\n", 2, "duration", "'-5'"),
        ("submit,duration\n0,abc\n", 1, "duration", "positive number"),
        ("submit,duration\n0,10\n0,10\n0,0\n", 3, "duration", "positive"),
        ("submit,duration\n0,inf\n", 1, "duration", "positive"),
        ("submit,duration\n2026-01-05 09:00:00,1\n2026-13-45 09:00:00,1\n", 2, "submit", "2026-13-45"),
        ("submit,duration\n2026-01-05 09:00:00,1\nyesterday,1\n", 2, "submit", "time"),
        ("submit,duration\n0,1\n,1\n", 2, "submit", "missing value"),
        ("submit,duration,pods\n0,1,2\n0,1,2.5\n", 2, "pods", "integer"),
        ("submit,duration,pods\n0,1,two\n", 1, "pods", "integer"),
        ("submit,duration,pods\n0,1,0\n", 1, "pods", ">= 1"),
        ("submit,duration,pods,min_member\n0,1,2,3\n", 1, "min_member", "exceeds pods"),
        ("submit,duration,priority\n0,1,high\n", 1, "priority", "integer"),
        ("submit,duration,memory\n0,1,4Gi\n0,1,4Gx\n", 2, "memory", "4Gx"),
        ("submit,duration,cpu\n0,1,-2\n", 1, "cpu", "non-negative"),
        ("submit,duration,gpu\n0,1,many\n", 1, "gpu", "many"),
        ("submit,duration,topology_mode\n0,1,medium\n", 1, "topology_mode", "hard, soft"),
        ("submit,duration,topology_tier\n0,1,0\n", 1, "topology_tier", "tier"),
        ("name,submit,duration\na,0,1\na,1,1\n", 2, "name", "duplicate"),
    ],
)
def test_bad_rows_name_file_row_and_field(tmp_path, body, row, field, fragment):
    path = write(tmp_path, body)
    with pytest.raises(InputError) as info:
        load_corral_trace(path)
    assert_input_error(info.value, path, row, field)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "body, field, fragment",
    [
        ("name,submit\na,0\n", "duration", "missing required column 'duration'"),
        ("submit,duration,gpus\n0,1,8\n", "gpus", "unknown column 'gpus'"),
    ],
)
def test_bad_columns(tmp_path, body, field, fragment):
    path = write(tmp_path, body)
    with pytest.raises(InputError) as info:
        load_corral_trace(path)
    assert_input_error(info.value, path, None, field)
    assert fragment in str(info.value)
    if field == "gpus":
        assert all(c in str(info.value) for c in CORRAL_COLUMNS)


def test_unreadable_files_are_input_errors(tmp_path):
    for path, fragment in [
        (tmp_path / "absent.csv", "no such file"),
        (tmp_path, "not a file"),
        (write(tmp_path, '[{"submit": 0}]', "trace.json"), "unknown trace format"),
        (write(tmp_path, "not parquet", "t.parquet"), "cannot read trace"),
        (write(tmp_path, "", "empty.csv"), "cannot read trace"),
    ]:
        with pytest.raises(InputError) as info:
            load_corral_trace(path)
        assert info.value.file == str(path) and fragment in str(info.value)


def test_header_only_is_an_empty_workload(tmp_path):
    assert load_corral_trace(write(tmp_path, "submit,duration\n")) == []


def test_parquet_round_trip_matches_csv(tmp_path):
    csv_path = write(
        tmp_path,
        """
name,submit,duration,queue,priority,pods,min_member,gpu,cpu,memory,topology_mode,topology_tier
b,2026-01-05 09:00:10,3600,research,10,4,3,8,32,256Gi,hard,2
a,2026-01-05 09:00:00,60,dev,0,1,1,0,1,4Gi,,
""",
    )
    frame = pd.DataFrame(
        {
            "name": ["b", "a"],
            "submit": pd.to_datetime(["2026-01-05 09:00:10", "2026-01-05 09:00:00"]),
            "duration": [3600.0, 60.0],
            "queue": ["research", "dev"],
            "priority": [10, 0],
            "pods": [4, 1],
            "min_member": [3.0, 1.0],
            "gpu": [8.0, 0.0],
            "cpu": [32, 1],
            "memory": ["256Gi", "4Gi"],
            "topology_mode": ["hard", None],
            "topology_tier": [2, None],
        }
    )
    pq_path = tmp_path / "trace.parquet"
    frame.to_parquet(pq_path)

    def strip(jobs):
        fields = ("name", "submit", "duration", "queue", "priority", "roles", "min_member", "topology")
        return [tuple(getattr(j, f) for f in fields) for j in jobs]

    assert strip(load_corral_trace(pq_path)) == strip(load_corral_trace(csv_path))


def test_parquet_bad_row(tmp_path):
    path = tmp_path / "bad.parquet"
    pd.DataFrame({"submit": [0.0, 1.0, 2.0], "duration": [5.0, 5.0, -1.0]}).to_parquet(path)
    with pytest.raises(InputError) as info:
        load_corral_trace(path)
    assert_input_error(info.value, path, 3, "duration")


# ------------------------------------------------------------------------------------------- Philly

PHILLY = """
timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 07:00:00,100.0,8,800.0,6214e9
2017-10-09 07:00:00,200.0,16,3200.0,6214e9
2017-10-09 07:10:00,300.0,12,3600.0,b436b2
2017-10-09 07:20:00,300.0,9,2700.0,b436b2
"""


def test_philly_shapes_gangs_and_queues(tmp_path):
    jobs = load_philly(write(tmp_path, PHILLY))
    by_name = {j.name: j for j in jobs}
    assert [j.name for j in jobs] == ["philly-2", "philly-3", "philly-1", "philly-4", "philly-5"]
    assert by_name["philly-2"].submit == 0.0 and by_name["philly-1"].submit == 115.0
    assert by_name["philly-2"].queue == "6214e9"  # an id, not the number 6.214e12
    one = by_name["philly-1"].roles
    assert (
        len(one) == 1
        and one[0].count == 1
        and one[0].requests == {"cpu": 4.0, "memory": 32.0 * GIB, GPU: 1.0}
    )
    gang = by_name["philly-3"]
    assert gang.num_pods == 2 and gang.min_pods == 2 and gang.roles[0].requests[GPU] == 8.0
    twelve = by_name["philly-4"]
    assert twelve.num_pods == 2 and twelve.roles[0].requests == {"cpu": 24.0, "memory": 192.0 * GIB, GPU: 6.0}
    nine = by_name["philly-5"]
    assert [(r.name, r.count, r.requests[GPU]) for r in nine.roles] == [("", 1, 5.0), ("rest", 1, 4.0)]
    assert nine.gpus == 9 and nine.min_pods == 2
    assert all(j.priority == 0 for j in jobs)


def test_philly_gpus_per_node(tmp_path):
    jobs = load_philly(write(tmp_path, PHILLY), gpus_per_node=4)
    assert {j.name: j.num_pods for j in jobs}["philly-2"] == 2
    with pytest.raises(InputError):
        load_philly(write(tmp_path, PHILLY), gpus_per_node=0)


@pytest.mark.parametrize(
    "line, field",
    [
        ("2017-10-09 07:01:55,0,1,0,aa", "duration"),
        ("2017-10-09 07:01:55,10,1.5,15,aa", "num_gpus"),
        ("2017-10-09 07:01:55,10,0,0,aa", "num_gpus"),
        ("2017-10-09 25:01:55,10,1,10,aa", "timestamp"),
        ("2017-10-09 07:01:55,10,1,10,", "cluster"),
    ],
)
def test_philly_bad_rows(tmp_path, line, field):
    path = write(tmp_path, PHILLY + line + "\n")
    with pytest.raises(InputError) as info:
        load_philly(path)
    assert_input_error(info.value, path, 6, field)


def test_philly_missing_column(tmp_path):
    path = write(tmp_path, "timestamp,duration,cluster\n2017-10-09 07:01:55,1,a\n")
    with pytest.raises(InputError) as info:
        load_philly(path)
    assert_input_error(info.value, path, None, "num_gpus")


def test_real_philly_trace():
    path = TRACES / "philly" / "philly.csv"
    if not path.is_file():
        pytest.skip("shared Philly trace not present")
    jobs = load_philly(path)
    assert len(jobs) == 82247 and jobs.skipped == {}
    assert jobs[0].submit == 0.0
    assert all(a.submit <= b.submit for a, b in itertools.pairwise(jobs))
    assert len({j.queue for j in jobs}) == 15
    sizes = Counter(j.num_pods for j in jobs)
    assert sizes[1] == 76627 + 1818 + 1870 + 1643 and sizes[16] == 3
    assert all(r.requests[GPU] <= 8 for j in jobs for r in j.roles)
    assert load_trace(path) == jobs


# ------------------------------------------------------------------------------------------ Alibaba

ALIBABA = """
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
pod-a,12000,16384,1,1000,,LS,Running,100,1100,150
pod-b,6000,12288,1,460,,BE,Running,200,900,
pod-c,4000,1024,0,0,,Burstable,Failed,300,300,300
pod-d,88000,327680,8,1000,V100M16|V100M32,Guaranteed,Succeeded,400,500,450
pod-e,1000,0,0,0,,Odd,Pending,50,60,70
"""


def test_alibaba_pods(tmp_path):
    jobs = load_alibaba(write(tmp_path, ALIBABA))
    assert isinstance(jobs, JobList) and jobs.skipped == {"duration <= 0": 2}  # pod-c and pod-e
    assert [(j.name, j.submit, j.duration, j.queue, j.priority) for j in jobs] == [
        ("pod-a", 0.0, 950.0, "LS", 100),
        ("pod-b", 100.0, 700.0, "BE", 0),
        ("pod-d", 300.0, 50.0, "Guaranteed", 100),
    ]
    a, b, d = jobs
    assert a.roles[0].requests == {"cpu": 12.0, "memory": 16384.0 * 2**20, GPU: 1.0}
    assert b.roles[0].requests[GPU] == pytest.approx(0.46)
    assert d.gpus == 8 and d.num_pods == 1 and d.min_member == 1
    assert a.source.endswith("row 1") and d.source.endswith("row 4")  # original row numbers


def test_alibaba_priorities_and_bad_rows(tmp_path):
    path = write(tmp_path, ALIBABA.replace("pod-b,6000", "pod-b,lots"))
    with pytest.raises(InputError) as info:
        load_alibaba(path)
    assert_input_error(info.value, path, 2, "cpu_milli")
    path = write(tmp_path, ALIBABA.replace("Burstable,Failed,300,300,300", "Burstable,Failed,300,400,"))
    assert {j.queue: j.priority for j in load_alibaba(path)}["Burstable"] == 50


def test_real_alibaba_traces():
    folder = TRACES / "alibaba-gpu-2023"
    if not folder.is_dir():
        pytest.skip("shared Alibaba trace not present")
    jobs = load_alibaba(folder / "openb_pod_list_default.csv")
    assert len(jobs) == 8151 and jobs.skipped == {"duration <= 0": 1}
    assert jobs[0].submit == 0.0 and {j.queue for j in jobs} == {"LS", "BE", "Burstable", "Guaranteed"}
    shared = [j for j in jobs if 0 < j.gpus < 1]
    assert len(shared) > 2000
    assert load_trace(folder / "openb_pod_list_default.csv") == jobs
    with pytest.raises(InputError) as info:
        load_alibaba(folder / "openb_pod_list_multigpu50.csv")
    assert info.value.field == "creation_time"


def test_load_trace_kinds(tmp_path):
    assert load_trace(write(tmp_path, "submit,duration\n0,1\n"))[0].name == "job-1"
    assert load_trace(write(tmp_path, PHILLY, "p.csv"))[0].name == "philly-2"
    assert load_trace(write(tmp_path, ALIBABA, "a.csv"))[0].name == "pod-a"
    with pytest.raises(InputError) as info:
        load_trace(write(tmp_path, PHILLY, "p.csv"), kind="borg")
    assert "corral, philly, alibaba" in str(info.value)


# ---------------------------------------------------------------------------------------- synthetic


def test_synthetic_is_deterministic():
    a, b, c = synthetic(7), synthetic(7), synthetic(8)
    assert a == b and a != c
    assert synthetic(np.random.default_rng(7)) == a
    assert len(a) == 200 and a[0].submit == 0.0
    assert all(x.submit <= y.submit for x, y in itertools.pairwise(a))
    assert [j.name for j in a[:2]] == ["job-000", "job-001"]


def test_synthetic_distributions():
    spec = SyntheticSpec(
        n_jobs=4000,
        arrival_rate=0.1,
        duration_median=600,
        duration_sigma=0.5,
        queues={"a": 3, "b": 1},
        priorities={0: 1, 100: 1},
        gang_sizes={1: 0.5, 4: 0.5},
        gpus_per_pod={2: 1},
    )
    jobs = synthetic(3, spec)
    gaps = np.diff([j.submit for j in jobs])
    assert np.mean(gaps) == pytest.approx(10.0, rel=0.06)
    assert np.median([j.duration for j in jobs]) == pytest.approx(600, rel=0.06)
    queues = Counter(j.queue for j in jobs)
    assert queues["a"] / len(jobs) == pytest.approx(0.75, abs=0.03)
    assert Counter(j.priority for j in jobs)[100] / len(jobs) == pytest.approx(0.5, abs=0.03)
    pods = Counter(j.num_pods for j in jobs)
    assert set(pods) == {1, 4} and pods[4] / len(jobs) == pytest.approx(0.5, abs=0.03)
    job = jobs[0]
    assert job.roles[0].requests == {"cpu": 8.0, "memory": 64.0 * GIB, GPU: 2.0}
    assert job.min_member == job.num_pods


def test_synthetic_clipping_topology_and_overrides():
    jobs = synthetic(
        1,
        n_jobs=500,
        duration_min=100,
        duration_max=200,
        topology_fraction=1.0,
        topology_tier=2,
        gang_sizes={"1": 1, "2": 1},
        memory_per_gpu="8Gi",
    )
    assert all(100 <= j.duration <= 200 for j in jobs)
    assert all(j.topology == ("hard", 2) for j in jobs if j.num_pods > 1)
    assert all(j.topology is None for j in jobs if j.num_pods == 1)
    assert jobs[0].roles[0].requests["memory"] == 8.0 * GIB * jobs[0].roles[0].requests[GPU]
    base = SyntheticSpec(n_jobs=10)
    assert synthetic(1, base, queues={"q": 1})[0].queue == "q"


def test_synthetic_spec_validation():
    spec = SyntheticSpec.from_mapping({"n_jobs": 5, "queues": {"x": 1}})
    assert spec.n_jobs == 5 and spec.queues == {"x": 1.0}
    for seed in (-1, 1.5, "x"):
        with pytest.raises(InputError):
            synthetic(seed)
    with pytest.raises(InputError) as info:
        SyntheticSpec.from_mapping({"n_jobs": 5, "jobs_per_hour": 3})
    assert info.value.field == "jobs_per_hour" and "arrival_rate" in str(info.value)
    for bad in (
        {"n_jobs": 0},
        {"n_jobs": 2.5},
        {"arrival_rate": -1},
        {"gang_sizes": {0: 1}},
        {"gang_sizes": {1.5: 1}},
        {"gpus_per_pod": {1: -1}},
        {"queues": {}},
        {"priorities": {0: 0}},
        {"topology_mode": "strict"},
        {"topology_fraction": 2},
        {"duration_min": 500, "duration_max": 100},
        {"memory_per_gpu": "lots"},
    ):
        with pytest.raises(InputError):
            SyntheticSpec.from_mapping(bad)


# ----------------------------------------------------------------------------------------- shaping


def test_filter_jobs_window_and_queues():
    jobs = synthetic(5, n_jobs=300, queues={"a": 1, "b": 1})
    window = filter_jobs(jobs, start=1000, end=5000)
    originals = [j for j in jobs if 1000 <= j.submit < 5000]
    assert [j.name for j in window] == [j.name for j in originals]
    assert window[0].submit == 0.0
    assert window[-1].submit == pytest.approx(originals[-1].submit - originals[0].submit)
    only_a = filter_jobs(jobs, queues=["a"])
    assert only_a and {j.queue for j in only_a} == {"a"} and only_a[0].submit == 0.0
    assert filter_jobs(jobs) == jobs
    with pytest.raises(InputError) as info:
        filter_jobs(jobs, queues=["c"])
    assert info.value.field == "queues" and "a, b" in str(info.value)
    with pytest.raises(InputError):
        filter_jobs(jobs, start=10, end=10)


def test_scale_arrivals():
    jobs = synthetic(2, n_jobs=20)
    scaled = scale_arrivals(jobs, 0.5)
    assert [s.submit for s in scaled] == [j.submit * 0.5 for j in jobs]
    assert [s.duration for s in scaled] == [j.duration for j in jobs]
    for factor in (0, -1, math.inf, math.nan, "2"):
        with pytest.raises(InputError) as info:
            scale_arrivals(jobs, factor)
        assert info.value.field == "factor"
