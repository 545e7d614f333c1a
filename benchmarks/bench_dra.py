"""Dynamic Resource Allocation at scale (issue 34): 1,000 nodes with 8 GPUs each published as
ResourceSlices (one slice per node, each device with NVIDIA-style attributes — a unique uuid, index,
product name — and its memory as capacity), a DeviceClass selecting them by CEL (its devices counted as
``nvidia.com/gpu`` by ``extendedResourceName``, so both forms are packed alike), and 5,000 pending pods
in gangs whose ResourceClaimTemplates ask for 1, 2, 4 or 8 GPUs; against the same workload written with
``nvidia.com/gpu`` requests on nodes that advertise ``nvidia.com/gpu: 8``.

Prints, for each form, the time to assemble the model from the parsed objects and the time of one full
cycle (enqueue, allocate, backfill with the default configuration, which has the ``dra`` plugin), wall
and CPU (user + sys of this process: on a shared machine wall time includes waiting for a core), the
pods bound, and the ratio DRA / extended resource of the cycle against the target (<= 2x).

With ``--live``, also what ``corral run`` pays to bring its model up to date between cycles
(:mod:`corral.kube.model`): the objects go into a watch cache, a first cycle runs and its binds are
assumed as a dry run assumes them, then one pending pod changes; each form prints the kind of model
update (``incremental``: the changed pods' jobs rebuilt; ``full``: everything assembled again, which
is what a cluster with resource claims gets) and its time, wall and CPU.

    .venv/bin/python benchmarks/bench_dra.py [--nodes N] [--pods P] [--seed S] [--profile] [--live]
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import pstats
import time

import numpy as np

from corral.framework.cycle import run_cycle
from corral.manifests.build import assemble_cluster, parse_objects
from corral.model.clock import parse_time
from corral.registry import REGISTRY, default_config

T0 = "2026-01-01T00:00:00Z"
API = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"
TARGET = 2.0


def _node(i: int, extended: bool) -> dict:
    alloc = {"cpu": "96", "memory": "1Ti", "pods": "110"}
    if extended:
        alloc["nvidia.com/gpu"] = "8"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i:05d}"},
        "status": {"allocatable": alloc},
    }


def _slice(i: int) -> dict:
    node = f"node-{i:05d}"
    devices = [
        {
            "name": f"gpu-{k}",
            "attributes": {
                "uuid": {"string": f"GPU-{i:05d}-{k}-0c9f2b1e"},
                "index": {"int": k},
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
                "driverVersion": {"version": "580.65.6"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for k in range(8)
    ]
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _pod(name: str, group: str, gpu: int, extended: bool) -> dict:
    requests = {"cpu": str(4 * gpu), "memory": f"{32 * gpu}Gi"}
    spec: dict = {
        "schedulerName": "corral",
        "containers": [{"name": "c", "resources": {"requests": requests}}],
    }
    if extended:
        requests["nvidia.com/gpu"] = str(gpu)
    else:
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": f"gpu-{gpu}"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": name,
            "creationTimestamp": T0,
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def generate(nodes: int, pods: int, seed: int, extended: bool) -> list[dict]:
    """The workload in one of its two forms (same gangs, same sizes, same GPU counts)."""
    rng = np.random.default_rng(seed)
    docs = [_node(i, extended) for i in range(nodes)]
    if not extended:
        docs += [_slice(i) for i in range(nodes)]
        docs.append(
            {
                "apiVersion": API,
                "kind": "DeviceClass",
                "metadata": {"name": DRIVER},
                # the class's devices count as nvidia.com/gpu (KEP-5004's extendedResourceName): queue
                # shares, binpack and the simulator's GPU accounting see them as the other form's GPUs
                "spec": {
                    "selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}],
                    "extendedResourceName": "nvidia.com/gpu",
                },
            }
        )
        for gpu in (1, 2, 4, 8):
            docs.append(
                {
                    "apiVersion": API,
                    "kind": "ResourceClaimTemplate",
                    "metadata": {"name": f"gpu-{gpu}", "namespace": "bench"},
                    "spec": {
                        "spec": {
                            "devices": {
                                "requests": [
                                    {
                                        "name": "gpus",
                                        "exactly": {
                                            "deviceClassName": DRIVER,
                                            "count": gpu,
                                            "selectors": [
                                                {
                                                    "cel": {
                                                        "expression": f"device.capacity['{DRIVER}'].memory"
                                                        ".compareTo(quantity('40Gi')) >= 0"
                                                    }
                                                }
                                            ],
                                        },
                                    }
                                ]
                            }
                        }
                    },
                }
            )
    made, g = 0, 0
    while made < pods:
        size = int(min(rng.integers(1, 17), pods - made))
        gpu = int(rng.choice([1, 2, 4, 8], p=[0.4, 0.3, 0.2, 0.1]))
        name = f"gang-{g:04d}"
        docs.append(
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "bench", "creationTimestamp": T0},
                "spec": {"minMember": size},
                "status": {"phase": "Inqueue"},
            }
        )
        docs += [_pod(f"{name}-{k}", name, gpu, extended) for k in range(size)]
        made += size
        g += 1
    return docs


def measure(docs: list[dict], profile: bool) -> dict:
    records = parse_objects(("bench", d) for d in docs)
    w0, c0 = time.perf_counter(), time.process_time()
    cluster = assemble_cluster(records)
    w1, c1 = time.perf_counter(), time.process_time()
    prof = cProfile.Profile() if profile else None
    if prof is not None:
        prof.enable()
    decisions = run_cycle(cluster, default_config(), REGISTRY, parse_time(T0), 1)
    if prof is not None:
        prof.disable()
    w2, c2 = time.perf_counter(), time.process_time()
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    return {
        "build": (w1 - w0, c1 - c0),
        "cycle": (w2 - w1, c2 - c1),
        "bound": len(decisions.binds),
        "claims": len(decisions.claim_allocations),
    }


def _timed(fn):  # type: ignore[no-untyped-def]
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, (time.perf_counter() - w0, time.process_time() - c0)


def measure_live(docs: list[dict]) -> dict:
    """``corral run``'s model updates: after the first cycle's binds (a dry run's), then after one pending
    pod changes."""
    from corral.kube.api import RESOURCES
    from corral.kube.cache import WatchCache
    from corral.kube.logs import Log
    from corral.kube.runner import dry_run_assume

    types = {(r.kind, r.api_version): r for r in RESOURCES}
    cache = WatchCache(None, Log(stream=io.StringIO()))
    by_type: dict = {r: [] for r in RESOURCES}
    for d in docs:
        r = types.get((d.get("kind"), d.get("apiVersion")))
        if r is not None:
            by_type[r].append(d)
    for r, items in by_type.items():
        cache.replace(r, items)
    now = parse_time(T0)
    (cluster, _), first = _timed(cache.build)
    decisions = run_cycle(cluster, default_config(), REGISTRY, now, 1)
    dry_run_assume(cache, decisions, now)
    _, after_binds = _timed(cache.build)
    binds_kind = cache.model.last
    bound = {b.pod for b in decisions.binds}
    pod_type = types[("Pod", "v1")]
    pending = next(e.raw for k, e in sorted(cache.stores[pod_type].items()) if k not in bound)
    changed = copy.deepcopy(pending)
    changed["metadata"].setdefault("labels", {})["bench"] = "changed"
    cache.event(pod_type, "MODIFIED", changed)
    _, one_pod = _timed(cache.build)
    return {
        "first": first,
        "binds": (binds_kind, after_binds),
        "one_pod": (cache.model.last, one_pod),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--live", action="store_true", help="also measure corral run's model updates")
    args = ap.parse_args()
    got = {}
    for form, extended in (("nvidia.com/gpu", True), ("DRA", False)):
        got[form] = m = measure(generate(args.nodes, args.pods, args.seed, extended), args.profile)
        print(
            f"{form:>15}: build {m['build'][0]:.2f} s wall ({m['build'][1]:.2f} s CPU); "
            f"cycle {m['cycle'][0]:.2f} s wall ({m['cycle'][1]:.2f} s CPU); "
            f"{m['bound']} pods bound, {m['claims']} claims allocated"
        )
    ext, dra = got["nvidia.com/gpu"], got["DRA"]
    assert ext["bound"] == dra["bound"], "the two forms must place the same number of pods"
    ratio_wall = dra["cycle"][0] / ext["cycle"][0]
    ratio_cpu = dra["cycle"][1] / ext["cycle"][1]
    print(
        f"cycle DRA / nvidia.com/gpu: {ratio_wall:.2f}x wall, {ratio_cpu:.2f}x CPU "
        f"(target <= {TARGET:.0f}x): {'met' if ratio_cpu <= TARGET else 'NOT met'}"
    )
    both = (dra["build"][1] + dra["cycle"][1]) / (ext["build"][1] + ext["cycle"][1])
    print(f"build + cycle DRA / nvidia.com/gpu: {both:.2f}x CPU")
    if not args.live:
        return
    for form, extended in (("nvidia.com/gpu", True), ("DRA", False)):
        m = measure_live(generate(args.nodes, args.pods, args.seed, extended))
        print(
            f"{form:>15} corral run model: first build {m['first'][0]:.2f} s wall ({m['first'][1]:.2f} s CPU); "
            f"after the binds {m['binds'][0]} {m['binds'][1][0]:.2f} s wall ({m['binds'][1][1]:.2f} s CPU); "
            f"after one pod changed {m['one_pod'][0]} {m['one_pod'][1][0]:.2f} s wall "
            f"({m['one_pod'][1][1]:.2f} s CPU)"
        )


if __name__ == "__main__":
    main()
