"""Property tests (hypothesis) for the rules of SPEC.md §5 and the Statement contract of §2.

Random snapshots: a few nodes with cpu/memory/GPUs/pod slots, a few queues (weights, sometimes a GPU
capability), gangs with random minMember, some of whose pods already run (a few of them Releasing),
some nominated by an earlier cycle, pods of another scheduler as fixed load, and best-effort pods on
their own. The generator keeps the input itself sound: running pods fit their node, and nominations fit
the node's capacity once releasing pods are gone.
"""

from __future__ import annotations

import json
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from corral.cli import app
from corral.framework.cycle import run_cycle
from corral.framework.session import Session
from corral.manifests.build import build_cluster
from corral.model import TaskStatus
from corral.model.clock import parse_time
from corral.registry import REGISTRY, default_config

NOW = "2026-01-01T00:00:00Z"
T_NOW = parse_time(NOW)
#: resource -> how a generated integer amount is written as a quantity
RES = {"cpu": lambda v: f"{v}m", "memory": lambda v: f"{v}Mi", "nvidia.com/gpu": str, "pods": str}
SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}


@dataclass
class Snap:
    """A generated snapshot and what the generator knows about it (integer units per resource)."""

    docs: list[dict] = field(default_factory=list)
    alloc: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> resource -> amount
    used: dict[str, dict[str, int]] = field(default_factory=dict)  # running incl. releasing
    releasing: dict[str, dict[str, int]] = field(default_factory=dict)
    nominated: dict[str, tuple[str, dict[str, int]]] = field(default_factory=dict)  # pod -> node, request
    request: dict[str, dict[str, int]] = field(default_factory=dict)  # pod key -> request
    job_of: dict[str, str] = field(default_factory=dict)  # pod key -> job uid
    min_member: dict[str, int] = field(default_factory=dict)  # job uid -> minMember
    placed: dict[str, int] = field(default_factory=dict)  # job uid -> running pods


def _fits(snap: Snap, node: str, req: dict[str, int], *, future: bool) -> bool:
    for r, v in req.items():
        held = snap.used[node][r]
        if future:
            held = (
                held
                - snap.releasing[node][r]
                + sum(q.get(r, 0) for n, q in snap.nominated.values() if n == node)
            )
        if held + v > snap.alloc[node][r]:
            return False
    return True


def _pod(
    name: str,
    req: dict[str, int],
    *,
    group: str | None,
    scheduler: str = "corral",
    priority: int = 0,
    role: str = "",
    spread: bool = False,
) -> dict:
    meta: dict = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "creationTimestamp": NOW,
        "annotations": {},
        "labels": {"app": group or name},
    }
    if group:
        meta["annotations"]["scheduling.k8s.io/group-name"] = group
    if role:
        meta["annotations"]["volcano.sh/task-spec"] = role
    requests = {r: RES[r](v) for r, v in req.items() if r != "pods" and v}
    spec: dict = {
        "schedulerName": scheduler,
        "priority": priority,
        "containers": [{"name": "c", "resources": {"requests": requests}}],
    }
    if spread:  # one pod of the gang per node: exercises the inter-pod index of predicates
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": group or name}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def _place(snap: Snap, pod: dict, node: str, req: dict[str, int], releasing: bool) -> None:
    pod["spec"]["nodeName"] = node
    pod["status"] = {"phase": "Running", "startTime": NOW}
    if releasing:
        pod["metadata"]["deletionTimestamp"] = NOW
    for r, v in req.items():
        snap.used[node][r] += v
        if releasing:
            snap.releasing[node][r] += v


requests_st = st.fixed_dictionaries(
    {
        "cpu": st.sampled_from([0, 500, 1000, 2000, 4000]),
        "memory": st.sampled_from([0, 512, 2048, 4096]),
        "nvidia.com/gpu": st.sampled_from([0, 0, 1, 2, 4, 8]),
    }
).filter(lambda d: any(d.values()))


