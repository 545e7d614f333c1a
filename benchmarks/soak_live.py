"""Fault-injection soak of ``corral run`` (bounded, loopback only): two replicas with leader election
against the tests' in-process API server (:mod:`tests.kube.fakeapi`), under a stream of gang jobs that
arrive, run and finish, while faults are injected:

- 500 answers before the request is carried out, and after (an ambiguous answer: the write landed), on
  binds, evictions and patches; 429 on evictions (rate limiting, no budget cause); 409 on binds;
- added latency on random requests; dropped watches; history compaction (410 Gone, relists);
- a replica killed at a random point (its writes stop at once, its lease is not released), or between
  the evictions and the binds of a cycle; the killed replica comes back as a new one;
- the leader paused past its lease (its clock jumps ahead, as a process that was stopped);
- an unreadable object appearing mid-run.

Checked from the server's side while it runs, and printed: no pod bound twice or to two nodes, no node
overcommitted, no gang below its minimum for longer than its release takes, no eviction repeated for a
terminating pod, every write but the lease's made by the replica holding the lease, every job eventually
running once the faults stop, and the scheduler's own records bounded. Binds per second and cycle time
are printed beside a fault-free run of the same length.

    python benchmarks/soak_live.py [--seconds 60] [--seed 1]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import resource
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kube.fakeapi import FakeAPI  # noqa: E402
from tests.scenarios.expand import expand  # noqa: E402

from corral.kube.api import KubeAPI, load_client  # noqa: E402
from corral.kube.logs import Log  # noqa: E402
from corral.kube.metrics import Metrics  # noqa: E402
from corral.kube.runner import Runner, RunOptions  # noqa: E402
from corral.registry import default_config  # noqa: E402

GPUS, NODES, PERIOD = 8, 8, 0.2


class Killed(BaseException):
    pass


class Replica:
    """One ``corral run`` process: a runner on its own client, tagged so the server knows who wrote."""

    def __init__(self, srv: FakeAPI, ident: str) -> None:
        client = load_client(host=srv.url)
        client.set_default_header("X-Corral-Replica", ident)
        opts = RunOptions(
            leader_elect=True,
            identity=ident,
            lease_namespace="default",
            period=PERIOD,
            lease=(1.0, 0.6, 0.1),
            backoff=(0.02, 0.5),
            watch_timeout=30,
            sync_timeout=30.0,
        )
        self.ident = ident
        self.runner = Runner(
            KubeAPI(client, timeout=5.0),
            default_config(),
            opts,
            Log(stream=io.StringIO()),
            Metrics(),
            io.StringIO(),
        )
        self.runner.applier.retry_backoff = (0.01, 0.05)
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"replica-{ident}")
        self.dead = False

    def _run(self) -> None:
        try:
            self.runner.start()
            self.runner.run()
        except BaseException:  # noqa: BLE001 - killed mid-cycle: the process is gone
            self.kill()
            return
        self.dead = True  # leadership lost: the process exits as `corral run` does
        self.runner.stop()

    def kill(self) -> None:
        """SIGKILL: no write goes out from now on, the lease is not released, nothing is cleaned up."""
        r = self.runner
        r.applier.api.may_write = lambda: False
        if r.elector is not None:
            r.elector.stopping.set()
        r.stopping.set()
        r.lost = True
        self.dead = True
        threading.Thread(target=r.cache.stop, daemon=True).start()


class Soak:
    def __init__(self, seconds: float, seed: int, faults: bool) -> None:
        self.rng = random.Random(seed)
        self.seconds, self.faults_on = seconds, faults
        self.srv = FakeAPI(history_limit=2000).start()
        self.srv.add_all(expand({"nodes": [{"name": f"n{i}", "gpu": GPUS} for i in range(NODES)]}))
        self.replicas: list[Replica] = []
        self.next_id = 0
        self.jobs: dict[str, dict] = {}  # name -> {min, gpu, pods: set, started, bound_at}
        self.faults: Counter = Counter()
        self.violations: Counter = Counter()
        self.partial_since: dict[str, float] = {}
        self.longest_partial = 0.0
        self.kills: list[float] = []
        self.recoveries: list[float] = []
        self.checked_writes = 0
        self.pod_serial = 0

    # -- the workload ---------------------------------------------------------------------------------
    def submit(self) -> None:
        name = f"j{len(self.jobs)}"
        count, gpu = self.rng.choice([(1, 8), (2, 4), (4, 2), (2, 8), (4, 4), (1, 2), (3, 8)])
        objs = expand({"jobs": [{"name": name, "pods": [{"count": count, "gpu": gpu}]}]})
        self.srv.add_all(objs)
        self.jobs[name] = {"min": count, "gpu": gpu, "done": False, "run_until": None}

    def pods(self) -> list[dict]:
        return self.srv.objects("Pod")

    def complete_and_recreate(self, now: float) -> None:
        """Jobs whose pods all run finish after a while; evicted pods are recreated pending (their
        controller's part)."""
        self.srv.finish_deletions()
        by_job: dict[str, list[dict]] = {}
        for p in self.pods():
            group = (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")
            by_job.setdefault(group, []).append(p)
        for name, info in self.jobs.items():
            if info["done"]:
                continue
            pods = by_job.get(name, [])
            bound = [p for p in pods if p["spec"].get("nodeName")]
            if len(pods) < info["min"]:  # evicted and gone: recreated pending
                for _ in range(info["min"] - len(pods)):
                    self.pod_serial += 1
                    pod = expand({"jobs": [{"name": name, "pods": [{"count": 1, "gpu": info["gpu"]}]}]})
                    pod = next(o for o in pod if o["kind"] == "Pod")
                    pod["metadata"]["name"] = f"{name}-r{self.pod_serial}"
                    pod["metadata"]["uid"] = f"{name}-r{self.pod_serial}-uid"
                    self.srv.add(pod)
            if len(bound) >= info["min"]:
                if info["run_until"] is None:
                    info["run_until"] = now + self.rng.uniform(0.5, 2.0)
                elif now >= info["run_until"]:
                    for p in pods:
                        self.srv.delete("Pod", p["metadata"]["name"], "default")
                    info["done"] = True

    # -- faults -----------------------------------------------------------------------------------------
    def leader(self) -> Replica | None:
        return next((r for r in self.replicas if not r.dead and r.runner.is_leader()), None)

    def spawn(self) -> None:
        self.next_id += 1
        rep = Replica(self.srv, f"r{self.next_id}")
        self.replicas.append(rep)
        rep.thread.start()

    def inject(self) -> None:
        rng, srv = self.rng, self.srv
        roll = rng.random()
        writes = [
            ("POST", r"/binding$"),
            ("POST", r"/eviction$"),
            ("PATCH", r"/podgroups/"),
            ("PATCH", r"/pods/[^/]+/status$"),
        ]
        if roll < 0.35:
            method, path = rng.choice(writes)
            srv.fail(method, path, rng.choice([500, 503, 504]), after=rng.random() < 0.5)
            self.faults["5xx"] += 1
        elif roll < 0.45:
            srv.fail("POST", r"/eviction$", 429)
            self.faults["429"] += 1
        elif roll < 0.55:
            srv.fail("POST", r"/binding$", 409)
            self.faults["409"] += 1
        elif roll < 0.70:
            srv.slow(rng.choice(["GET", "POST", "PATCH", "PUT"]), r".", rng.uniform(0.05, 0.4))
            self.faults["latency"] += 1
        elif roll < 0.78:
            srv.drop_watches()
            self.faults["dropped watches"] += 1
        elif roll < 0.82:
            srv.compact()
            self.faults["compaction (410)"] += 1
        elif roll < 0.86:
            lead = self.leader()
            if lead is not None and lead.runner.elector is not None:
                shift = rng.uniform(1.2, 2.0)
                el = lead.runner.elector
                base = el.clock
                el.clock = lambda: base() + shift  # paused past its lease
                self.faults["leader pause"] += 1
        elif roll < 0.90:
            lead = self.leader()
            if lead is not None:
                if rng.random() < 0.5:
                    lead.runner.applier.after_evictions = lambda: (_ for _ in ()).throw(Killed())
                    self.faults["kill between evictions and binds"] += 1
                else:
                    lead.kill()
                    self.faults["kill"] += 1
                self.kills.append(time.monotonic())
        elif roll < 0.905:
            bad = expand(
                {
                    "jobs": [
                        {
                            "name": f"bad{self.faults['unreadable object']}",
                            "bare": True,
                            "pods": [{"count": 1, "cpu": "lots"}],
                        }
                    ]
                }
            )
            srv.add_all(bad)
            self.faults["unreadable object"] += 1

    # -- invariants ----------------------------------------------------------------------------------
    def check(self, now: float) -> None:
        used: Counter = Counter()
        groups: dict[str, int] = Counter()
        for p in self.pods():
            node = p["spec"].get("nodeName")
            group = (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")
            if node:
                req = p["spec"]["containers"][0].get("resources", {}).get("requests", {})
                used[node] += int(req.get("nvidia.com/gpu", 0))
                if group and not p["metadata"].get("deletionTimestamp"):
                    groups[group] += 1
        self.violations["node overcommitted"] += sum(1 for n, g in used.items() if g > GPUS)
        for name, info in self.jobs.items():
            bound = groups.get(name, 0)
            if 0 < bound < info["min"] and not info["done"]:
                since = self.partial_since.setdefault(name, now)
                self.longest_partial = max(self.longest_partial, now - since)
            else:
                self.partial_since.pop(name, None)
        bindings = Counter(p for p, _n in self.srv.bindings)
        self.violations["pod bound twice"] = sum(1 for c in bindings.values() if c > 1)
        self.violations["eviction of a terminating pod"] = len(self.srv.repeated_evictions)
        new = self.srv.writes[self.checked_writes :]
        self.checked_writes += len(new)
        self.violations["write by a non-leader"] += sum(
            1 for who, holders, _m, _p in new if who not in holders
        )

    # -- the run ----------------------------------------------------------------------------------------
    def run(self) -> dict:
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.spawn()
        self.spawn()
        start = time.monotonic()
        end = start + self.seconds
        last_submit = 0.0
        while time.monotonic() < end:
            now = time.monotonic()
            pending = sum(1 for i in self.jobs.values() if not i["done"])
            if now - last_submit > 0.15 and pending < 24:
                self.submit()
                last_submit = now
            if self.faults_on:
                self.inject()
            alive = [r for r in self.replicas if not r.dead]
            if len(alive) < 2:
                self.spawn()
            self.complete_and_recreate(now)
            self.check(now)
            if self.kills and len(self.recoveries) < len(self.kills):
                lead = self.leader()
                if (
                    lead is not None
                    and lead.runner.cycle_no > 0
                    and lead.runner.last_cycle_end > self.kills[-1]
                ):
                    self.recoveries.append(lead.runner.last_cycle_end - self.kills[-1])
            time.sleep(0.05)
        # faults stop: every job must run
        drain_end = time.monotonic() + 60
        while time.monotonic() < drain_end and not all(i["done"] for i in self.jobs.values()):
            if len([r for r in self.replicas if not r.dead]) < 1:
                self.spawn()
            self.complete_and_recreate(time.monotonic())
            self.check(time.monotonic())
            time.sleep(0.05)
        left = [n for n, i in self.jobs.items() if not i["done"]]
        if os.environ.get("SOAK_DEBUG") and left:
            for p in self.pods():
                g = (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")
                if g in left[:3]:
                    print(
                        g,
                        p["metadata"]["name"],
                        p["spec"].get("nodeName"),
                        p["metadata"].get("deletionTimestamp"),
                        file=sys.stderr,
                    )
            alive = [(r.ident, r.runner.is_leader(), r.runner.cycle_no) for r in self.replicas if not r.dead]
            print("alive", alive, file=sys.stderr)
            print(self.srv.get("PodGroup", left[0], "default").get("status"), file=sys.stderr)
            print(
                [
                    (e["reason"], e["message"][:150])
                    for e in self.srv.objects("Event")
                    if e["involvedObject"]["name"].startswith(left[0])
                ][-3:],
                file=sys.stderr,
            )
            print(Counter(p["spec"].get("nodeName") for p in self.pods()), file=sys.stderr)
        self.violations["jobs never run"] = len(left)
        records = {}
        for r in self.replicas:
            if not r.dead:
                ap = r.runner.applier
                records = {
                    "emitted events": len(ap.recorder.emitted),
                    "refusals": len(ap.refused),
                    "uncertain writes": len(ap.uncertain),
                    "partial gangs": len(ap.partial),
                    "log records": len(r.runner.log.records),
                }
        binds = len(self.srv.bindings)
        cycles = [
            r.runner.metrics.cycle._sum.get() / r.runner.cycle_no  # noqa: SLF001
            for r in self.replicas
            if r.runner.cycle_no
        ]
        if os.environ.get("SOAK_DEBUG"):
            for r in self.replicas:
                msgs = Counter(x["msg"] for x in r.runner.log.records if x["level"] in ("warning", "error"))
                print(r.ident, r.dead, r.runner.cycle_no, r.runner.is_leader(), dict(msgs), file=sys.stderr)
                lead = [x for x in r.runner.log.records if "leader" in x["msg"] or "lease" in x["msg"]]
                for x in lead[-4:]:
                    print("   ", x, file=sys.stderr)
            print(self.srv.objects("Lease"), file=sys.stderr)
        for r in self.replicas:
            if not r.dead:
                r.runner.stopping.set()
        out = {
            "faults": dict(self.faults),
            "violations": dict(self.violations),
            "jobs": len(self.jobs),
            "binds/s": binds / (time.monotonic() - start),
            "cycle s": statistics.median(cycles) if cycles else 0.0,
            "longest partial gang s": self.longest_partial,
            "recovery after kill s": max(self.recoveries) if self.recoveries else None,
            "records": records,
            "rss growth KiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0,
            "replicas started": self.next_id,
        }
        self.srv.stop()
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    clean = Soak(args.seconds / 3, args.seed, faults=False).run()
    soak = Soak(args.seconds, args.seed, faults=True).run()
    total = sum(soak["faults"].values())
    print(f"faults injected: {total}")
    for k, v in sorted(soak["faults"].items()):
        print(f"  {k}: {v}")
    print("invariant violations:")
    for k, v in sorted(soak["violations"].items()):
        print(f"  {k}: {v}")
    print(f"jobs: {soak['jobs']} (fault-free run: {clean['jobs']})")
    print(f"binds/s: {soak['binds/s']:.1f} (fault-free: {clean['binds/s']:.1f})")
    print(f"median cycle: {soak['cycle s'] * 1000:.1f} ms (fault-free: {clean['cycle s'] * 1000:.1f} ms)")
    print(f"longest time a gang stayed partly bound: {soak['longest partial gang s']:.2f} s")
    print(f"slowest recovery after a kill (to the next cycle): {soak['recovery after kill s']} s")
    print(f"replicas started: {soak['replicas started']}; scheduler records at the end: {soak['records']}")
    print(f"process max RSS growth: {soak['rss growth KiB']} KiB")
    return 1 if any(soak["violations"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
