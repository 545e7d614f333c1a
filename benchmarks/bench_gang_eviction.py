"""Gang-aware eviction against the legacy way and an exact oracle, on the seed's cost model (seed 000
§3.2, SPEC.md §3.3; issue "Gang eviction: the seed's cost model ...").

A few hundred generated contention scenarios (numpy Generator seeded by (seed, scenario index), so any
scenario can be rerun alone): 64–512 nodes of 8 GPUs under a 2- or 3-tier HyperNode tree (racks of 8 or
16 nodes, spines of 4 or 8 racks, sometimes a root), the cluster 95–100 % full of running gangs of 1–64
pods of 1, 2, 4 or 8 GPUs (some with surplus pods above minMember, some without; some packed into a
rack or spine, some scattered; one to three victim priority levels plus a few pods above the preemptor;
5 min to 3 days of run time) and one pending high-priority preemptor gang of 8–128 GPUs per scenario
(about a third with a hard topology of tier 1 or 2).

* preempt scenarios (≈60 %): two or three queues, the preemptor in q0 with most of the running gangs;
* reclaim scenarios: three queues — the running gangs in q0 and q1 (70/30), each with a backlog that is
  never admitted (so they deserve their weight's share rather than what they hold), the preemptor
  alone in q2.

Pods request GPUs only (``--cpu-requests`` adds 4 CPUs and 32 GiB per GPU, which never bind on these
nodes). Both reclaim actions apply proportion's queue rule (Volcano's: a victim while its queue still
holds more than it deserves, applied whatever its tier); the oracle models that rule exactly
(:func:`corral.solvers.oracle.queue_limits`: a queue's victims pass when, its largest pod last — the
one that crosses the line — they leave it above its deserved share in some resource). The queues are
flat, so the model is exact.

Each scenario runs, on a fresh copy of the cluster, through one cycle ``enqueue, allocate, <action>``
with the same plugins, timing the action's ``execute``: ``preempt``/``reclaim`` (legacy, task by task;
the gang plugin's Preemptable/Reclaimable switches off so they may break gangs as Volcano's do) and
``gangpreempt``/``gangreclaim``. The CP-SAT oracle (:func:`corral.solvers.oracle.solve_by_rules`)
minimises the gang actions' own lexicographic rule exactly, over every allowed domain: no healthy gang
broken if any plan avoids it; then the lowest victim level (job priority for preempt, the victim queue
order of the session for reclaim); then the least work; then the fewest pods.

The cost model (all methods are measured by it, :func:`corral.solvers.oracle.work_lost`): a victim
that leaves its job at or above its minimums loses nothing; a healthy gang pushed below loses the
GPU-hours of all its running pods; a job broken already costs nothing more.

Reported per method: placed, gangs broken, pods evicted, work lost, time per decision; and the
targets: the gang actions place the preemptor wherever the oracle does; never break a healthy gang
where the oracle breaks none; lose at most 10 % more work than the oracle on ≥ 98 % of the instances
it places (median ratio 1.00); p95 ≤ 50 ms per decision at 512 nodes. Each action runs ``--repeat``
times (3) on fresh copies and the fastest counts, and the 512-node decisions are timed once more at
the end (:func:`retime`): the machine is shared.

    .venv/bin/python benchmarks/bench_gang_eviction.py [--scenarios N] [--seed S] [--max-nodes M] [--quick] [-v]
"""

from __future__ import annotations

import argparse
import functools
import math
import operator
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from corral.errors import CommitError
from corral.framework.config import parse_config
from corral.framework.session import Session
from corral.manifests.build import build_cluster
from corral.registry import REGISTRY
from corral.solvers.oracle import allowed_domains, candidate_victims, queue_limits, solve_by_rules, work_lost

NOW = 1767225600.0  # 2026-01-01T00:00:00Z
GPU_NODE = {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}
PRIORITIES = {"low": 10, "mid": 20, "high-batch": 30, "urgent": 100, "critical": 200}
HIGH = "urgent"


#: ``maxDomains`` of the gang actions (``--max-domains``; None: the default)
MAX_DOMAINS: int | None = None