@st.composite
def snapshots(draw, max_nodes: int = 5, max_jobs: int = 6) -> Snap:
    snap = Snap()
    for i in range(draw(st.integers(1, max_nodes))):
        name = f"n{i}"
        alloc = {
            "cpu": draw(st.sampled_from([4000, 8000, 16000])),
            "memory": draw(st.sampled_from([8192, 16384])),
            "nvidia.com/gpu": draw(st.sampled_from([0, 2, 4, 8])),
            "pods": draw(st.sampled_from([2, 4, 110])),
        }
        snap.alloc[name] = alloc
        snap.used[name] = dict.fromkeys(alloc, 0)
        snap.releasing[name] = dict.fromkeys(alloc, 0)
        snap.docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {r: RES[r](v) for r, v in alloc.items()}},
            }
        )
    nodes = sorted(snap.alloc)
    queues = ["default"]
    for i in range(draw(st.integers(0, 2))):
        spec: dict = {"weight": draw(st.integers(1, 4))}
        if draw(st.booleans()):
            spec["capability"] = {"nvidia.com/gpu": str(draw(st.sampled_from([2, 4, 8, 16])))}
        queues.append(f"q{i}")
        snap.docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": f"q{i}"},
                "spec": spec,
            }
        )
    for j in range(draw(st.integers(1, max_jobs))):
        name = f"j{j}"
        uid = f"default/{name}"
        count = draw(st.integers(1, 4))
        min_member = draw(st.integers(1, count))
        req = {**draw(requests_st), "pods": 1}
        priority = draw(st.integers(0, 3))
        roles = draw(st.booleans())
        spread = draw(st.integers(0, 3)) == 0
        placed = 0
        for k in range(count):
            pname = f"{name}-{k}"
            pod = _pod(
                pname, req, group=name, priority=priority, role="ab"[k % 2] if roles else "", spread=spread
            )
            where = draw(st.sampled_from(["pending"] * 3 + ["running", "nominated"]))
            node = draw(st.sampled_from(nodes))
            if spread and where == "running":
                where = "pending"  # the generator does not check anti-affinity of running pods
            if (
                where == "running"
                and _fits(snap, node, req, future=False)
                and _fits(snap, node, req, future=True)
            ):
                releasing = draw(st.integers(0, 4)) == 0
                _place(snap, pod, node, req, releasing)
                placed += 0 if releasing else 1
            elif where == "nominated" and _fits(snap, node, req, future=True):
                pod["status"]["nominatedNodeName"] = node
                snap.nominated[f"default/{pname}"] = (node, req)
            snap.request[f"default/{pname}"] = req
            snap.job_of[f"default/{pname}"] = uid
            snap.docs.append(pod)
        spec = {"minMember": min_member, "queue": draw(st.sampled_from(queues))}
        if roles and draw(st.booleans()):
            spec["minTaskMember"] = {"a": 1} if count == 1 else {"a": 1, "b": 1}
        phase = (
            "Running" if placed >= min_member else draw(st.sampled_from(["Inqueue", "Inqueue", "Pending"]))
        )
        if draw(st.booleans()):
            spec["minResources"] = {r: RES[r](v * min_member) for r, v in req.items() if r != "pods" and v}
        snap.docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "default", "creationTimestamp": NOW},
                "spec": spec,
                "status": {"phase": phase},
            }
        )
        snap.min_member[uid] = min_member
        snap.placed[uid] = placed
    for k in range(draw(st.integers(0, 2))):  # other schedulers' pods: fixed load
        req = {**draw(requests_st), "pods": 1}
        node = draw(st.sampled_from(nodes))
        pod = _pod(f"foreign-{k}", req, group=None, scheduler="default-scheduler")
        if _fits(snap, node, req, future=False) and _fits(snap, node, req, future=True):
            _place(snap, pod, node, req, False)
            snap.docs.append(pod)
    for k in range(draw(st.integers(0, 2))):  # best-effort pods, each a job of its own
        key = f"default/be-{k}"
        snap.request[key] = {"cpu": 0, "memory": 0, "nvidia.com/gpu": 0, "pods": 1}
        snap.job_of[key] = key
        snap.min_member[key] = 1
        snap.placed[key] = 0
        snap.docs.append(_pod(f"be-{k}", {}, group=None))
    return snap


def _cluster(snap: Snap):
    return build_cluster([("generated.yaml", d) for d in snap.docs])


# -- SPEC.md §5: no node over-committed by the binds and nominations of a cycle ----------------------
@settings(max_examples=200, **SETTINGS)
@given(snapshots())
def test_no_node_overcommitted_by_binds_and_nominations(snap: Snap) -> None:
    assert_no_overcommit(snap, run_cycle(_cluster(snap), default_config(), REGISTRY, T_NOW, 1))


def assert_no_overcommit(snap: Snap, decisions) -> None:
    now = {n: dict(u) for n, u in snap.used.items()}  # running incl. releasing, + binds
    later = {n: {r: u[r] - snap.releasing[n][r] for r in u} for n, u in snap.used.items()}
    noms = {pod: node for pod, (node, _) in snap.nominated.items()}
    for b in decisions.binds:
        noms.pop(b.pod, None)
        for r, v in snap.request[b.pod].items():
            now[b.node][r] += v
            later[b.node][r] += v
    for n in decisions.nominations:
        if n.node:
            noms[n.pod] = n.node
        else:
            noms.pop(n.pod, None)
    for pod, node in noms.items():
        for r, v in snap.request[pod].items():
            later[node][r] += v
    for node, alloc in snap.alloc.items():
        for r, cap in alloc.items():
            assert now[node][r] <= cap, f"{node} {r}: {now[node][r]} bound > {cap}"
            assert later[node][r] <= cap, f"{node} {r}: {later[node][r]} bound + nominated > {cap}"


