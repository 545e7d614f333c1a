"""Property tests (hypothesis) for gang-aware eviction (seed 000, SPEC.md §3.3 and §5).

Random clusters of 4–8 GPU nodes under a two-tier HyperNode tree (leaf switches of two nodes, spines
of two leaves), full of running victim gangs of random size, minMember, roles, priority and queue, and
one or two pending preemptor gangs of higher priority, some with a hard or soft network topology. One
cycle of ``enqueue, allocate, gangpreempt`` (or ``gangreclaim``) runs; its decisions are applied with
:func:`corral.framework.cycle.apply_decisions`, and then:

- every nominated pod fits on its node together with everything else there (no over-commit);
- a gang that caused evictions is nominated in full (ready + nominated reach minMember);
- gangpreempt touches only strictly lower-priority jobs of the preemptor's own queue; gangreclaim only
  other queues, never pushing a queue below the floor its queue plugin keeps (what it deserves);
- every eviction and nomination made for one preemptor lies in one domain of its search space — but
  the pods of a gang broken whole that run outside it —: for a hard-topology gang one hypernode of an
  allowed tier, which also holds the nodes it already runs on;
- no gang is left bound below its minimum by the evictions (SPEC §5: a broken gang goes whole).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.framework.config import parse_config
from corral.framework.cycle import apply_decisions, run_cycle
from corral.framework.session import Session
from corral.manifests.build import build_cluster
from corral.model import TaskStatus
from corral.model.clock import parse_time
from corral.model.resources import EPS
from corral.registry import REGISTRY
from tests.actions.gang_minimum import assert_no_gang_left_broken
from tests.scenarios.expand import T0, expand

NOW = parse_time(T0)
SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}

TIERS = [
    {
        "plugins": [
            {"name": "priority"},
            {"name": "gang", "enablePreemptable": False, "enableReclaimable": False},
            {"name": "conformance"},
        ]
    },
    {
        "plugins": [
            {"name": "predicates"},
            {"name": "QUEUE"},
            {"name": "nodeorder"},
            {"name": "binpack"},
            {"name": "network-topology-aware"},
        ]
    },
]


def _config(action: str, queue_plugin: str, extra: dict | None = None):
    tiers = [
        {"plugins": [dict(p, name=queue_plugin) if p["name"] == "QUEUE" else p for p in t["plugins"]]}
        for t in TIERS
    ]
    raw = {"actions": f"enqueue, allocate, {action}", "tiers": tiers}
    if extra:
        raw["configurations"] = [{"name": action, "arguments": extra}]
    return parse_config(raw, REGISTRY, "property test")


@dataclass
class Gen:
    case: dict
    topology: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # job uid -> (mode, tier)
    deserved: dict[str, float] = field(default_factory=dict)  # queue -> GPUs


@st.composite
def clusters(draw, reclaim: bool = False) -> Gen:
    n = draw(st.sampled_from([4, 6, 8]))
    pods_cap = draw(st.sampled_from([110, 110, 3]))
    nodes = [{"name": f"n{i}", "gpu": 8, "cpu": 32, "pods": pods_cap} for i in range(n)]
    leaves = [{"name": f"leaf{k}", "tier": 1, "nodes": [f"n{2 * k}", f"n{2 * k + 1}"]} for k in range(n // 2)]
    spines = [
        {"name": f"spine{k}", "tier": 2, "hypernodes": [lf["name"] for lf in leaves[2 * k : 2 * k + 2]]}
        for k in range((len(leaves) + 1) // 2)
    ]
    free = {nd["name"]: [8, 32, pods_cap] for nd in nodes}  # gpu, cpu, pod slots
    queues = ["default", "default", "default", "q1"]
    gen = Gen({"nodes": nodes, "hypernodes": leaves + spines, "jobs": []})
    if reclaim:
        gen.deserved = {
            "default": float(draw(st.sampled_from([0, 4, 8, 16]))),
            "q1": float(draw(st.sampled_from([0, 8, 16]))),
            "qp": float(8 * n),
        }
        gen.case["queues"] = [
            {"name": q, "deserved": {"nvidia.com/gpu": int(v)}} for q, v in gen.deserved.items()
        ]
    for j in range(draw(st.integers(2, 7))):
        count = draw(st.integers(1, 4))
        gpu, cpu = draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from([0, 1, 4]))
        roles = count >= 2 and draw(st.integers(0, 3)) == 0
        placed: list[str] = []
        for _ in range(count):
            fits = [nm for nm, f in free.items() if f[0] >= gpu and f[1] >= cpu and f[2] >= 1]
            if not fits:
                break
            nm = draw(st.sampled_from(fits))
            free[nm][0] -= gpu
            free[nm][1] -= cpu
            free[nm][2] -= 1
            placed.append(nm)
        if not placed:
            continue
        started = "2025-12-31T00:00:00Z"
        job: dict = {
            "name": f"v{j}",
            "queue": draw(st.sampled_from(queues)),
            "phase": "Running",
            "priority": draw(st.sampled_from([0, 1, 2, 5, 6])),
            "created": draw(st.sampled_from(["2025-12-30T00:00:00Z", "2025-12-31T00:00:00Z"])),
        }
        req = {"gpu": gpu, **({"cpu": cpu} if cpu else {})}
        if roles and len(placed) >= 2:
            half = len(placed) // 2
            job["pods"] = [
                {"role": "ps", "count": half, "nodes": placed[:half], "started": started, **req},
                {
                    "role": "worker",
                    "count": len(placed) - half,
                    "nodes": placed[half:],
                    "started": started,
                    **req,
                },
            ]
            job["minTaskMember"] = {"ps": draw(st.integers(0, half)), "worker": 1}
        else:
            job["pods"] = [{"count": len(placed), "nodes": placed, "started": started, **req}]
        job["minMember"] = draw(st.integers(1, len(placed)))
        gen.case["jobs"].append(job)
    for p in range(draw(st.integers(1, 2))):
        count = draw(st.integers(1, 3))
        job = {
            "name": f"pre{p}",
            "priority": draw(st.sampled_from([5, 6])),
            "queue": "qp" if reclaim else draw(st.sampled_from(queues)),
            "pods": [{"count": count, "gpu": draw(st.sampled_from([2, 4, 8]))}],
        }
        job["minMember"] = draw(st.integers(max(count - 1, 1), count))
        mode = draw(st.sampled_from(["", "hard", "hard", "soft"]))
        if mode:
            tier = draw(st.sampled_from([1, 2, None]))
            job["networkTopology"] = {"mode": mode, **({"highestTierAllowed": tier} if tier else {})}
            gen.topology[f"default/{job['name']}"] = (mode, tier)
        gen.case["jobs"].append(job)
    return gen


def _run(gen: Gen, action: str, queue_plugin: str, extra: dict | None = None):
    cluster = build_cluster([("generated.yaml", d) for d in expand(gen.case)])
    info = {uid: (j.priority, j.queue, j.min_member) for uid, j in cluster.jobs.items()}
    job_of = {t.key: t.job.uid for t in cluster.tasks.values() if t.job is not None}
    running = {
        t.key: (
            t.job.uid,
            cluster.nodes.names[t.node],
            float(t.request[cluster.resources.pos("nvidia.com/gpu")]),
        )
        for t in cluster.tasks.values()
        if t.status is TaskStatus.RUNNING
    }
    decisions = run_cycle(cluster, _config(action, queue_plugin, extra), REGISTRY, NOW, 1)
    return cluster, decisions, info, job_of, running


def _check_common(gen: Gen, cluster, decisions, info, job_of, running) -> None:
    assert_no_gang_left_broken(build_cluster([("generated.yaml", d) for d in expand(gen.case)]), decisions)
    apply_decisions(cluster, decisions, NOW)
    nodes = cluster.nodes
    # no node over-committed once evicted pods are gone: bound + nominated fit
    over = nodes.used + nodes.pipelined > nodes.allocatable + EPS
    assert not over.any(), f"over-committed: {[nodes.names[r] for r in np.flatnonzero(over.any(axis=1))]}"
    tree = cluster.hypernodes
    evicted_for: dict[str, set[str]] = {}
    gone = {e.pod for e in decisions.evictions}
    for e in decisions.evictions:
        # a gang all of whose running pods go is broken whole (SPEC §5): its pods outside the
        # preemptor's domain go too, so only the evictions of gangs that keep pods count here
        victim = job_of[e.pod]
        if all(k in gone for k, (uid, _, _) in running.items() if uid == victim):
            evicted_for.setdefault(e.preemptor, set())
            continue
        evicted_for.setdefault(e.preemptor, set()).add(e.node)
    nominated: dict[str, set[str]] = {}
    for nm in decisions.nominations:
        if nm.node:
            nominated.setdefault(job_of[nm.pod], set()).add(nm.node)
    for pre, ev_nodes in evicted_for.items():
        job = cluster.jobs[pre]
        # evictions only for a gang that is then nominated in full
        have = job.ready_count() + job.count(TaskStatus.PIPELINED)
        assert have >= job.min_member, (
            f"{pre} evicted {sorted(ev_nodes)} but holds only {have}/{job.min_member}"
        )
        mode, tier = gen.topology.get(pre, ("", None))
        if mode != "hard" or not tree:
            continue
        rows = [nodes.index[n] for n in ev_nodes | nominated.get(pre, set())]
        rows += [t.node for t in job.tasks if t.status is TaskStatus.RUNNING]
        top = tier if tier is not None else max(tree.tiers)
        assert any(hn.mask[rows].all() for t in tree.tiers if t <= top for hn in tree.domains(t)), (
            f"{pre} (hard, tier <= {top}) touched {sorted(ev_nodes)} and nominated {sorted(nominated.get(pre, ()))}"
            " outside any one allowed hypernode"
        )
    # a hard-topology gang's nominations, with or without evictions, lie in one allowed hypernode
    for pre, nom_nodes in nominated.items():
        mode, tier = gen.topology.get(pre, ("", None))
        if mode != "hard" or not tree:
            continue
        top = tier if tier is not None else max(tree.tiers)
        rows = [nodes.index[n] for n in nom_nodes]
        assert any(hn.mask[rows].all() for t in tree.tiers if t <= top for hn in tree.domains(t)), (
            f"{pre} nominated across hypernodes: {sorted(nom_nodes)}"
        )


@settings(max_examples=250, **SETTINGS)
@given(clusters())
def test_gangpreempt_properties(gen: Gen) -> None:
    cluster, decisions, info, job_of, running = _run(gen, "gangpreempt", "proportion")
    for e in decisions.evictions:
        assert e.action == "gangpreempt"
        victim, pre = job_of[e.pod], e.preemptor
        assert info[victim][0] < info[pre][0], (
            f"{victim} (priority {info[victim][0]}) evicted for {pre} ({info[pre][0]})"
        )
        assert info[victim][1] == info[pre][1], (
            f"{victim} of queue {info[victim][1]} evicted for {pre} of {info[pre][1]}"
        )
        assert running[e.pod][1] == e.node
    _check_common(gen, cluster, decisions, info, job_of, running)


@settings(max_examples=150, **SETTINGS)
@given(clusters(), st.booleans())
def test_gangpreempt_without_whole_bundles_breaks_no_healthy_gang(gen: Gen, allow: bool) -> None:
    ready_before = {}
    cluster0 = build_cluster([("generated.yaml", d) for d in expand(gen.case)])
    for uid, j in cluster0.jobs.items():
        surplus = j.ready_count() - j.min_member
        roles = j.role_counts(frozenset({TaskStatus.RUNNING}))
        if (
            j.min_task_member
            and not j.elastic
            and any(roles.get(r, 0) < m for r, m in j.min_task_member.items())
        ):
            surplus = -1  # a role below its minimum: the gang is broken already
        ready_before[uid] = surplus
    cluster, decisions, info, job_of, running = _run(
        gen, "gangpreempt", "proportion", {"allowWholeBundle": allow}
    )
    if not allow:
        taken: dict[str, int] = {}
        for e in decisions.evictions:
            taken[job_of[e.pod]] = taken.get(job_of[e.pod], 0) + 1
        for victim, k in taken.items():
            # a healthy gang gives up at most its surplus; a broken one may go
            if ready_before[victim] >= 0:
                assert k <= ready_before[victim], (
                    f"{victim}: {k} pods evicted, surplus {ready_before[victim]}"
                )
    _check_common(gen, cluster, decisions, info, job_of, running)


@settings(max_examples=200, **SETTINGS)
@given(clusters(reclaim=True))
def test_gangreclaim_properties(gen: Gen) -> None:
    # the floor the queue plugin keeps each queue at (what it deserves, at least in scarce resources)
    probe = Session(
        build_cluster([("generated.yaml", d) for d in expand(gen.case)]),
        _config("gangreclaim", "capacity"),
        REGISTRY,
        NOW,
    )
    plugin = probe.plugin("capacity")
    gpu = probe.cluster.resources.pos("nvidia.com/gpu")
    floor = {q: float(v[gpu]) for q, v in getattr(plugin, "reclaim_floor", plugin.deserved).items()}
    cluster, decisions, info, job_of, running = _run(gen, "gangreclaim", "capacity")
    held: dict[str, float] = {}
    for uid, _, gpu in running.values():
        held[info[uid][1]] = held.get(info[uid][1], 0.0) + gpu
    left = dict(held)
    for e in decisions.evictions:
        assert e.action == "gangreclaim"
        victim, pre = job_of[e.pod], e.preemptor
        assert info[victim][1] != info[pre][1], f"{victim} evicted for {pre} of its own queue"
        left[info[victim][1]] -= running[e.pod][2]
    for q, v in left.items():
        if v < held[q]:
            assert v >= floor[q] - EPS, f"queue {q} pushed to {v / 1000} GPUs, below {floor[q] / 1000}"
    _check_common(gen, cluster, decisions, info, job_of, running)
