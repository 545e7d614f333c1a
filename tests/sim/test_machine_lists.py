"""Clusters from published machine lists (corral.sim.machines), the ``default_queue`` key of a cluster
spec, and the unit hints of cluster and synthetic specs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from corral.cli import app
from corral.errors import InputError
from corral.model.quantity import MILLI
from corral.model.resources import GPU
from corral.sim.cluster_keys import route_queues
from corral.sim.clusters import load_cluster
from corral.sim.synthetic import SyntheticSpec
from corral.sim.workload import load_corral_trace

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def need(relative: str) -> Path:
    path = TRACES / relative
    if not path.exists():
        pytest.skip(f"shared trace {relative} not present")
    return path


def gpus(template) -> Counter:
    cluster = template.cluster
    return Counter(int(v // MILLI) for v in cluster.nodes.allocatable[:, cluster.resources.pos(GPU)])


def test_real_philly_machine_lists():
    original = load_cluster(need("philly-cluster/cluster_machine_list"))
    assert gpus(original) == {2: 321, 8: 231}  # 2,490 GPUs, as the README counts
    labels = Counter(lbl.get("nvidia.com/gpu.memory") for lbl in original.cluster.nodes.labels)
    assert labels == {"12288": 321, "24576": 231}
    revised = load_cluster(need("philly-cluster/revised_machine_list.csv"))
    assert gpus(revised) == {8: 264, 4: 271, 2: 3, 3: 1, 0: 13}  # 3,205 GPUs


def test_real_pai_and_tiresias_clusters():
    pai = load_cluster(need("alibaba-pai-2020/pai_machine_spec.csv"))
    assert len(pai.cluster.nodes) == 1897 and sum(k * v for k, v in gpus(pai).items()) == 6742
    models = Counter(lbl["alibabacloud.com/gpu-card-model"] for lbl in pai.cluster.nodes.labels)
    assert models["P100"] == 798 and models["V100M32"] == 135 and models["CPU"] == 83
    tiresias = load_cluster(need("tiresias/n160g8.csv"))
    assert gpus(tiresias) == {8: 160}
    assert len(tiresias.cluster.hypernodes.hypernodes) == 5  # 5 switches of 32 nodes


def test_machines_in_a_spec_with_queues_and_default_queue(tmp_path):
    (tmp_path / "machines.csv").write_text(
        "machineId, number of GPUs, single GPU mem\nm0,2, 12GB\nm1,8, 24GB\n"
    )
    spec = tmp_path / "cluster.yaml"
    spec.write_text(
        "machines: {file: machines.csv}\nqueues:\n- {name: research, weight: 2}\ndefault_queue: research\n"
    )
    template = load_cluster(spec)
    assert gpus(template) == {2: 1, 8: 1} and template.default_queue == "research"
    trace = tmp_path / "t.csv"
    trace.write_text("submit,duration,queue,gpu\n0,60,research,1\n5,60,vc-a,1\n9,60,vc-b,2\n10,60,vc-a,1\n")
    jobs, moved = route_queues(template, load_corral_trace(trace))
    assert [j.queue for j in jobs] == ["research"] * 4 and moved == {"vc-a": 2, "vc-b": 1}


@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        ("nodes: [{name: a, count: 1}]\ndefault_queue: x\n", "default_queue", "needs a 'queues' list"),
        (
            "nodes: [{name: a, count: 1}]\nqueues: [{name: q}]\ndefault_queue: x\n",
            "default_queue",
            "not a queue",
        ),
        ("machines: {file: absent.csv}\n", "machines.file", "no such file"),
        ("machines: {file: m.csv, format: borg}\n", "machines.format", "unknown format"),
        ("nodes: [{name: a, count: 1, memory: 768}]\n", "nodes[0].memory", "768Gi"),
        ("nodes: [{name: a, count: 1, memory: '64'}]\n", "nodes[0].memory", "read as bytes"),
    ],
)
def test_spec_errors_name_file_and_key(tmp_path, body, field, fragment):
    spec = tmp_path / "cluster.yaml"
    spec.write_text(body)
    with pytest.raises(InputError) as info:
        load_cluster(spec)
    assert info.value.file == str(spec) and info.value.field == field and fragment in str(info.value)


def test_bad_machine_row_names_the_row(tmp_path):
    path = tmp_path / "machines"
    path.write_text("machineId, number of GPUs, single GPU mem\nm0,2, 12GB\nm1,8\n")
    with pytest.raises(InputError) as info:
        load_cluster(path)
    assert info.value.obj == "row 2" and info.value.field == "single GPU mem"
    path.write_text("machineId, number of GPUs, single GPU mem\nm0,2, 12 gigs\n")
    with pytest.raises(InputError) as info:
        load_cluster(path)
    assert info.value.obj == "row 1" and "24GB" in str(info.value)


def test_synthetic_unit_hints():
    with pytest.raises(InputError, match="write 1800 for 30m"):
        SyntheticSpec.from_mapping({"duration_median": "30m"})
    with pytest.raises(InputError, match="write 32Gi"):
        SyntheticSpec.from_mapping({"memory_per_gpu": 32})
    assert SyntheticSpec.from_mapping({"memory_per_gpu": 0}).memory_per_gpu == 0


def test_cli_names_the_file_routes_queues_and_hides_bool(tmp_path):
    runner = CliRunner()
    spec = tmp_path / "syn.yaml"
    spec.write_text("n_jobs: 5\nduration_median: 2h\n")
    out = runner.invoke(
        app, ["simulate", "--workload", str(spec), "-o", str(tmp_path / "r"), "--no-progress"]
    )
    assert out.exit_code == 2 and str(spec) in out.output and "write 7200 for 2h" in out.output
    cluster = tmp_path / "c.yaml"
    cluster.write_text("nodes: [{name: a, count: 2, gpus: 8}]\nqueues: [{name: main}]\ndefault_queue: main\n")
    trace = tmp_path / "t.csv"
    trace.write_text("submit,duration,queue,gpu\n0,60,vc-a,1\n5,60,vc-b,2\n")
    args = ["simulate", "--workload", str(trace), "--cluster", str(cluster), "-o", str(tmp_path / "r")]
    out = runner.invoke(app, [*args, "--no-progress"])
    assert out.exit_code == 0, out.output
    assert "run in 'main': vc-a (1 jobs), vc-b (1 jobs)" in out.output
    help_text = runner.invoke(app, ["simulate", "--help"], terminal_width=200).output
    assert "--force" in help_text and "<bool>" not in help_text and "swf" in help_text


def test_queue_quotas_from_a_vc_table(tmp_path):
    (tmp_path / "vc.csv").write_text("vc,node num\nvcA,4\nvcB,2\n")
    spec = tmp_path / "cluster.yaml"
    spec.write_text(
        "nodes: [{name: a, count: 6, gpus: 8}]\nqueue_quotas: {file: vc.csv}\nqueues: [{name: rest}]\n"
        "default_queue: rest\n"
    )
    cluster = load_cluster(spec).cluster
    gpu = cluster.resources.pos(GPU)
    assert cluster.queues["vcA"].weight == 4 and cluster.queues["vcA"].capability[gpu] == 32 * MILLI
    assert cluster.queues["vcB"].deserved[gpu] == 16 * MILLI and "rest" in cluster.queues
    (tmp_path / "vc.csv").write_text("vc,node num\nvcA,4\nvcB\n")
    with pytest.raises(InputError) as info:
        load_cluster(spec)
    assert info.value.obj == "row 2" and info.value.file == str(tmp_path / "vc.csv")


def test_real_philly_vc_quotas(tmp_path):
    quotas = need("philly-cluster/philly_vc.csv")
    spec = tmp_path / "cluster.yaml"
    spec.write_text(f"nodes: [{{name: a, count: 352, gpus: 8}}]\nqueue_quotas: {{file: {quotas}}}\n")
    cluster = load_cluster(spec).cluster
    assert sum(q.weight for n, q in cluster.queues.items() if n != "default") == 352  # 11 VCs, 352 nodes
    lucid = need("helios-aggregates/Lucid/Venus/vc_config.csv")  # header ",num"
    spec.write_text(f"nodes: [{{name: a, count: 135, gpus: 8}}]\nqueue_quotas: {{file: {lucid}}}\n")
    cluster = load_cluster(spec).cluster
    assert len(cluster.queues) == 16 and sum(q.weight for q in cluster.queues.values()) == 136  # + default
