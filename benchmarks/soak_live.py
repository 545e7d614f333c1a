"""Fault-injection soak of ``corral run`` (bounded, loopback only): two replicas with leader election
against the tests' in-process API server (:mod:`tests.kube.fakeapi`), under a stream of gang jobs that
arrive, run and finish, while faults are injected:

- 5xx answers before the request is carried out, and after (an ambiguous answer: the write landed), on
  binds, evictions, PodGroup and pod status patches, Events and lease renewals; 5xx on read backs and
  lists; 429 on evictions (rate limiting, no budget cause); 409 on binds. One such answer is queued at
  a time per kind of request, so they meet a fraction of the requests, and only those that met a
  request are counted;
- added latency on random requests; dropped watches; history compaction (410 Gone, relists);
- a replica killed at a random point (its writes stop at once, its lease is not released), or between
  the evictions and the binds of a cycle; the killed replica comes back as a new one;
- the leader paused past its lease (its clock jumps ahead, as a process that was stopped);
- an unreadable object appearing mid-run.

Checked from the server's side while it runs, and printed: no pod bound twice or to two nodes, no node
overcommitted, no gang below its minimum beyond one cycle (a gang seen partly bound while a whole
cycle of a leader started and finished is a violation), no eviction repeated for a terminating pod,
every write but the lease's made by the replica holding the lease, every job eventually running once the
faults stop, a new leader's first cycle finished within two periods of its taking the lease over, and the
scheduler's own records bounded. Binds per second and cycle time (wall, and the process's CPU time) are
printed beside a fault-free run a third as long. Exit code 1 on any violation.

    python benchmarks/soak_live.py [--seconds 150] [--seed 1]     # about 4 minutes; SOAK_DEBUG=1 explains
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import resource
import statistics
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
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
LEASE = (1.0, 0.6, 0.1)  # duration, renew deadline, retry


class Killed(BaseException):
    pass


class Replica:
    """One ``corral run`` process: a runner on its own client, tagged so the server knows who wrote."""

    def __init__(self, srv: FakeAPI, ident: str, cycles: list[tuple[float, float, float]]) -> None:
        client = load_client(host=srv.url)
        client.set_default_header("X-Corral-Replica", ident)
        opts = RunOptions(
            leader_elect=True,
            identity=ident,
            lease_namespace="default",
            period=PERIOD,
            lease=LEASE,
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
        run_one = self.runner.cycle

        def cycle(now: float):  # noqa: ANN202
            """Recorded in ``cycles`` (start, end, when this replica took the lease over) when finished as
            leader (a cycle stopped mid-apply, or failed, is not one)."""
            start = time.monotonic()
            res = run_one(now)
            el = self.runner.elector
            if res is not None and not self.dead and el is not None:
                cycles.append((start, time.monotonic(), el.acquired_at))
            return res

        self.runner.cycle = cycle  # type: ignore[method-assign]

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
        r.applier.pool.shutdown(wait=False, cancel_futures=True)


class Soak:
    def __init__(self, seconds: float, seed: int, faults: bool) -> None:
        self.rng = random.Random(seed)
        self.seconds, self.faults_on = seconds, faults
        self.srv = FakeAPI(history_limit=2000).start()
        self.srv.add_all(expand({"nodes": [{"name": f"n{i}", "gpu": GPUS} for i in range(NODES)]}))
        self.replicas: list[Replica] = []  # alive, or dead with threads still ending
        self.cycles: list[tuple[float, float, float]] = []  # every replica's finished cycles
        self.next_id = 0
        self.jobs: dict[str, dict] = {}  # name -> {min, gpu, pods: set, started, bound_at}
        self.faults: Counter = Counter()
        self.violations: Counter = Counter()
        self.partial_since: dict[str, float] = {}
        self.longest_partial = 0.0
        self.partial_flagged: set[str] = set()
        self.t0 = time.monotonic()
        self.kills: list[tuple[float, float]] = []  # (when, when the killed leader's lease ran out)
        self.recoveries: list[tuple[float, float, float]] = []  # see recovered()
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
        rep = Replica(self.srv, f"r{self.next_id}", self.cycles)
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
            ("POST", r"/events$"),
            ("PUT", r"/leases/"),  # a renewal that fails
            ("GET", r"/pods/[^/]+$"),  # a read back that fails
            ("GET", r"/pods\?"),  # a list that fails (the informer backs off and lists again)
        ]
        # the answers of the server: one queued at a time per kind of request, so they hit a fraction of
        # the requests (counted by the server when they meet one), never a pile-up failing every request
        if roll < 0.35:
            method, path = rng.choice(writes)
            if not srv.pending(method, path):
                srv.fail(method, path, rng.choice([500, 503, 504]), after=rng.random() < 0.5)
        elif roll < 0.45:
            if not srv.pending("POST", r"/eviction$"):
                srv.fail("POST", r"/eviction$", 429)
        elif roll < 0.55:
            if not srv.pending("POST", r"/binding$"):
                srv.fail("POST", r"/binding$", 409)
        elif roll < 0.70:
            method = rng.choice(["GET", "POST", "PATCH", "PUT"])
            if not srv.pending(method, r"."):
                srv.slow(method, r".", rng.uniform(0.05, 0.4))
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
            if lead is not None and lead.runner.applier.after_evictions is None:
                if rng.random() < 0.5:

                    def die() -> None:
                        self.kills.append((time.monotonic(), self.lease_expiry()))
                        self.faults["kill between evictions and binds"] += 1
                        raise Killed()

                    lead.runner.applier.after_evictions = die  # at its next apply phase
                else:
                    lead.kill()
                    self.faults["kill"] += 1
                    self.kills.append((time.monotonic(), self.lease_expiry()))
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

    def recovered(self) -> None:
        """Each kill is recovered from when a leader finishes a cycle after it: (seconds from the kill to
        that cycle's end, from the lease's expiry to the new leader's acquisition, from the acquisition
        (or the kill) to the start of that cycle, the cycle's own length)."""
        for killed, expiry in list(self.kills):
            after = [c for c in self.cycles if c[1] > killed]
            if after:
                start, end, got = min(after, key=lambda c: c[1])
                self.recoveries.append((end - killed, got - expiry, start - max(got, killed), end - start))
                self.kills.remove((killed, expiry))

    def lease_expiry(self) -> float:
        """When (on this clock) the lease, as last renewed, runs out: no standby may lead before."""
        spec = (self.srv.get("Lease", "corral", "default") or {}).get("spec") or {}
        renewed = datetime.strptime(spec["renewTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        return time.monotonic() - (time.time() - renewed.timestamp()) + float(spec["leaseDurationSeconds"])

    # -- invariants ----------------------------------------------------------------------------------
    def cycles_between(self, after: float, before: float) -> int:
        """Cycles a leader started after ``after`` and finished before ``before``."""
        return sum(1 for s, e, _a in self.cycles if s > after and e < before)

    def check(self, now: float) -> None:
        used: Counter = Counter()
        groups: dict[str, int] = Counter()
        now = time.monotonic()  # the instant the server's state is read
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
                if name not in self.partial_flagged and self.cycles_between(since, now) >= 1:
                    self.partial_flagged.add(name)  # one violation per episode
                    self.violations["gang below its minimum beyond one cycle"] += 1
                    if os.environ.get("SOAK_DEBUG"):
                        self.explain_partial(name, since, now)
            else:
                self.partial_since.pop(name, None)
                self.partial_flagged.discard(name)
        bindings = Counter(p for p, _n in self.srv.bindings)
        self.violations["pod bound twice"] = sum(1 for c in bindings.values() if c > 1)
        self.violations["eviction of a terminating pod"] = len(self.srv.repeated_evictions)
        new = self.srv.writes[self.checked_writes :]
        self.checked_writes += len(new)
        self.violations["write by a non-leader"] += sum(
            1 for who, holders, _m, _p in new if who not in holders
        )

    def explain_partial(self, name: str, since: float, now: float) -> None:
        t = lambda x: round(x - self.t0, 2)  # noqa: E731
        print(f"--- {name} partly bound since {t(since)}, still at {t(now)}", file=sys.stderr)
        for p in self.pods():
            if (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name") == name:
                print(
                    "   ",
                    p["metadata"]["name"],
                    p["spec"].get("nodeName"),
                    p["metadata"].get("deletionTimestamp"),
                    file=sys.stderr,
                )
        print("   cycles", [(t(s), t(e)) for s, e, _a in self.cycles if e > since - 1][:6], file=sys.stderr)
        for r in self.replicas:
            print("  ", r.ident, "dead" if r.dead else "", file=sys.stderr)
            for x in r.runner.log.records:
                if name in json.dumps(x, default=str) or "leader" in x["msg"]:
                    print("     ", x, file=sys.stderr)

    # -- the run ----------------------------------------------------------------------------------------
    def run(self) -> dict:
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.spawn()
        self.spawn()
        start, cpu0 = time.monotonic(), time.process_time()
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
            # a dead replica is let go once its threads ended (the process is gone: so is its memory)
            self.replicas = [r for r in self.replicas if not r.dead or r.thread.is_alive()]
            alive = [r for r in self.replicas if not r.dead]
            if len(alive) < 2:
                self.spawn()
            self.complete_and_recreate(now)
            self.check(now)
            self.recovered()
            time.sleep(0.05)
        # faults stop: every job must run
        churn = {
            "wall s": time.monotonic() - start,
            "cpu s": time.process_time() - cpu0,
            "binds": len(self.srv.bindings),
            "cycles": sorted(e - s for s, e, _a in self.cycles),
        }
        with self.srv.lock:
            self.srv.faults, self.srv.delays = [], []
        for r in self.replicas:
            r.runner.applier.after_evictions = None
        for answer, n in self.srv.fired.items():
            status = answer.split()[0]
            kind = "5xx" if status.startswith("5") else status
            if answer.endswith("after"):
                kind += " after the write (it landed)"
            self.faults[kind] += n
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
            "requests": len(self.srv.requests),
            "answers faulted": sum(self.srv.fired.values()),
            "churn": churn,
            "longest partial gang s": self.longest_partial,
            "recoveries": sorted(self.recoveries),
            "records": records,
            "rss growth KiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0,
            "replicas started": self.next_id,
        }
        self.srv.stop()
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=150.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    clean = Soak(args.seconds / 3, args.seed, faults=False).run()
    soak = Soak(args.seconds, args.seed, faults=True).run()
    total = sum(soak["faults"].values())
    print(f"faults injected: {total}")
    share = soak["answers faulted"] / max(1, soak["requests"])
    print(
        f"  (of {soak['requests']} requests, {soak['answers faulted']} answered late or with an error: "
        f"{share:.1%})"
    )
    for k, v in sorted(soak["faults"].items()):
        print(f"  {k}: {v}")
    rec = soak["recoveries"]
    late = sum(1 for _k, _t, first, _c in rec if first > 2 * PERIOD)
    if late:
        soak["violations"]["a new leader's first cycle started later than two periods"] = late
    print("invariant violations:")
    for k, v in sorted(soak["violations"].items()):
        print(f"  {k}: {v}")
    print(f"jobs: {soak['jobs']} (fault-free run: {clean['jobs']})")
    for name, run in (("under faults", soak), ("fault-free", clean)):
        c = run["churn"]
        cyc = c["cycles"] or [0.0]
        print(
            f"{name}: {c['binds'] / c['wall s']:.1f} binds/s over {c['wall s']:.0f} s wall, "
            f"{c['binds'] / c['cpu s']:.1f} per CPU second ({c['cpu s']:.1f} s CPU: the API server, the "
            f"replicas and the checker share the process); cycle median {statistics.median(cyc) * 1000:.0f} "
            f"ms, p90 {cyc[int(0.9 * (len(cyc) - 1))] * 1000:.0f} ms wall over {len(c['cycles'])} cycles"
        )
    print(f"longest time a gang stayed partly bound: {soak['longest partial gang s']:.2f} s")
    if rec:
        print(
            f"recovery after {len(rec)} kills (to a leader's next finished cycle): median "
            f"{statistics.median(r[0] for r in rec):.2f} s, slowest {max(r[0] for r in rec):.2f} s from the "
            f"kill. The lease taken over {statistics.median(r[1] for r in rec):.2f} s (median), at most "
            f"{max(r[1] for r in rec):.2f} s after the killed leader's "
            f"lease ran out (a standby waits the lease duration, {LEASE[0]:g} s, from the last renewal it "
            f"saw); the new leader's first cycle started at most {max(r[2] for r in rec):.2f} s after it "
            f"took over (bar: two periods, {2 * PERIOD:.1f} s) and took at most {max(r[3] for r in rec):.2f} s"
        )
    print(f"replicas started: {soak['replicas started']}; scheduler records at the end: {soak['records']}")
    print(f"process max RSS growth: {soak['rss growth KiB']} KiB")
    return 1 if any(soak["violations"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