def config(action: str) -> dict:
    """Volcano's default tiers plus network-topology-aware; the gang plugin does not vote on victims
    (``enablePreemptable``/``enableReclaimable`` false) so the legacy actions may break gangs. Both
    reclaim actions apply the queue rule of proportion (a victim queue stays at or above its reclaim
    floor) whatever tier it sits in; the oracle models it."""
    conf = {
        "actions": f"enqueue, allocate, {action}",
        "tiers": [
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
                    {"name": "proportion"},
                    # normal-pod HyperNode bin packing off: the placements measured before it was read
                    {
                        "name": "network-topology-aware",
                        "arguments": {"hypernode.binpack.normal-pod.enable": False},
                    },
                    {"name": "nodeorder"},
                    {"name": "binpack"},
                ]
            },
        ],
    }
    if MAX_DOMAINS is not None and action.startswith("gang"):
        conf["configurations"] = [{"name": action, "arguments": {"maxDomains": MAX_DOMAINS}}]
    return conf


def _ts(seconds_ago: float) -> str:
    t = time.gmtime(NOW - seconds_ago)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", t)


# -- scenarios ------------------------------------------------------------------------------------
@dataclass
class Scenario:
    index: int
    kind: str  # preempt | reclaim
    nodes: int
    tiers: int
    rack: int
    docs: list[dict]
    preemptor: str  # podgroup uid "ns/name"
    topology: str  # "" | "hard-1" | "hard-2" | ...
    pods_running: int
    gangs_running: int
    fill: float
    preemptor_gpus: int
    levels: int  # victim priority levels in use (1-3)