# -- SPEC.md §5: no gang left bound below minMember ---------------------------------------------------
@settings(max_examples=200, **SETTINGS)
@given(snapshots())
def test_no_gang_bound_below_min_member(snap: Snap) -> None:
    assert_no_partial_gang(snap, run_cycle(_cluster(snap), default_config(), REGISTRY, T_NOW, 1))


def assert_no_partial_gang(snap: Snap, decisions) -> None:
    bound: dict[str, int] = {}
    for b in decisions.binds:
        job = snap.job_of[b.pod]
        bound[job] = bound.get(job, 0) + 1
    for job, n in bound.items():
        assert n + snap.placed[job] >= snap.min_member[job], (
            f"{job}: {n} bound + {snap.placed[job]} running < minMember {snap.min_member[job]}"
        )


# -- SPEC.md §2: discard restores the session exactly; save/restore likewise --------------------------
def _state(cluster, session: Session) -> tuple:
    tasks = tuple(sorted((uid, t.status.value, t.node, t.nominated) for uid, t in cluster.tasks.items()))
    plugins = []
    for p in session.plugins():
        for attr in ("usage", "allocated"):
            d = getattr(p, attr, None)
            if isinstance(d, dict):
                plugins.append(
                    (
                        p.name,
                        attr,
                        tuple(
                            sorted((k, np.asarray(v, dtype=float).round(3).tobytes()) for k, v in d.items())
                        ),
                    )
                )
        placed = getattr(p, "placed", None)
        if isinstance(placed, dict):
            plugins.append((p.name, "placed", tuple(sorted((t.uid, row) for t, row in placed.values()))))
    return cluster.nodes.state_bytes(), tasks, tuple(plugins)


_OPS = st.lists(
    st.tuples(st.sampled_from(["allocate", "pipeline", "evict"]), st.integers(0, 999), st.integers(0, 999)),
    max_size=10,
)


def _apply(stmt, cluster, ops) -> None:
    rows = len(cluster.nodes)
    tasks = [t for _, t in sorted(cluster.tasks.items()) if t.managed]
    for kind, a, b in ops:
        if kind == "evict":
            cands = [
                t for t in tasks if t.status in (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.ALLOCATED)
            ]
        else:
            cands = [t for t in tasks if t.status in (TaskStatus.PENDING, TaskStatus.PIPELINED)]
        if not cands:
            continue
        task = cands[a % len(cands)]
        if kind == "evict":
            stmt.evict(task, "property test")
        else:
            getattr(stmt, kind)(task, b % rows)


@settings(max_examples=150, **SETTINGS)
@given(snapshots(), _OPS, _OPS)
def test_statement_discard_and_restore_are_exact(snap: Snap, first, second) -> None:
    cluster = _cluster(snap)
    session = Session(cluster, default_config(), REGISTRY, T_NOW, 1)
    before = _state(cluster, session)
    stmt = session.statement()
    _apply(stmt, cluster, first)
    mark = stmt.save()
    at_mark = _state(cluster, session)
    _apply(stmt, cluster, second)
    stmt.restore(mark)
    assert _state(cluster, session) == at_mark
    _apply(stmt, cluster, second)
    stmt.discard()
    assert _state(cluster, session) == before


@settings(max_examples=60, **SETTINGS)
@given(snapshots(), _OPS)
def test_statement_context_manager_discards(snap: Snap, ops) -> None:
    cluster = _cluster(snap)
    session = Session(cluster, default_config(), REGISTRY, T_NOW, 1)
    before = _state(cluster, session)
    with session.statement() as stmt:
        _apply(stmt, cluster, ops)
    assert _state(cluster, session) == before
    assert not session.decisions.binds and not session.decisions.evictions


# -- SPEC.md §5: same input, same decisions, byte for byte --------------------------------------------
def _schedule_json(path: Path, *extra: str) -> str:
    result = CliRunner().invoke(app, ["schedule", str(path), "--now", NOW, "-o", "json", *extra])
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    return result.stdout


@settings(max_examples=30, **SETTINGS)
@given(snapshots(max_nodes=4, max_jobs=5), st.integers(1, 2), st.randoms(use_true_random=False))
def test_same_input_same_output(snap: Snap, cycles: int, rnd: random.Random) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "snapshot.yaml"
        path.write_text(yaml.safe_dump_all(snap.docs))
        first = _schedule_json(path, "--cycles", str(cycles))
        assert _schedule_json(path, "--cycles", str(cycles)) == first
        docs = list(snap.docs)
        rnd.shuffle(docs)  # the order of objects in a file does not matter
        path.write_text(yaml.safe_dump_all(docs))
        assert _schedule_json(path, "--cycles", str(cycles)) == first
