"""Property: for every trace loader and machine-list reader, a data row cut short (any cut that loses at
least one field, keeping something of the row) is an InputError naming the file and that row — never a
job whose missing cells took defaults (a lost ``gpu`` cell would make a 0-GPU job)."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.errors import InputError
from corral.sim.clusters import load_cluster
from corral.sim.formats import load_workload
from corral.sim.loaders.common import Hints


def _workload(fmt: str) -> Callable[[Path, Path], object]:
    def load(path: Path, folder: Path) -> object:
        options = {
            "gavel": f"gavel:throughputs={folder / 'thr.json'}",
            "pollux": f"pollux:durations={folder / 'dur.csv'}",
        }.get(fmt, fmt)
        return load_workload(path, options, Hints())

    return load


def _cluster(path: Path, folder: Path) -> object:
    return load_cluster(path)


# format -> (lines before the data rows, data rows, loader)
CASES: dict[str, tuple[list[str], list[str], Callable[[Path, Path], object]]] = {
    "corral": (
        ["name,submit,duration,queue,priority,pods,min_member,gpu,cpu,memory"],
        ["a,0,60,q,0,2,2,8,32,256Gi", "b,5,120,q,1,1,1,1,4,16Gi", "c,9,30,r,0,4,2,0.5,500m,8Gi"],
        _workload("corral"),
    ),
    "philly": (
        ["timestamp,duration,num_gpus,gpu_time,cluster"],
        ["2017-10-09 07:01:55,66.0,1,66.0,11cb48", "2017-10-09 07:00:00,100.0,16,1600.0,6214e9"],
        _workload("philly"),
    ),
    "alibaba": (
        [
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
        ],
        ["p-a,12000,16384,1,1000,,LS,Running,100,1100,150", "p-b,6000,12288,1,460,,BE,Running,200,900,"],
        _workload("alibaba"),
    ),
    "alibaba-dlrm": (
        [
            "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,"
            "memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,"
            "scheduled_time,deletion_time"
        ],
        [
            "i-0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640,800,8,,,500",
            "i-1,CN,app_1,4,4,0,0,0,0,16,16,10,10,-1,100,110,",
        ],
        _workload("alibaba-dlrm"),
    ),
    "swf": (
        ["; Version: 2.2", "; MaxProcs: 8"],
        [
            "    1   0  10  100  4  -1 -1   4  300 -1 1 1 1 -1  1 1 -1 -1",
            "    2   5  -1   50 -1  -1 -1   2   -1 -1 0 2 1 -1  2 1 -1 -1",
        ],
        _workload("swf"),
    ),
    "gavel": (
        [],
        [
            "LM (batch size 20)\tcd %s && python3 main.py\t-n\t0\t600\t0.000000\t1",
            "A3C\tpython3 a.py\t-n\t0\t90\t3.5\t4",
        ],
        _workload("gavel"),
    ),
    "pollux": (
        ["name,time,application,num_replicas,batch_size"],
        ["cifar10-0,107,cifar10,6,2048", "ncf-1,135,ncf,1,32768"],
        _workload("pollux"),
    ),
    "tiresias": (
        ["job_id,num_gpu,submit_time,iterations,model_name,duration,interval"],
        ["0,1,0,606,vgg19,164,30", "1,8,30,133,vgg11,147,23"],
        _workload("tiresias"),
    ),
    "helios": (
        ["job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"],
        [
            "101,u1,vcA,16,32,2,COMPLETED,2020-04-01 00:00:10,2020-04-01 00:01:00,2020-04-01 01:01:00,3600,50",
            "102,u2,vcB,0,4,1,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:00:00,2020-04-01 00:10:00,600,0",
        ],
        _workload("helios"),
    ),
    "machines-philly": (
        ["machineId, number of GPUs, single GPU mem"],
        ["m0,2, 12GB", "m1,8, 24GB"],
        _cluster,
    ),
    "machines-philly-revised": ([",machineId,number of GPUs"], ["0,m0,8", "1,m1,4"], _cluster),
    "machines-pai": ([], ["7399a758,CPU,96,512,0", "75c536d5,V100,96,512,8"], _cluster),
    "machines-tiresias": (
        ["num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node"],
        ["1,32,4,40,256"],
        _cluster,
    ),
}
_DELIMITER = re.compile(r",\s*|\t|\s+")


def _write_extras(folder: Path) -> None:
    (folder / "thr.json").write_text(
        json.dumps({"v100": {"LM (batch size 20)": {"null": 2.0}, "A3C": {"null": 1.0}}})
    )
    (folder / "dur.csv").write_text("application,duration\ncifar10,600\nncf,60\n")


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_whole_files_load(fmt):
    before, rows, load = CASES[fmt]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _write_extras(folder)
        path = folder / "trace"
        path.write_text("\n".join([*before, *rows]) + "\n")
        assert load(path, folder)


@pytest.mark.parametrize("fmt", sorted(CASES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_row_cut_short_is_an_error_naming_it(fmt, data):
    before, rows, load = CASES[fmt]
    index = data.draw(st.integers(0, len(rows) - 1), label="row")
    row = rows[index]
    first = len(row) - len(row.lstrip())  # keep at least one character that is not blank
    last = max(m.start() for m in _DELIMITER.finditer(row.rstrip()))  # lose at least the last field
    cut = data.draw(st.integers(first + 1, last), label="cut")
    lines = [*before, *rows[:index], row[:cut], *rows[index + 1 :]]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _write_extras(folder)
        path = folder / "trace"
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(InputError) as info:
            load(path, folder)
    assert info.value.file == str(path)
    assert info.value.obj == f"row {index + 1}", str(info.value)