def generate(
    index: int, rng: np.random.Generator, max_nodes: int, kind: str | None = None, cpu_requests: bool = False
) -> Scenario:
    sizes = [n for n in (64, 128, 256, 512) if n <= max_nodes] or [max_nodes]
    weights = np.array([0.3, 0.3, 0.2, 0.2][: len(sizes)])
    n = int(rng.choice(sizes, p=weights / weights.sum()))
    rack = int(rng.choice([8, 16]))
    per_spine = int(rng.choice([4, 8]))
    tiers = int(rng.choice([2, 3]))
    kind = kind or ("reclaim" if rng.random() < 0.4 else "preempt")
    # reclaim: two victim queues, unevenly loaded (with proportion, a lone victim queue with a backlog
    # deserves everything but the reclaimer's share: it may give up only need - free GPUs, exactly)
    n_queues = 3 if kind == "reclaim" else int(rng.choice([2, 3]))
    queues = [f"q{i}" for i in range(n_queues)]
    pre_queue = queues[-1] if kind == "reclaim" else queues[0]
    docs: list[dict] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": k}, "value": v}
        for k, v in PRIORITIES.items()
    ]
    names = [f"node-{i:04d}" for i in range(n)]
    racks = [list(range(r, min(r + rack, n))) for r in range(0, n, rack)]
    for i, name in enumerate(names):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"rack": f"rack-{i // rack:03d}"}},
                "status": {"allocatable": dict(GPU_NODE)},
            }
        )
    for r in range(len(racks)):
        docs.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": f"rack-{r:03d}"},
                "spec": {
                    "tier": 1,
                    "members": [
                        {
                            "type": "Node",
                            "selector": {"labelMatch": {"matchLabels": {"rack": f"rack-{r:03d}"}}},
                        }
                    ],
                },
            }
        )
    spines = [list(range(s, min(s + per_spine, len(racks)))) for s in range(0, len(racks), per_spine)]
    for s, members in enumerate(spines):
        docs.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": f"spine-{s:02d}"},
                "spec": {
                    "tier": 2,
                    "members": [
                        {"type": "HyperNode", "selector": {"exactMatch": {"name": f"rack-{r:03d}"}}}
                        for r in members
                    ],
                },
            }
        )
    if tiers == 3:
        docs.append(
            {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": "root"},
                "spec": {
                    "tier": 3,
                    "members": [
                        {"type": "HyperNode", "selector": {"exactMatch": {"name": f"spine-{s:02d}"}}}
                        for s in range(len(spines))
                    ],
                },
            }
        )
    for q in queues:
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": q},
                "spec": {"weight": 1, "reclaimable": True},
            }
        )

    def pod(
        name: str, group: str, gpu: int, prio: str, node: str | None, ago: float | None, created: float = 60.0
    ) -> dict:
        requests = {"nvidia.com/gpu": str(gpu)}
        if cpu_requests:
            requests.update({"cpu": str(4 * gpu), "memory": f"{32 * gpu}Gi"})
        p = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "bench",
                "uid": name,
                "creationTimestamp": _ts(created),
                "annotations": {"scheduling.k8s.io/group-name": group},
            },
            "spec": {
                "schedulerName": "corral",
                "priorityClassName": prio,
                "containers": [{"name": "c", "resources": {"requests": requests}}],
            },
            "status": {"phase": "Pending"},
        }
        if node is not None:
            p["spec"]["nodeName"] = node
            p["status"] = {"phase": "Running", "startTime": _ts(ago)}
        return p

    # running gangs until the cluster is nearly full
    free = np.full(n, 8, dtype=np.int64)
    target = rng.uniform(0.95, 1.0) * 8 * n
    levels = (
        ["low"]
        if rng.random() < 0.4
        else (["low", "mid"] if rng.random() < 0.5 else ["low", "mid", "high-batch"])
    )
    scatter_p = rng.uniform(0.1, 0.6)
    surplus_p = rng.uniform(0.2, 0.6)
    g_idx = 0
    pods_running = 0
    failures = 0
    while (8 * n - free.sum()) < target and failures < 40:
        u = rng.random()
        size = int(
            rng.integers(1, 5) if u < 0.45 else rng.integers(5, 17) if u < 0.8 else rng.integers(17, 65)
        )
        gpu = int(rng.choice([1, 2, 4, 8], p=[0.35, 0.25, 0.2, 0.2]))
        size = max(1, min(size, (8 * n // 4) // gpu))
        slots = free // gpu
        scatter = rng.random() < scatter_p
        rows = _place(rng, slots, size, racks, per_spine, scatter)
        if rows is None:
            failures += 1
            continue
        failures = 0
        name = f"run-{g_idx:04d}"
        g_idx += 1
        min_member = size
        if size > 1 and rng.random() < surplus_p:
            min_member = max(1, int(math.ceil(size * rng.uniform(0.4, 0.9))))
            min_member = min(min_member, size - 1)
        r = rng.random()
        if kind == "preempt":
            queue = queues[0] if r < 0.75 or n_queues == 1 else queues[1 + int(rng.integers(0, n_queues - 1))]
        else:
            queue = queues[0] if r < 0.7 else queues[1]
        prio = "critical" if rng.random() < 0.08 else str(rng.choice(levels))
        ago = float(np.exp(rng.uniform(np.log(300), np.log(3 * 86400))))
        created = ago + float(rng.uniform(0, 600))  # queued up to 10 minutes before it started
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "bench", "creationTimestamp": _ts(created)},
                "spec": {"minMember": min_member, "queue": queue, "priorityClassName": prio},
                "status": {"phase": "Running"},
            }
        )
        for k, row in enumerate(rows):
            free[row] -= gpu
            started = ago if k < min_member else ago * rng.uniform(0.2, 1.0)  # surplus scaled up later
            docs.append(pod(f"{name}-{k}", name, gpu, prio, names[row], started, max(created, started)))
        pods_running += size
    if kind == "reclaim":
        # a backlog in every victim queue (never admitted: Pending, minResources above the cluster), so
        # that it asks for more than its weight's share and deserves that share, not just what it holds
        for q in queues[:-1]:
            name = f"backlog-{q}"
            docs.append(
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "bench", "creationTimestamp": _ts(60.0)},
                    "spec": {
                        "minMember": n // 2,
                        "queue": q,
                        "priorityClassName": "low",
                        "minResources": {"nvidia.com/gpu": str(16 * n)},
                    },
                    "status": {"phase": "Pending"},
                }
            )
            docs += [pod(f"{name}-{k}", name, 8, "low", None, None) for k in range(n // 2)]
    # the preemptor
    gpu = int(rng.choice([2, 4, 8], p=[0.3, 0.3, 0.4]))
    total = int(rng.choice([8, 16, 32, 64, 128], p=[0.2, 0.25, 0.25, 0.2, 0.1]))
    total = min(total, 8 * n // (n_queues + 1) // gpu * gpu) if kind == "reclaim" else min(total, 8 * n // 4)
    size = max(1, total // gpu)
    topo = ""
    spec: dict = {"minMember": size, "queue": pre_queue, "priorityClassName": HIGH}
    if rng.random() < 0.35:
        tier = 1 if size * gpu <= 8 * rack and rng.random() < 0.6 else 2
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
        topo = f"hard-{tier}"
    docs.append(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "preemptor", "namespace": "bench", "creationTimestamp": _ts(60.0)},
            "spec": spec,
            "status": {"phase": "Inqueue"},
        }
    )
    for k in range(size):
        docs.append(pod(f"preemptor-{k}", "preemptor", gpu, HIGH, None, None))
    return Scenario(
        index,
        kind,
        n,
        tiers,
        rack,
        docs,
        "bench/preemptor",
        topo,
        pods_running,
        g_idx,
        float(1 - free.sum() / (8 * n)),
        size * gpu,
        len(levels),
    )


def _place(
    rng: np.random.Generator,
    slots: np.ndarray,
    size: int,
    racks: list[list[int]],
    per_spine: int,
    scatter: bool,
) -> list[int] | None:
    """Rows for ``size`` pods given per-node free pod slots: scattered one pod per node over random
    nodes, or packed (first fit) into a rack, else a spine, else anywhere."""
    if slots.sum() < size:
        return None
    if scatter:
        order = rng.permutation(np.flatnonzero(slots > 0))
        rows: list[int] = []
        left = slots.copy()
        while len(rows) < size:
            for r in order:
                if len(rows) >= size:
                    break
                if left[r] > 0:
                    rows.append(int(r))
                    left[r] -= 1
        return rows
    spines = [
        functools.reduce(operator.iadd, racks[s : s + per_spine], []) for s in range(0, len(racks), per_spine)
    ]
    for group in (
        [racks[i] for i in rng.permutation(len(racks))],
        [spines[i] for i in rng.permutation(len(spines))],
        [functools.reduce(operator.iadd, racks, [])],
    ):
        for members in group:
            if slots[members].sum() >= size:
                rows = []
                for r in members:
                    take = min(int(slots[r]), size - len(rows))
                    rows += [r] * take
                    if len(rows) >= size:
                        return rows
    return None


# -- running the methods ---------------------------------------------------------------------------
@dataclass
class Outcome:
    method: str
    scenario: int
    nodes: int
    placed: bool = False  # nominated >= minMember, inside one allowed hypernode if hard
    valid_topology: bool = True  # False: nominated >= minMember but across hypernodes
    broken: int = 0
    evicted: int = 0
    work: float = 0.0
    ms: float = 0.0  # wall time of the action's execute (the oracle: its solves)
    cpu_ms: float = 0.0  # process CPU time of the same (less sensitive to a busy machine)
    status: str = ""
    victims: list[str] = field(default_factory=list)


def run_action(sc: Scenario, action: str, pristine, repeat: int = 1) -> Outcome:
    """One cycle ``enqueue, allocate, <action>`` on a fresh copy of the scenario; only the last action's
    ``execute`` is timed. With ``repeat`` > 1 the cycle runs that many times (each on a fresh copy; the
    decisions must be the same) and the fastest time counts — on a shared machine the slower runs
    measure the neighbours."""
    best = None
    for _ in range(max(repeat, 1)):
        out = _run_action(sc, action, pristine)
        if best is not None:
            assert out.victims == best.victims and out.placed == best.placed, "decisions differ between runs"
            out.ms, out.cpu_ms = min(out.ms, best.ms), min(out.cpu_ms, best.cpu_ms)
        best = out
    return best


def _run_action(sc: Scenario, action: str, pristine) -> Outcome:
    cluster = build_cluster(("bench", d) for d in sc.docs)
    cfg = parse_config(config(action), REGISTRY, "bench")
    session = Session(cluster, cfg, REGISTRY, NOW, 1)
    for ac in cfg.actions[:-1]:
        session.action = ac.name
        REGISTRY.action_class(ac.name)(ac.args).execute(session)
    ac = cfg.actions[-1]
    act = REGISTRY.action_class(ac.name)(ac.args)
    session.action = ac.name
    label = action
    t, c = time.perf_counter(), time.process_time()
    try:
        act.execute(session)
    except CommitError as exc:  # a failed transaction aborts the cycle: counted, not placed
        return Outcome(
            label, sc.index, sc.nodes, ms=(time.perf_counter() - t) * 1000.0, status=f"crash: {exc}"
        )
    ms, cpu_ms = (time.perf_counter() - t) * 1000.0, (time.process_time() - c) * 1000.0
    decisions = session.close()
    out = Outcome(label, sc.index, sc.nodes, ms=ms, cpu_ms=cpu_ms)
    job = pristine.jobs[sc.preemptor]
    where = {b.pod: b.node for b in decisions.binds}
    where.update({nm.pod: nm.node for nm in decisions.nominations if nm.node})
    mine = [t for t in job.tasks if t.key in where]
    out.placed = len(mine) >= job.min_member
    if out.placed and job.topology_mode == "hard" and pristine.hypernodes:
        rows = np.array([pristine.nodes.index[where[t.key]] for t in mine])
        out.valid_topology = any(m[rows].all() for _, m in allowed_domains(pristine, job))
        out.placed = out.valid_topology  # nominated across hypernodes: the gang cannot start there
    by_key = {t.key: t for t in pristine.tasks.values()}
    victims = [by_key[e.pod] for e in decisions.evictions]
    out.evicted = len(victims)
    out.work, broken = work_lost(pristine, victims, NOW)
    out.broken = len(broken)
    out.victims = sorted(e.pod for e in decisions.evictions)
    return out


def run_oracle(sc: Scenario, pristine, action: str, time_limit: float, workers: int, hint=None) -> Outcome:
    """The oracle under the gang action's rule, with the session's victim queue order (reclaim) and
    queue rule (the reclaim floor of proportion)."""
    job = pristine.jobs[sc.preemptor]
    gang = "gangpreempt" if action == "preempt" else "gangreclaim"
    session = Session(pristine, parse_config(config(gang), REGISTRY, "bench"), REGISTRY, NOW, 1)
    limits = queue_limits(session, job.queue) if action == "reclaim" else None
    rank = REGISTRY.action_class(gang)(parse_config(config(gang), REGISTRY, "bench").actions[-1].args).rank(
        session
    )
    res = solve_by_rules(
        pristine,
        job,
        action=action,
        now=NOW,
        time_limit=time_limit,
        queue_limits=limits,
        workers=workers,
        hint=hint,
        rank=rank,
    )
    out = Outcome(
        "oracle",
        sc.index,
        sc.nodes,
        placed=res.placed,
        broken=len(res.broken),
        evicted=len(res.victims),
        work=res.work_lost,
        ms=res.wall * 1000.0,
        status=res.status,
    )
    out.victims = sorted(v.key for v in res.victims)
    return out


def oracle_size(sc: Scenario, pristine, action: str) -> tuple[int, int]:
    job = pristine.jobs[sc.preemptor]
    union = np.zeros(len(pristine.nodes), dtype=bool)
    for _, m in allowed_domains(pristine, job):
        union |= m
    return int(union.sum()), len(candidate_victims(pristine, job, action, union))


# -- report ----------------------------------------------------------------------------------------
def table(rows: list[Outcome], title: str) -> None:
    print(f"\n{title}")
    print(
        f"  {'method':<20}{'runs':>6}{'placed':>8}{'topo-bad':>9}{'gangs broken':>14}{'pods evicted':>14}"
        f"{'work lost GPU-h':>17}{'ms median':>11}{'ms p95':>9}{'ms max':>9}"
    )
    methods: list[str] = []
    for r in rows:
        if r.method not in methods:
            methods.append(r.method)
    for m in methods:
        sel = [r for r in rows if r.method == m]
        ms = np.array([r.ms for r in sel])
        print(
            f"  {m:<20}{len(sel):>6}{sum(r.placed for r in sel):>8}{sum(not r.valid_topology for r in sel):>9}"
            f"{sum(r.broken for r in sel):>14}{sum(r.evicted for r in sel):>14}{sum(r.work for r in sel):>17.1f}"
            f"{np.median(ms):>11.1f}{np.percentile(ms, 95):>9.1f}{ms.max():>9.1f}"
        )


def ratio(method: Outcome, ref: Outcome) -> float:
    """Work lost by ``method`` over the oracle's (1 when both lose nothing; 0.01 GPU-h tolerance)."""
    if ref.work <= 0.01:
        return 1.0 if method.work <= 0.01 else math.inf
    return method.work / ref.work


def within(method: Outcome, ref: Outcome, slack: float = 0.10) -> bool:
    """Placed, and at most ``slack`` more work lost than ``ref`` (0.01 GPU-h absolute tolerance)."""
    return method.placed and method.work <= (1 + slack) * ref.work + 0.01


def retime(pairs: list[tuple[Scenario, dict[str, Outcome]]], repeat: int) -> None:
    """Time the legacy and gang-aware decisions at 512 nodes (the time target's) once more, at the end
    of the run, and keep the fastest of both passes: the repeats of one decision run back to back, and
    a busy spell of the shared machine can slow them all (the legacy action's own p95 at 512 nodes has
    read from 62 to 135 ms with unchanged code). The decisions must be the same."""
    for sc, res in pairs:
        if sc.nodes != 512:
            continue
        pristine = build_cluster(("bench", d) for d in sc.docs)
        for key in ("legacy", "gang"):
            again = run_action(sc, res[key].method, pristine, repeat)
            assert again.victims == res[key].victims, "decisions differ between passes"
            res[key].ms, res[key].cpu_ms = min(res[key].ms, again.ms), min(res[key].cpu_ms, again.cpu_ms)


def fingerprint() -> str:
    """Short hashes of the sources measured (the figures belong to this code)."""
    import hashlib
    from pathlib import Path

    import corral.actions

    base = Path(corral.actions.__file__).parent.parent
    out = []
    for name in (
        "actions/gang_evict",
        "actions/gang_plan",
        "actions/bundles",
        "actions/gang_actions",
        "actions/evict",
        "actions/preempt",
        "actions/reclaim",
        "plugins/network_topology",
        "plugins/queues",
        "solvers/oracle",
        "solvers/eviction_model",
        "solvers/oracle_work",
    ):
        path = base / f"{name}.py"
        if path.exists():
            out.append(f"{name.split('/')[1]} {hashlib.sha1(path.read_bytes()).hexdigest()[:8]}")
    return ", ".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenarios", type=int, default=300)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--max-nodes", type=int, default=512)
    ap.add_argument(
        "--quick", action="store_true", help="40 scenarios of at most 128 nodes, oracle limit 2 s"
    )
    ap.add_argument(
        "--oracle-nodes", type=int, default=512, help="oracle only on domains of at most this many nodes"
    )
    ap.add_argument(
        "--oracle-victims", type=int, default=5000, help="... and at most this many candidate victims"
    )
    ap.add_argument("--oracle-time", type=float, default=10.0, help="CP-SAT time limit per solve, seconds")
    ap.add_argument("--oracle-workers", type=int, default=2, help="CP-SAT search workers")
    ap.add_argument(
        "--cpu-requests",
        action="store_true",
        help="pods also request 4 CPUs and 32 GiB per GPU "
        "(by default only GPUs: CPU and memory never bind on these nodes)",
    )
    ap.add_argument("--max-domains", type=int, help="maxDomains of gangpreempt/gangreclaim (default: theirs)")
    ap.add_argument(
        "--repeat", type=int, default=3, help="time each action this many times, keep the fastest"
    )
    ap.add_argument(
        "--only", type=int, nargs="+", help="run only these scenario indices (with the same seed)"
    )
    ap.add_argument("--verbose", "-v", action="store_true", help="one line per scenario")
    ap.add_argument(
        "--show-losses",
        type=int,
        default=5,
        help="print this many instances where gang-aware loses most to the oracle",
    )
    args = ap.parse_args()
    global MAX_DOMAINS
    MAX_DOMAINS = args.max_domains
    if args.quick:
        args.scenarios = min(args.scenarios, 40)
        args.max_nodes = min(args.max_nodes, 128)
        args.oracle_time = min(args.oracle_time, 2.0)
    t_start = time.perf_counter()
    rows: list[Outcome] = []
    pairs: list[tuple[Scenario, dict[str, Outcome]]] = []
    for i in args.only or range(args.scenarios):
        sc = generate(
            i, np.random.default_rng([args.seed, i]), args.max_nodes, cpu_requests=args.cpu_requests
        )
        pristine = build_cluster(("bench", d) for d in sc.docs)
        legacy, gang = ("preempt", "gangpreempt") if sc.kind == "preempt" else ("reclaim", "gangreclaim")
        res = {
            "legacy": run_action(sc, legacy, pristine, args.repeat),
            "gang": run_action(sc, gang, pristine, args.repeat),
        }
        nn, nv = oracle_size(sc, pristine, sc.kind)
        if nn <= args.oracle_nodes and nv <= args.oracle_victims:
            by_key = {t.key: t for t in pristine.tasks.values()}
            hint = [by_key[k] for k in res["gang"].victims] if res["gang"].placed else None
            res["oracle"] = run_oracle(sc, pristine, sc.kind, args.oracle_time, args.oracle_workers, hint)
        rows.extend(res.values())
        pairs.append((sc, res))
        if args.verbose:
            line = " | ".join(
                f"{r.method} {'P' if r.placed else '-'} b{r.broken} e{r.evicted} w{r.work:.1f} {r.ms:.0f}ms"
                + (f" {r.status}" if r.status else "")
                for r in res.values()
            )
            print(
                f"#{i:3d} {sc.kind:<7} {sc.nodes:4d} nodes fill {sc.fill:.3f} prio-levels {sc.levels} "
                f"{sc.topology or '-':<6} need {sc.preemptor_gpus:3d} GPU | {line}",
                flush=True,
            )
    retime(pairs, args.repeat)
    elapsed = time.perf_counter() - t_start
    return report(args, pairs, rows, elapsed)


def report(
    args, pairs: list[tuple[Scenario, dict[str, Outcome]]], rows: list[Outcome], elapsed: float
) -> int:
    n_pre = sum(1 for sc, _ in pairs if sc.kind == "preempt")
    with_oracle = [(sc, res) for sc, res in pairs if "oracle" in res]
    print(
        f"{len(pairs)} scenarios ({n_pre} preempt, {len(pairs) - n_pre} reclaim), seed {args.seed}, "
        f"{len(with_oracle)} with the oracle "
        f"({sum(1 for _, r in with_oracle if r['oracle'].status == 'OPTIMAL')} proved optimal, "
        f"{sum(1 for _, r in with_oracle if r['oracle'].status == 'INFEASIBLE')} proved impossible); "
        f"{elapsed:.0f} s"
    )
    print(f"code: {fingerprint()}")
    sizes = sorted({sc.nodes for sc, _ in pairs})
    print(
        "nodes: "
        + ", ".join(f"{s}: {sum(1 for sc, _ in pairs if sc.nodes == s)}" for s in sizes)
        + f"; hard topology: {sum(1 for sc, _ in pairs if sc.topology)}"
    )
    for kind in ("preempt", "reclaim"):
        sel = [r for sc, res in pairs if sc.kind == kind for r in res.values()]
        if sel:
            table(sel, f"{kind} scenarios")
    print("\ntargets (gang-aware = gangpreempt / gangreclaim, against the oracle of the same rule)")
    ok_all = True
    can = [res for _, res in with_oracle if res["oracle"].placed]
    for key in ("gang", "legacy"):
        missed = sum(1 for res in can if not res[key].placed)
        rogue = sum(1 for res in can if res["oracle"].broken == 0 and res[key].broken > 0)
        good = sum(within(res[key], res["oracle"]) for res in can)
        ratios = [ratio(res[key], res["oracle"]) for res in can if res[key].placed]
        label = "gang-aware" if key == "gang" else "legacy"
        print(
            f"  {label:<10} misses {missed} of the {len(can)} placements the oracle makes; breaks a gang where the "
            f"oracle breaks none on {rogue}; within 10 % of its work on {good}/{len(can)} = "
            f"{good / max(len(can), 1):.1%} (median ratio {np.median(ratios) if ratios else float('nan'):.2f})"
        )
        if key == "gang":
            ok = (
                missed == 0
                and rogue == 0
                and good >= 0.98 * len(can)
                and (not ratios or np.median(ratios) <= 1.0 + 1e-9)
            )
            ok_all &= ok
            print(
                f"    targets: 0 misses, 0 gangs broken needlessly, >= 98 % within 10 %, median 1.00  "
                f"{'OK' if ok else 'MISSED'}"
            )
    proved_not = [res for _, res in with_oracle if res["oracle"].status == "INFEASIBLE"]
    bad = sum(1 for res in proved_not if res["gang"].placed)
    if bad:
        print(f"  gang-aware placed {bad} the oracle proves impossible: CHECK")
    big = [r for r in rows if r.method in ("gangpreempt", "gangreclaim") and r.nodes == 512]
    if big:
        ms = np.array([r.ms for r in big])
        ok = float(np.percentile(ms, 95)) <= 50.0
        ok_all &= ok
        print(
            f"  gang-aware time per decision at 512 nodes ({len(big)}): median {np.median(ms):.1f} ms, p95 "
            f"{np.percentile(ms, 95):.1f} ms, max {ms.max():.1f} ms (target p95 <= 50 ms)  {'OK' if ok else 'MISSED'}"
        )
        cpu = np.array([r.cpu_ms for r in big])
        print(
            f"    process CPU time: median {np.median(cpu):.1f} ms, p95 {np.percentile(cpu, 95):.1f} ms "
            f"(wall over CPU {np.median(ms) / max(np.median(cpu), 1e-9):.1f}x: other work on the machine)"
        )
        lms = np.array([r.ms for r in rows if r.method in ("preempt", "reclaim") and r.nodes == 512])
        print(
            f"    legacy at 512 nodes: median {np.median(lms):.1f} ms, p95 {np.percentile(lms, 95):.1f} ms "
            f"(the same machine, the same passes)"
        )
    else:
        print("  no 512-node scenarios (--max-nodes): time target not measured")
    if args.show_losses and can:
        worst = sorted(
            (
                (res["gang"].work - res["oracle"].work, sc, res)
                for sc, res in with_oracle
                if res["oracle"].placed and res["gang"].placed
            ),
            key=lambda x: -x[0],
        )[: args.show_losses]
        worst = [w for w in worst if w[0] > 0.01]
        if worst:
            print("\nwhere gang-aware loses most to the oracle (rerun one with --only I -v to see it)")
        for _diff, sc, res in worst:
            g, o = res["gang"], res["oracle"]
            print(
                f"  scenario {sc.index} ({sc.kind}, {sc.nodes} nodes, {sc.topology or 'no topology'}, "
                f"{sc.preemptor_gpus} GPUs): gang-aware {g.work:.1f} GPU-h / {g.broken} broken / {g.evicted} pods, "
                f"oracle {o.work:.1f} GPU-h / {o.broken} broken / {o.evicted} pods ({o.status})"
            )
    print(f"\nall targets {'met' if ok_all else 'NOT all met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
