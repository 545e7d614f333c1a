"""The workload formats of the registry (corral.sim.formats) and their loaders: SWF, Gavel, Pollux,
Tiresias, Alibaba 2025 DLRM and Helios — each on a small file written here and on the real file under
../shared/traces (skipped when absent) — plus reading by content and the truncated-row rule."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from corral.errors import InputError
from corral.model.annotations import EXPECTED_RUNTIME
from corral.sim.formats import FORMATS, detect, load_trace, load_workload, parse_format
from corral.sim.jobspec import GPU
from corral.sim.loaders.common import Hints
from corral.sim.workload import load_corral_trace

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
GIB = 2**30


def need(relative: str) -> Path:
    path = TRACES / relative
    if not path.exists():
        pytest.skip(f"shared trace {relative} not present")
    return path


def hints(per_node: dict[str, float] | None = None) -> Hints:
    table = per_node or {GPU: 8.0}
    return Hints(lambda resource: table.get(resource))


def write(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(text.lstrip("\n"))
    return path


# ----------------------------------------------------------------------------------------------- SWF

SWF = """
; Version: 2.2
; MaxNodes: 4
; MaxProcs: 16
    1   0  10  100  4  -1 -1   4  300 -1 1 1 1 -1  1 1 -1 -1
    2   5  -1   50 -1  -1 -1  10   -1 -1 0 2 1 -1  2 1 -1 -1
    3   9   0   -1  2  -1 -1   2  100 -1 5 1 1 -1  1 1 -1 -1
    4  12   0    0  2  -1 -1   2  100 -1 5 1 1 -1  1 1 -1 -1
    5  20   0   30 -1  -1 -1  -1   60 -1 1 1 1 -1  1 2 -1 -1
