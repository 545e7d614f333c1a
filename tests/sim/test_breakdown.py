"""The per-size and per-queue breakdown, checked against a hand computation."""

from __future__ import annotations

import pytest

from corral.errors import InputError
from corral.sim.breakdown import breakdown, parse_buckets, size_labels
from corral.sim.report import summarize
from corral.sim.result import ClusterSample, JobRecord, SimResult


def rec(name, gpus, submit, start, end, duration, queue="a", status=None):
    return JobRecord(
        job=name,
        queue=queue,
        priority=0,
        pods=1,
        min_member=1,
        gpus=gpus,
        duration=duration,
        submit=submit,
        first_start=start,
        end=end,
        wait=None if start is None else start - submit,
        jct=None if end is None else end - submit,
        status=status or ("completed" if end is not None else "running" if start is not None else "pending"),
    )


def small_result() -> SimResult:
    jobs = [
        rec("s1", 1, 0, 0, 5, 5),  # jct 5, slowdown 1, bounded max(5/10, 1) = 1
        rec("s2", 1, 0, 20, 40, 20),  # jct 40, slowdown 2, bounded 2
        rec("m1", 4, 0, 10, 110, 100, "b"),  # jct 110, slowdown 1.1, bounded 1.1
        rec("m2", 8, 0, 30, None, 100, "b"),  # running: wait 30, no jct
        rec("l1", 16, 0, 300, 400, 100),  # jct 400, slowdown 4, bounded 4
        rec("x1", 64, 0, None, None, 100),  # never started
        rec("c1", 0, 0, 1, 3, 2),  # CPU only: jct 3, slowdown 1.5, bounded 1
    ]
    return SimResult(
        jobs=jobs,
        cluster=[
            ClusterSample(0, 1, 8, 0.125, 1, 1, 6.0, 2.0),
            ClusterSample(50, 1, 8, 0.125, 1, 1, 2.0, 0.0),
        ],
        meta={"end_time": 100.0},
    )


def test_labels_and_bucket_parsing():
    assert size_labels((1, 8, 32)) == ["1 GPU", "2-8", "9-32", ">32"]
    assert size_labels((2, 4)) == ["<=2", "3-4", ">4"]
    assert parse_buckets("1, 8,32") == (1, 8, 32) and parse_buckets(None) == (1, 8, 32)
    for bad in ("", "8,1", "0,2", "a", "1,1"):
        with pytest.raises(InputError):
            parse_buckets(bad)


def test_breakdown_by_size_and_queue_by_hand():
    rows = {(r["by"], r["group"]): r for r in breakdown(small_result())}
    assert list(rows) == [
        ("size", "0 GPU"),
        ("size", "1 GPU"),
        ("size", "2-8"),
        ("size", "9-32"),
        ("size", ">32"),
        ("queue", "a"),
        ("queue", "b"),
    ]
    one = rows[("size", "1 GPU")]
    assert (one["jobs"], one["completed"], one["waiting"]) == (2, 2, 0)
    assert (one["jct_mean"], one["wait_mean"], one["wait_max"]) == (22.5, 10.0, 20)
    assert (one["slowdown_mean"], one["bounded_slowdown_mean"]) == (1.5, 1.5)
    mid = rows[("size", "2-8")]
    assert (mid["jobs"], mid["completed"], mid["wait_mean"], mid["jct_mean"]) == (2, 1, 20.0, 110.0)
    assert mid["slowdown_mean"] == pytest.approx(1.1)
    huge = rows[("size", ">32")]
    # never started: its wait counts up to the end of the run (100 s), censored, not left out
    assert (huge["jobs"], huge["waiting"], huge["wait_mean"], huge["jct_mean"]) == (1, 1, 100.0, None)
    assert rows[("size", "0 GPU")]["bounded_slowdown_mean"] == 1.0
    qa = rows[("queue", "a")]  # s1, s2, l1, x1, c1
    assert (qa["jobs"], qa["completed"], qa["waiting"]) == (5, 4, 1)
    assert qa["jct_mean"] == pytest.approx((5 + 40 + 400 + 3) / 4)
    assert qa["wait_max"] == 300


def test_summary_slowdowns_and_demand():
    s = summarize(small_result())
    # completed jobs: slowdowns 1, 2, 1.1, 4, 1.5 ; bounded 1, 2, 1.1, 4, 1
    assert s["slowdown_mean"] == pytest.approx((1 + 2 + 1.1 + 4 + 1.5) / 5)
    assert s["bounded_slowdown_mean"] == pytest.approx((1 + 2 + 1.1 + 4 + 1) / 5)
    # pending demand 6 for 50 s, then 2 for 50 s; fragmented 2 then 0
    assert (s["pending_gpus_mean"], s["fragmented_gpus_mean"]) == (4.0, 1.0)


def test_engine_samples_waiting_demand_and_fragmentation():
    from tests.sim.test_engine import engine, job

    # one node of 8 GPUs: a takes 6 at 0; b (4 GPUs) waits until a ends at 100. While b waits, 4 GPUs
    # are asked for and the 2 free GPUs cannot host a 4-GPU pod: 2 fragmented.
    result = engine([job("a", 0, 100, 6), job("b", 0, 50, 4)], nodes=1).run()
    seen = [(s.time, s.gpu_used, s.pending_gpus, s.fragmented_gpus) for s in result.cluster]
    assert seen[0] == (0, 6, 4, 2)
    assert seen[-2:] == [(100, 4, 0, 0), (150, 0, 0, 0)]


def test_fractional_gpu_jobs_have_their_own_bucket():
    result = small_result()
    result.jobs += [rec("f1", 0.5, 0, 50, 60, 10), rec("f2", 0.25, 0, 70, 80, 10)]
    rows = {(r["by"], r["group"]): r for r in breakdown(result)}
    assert [g for by, g in rows if by == "size"][:3] == ["0 GPU", "fractional", "1 GPU"]
    frac = rows[("size", "fractional")]
    assert (frac["jobs"], frac["wait_mean"]) == (2, 60.0)
    assert rows[("size", "1 GPU")]["jobs"] == 2  # the whole-GPU jobs alone


def test_waits_of_jobs_still_waiting_are_censored_not_left_out():
    s = summarize(small_result())
    # started: 0, 20, 10, 30, 300, 1 ; x1 never started: 100 (the run's end) - 0
    assert s["wait_mean"] == pytest.approx((0 + 20 + 10 + 30 + 300 + 1 + 100) / 7)
    result = small_result()
    result.jobs[5].status = "never_fits"  # a job that can never run is counted apart, not as a wait
    assert summarize(result)["wait_mean"] == pytest.approx((0 + 20 + 10 + 30 + 300 + 1) / 6)
