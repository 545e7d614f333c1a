"""Property tests (hypothesis) of ``preempt`` and ``reclaim`` (SPEC.md §3.2, §3.4, §5; seeds 002, 003).

Random small clusters: a few nodes (GPUs, CPU, a few pod slots), one to three queues, running jobs of
several priorities spread over the nodes (some not preemptable, some in kube-system, some being deleted,
some with a start time that min-runtime protects), and pending jobs of various priorities. One cycle of
``enqueue, allocate, preempt, reclaim`` runs with gang, conformance, minruntime, predicates, pdb and
either proportion or capacity; then the decisions are applied (evicted pods stay Releasing) and:

- no node holds more than it has: now (binds, with releasing pods still there) and once the releasing
  and evicted pods are gone (running pods plus every nomination, the preemptors' included);
- a preempt victim's job is of strictly lower priority than its preemptor's, in the same queue, and never
  the preemptor itself, nor kube-system, nor marked not preemptable;
- reclaim takes only from other, reclaimable queues and never pushes a victim queue below its deserved
  share (read from a Session's queue plugin before the cycle) in a scarce resource its victims held
  (one the queues together ask more of than the cluster has; see :mod:`corral.plugins.queues`);
- no victim protected by min-runtime is evicted (an elastic one keeps at least minMember);
- a preemptor that evicted anything is pipelined (its gang reaches minMember counting nominations).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.framework.config import parse_config
from corral.framework.cycle import apply_decisions, run_cycle
from corral.framework.session import Session
from corral.manifests import build_cluster
from corral.model import TaskStatus
from corral.model.clock import parse_time
from corral.model.resources import EPS
from corral.registry import REGISTRY
from tests.actions.gang_minimum import assert_no_gang_left_broken
from tests.scenarios.expand import expand

NOW = "2026-01-01T12:00:00Z"
T_NOW = parse_time(NOW)
PREEMPT_MIN, RECLAIM_MIN = 60.0, 120.0
START = "kai.scheduler/last-start-timestamp"
SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}

#: seconds before NOW a running job started (None: no annotation, never protected)
AGES = [None, None, 10, 90, 300]


def _stamp(age: int) -> str:
    t = int(T_NOW) - age
    h, rem = divmod(t % 86400, 3600)
    return f"2026-01-01T{h:02d}:{rem // 60:02d}:{rem % 60:02d}Z"


def config(queue_plugin: str, gang_preemptable: bool) -> dict:
    return {
        "actions": "enqueue, allocate, preempt, reclaim",
        "tiers": [
            {
                "plugins": [
                    {"name": "priority"},
                    {
                        "name": "gang",
                        "enablePreemptable": gang_preemptable,
                        "enableReclaimable": gang_preemptable,
                    },
                    {"name": "conformance"},
                    {
                        "name": "minruntime",
                        "arguments": {
                            "defaultPreemptMinRuntime": f"{int(PREEMPT_MIN)}s",
                            "defaultReclaimMinRuntime": f"{int(RECLAIM_MIN)}s",
                        },
                    },
                ]
            },
            {"plugins": [{"name": "predicates"}, {"name": queue_plugin}, {"name": "pdb"}]},
        ],
    }


@st.composite
def cases(draw, reclaim: bool = False) -> dict:
    """A scenario in the shorthand of ``tests/scenarios/expand.py`` whose running pods fit their nodes
    (``reclaim``: always two or three queues, the pending jobs in the first, the running ones in the
    others)."""
    nodes, free = [], {}
    for i in range(draw(st.integers(1, 4))):
        gpu = draw(st.sampled_from([4, 8]))
        slots = draw(st.sampled_from([3, 5, 110]))
        nodes.append({"name": f"n{i}", "gpu": gpu, "cpu": 16, "memory": "64Gi", "pods": slots})
        free[f"n{i}"] = {"gpu": gpu, "cpu": 16, "pods": slots}
    queue_plugin = draw(st.sampled_from(["proportion", "capacity"]))
    n_queues = draw(st.integers(2 if reclaim else 1, 3))
    # half of the cases keep the running jobs out of the first queue and the pending ones in it, so
    # that reclaim (across queues) has something to do after preempt (inside a queue)
    skew = reclaim or (n_queues > 1 and draw(st.booleans()))
    queues = []
    for i in range(n_queues):
        q: dict = {"name": f"q{i}", "weight": draw(st.integers(1, 3))}
        if queue_plugin == "capacity":
            low = 6 if skew and i == 0 else 0
            q["deserved"] = {
                "nvidia.com/gpu": draw(st.integers(low, 12)),
                "cpu": draw(st.integers(2 * low, 24)),
                "memory": "256Gi",
            }
        if draw(st.integers(0, 5)) == 0:
            q["reclaimable"] = False
        queues.append(q)
    qnames = [q["name"] for q in queues]
    running_q = qnames[1:] if skew else qnames
    pending_q = qnames[:1] if skew else qnames
    jobs = []
    for j in range(draw(st.integers(1, 6))):
        count = draw(st.integers(1, 3))
        gpu = draw(st.sampled_from([1, 2, 4]))
        cpu = draw(st.integers(1, 4))
        placed = []
        for _ in range(count):
            fits = [n for n, f in free.items() if f["gpu"] >= gpu and f["cpu"] >= cpu and f["pods"] >= 1]
            if not fits:
                break
            n = draw(st.sampled_from(fits))
            free[n]["gpu"] -= gpu
            free[n]["cpu"] -= cpu
            free[n]["pods"] -= 1
            placed.append(n)
        if not placed:
            continue
        group: dict = {"count": len(placed), "gpu": gpu, "cpu": cpu, "nodes": placed}
        kind = draw(st.sampled_from(["plain"] * 8 + ["guarded", "deleting", "web"]))
        if kind == "guarded":
            group["labels"] = {"volcano.sh/preemptable": "false"}
        elif kind == "deleting":
            group["deleting"] = True
        elif kind == "web":
            group["labels"] = {"app": "web"}
        job = {
            "name": f"r{j}",
            "queue": draw(st.sampled_from(running_q)),
            "priority": draw(st.sampled_from([1, 10, 20, 50, 100])),
            "minMember": draw(st.integers(1, len(placed))),
            "phase": "Running",
            "pods": [group],
        }
        if draw(st.integers(0, 7)) == 0:
            job["namespace"] = "kube-system"
        age = draw(st.sampled_from(AGES))
        if age is not None:
            job["annotations"] = {START: _stamp(age)}
        jobs.append(job)
    for j in range(draw(st.integers(1, 3))):
        count = draw(st.integers(1, 2))
        jobs.append(
            {
                "name": f"p{j}",
                "queue": draw(st.sampled_from(pending_q)),
                "priority": draw(st.sampled_from([5, 30, 60, 100, 200])),
                "pods": [
                    {
                        "count": count,
                        "gpu": draw(st.sampled_from([1, 2, 4, 8])),
                        "cpu": draw(st.integers(1, 4)),
                    }
                ],
            }
        )
    pdbs = [{"name": "web", "selector": {"app": "web"}, "maxUnavailable": 1}] if draw(st.booleans()) else []
    return {
        "nodes": nodes,
        "queues": queues,
        "jobs": jobs,
        "pdbs": pdbs,
        "queue_plugin": queue_plugin,
        "gang_preemptable": draw(st.booleans()),
    }


def _cluster(case: dict):
    return build_cluster(("generated", d) for d in expand(case))


def run(case: dict):
    """(cluster after the cycle with decisions applied, decisions, deserved per queue before the cycle,
    the cluster as it was)."""
    cfg = parse_config(config(case["queue_plugin"], case["gang_preemptable"]), REGISTRY, "property")
    before = _cluster(case)
    probe = Session(_cluster(case), cfg, REGISTRY, T_NOW)
    deserved = {k: v.copy() for k, v in probe.plugin(case["queue_plugin"]).deserved.items()}
    cluster = _cluster(case)
    decisions = run_cycle(cluster, cfg, REGISTRY, T_NOW)
    apply_decisions(cluster, decisions, T_NOW, remove_evicted=False)
    return cluster, decisions, deserved, before


def _by_key(cluster):
    return {t.key: t for t in cluster.tasks.values()}


@settings(max_examples=70, **SETTINGS)
@given(cases())
def test_no_node_overcommitted_and_nominees_fit(case: dict) -> None:
    cluster, decisions, _, _ = run(case)
    nodes = cluster.nodes
    now = np.zeros_like(nodes.allocatable)
    later = np.zeros_like(nodes.allocatable)
    for t in cluster.tasks.values():
        if t.status in (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.RELEASING) and t.node >= 0:
            now[t.node] += t.request
            if t.status is not TaskStatus.RELEASING:
                later[t.node] += t.request
        elif t.status is TaskStatus.PIPELINED and t.nominated >= 0:
            later[t.nominated] += t.request
    assert np.all(now <= nodes.allocatable + EPS), "binds over-commit a node"
    assert np.all(later <= nodes.allocatable + EPS), "running pods and nominations over-commit a node"
    # the last nomination record of a pod is where it waits (an empty node: it waits anywhere)
    keys = _by_key(cluster)
    last = {n.pod: n.node for n in decisions.nominations}
    for pod, node in last.items():
        task = keys[pod]
        if node:
            assert task.status is TaskStatus.PIPELINED and nodes.names[task.nominated] == node
        else:
            assert task.status is TaskStatus.PENDING and task.nominated < 0


@settings(max_examples=70, **SETTINGS)
@given(cases())
def test_preempt_victims_have_lower_priority(case: dict) -> None:
    cluster, decisions, _, _ = run(case)
    keys = _by_key(cluster)
    for e in decisions.evictions:
        victim = keys[e.pod]
        preemptor = cluster.jobs[e.preemptor]
        assert victim.job is not preemptor
        assert victim.preemptable and victim.namespace != "kube-system"
        if e.action == "preempt":
            assert victim.job.priority < preemptor.priority, (e, victim.job.priority, preemptor.priority)
            assert victim.job.queue == preemptor.queue
        else:
            assert e.action == "reclaim"
            assert victim.job.queue != preemptor.queue
            assert cluster.queues[victim.job.queue].reclaimable
        # a gang never breaks other pods for a start it cannot make
        held = sum(
            1
            for t in preemptor.tasks
            if t.status in (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.PIPELINED, TaskStatus.SUCCEEDED)
        )
        assert held >= preemptor.min_member


def lines(case: dict) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each queue's reclaim line before the cycle (what the queue plugin compares it with) and the
    resources the plugin counts."""
    cfg = parse_config(config(case["queue_plugin"], case["gang_preemptable"]), REGISTRY, "property")
    plugin = Session(_cluster(case), cfg, REGISTRY, T_NOW).plugin(case["queue_plugin"])
    return {name: plugin._reclaim_line(name).copy() for name in plugin.queues}, plugin.cols.copy()