"""


def test_swf_maps_processors_estimates_and_skips(tmp_path):
    path = write(tmp_path, SWF, "log.swf")
    jobs = load_workload(path, None, hints({GPU: 4.0}))
    assert jobs.skipped == {
        "run time unknown (-1)": 1,
        "run time 0 (never ran)": 1,
        "processor count unknown": 1,
    }
    one, two = jobs
    assert (one.name, one.submit, one.duration, one.queue) == ("swf-1", 0.0, 100.0, "default")
    assert one.annotations == {EXPECTED_RUNTIME: "300s"} and two.annotations == {}
    assert one.num_pods == 1 and one.gpus == 4
    # 10 processors on nodes of 4: a rigid gang of 3 pods (4 + 3 + 3)
    assert two.num_pods == 3 and two.min_pods == 3 and two.gpus == 10
    assert sorted(r.requests[GPU] for r in two.roles) == [3.0, 4.0]


def test_swf_resource_per_node_and_queues(tmp_path):
    path = write(tmp_path, SWF, "log.swf")
    jobs = load_workload(path, "swf:resource=cpu,per_node=2,queues=number", hints())
    assert [j.num_pods for j in jobs] == [2, 5]
    assert jobs[0].roles[0].requests == {"cpu": 2.0}
    assert [j.queue for j in jobs] == ["queue-1", "queue-2"]
    # without a cluster amount of the resource: the header's MaxProcs / MaxNodes (16 / 4)
    jobs = load_workload(path, "swf:resource=cpu", hints())
    assert [j.num_pods for j in jobs] == [1, 3]
    for bad, field in (
        ("swf:per_node=0", "--format swf:per_node"),
        ("swf:queues=user", "--format swf:queues"),
    ):
        with pytest.raises(InputError) as info:
            load_workload(path, bad, hints())
        assert info.value.field == field


@pytest.mark.parametrize(
    ("line", "field", "fragment"),
    [
        ("6 30 0 10 1 -1 -1 1 60 -1 1 1 1", "executable", "truncated row"),
        ("6 30 0 10 1 -1 -1 1 60 -1 1 1 1 -1 1 1 -1 -1 7", None, "more than SWF's 18"),
        ("6 30 0 ten 1 -1 -1 1 60 -1 1 1 1 -1 1 1 -1 -1", "run_time", "'ten'"),
        ("6 30 0 10 1 -1 -1 -5 60 -1 1 1 1 -1 1 1 -1 -1", "requested_processors", "'-5'"),
        ("6 30 0 10 1 -1 -1 1.5 60 -1 1 1 1 -1 1 1 -1 -1", "requested_processors", "whole number"),
    ],
)
def test_swf_bad_rows_name_the_row(tmp_path, line, field, fragment):
    path = write(tmp_path, SWF + line + "\n", "log.swf")
    with pytest.raises(InputError) as info:
        load_workload(path, "swf", hints())
    assert info.value.obj == "row 6" and info.value.field == field and fragment in str(info.value)
    assert info.value.file == str(path)


def test_gzip_is_read_by_content_not_by_name(tmp_path):
    packed = tmp_path / "log.swf"  # gzip data without the suffix
    packed.write_bytes(gzip.compress(SWF.lstrip().encode()))
    plain = write(tmp_path, SWF, "plain.swf.gz")  # the suffix without gzip data
    assert detect(packed) == "swf" and detect(plain) == "swf"
    strip = lambda jobs: [(j.name, j.submit, j.duration, j.roles, j.annotations) for j in jobs]  # noqa: E731
    assert strip(load_workload(packed, None, hints())) == strip(load_workload(plain, None, hints()))
    csv = tmp_path / "trace.dat"
    csv.write_bytes(gzip.compress(b"submit,duration,gpu\n0,60,2\n"))
    assert load_corral_trace(csv)[0].gpus == 2
    broken = tmp_path / "broken.csv"
    broken.write_bytes(gzip.compress(b"submit,duration\n0,60\n")[:-12])
    with pytest.raises(InputError, match="gzip"):
        load_corral_trace(broken)


def test_real_swf_logs():
    folder = need("pwa-swf")
    kth = load_workload(folder / "KTH-SP2-1996-2.1-cln.swf.gz", "swf:per_node=1", hints())
    assert len(kth) == 27992 and kth.skipped == {}  # every job line of the README's count
    assert kth[0].name == "swf-15" and kth[0].submit == 0.0
    assert all(j.num_pods == j.gpus for j in kth)  # one processor per node: one pod per processor
    assert sum(EXPECTED_RUNTIME in j.annotations for j in kth) == 27992
    thunder = load_workload(folder / "LLNL-Thunder-2007-1.1-cln.swf.gz", None, hints())
    # the README: Run Time -1 for 1,190 jobs (their submit time is unknown too)
    assert thunder.skipped == {"submit time unknown (-1)": 1190, "run time 0 (never ran)": 6236}
    assert sum(thunder.skipped.values()) + len(thunder) == 121039
    assert sum(EXPECTED_RUNTIME in j.annotations for j in thunder) < len(thunder)  # Requested Time -1


# --------------------------------------------------------------------------------------------- Gavel

GAVEL = (
    "ResNet-50 (batch size 16)\tcd %s && python3 main.py\t--num_steps\t1\t1000\t0.000000\t1\n"
    "LM (batch size 20)\tcd %s && python3 main.py\t-n\t0\t600\t30.500000\t16\n"
    "LM (batch size 20)\tcd %s && python3 main.py\t-n\t0\t600\t40.000000\t0\n"
)
THROUGHPUTS = {
    "v100": {
        "('ResNet-50 (batch size 16)', 1)": {"null": 10.0},
        "LM (batch size 20)": {"null": 2.0, "x": [1, 2]},
    },
    "k80": {"LM (batch size 20)": {"null": 0.5}},
}


def test_gavel_steps_over_throughputs(tmp_path):
    path = write(tmp_path, GAVEL, "0e4a51.trace")
    table = tmp_path / "thr.json"
    table.write_text(json.dumps(THROUGHPUTS))
    assert detect(path) == "gavel"
    jobs = load_workload(path, f"gavel:throughputs={table}", hints())
    assert jobs.skipped == {"scale_factor 0": 1}
    resnet, lm = jobs
    assert (resnet.duration, resnet.gpus, resnet.queue) == (100.0, 1, "0e4a51")
    assert (lm.submit, lm.duration, lm.num_pods, lm.gpus) == (30.5, 300.0, 2, 16)
    # the job type is the model class the speed model reads (the throughput table's row)
    assert lm.annotations == {"corral.io/model-class": "LM (batch size 20)"}
    with pytest.raises(InputError) as info:
        load_workload(path, f"gavel:throughputs={table},worker=k80", hints())
    assert info.value.obj == "row 1" and info.value.field == "job_type"
    with pytest.raises(InputError, match="throughput table"):
        load_workload(path, "gavel", hints())


def test_real_gavel_trace(tmp_path):
    path = need("gavel-msr/seed=0/0e4a51.trace")
    kinds = sorted({line.split("\t")[0] for line in path.read_text().splitlines()})
    table = tmp_path / "thr.json"
    table.write_text(json.dumps({"v100": {k: {"null": 1.0} for k in kinds}}))
    jobs = load_workload(path, f"gavel:throughputs={table}", hints())
    assert len(jobs) == 1181  # the README's count
    assert Counter(int(j.gpus) for j in jobs) == {1: 436, 2: 226, 4: 451, 8: 68}


# -------------------------------------------------------------------------------------------- Pollux

POLLUX = """
name,time,application,num_replicas,batch_size
cifar10-0,107,cifar10,6,2048
imagenet-1,110,imagenet,12,320
"""


def test_pollux_durations_table(tmp_path):
    path = write(tmp_path, POLLUX, "workload-1.csv")
    table = write(
        tmp_path,
        "application,duration,num_replicas\ncifar10,600,\nimagenet,7200,\nimagenet,3600,12\n",
        "d.csv",
    )
    jobs = load_workload(path, f"pollux:durations={table}", hints({GPU: 4.0}))
    assert [(j.name, j.submit, j.duration, j.num_pods, j.gpus) for j in jobs] == [
        ("cifar10-0", 0.0, 600.0, 2, 6),
        ("imagenet-1", 3.0, 3600.0, 3, 12),
    ]
    assert [j.annotations["corral.io/model-class"] for j in jobs] == ["cifar10", "imagenet"]
    short = write(tmp_path, "application,duration\ncifar10,600\n", "short.csv")
    with pytest.raises(InputError) as info:
        load_workload(path, f"pollux:durations={short}", hints())
    assert info.value.obj == "row 2" and info.value.field == "application"


def test_real_pollux_workload(tmp_path):
    path = need("pollux-workloads/workloads/workload-1.csv")
    apps = ("cifar10", "ncf", "deepspeech2", "bert", "yolov3", "imagenet")
    table = write(tmp_path, "application,duration\n" + "".join(f"{a},600\n" for a in apps), "d.csv")
    jobs = load_workload(path, f"pollux:durations={table}", hints({GPU: 4.0}))
    assert len(jobs) == 160 and detect(path) == "pollux"
    assert all(j.submit <= 8 * 3600 for j in jobs)


# ------------------------------------------------------------------------------------------ Tiresias


def test_real_tiresias_trace():
    path = need("tiresias/60_job.csv")
    jobs = load_trace(path)
    assert len(jobs) == 60 and detect(path) == "tiresias"
    assert Counter(int(j.gpus) for j in jobs) == {1: 30, 2: 10, 4: 10, 8: 10}  # the README's mix
    assert jobs[0].name == "tiresias-0" and jobs[0].duration == 164.0
    assert jobs[0].annotations == {"corral.io/model-class": "vgg19"}  # model_name
    with pytest.raises(InputError, match="duplicate job name 'tiresias-10'"):
        load_trace(path.parent / "tf_job.csv", "tiresias")


# -------------------------------------------------------------------------------------- Alibaba DLRM

DLRM = """
instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,scheduled_time,deletion_time
i-0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640,800,8,,,500
i-1,CN,app_1,4,4,0,0,0,0,16,16,10,10,-1,100,110,
i-2,CN,app_1,4,4,0,0,0,0,16,16,10,10,-1,200,210,210
"""


def test_dlrm_instances(tmp_path):
    path = write(tmp_path, DLRM, "dlrm.csv")
    assert detect(path) == "alibaba-dlrm"
    jobs = load_trace(path)
    assert jobs.skipped == {"run time <= 0": 1}
    first, second = jobs
    assert (first.name, first.submit, first.duration) == ("i-0", 0.0, 500.0)  # existed before the trace
    assert first.roles[0].requests == {"cpu": 12.0, "memory": 120.0 * GIB, GPU: 1.0}
    assert (second.submit, second.duration) == (100.0, 390.0)  # runs to the trace's last time (500)
    assert GPU not in second.roles[0].requests


def test_real_dlrm_trace():
    path = need("alibaba-gpu-2025-dlrm/disaggregated_DLRM_trace.csv")
    jobs = load_trace(path)
    assert len(jobs) + sum(jobs.skipped.values()) == 23871
    assert sum(j.gpus for j in jobs) <= 7386 and jobs[0].submit == 0.0


# -------------------------------------------------------------------------------------------- Helios

HELIOS = """
job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
101,u1,vcA,16,32,2,COMPLETED,2020-04-01 00:00:10,2020-04-01 00:01:00,2020-04-01 01:01:00,3600,50
102,u2,vcB,0,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:00,2020-04-01 00:10:00,600,0
103,u2,vcB,3,6,2,FAILED,2020-04-01 00:02:00,2020-04-01 00:02:30,2020-04-01 00:03:30,60,30
104,u3,vcA,1,1,1,CANCELLED,2020-04-01 00:03:00,,2020-04-01 00:04:00,0,60
"""


def test_helios_cluster_log_schema(tmp_path):
    path = write(tmp_path, HELIOS, "cluster_log.csv")
    assert detect(path) == "helios"
    jobs = {j.name: j for j in load_trace(path)}
    assert load_trace(path).skipped == {"duration 0 (never ran)": 1}
    big, cpu, odd = jobs["helios-101"], jobs["helios-102"], jobs["helios-103"]
    assert (big.submit, big.duration, big.queue, big.num_pods, big.gpus) == (10.0, 3600.0, "vcA", 2, 16)
    assert big.roles[0].requests == {"cpu": 16.0, GPU: 8.0}
    assert cpu.gpus == 0 and cpu.submit == 0.0
    assert sorted(r.requests[GPU] for r in odd.roles) == [1.0, 2.0] and odd.num_pods == 2


# ------------------------------------------------------------------------------------------ registry


def test_format_option_syntax_and_detection(tmp_path):
    assert parse_format("swf:resource=cpu, per_node=2") == ("swf", {"resource": "cpu", "per_node": "2"})
    assert parse_format(None) == (None, {})
    for bad in ("borg", "swf:resource", "swf:=cpu"):
        with pytest.raises(InputError) as info:
            parse_format(bad)
        assert info.value.field == "--format"
    with pytest.raises(InputError, match="unknown option 'gpus' of format swf"):
        load_workload(write(tmp_path, SWF, "a.swf"), "swf:gpus=8", hints())
    with pytest.raises(InputError, match="unknown option"):
        load_workload(write(tmp_path, "submit,duration\n0,1\n", "t.csv"), "corral:x=1", hints())
    assert detect(write(tmp_path, "submit,duration\n0,1\n", "t.csv")) == "corral"
    assert detect(write(tmp_path, "n_jobs: 3\n", "s.yaml")) == "synthetic"
    assert {
        "corral",
        "philly",
        "alibaba",
        "alibaba-dlrm",
        "swf",
        "gavel",
        "pollux",
        "tiresias",
        "helios",
    } < set(FORMATS)
    from corral.commands.simulate import FORMATS as CLI_FORMATS

    assert tuple(FORMATS) == CLI_FORMATS  # the CLI's static list is the registry's


def test_cli_reports_skipped_rows(tmp_path):
    import json as _json

    from typer.testing import CliRunner

    from corral.cli import app

    log = write(tmp_path, SWF, "log")  # no suffix: recognised by content
    cluster = write(tmp_path, "nodes: [{name: n, count: 4, gpus: 4}]\n", "c.yaml")
    out_dir = tmp_path / "r"
    args = [
        "simulate",
        "--workload",
        str(log),
        "--cluster",
        str(cluster),
        "-o",
        str(out_dir),
        "--no-progress",
    ]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "trace rows skipped: 1 (run time unknown (-1)), 1 (run time 0 (never ran))" in out.output
    meta = _json.loads((out_dir / "meta.json").read_text())
    assert meta["skipped_rows"]["processor count unknown"] == 1
    bad = CliRunner().invoke(app, [*args[:2], str(log), "--format", "swf:gpus=2", *args[3:]])
    assert bad.exit_code == 2 and "unknown option 'gpus' of format swf" in bad.output
