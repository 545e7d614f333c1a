"""The job-speed model (sim/speed.py, ``simulation.speed``): a job's rate from the highest topology tier
its gang spans, the GPU type it runs on (a Gavel throughput table) and its elastic pods; recomputed
whenever its running pods change, with the work done kept exact; the placement cost in the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from corral.errors import ConfigError
from corral.framework.config import parse_config
from corral.model.annotations import MODEL_CLASS
from corral.registry import REGISTRY, default_config
from corral.sim.clusters import ClusterSpec, NodeShape, from_spec
from corral.sim.engine import Engine, SimOptions
from corral.sim.jobspec import GPU, JobSpec, RoleSpec
from corral.sim.report import summarize
from corral.sim.runs import check_simulation_section
from corral.sim.speed import SPREAD_DEFAULTS, SpeedModel
from corral.sim.speed_config import speed_options


def _job(
    name: str, duration: float, pods: int = 2, *, minimum: int | None = None, klass: str = ""
) -> JobSpec:
    role = RoleSpec("", pods, {GPU: 8, "cpu": 1.0, "memory": 2.0**30})
    notes = {MODEL_CLASS: klass} if klass else {}
    return JobSpec(name, 0.0, duration, "default", (role,), min_member=minimum, annotations=notes)


def _run(
    jobs: list[JobSpec],
    speed: SpeedModel | None,
    *,
    nodes: int = 8,
    tiers: tuple[int, ...] = (2, 2),
    down: tuple[int, ...] = (),
    labels: dict[str, str] | None = None,
    up: dict[int, float] | None = None,
) -> dict[str, Any]:
    """Run on ``nodes`` nodes of 8 GPUs (tier 1: pairs of nodes, tier 2: pairs of pairs by default) with
    the nodes ``down`` failed from the start (``up``: node -> when it comes back)."""
    shape = NodeShape("n", nodes, gpus=8, labels=labels or {})
    cluster = from_spec(ClusterSpec((shape,), tiers=tiers)).instantiate(j.queue for j in jobs)
    eng = Engine(cluster, jobs, default_config(), options=SimOptions(schedule_period=10.0, speed=speed))
    for row in down:
        eng.node_down(0.0, f"n-{row:03d}", (up or {}).get(row))
    result = eng.run()
    return {"jobs": {r.job: r for r in result.jobs}, "summary": summarize(result)}


# nodes 0-3 are one tier-2 domain (leaves 0-1, 2-3), nodes 4-7 the other
ONE_LEAF = (2, 3, 4, 5, 6, 7)  # free: 0, 1 — one tier-1 domain
ONE_SPINE = (1, 3, 4, 5, 6, 7)  # free: 0, 2 — two leaves of one tier-2 domain
TWO_SPINES = (1, 2, 3, 5, 6, 7)  # free: 0, 4 — two tier-2 domains


def test_a_gang_over_two_tier2_domains_finishes_later_by_the_configured_factor() -> None:
    speed = SpeedModel({"default": ((1, 1.0), (2, 1.25), (3, 2.0))})
    inside = _run([_job("g", 1000.0)], speed, down=ONE_SPINE)["jobs"]["g"]
    across = _run([_job("g", 1000.0)], speed, down=TWO_SPINES)["jobs"]["g"]
    assert inside.first_start == across.first_start == 0.0
    assert inside.span == "tier2" and across.span == "cluster"
    assert inside.jct == pytest.approx(1250.0, rel=1e-12)
    assert across.jct == pytest.approx(2000.0, rel=1e-12)
    assert across.jct / inside.jct == pytest.approx(2.0 / 1.25, rel=1e-12)
    # 16 GPUs for 2,000 s at slowdown 2 lose half of it; for 1,250 s at 1.25, a fifth
    assert across.spread_gpu_hours == pytest.approx(16 * 2000 * 0.5 / 3600)
    assert inside.spread_gpu_hours == pytest.approx(16 * 1250 * 0.2 / 3600)


def test_without_the_model_placement_does_not_change_speed() -> None:
    inside = _run([_job("g", 1000.0)], None, down=ONE_LEAF)["jobs"]["g"]
    across = _run([_job("g", 1000.0)], None, down=TWO_SPINES)["jobs"]["g"]
    assert inside.jct == across.jct == 1000.0
    assert inside.span == across.span == "" and across.spread_gpu_hours == 0.0


def test_builtin_factors_apply_above_the_node_and_one_node_runs_at_full_speed() -> None:
    speed = SpeedModel()
    leaf = _run([_job("g", 1000.0)], speed, down=ONE_LEAF)["jobs"]["g"]
    assert leaf.span == "tier1" and leaf.jct == pytest.approx(1000.0 * SPREAD_DEFAULTS["default"][0][1])
    resnet = _run([_job("g", 1000.0, klass="imagenet")], speed, down=TWO_SPINES)["jobs"]["g"]
    assert resnet.jct == pytest.approx(1000.0 * SPREAD_DEFAULTS["imagenet"][0][1])
    single = _run([_job("s", 1000.0, pods=1)], speed)["jobs"]["s"]
    assert single.span == "node" and single.jct == 1000.0 and single.spread_gpu_hours == 0.0


def test_a_rate_change_mid_run_keeps_the_work_done_exact() -> None:
    # an elastic job (min 1 of 2 pods) runs alone on node 0 until node 1 comes back at 100 s; from then
    # its two pods run twice as fast: 100 s of work done, 900 left at rate 2 -> done at 550 s
    speed = SpeedModel({"default": ((1, 1.0),)}, elastic={"default": ((1.0, 1.0), (2.0, 2.0))})
    rec = _run([_job("e", 1000.0, minimum=1)], speed, nodes=2, tiers=(), down=(1,), up={1: 100.0})["jobs"][
        "e"
    ]
    assert rec.first_start == 0.0 and rec.end == pytest.approx(550.0, rel=1e-12)
    assert rec.span == "cluster"  # two nodes, no HyperNodes
    plain = _run([_job("e", 1000.0, minimum=1)], None, nodes=2, tiers=(), down=(1,), up={1: 100.0})
    assert plain["jobs"]["e"].end == 1000.0  # without the model the extra pod does nothing


def test_a_stop_keeps_the_work_and_the_resume_reads_the_new_placement() -> None:
    # spread over both spines at rate 1/2 until node 4 fails at 400 s (200 s of work, checkpointed every
    # second); it resumes inside one leaf (nodes 0, 1) at rate 1 for the 800 s left
    speed = SpeedModel({"default": ((1, 1.0), (3, 2.0))})
    jobs = [_job("g", 1000.0)]
    shape = NodeShape("n", 8, gpus=8)
    cluster = from_spec(ClusterSpec((shape,), tiers=(2, 2))).instantiate(j.queue for j in jobs)
    options = SimOptions(schedule_period=10.0, speed=speed, checkpoint_interval=1.0)
    eng = Engine(cluster, jobs, default_config(), options=options)
    for row in (1, 2, 3, 5, 6, 7):
        eng.node_down(0.0, f"n-{row:03d}", 200.0 if row == 1 else None)
    eng.node_down(400.0, "n-004")
    rec = {r.job: r for r in eng.run().jobs}["g"]
    assert rec.restarts == 1 and rec.gpu_hours_lost == 0.0
    assert rec.end == pytest.approx(400.0 + 800.0, rel=1e-12)
    assert rec.span == "cluster"  # the widest of its runs


def _table(tmp_path: Path) -> Path:
    table = {
        "v100": {"ResNet-50 (batch size 64)": {"null": 10.0}, "('LM (batch size 20)', 8)": {"null": 4.0}},
        "k80": {"ResNet-50 (batch size 64)": {"null": 2.5}, "('LM (batch size 20)', 8)": {"null": 2.0}},
    }
    path = tmp_path / "throughputs.json"
    path.write_text(json.dumps(table))
    return path


def test_the_gpu_type_sets_the_rate_from_the_throughput_table(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    _table(tmp_path)  # beside the configuration: a relative path is read from its folder
    got = speed_options({"speed": {"throughputs": {"file": "throughputs.json"}}}, str(config))
    speed = got["speed"]
    k80 = {"nvidia.com/gpu.product": "Tesla-K80"}
    jobs = [
        _job("resnet", 1000.0, pods=1, klass="ResNet-50 (batch size 64)"),
        _job("lm", 1000.0, pods=1, klass="LM (batch size 20)"),
        _job("other", 1000.0, pods=1, klass="unknown"),
    ]
    ran = _run(jobs, speed, nodes=3, tiers=(), labels=k80)["jobs"]
    assert ran["resnet"].jct == pytest.approx(4000.0)  # 2.5 steps/s against 10 on the reference v100
    assert ran["lm"].jct == pytest.approx(2000.0)  # the row of its scale factor (8 GPUs): 2 against 4
    assert ran["other"].jct == 1000.0  # a class the table lacks runs at the reference speed
    on_v100 = _run(jobs, speed, nodes=3, tiers=(), labels={"nvidia.com/gpu.product": "Tesla-V100-SXM2"})
    assert on_v100["jobs"]["resnet"].jct == 1000.0


def test_the_report_counts_gangs_by_span_and_the_gpu_hours_spread_cost() -> None:
    speed = SpeedModel({"default": ((1, 1.0), (3, 2.0))})
    out = _run([_job("g", 1000.0), _job("s", 500.0, pods=1)], speed, down=TWO_SPINES)["summary"]
    assert out["gangs_span_cluster"] == 1 and "gangs_span_node" not in out  # the 1-pod job is no gang
    assert out["spread_gpu_hours"] == pytest.approx(16 * 2000 * 0.5 / 3600, rel=1e-5)
    plain = _run([_job("g", 1000.0)], None, down=TWO_SPINES)["summary"]
    assert not any(k.startswith(("gangs_span_", "spread_")) for k in plain)


def test_the_settings_are_checked(tmp_path: Path) -> None:
    got = speed_options(
        {"speed": {"spread": {"default": {1: 1.2, "3": 1.5}}, "elastic": {"x": [[1, 1], [4, 3]]}}}
    )
    model = got["speed"]
    assert model.spread_factor("default", 2) == 1.2 and model.spread_factor("default", 5) == 1.5
    assert model.spread_factor("cifar10", 1) == 1.2  # a configured table replaces the built-in one
    assert SpeedModel({"x": ((1, 2.0),)}).spread_factor("y", 3) == 1.0  # no row and no default: 1
    assert (
        speed_options({"speed": {}})["speed"].spread_factor("cifar10", 1) == SPREAD_DEFAULTS["cifar10"][0][1]
    )
    assert model.elastic_speedup("x", 2.5) == pytest.approx(2.0) and model.elastic_speedup("x", 9) == 3
    assert speed_options({}) == {} and isinstance(speed_options({"speed": {}})["speed"], SpeedModel)
    _table(tmp_path)
    for bad, field in (
        ({"sped": 1}, "simulation.speed.sped"),
        ({"spread": {"default": {1: 0.5}}}, "simulation.speed.spread.default.1"),
        ({"spread": {"default": {0: 1.5}}}, "simulation.speed.spread.default"),
        ({"spread": ["default"]}, "simulation.speed.spread"),
        ({"elastic": {"x": [[2, 1], [1, 2]]}}, "simulation.speed.elastic.x[1]"),
        ({"elastic": {"x": [[1, 0]]}}, "simulation.speed.elastic.x[0]"),
        ({"throughputs": {"file": "nope.json"}}, "simulation.speed.throughputs.file"),
        (
            {"throughputs": {"file": "throughputs.json", "reference": "a100"}},
            "simulation.speed.throughputs.reference",
        ),
        ({"throughputs": {"file": "throughputs.json", "labels": "x"}}, "simulation.speed.throughputs.labels"),
    ):
        with pytest.raises(ConfigError) as info:
            speed_options({"speed": bad}, str(tmp_path / "s.yaml"))
        assert info.value.field == field, bad
    config = parse_config({"actions": "allocate", "simulation": {"speed": {"spread": 2}}}, REGISTRY, "c.yaml")
    with pytest.raises(ConfigError) as info:
        check_simulation_section(config, "c.yaml")
    assert info.value.field == "simulation.speed.spread"


def test_the_report_pages_show_the_placement_cost(tmp_path: Path) -> None:
    from corral.sim.report import summary_table, write_comparison, write_report

    speed = SpeedModel({"default": ((1, 1.0), (3, 2.0))})
    shape = NodeShape("n", 8, gpus=8)
    results = {}
    for name, options in (("with", SimOptions(speed=speed)), ("without", SimOptions())):
        jobs = [_job("g", 1000.0), _job("h", 1000.0, pods=4)]
        cluster = from_spec(ClusterSpec((shape,), tiers=(2, 2))).instantiate(j.queue for j in jobs)
        results[name] = Engine(cluster, jobs, default_config(), options=options).run()
    page = (write_report(results["with"], tmp_path / "one") / "index.html").read_text()
    assert "GPU-hours lost to spread" in page and "gangs within one tier-1 domain" in page
    both = (write_comparison(results, tmp_path / "two") / "index.html").read_text()
    assert "gangs within one tier-1 domain" in both and "GPU-hours lost to spread" in both
    table = summary_table({n: summarize(r) for n, r in results.items()})
    assert table.row_count == len(summarize(results["with"]))


def test_a_run_cut_short_counts_the_spread_of_the_runs_still_going() -> None:
    speed = SpeedModel({"default": ((1, 1.0), (3, 2.0))})
    jobs = [_job("g", 1000.0)]
    cluster = from_spec(ClusterSpec((NodeShape("n", 8, gpus=8),), tiers=(2, 2))).instantiate(["default"])
    eng = Engine(cluster, jobs, default_config(), options=SimOptions(speed=speed, until=600.0))
    for row in TWO_SPINES:
        eng.node_down(0.0, f"n-{row:03d}")
    rec = eng.run().jobs[0]
    assert rec.status == "running" and rec.span == "cluster"
    assert rec.spread_gpu_hours == pytest.approx(16 * 600 * 0.5 / 3600)


def test_the_same_inputs_give_the_same_records_with_the_model() -> None:
    from corral.sim.synthetic import SyntheticSpec, synthetic

    spec = SyntheticSpec(n_jobs=120, arrival_rate=1 / 30, gang_sizes={1: 0.5, 2: 0.3, 4: 0.2})
    speed = SpeedModel(
        {"default": ((1, 1.1), (2, 1.4), (3, 1.8))}, elastic={"default": ((1.0, 1.0), (2.0, 1.5))}
    )

    def once() -> list:
        jobs = synthetic(3, spec)
        cluster = from_spec(ClusterSpec((NodeShape("n", 8, gpus=8),), tiers=(2, 2))).instantiate(
            j.queue for j in jobs
        )
        return Engine(cluster, jobs, default_config(), options=SimOptions(speed=speed)).run().jobs

    first, second = once(), once()
    assert first == second
    assert all(r.status == "completed" and r.jct >= r.duration - 1e-6 for r in first)
    assert {r.span for r in first if r.pods > 1} - {"node"}  # some gangs did spread


def test_a_gavel_trace_runs_at_its_job_types_speed_on_each_gpu_type(tmp_path: Path) -> None:
    # the loader's job_type is the row of the same table the speed model reads: 1,000 steps of
    # ResNet-50 take 100 s on a V100 (the reference the loader times them on) and 400 s on a K80
    from corral.sim.formats import load_workload
    from corral.sim.loaders.common import Hints

    trace = tmp_path / "0e4a51.trace"
    trace.write_text("ResNet-50 (batch size 64)\tcd %s && python3 main.py\t--num_steps\t1\t1000\t0.0\t1\n")
    table = _table(tmp_path)
    jobs = list(load_workload(trace, f"gavel:throughputs={table}", Hints(lambda r: {GPU: 8.0}.get(r))))
    assert jobs[0].duration == 100.0
    speed = speed_options({"speed": {"throughputs": {"file": str(table)}}})["speed"]
    for product, jct in (("Tesla-K80", 400.0), ("Tesla-V100-SXM2-16GB", 100.0)):
        got = _run(jobs, speed, nodes=1, tiers=(), labels={"nvidia.com/gpu.product": product})
        assert got["jobs"][jobs[0].name].jct == pytest.approx(jct)


def test_the_example_configurations_differ_only_in_topology_awareness() -> None:
    from corral.framework.config import load_config_file

    folder = Path(__file__).resolve().parents[2] / "docs" / "examples" / "speed"
    aware, blind = (load_config_file(folder / f"topology-{n}.yaml", REGISTRY) for n in ("aware", "blind"))
    for config in (aware, blind):
        check_simulation_section(config, config.source)
        assert str(speed_options(config.simulation)["speed"]) == str(SpeedModel())
    names = [[p.name for tier in c.tiers for p in tier] for c in (aware, blind)]
    assert [n for n in names[0] if n != "network-topology-aware"] == names[1]
    assert "network-topology-aware" in names[0]
    assert [p.name for tier in default_config().tiers for p in tier] == names[0]


def test_factors_of_one_give_the_records_of_no_model_to_the_bit() -> None:
    # the model's work accounting adds nothing of its own: with every factor 1, starts, ends, restarts
    # and lost GPU-hours are those of a run without it, through node failures and checkpoints
    from corral.sim.synthetic import SyntheticSpec, synthetic

    spec = SyntheticSpec(n_jobs=150, arrival_rate=1 / 20, gang_sizes={1: 0.4, 2: 0.3, 4: 0.3})
    flat = SpeedModel({"default": ((1, 1.0),)})

    def once(speed: SpeedModel | None) -> list:
        jobs = synthetic(5, spec)
        cluster = from_spec(ClusterSpec((NodeShape("n", 8, gpus=8),), tiers=(2, 2))).instantiate(
            j.queue for j in jobs
        )
        options = SimOptions(speed=speed, checkpoint_interval=300.0)
        eng = Engine(cluster, jobs, default_config(), options=options)
        for at, node in ((2000.0, "n-001"), (5000.0, "n-006"), (9000.0, "n-003")):
            eng.node_down(at, node, 1500.0)
        return eng.run().jobs

    plain, flat_run = once(None), once(flat)
    assert sum(r.restarts for r in plain) > 0
    keys = ("first_start", "end", "restarts", "gpu_hours_lost", "status")
    assert [[getattr(r, k) for k in keys] for r in plain] == [[getattr(r, k) for k in keys] for r in flat_run]
    assert {r.span for r in flat_run if r.first_start is not None} >= {"node"}