@settings(max_examples=100, **SETTINGS)
@given(cases(reclaim=True))
def test_reclaim_below_share_by_at_most_the_last_pod(case: dict) -> None:
    """SPEC §3.2 (Volcano's rule): a victim queue gives up pods only while it holds more than it deserves
    in some resource, so after the cycle it is below its share by less than its last victim: what it
    holds plus its largest victim is above its line in some counted resource."""
    cluster, decisions, _, _ = run(case)
    line, cols = lines(case)
    keys = _by_key(cluster)
    res = cluster.resources
    largest: dict[str, np.ndarray] = {}
    for e in decisions.evictions:
        if e.action == "reclaim":
            v = keys[e.pod]
            largest[v.job.queue] = np.maximum(largest.get(v.job.queue, 0), v.request)
    for queue, pod in largest.items():
        held = np.zeros(len(res))
        for job in cluster.jobs.values():
            if job.queue == queue:
                for t in job.tasks:
                    if t.status in (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.PIPELINED):
                        held += t.request
        assert np.any((held + pod)[cols] > line[queue][cols] - EPS), (queue, held, pod, line[queue])


@settings(max_examples=70, **SETTINGS)
@given(st.one_of(cases(), cases(reclaim=True)))
def test_no_gang_left_below_its_minimum(case: dict) -> None:
    """SPEC §5: preempt and reclaim (the gang victim filter on or off) never leave a gang bound below
    its minimum; a gang their victims break is evicted whole."""
    _, decisions, _, before = run(case)
    assert_no_gang_left_broken(before, decisions)


@settings(max_examples=70, **SETTINGS)
@given(cases())
def test_min_runtime_protects_victims(case: dict) -> None:
    cluster, decisions, _, before = run(case)
    keys = _by_key(cluster)
    pods_before = {uid: len(j.tasks) for uid, j in before.jobs.items()}
    for e in decisions.evictions:
        job = keys[e.pod].job
        stamp = job.annotations.get(START)
        if stamp is None:
            continue
        limit = PREEMPT_MIN if e.action == "preempt" else RECLAIM_MIN
        if parse_time(stamp) + limit <= T_NOW:
            continue  # ran long enough
        elastic = pods_before[job.uid] > job.min_member
        assert elastic, f"{e.pod} of a protected job was evicted by {e.action}"
        left = sum(1 for t in job.tasks if t.status in (TaskStatus.RUNNING, TaskStatus.BOUND))
        assert left >= job.min_member, f"protected elastic job {job.uid} cut below minMember"
