"""Gangs left below their minimum with pods on nodes (the applier's :class:`PartialGangs`): a gang never
holds capacity idle for longer than one cycle.

How a gang ends up partly bound: some of its binds fail (a 409, a 5xx that did not land, a pod deleted
meanwhile), or the replica binding it dies, or loses its lease, between two of its binds. Nothing in the
API server makes a gang's binds atomic, so the next cycle repairs what the last one left:

- **Found below its minimum at the start of a cycle** — by this replica's memory of its own failed binds,
  or, for a gang some other replica (or this one before a restart) left behind, by a pod bound and not
  started yet while the gang is below its minimum — the gang is **completed in that cycle or released in
  that cycle**: when the cycle's decisions do not bring it to its minimum, or its binds fail again, its
  pods on nodes are evicted through the Eviction API (their controller recreates them pending), so it
  starts again whole later. A new leader does this in its first cycle.
- Before a gang is released its pods are read back from the API server: a gang the cache shows below its
  minimum only because the watch lags (a dead leader's last binds not seen yet) is left alone. A pod
  whose read fails counts as the cache shows it (the release is not put off: a gang wrongly released
  starts again, a gang wrongly kept holds its nodes idle).
- A release whose evictions fail is tried again next cycle (the gang is still below its minimum then).
- A gang whose binds partly fail in a cycle is reported (log line, ``PartiallyBound`` Event on its
  PodGroup) and decided again in the next cycle, which completes or releases it as above.

KAI's ``stalegangeviction`` action evicts the pods of a gang that stays below its minimum, after a grace
period (``--default-staleness-grace-period``, 60 s); corral's grace is one cycle, since a partly bound
gang here is always a failure of the scheduler's own writes, never a gang that lost a running pod: a
gang whose pods all started is left to its job controller unless this replica saw its binds fail.
Readiness counts pods bound, running or succeeded against the PodGroup's minimum (``minMember``),
as the gang plugin does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from corral.framework.decisions import Decisions
from corral.kube.api import POD, APIError
from corral.kube.jobfacts import IndexMismatch, below_minimum
from corral.model import Cluster, Job, TaskStatus

if TYPE_CHECKING:
    from corral.kube.apply_report import ApplyReport

__all__ = ["PartialGangs", "below_minimum"]

_PLACED = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})
_READY = _PLACED | {TaskStatus.SUCCEEDED}


def _split(key: str) -> tuple[str, str]:
    ns, _, name = key.partition("/")
    return ns, name


class PartialGangs:
    """Mixed into the applier: uses its ``api``, ``cache``, ``log``, ``recorder``, ``_evict``,
    ``_count`` and ``_api_error``; ``partial`` holds the gangs whose binds partly failed."""

    api: Any
    cache: Any
    log: Any
    recorder: Any
    _evict: Any
    _count: Any
    _api_error: Any
    partial: set[str]

    def _incomplete(self, cluster: Cluster, decisions: Decisions | None = None) -> dict[str, Job]:
        """The gangs found below their minimum at the start of this cycle (see the module's docstring);
        the memory of gangs that are gone or whole is dropped. On the kept model's cluster only the
        candidates are looked at: the gangs below their minimum as built (kept by the model,
        :class:`~corral.kube.jobfacts.JobFacts`), those this replica saw partly bound, and those whose
        pods the cycle's operations moved (``decisions.touched``); ``CORRAL_CHECK_INDEX=1`` compares
        them with a walk over every job."""
        model = self.cache.model
        if decisions is None or decisions.touched is None or cluster.jobs is not model.jobs:
            found = self._incomplete_of(cluster, cluster.jobs)
        else:
            candidates = model.facts.below | self.partial
            candidates |= {t.job.uid for t, _s, _n in decisions.touched if t.job is not None}
            found = self._incomplete_of(cluster, sorted(candidates))
            if model.facts.check:
                full = self._incomplete_of(cluster, cluster.jobs)
                if full.keys() != found.keys():
                    raise IndexMismatch(f"partly bound gangs: kept {sorted(found)}, walked {sorted(full)}")
        self.partial &= set(found)
        return found

    def _incomplete_of(self, cluster: Cluster, uids: Iterable[str]) -> dict[str, Job]:
        """The gangs of ``uids`` below their minimum with a pod bound and not started (or partly bound
        by this replica)."""
        found: dict[str, Job] = {}
        for uid in uids:
            job = cluster.jobs.get(uid)
            if job is None or job.synthetic or not below_minimum(job):
                continue
            if uid in self.partial or any(t.status is TaskStatus.BOUND for t in job.tasks):
                found[uid] = job
        return found

    def _release_unfinished(
        self, incomplete: dict[str, Job], decisions: Decisions, report: ApplyReport
    ) -> dict[str, Job]:
        """Release the gangs of ``incomplete`` this cycle does not bring to their minimum; the others
        (whose binds go out in this cycle) are returned."""
        binding = {b.pod for b in decisions.binds}
        kept = {}
        for uid, job in incomplete.items():
            adds = sum(1 for t in job.tasks if t.key in binding)
            ready = sum(1 for t in job.tasks if t.status in _READY and t.key not in binding)
            if ready + adds >= job.min_member:
                kept[uid] = job
            else:
                self._release(job, report, "this cycle cannot complete it")
        return kept

    def _release_failed_again(
        self, retried: dict[str, Job], failed: dict[str, list[str]], report: ApplyReport
    ) -> None:
        """Gangs found below their minimum whose binds failed again in this cycle: released now."""
        for uid, pods in failed.items():
            if uid in retried:
                self.partial.discard(uid)
                self._release(retried[uid], report, f"its binds failed again ({len(pods)})")

    def _release(self, job: Job, report: ApplyReport, why: str) -> None:
        """Evict ``job``'s pods on nodes, once a fresh read confirms it is below its minimum."""
        placed, ready = self._read_back_gang(job)
        if ready >= job.min_member or not placed:
            self.partial.discard(job.uid)
            return
        report.released.append(job.uid)
        self.log.error(
            "gang released: below its minimum with pods on nodes",
            podgroup=job.uid,
            why=why,
            evicted=placed,
            ready=ready,
            min_member=job.min_member,
        )
        self.recorder.event(
            "PodGroup",
            job.uid,
            "Warning",
            "GangReleased",
            f"{ready} of minimum {job.min_member} pods placed ({why}); {len(placed)} pods evicted to "
            "free their nodes",
        )
        for pod in placed:
            outcome, detail = self._evict(pod)
            self._count(report, "evictions", outcome, pod)
            if outcome not in ("done", "uncertain"):
                self.log.warning("release eviction not applied", pod=pod, outcome=outcome, error=detail)

    def _read_back_gang(self, job: Job) -> tuple[list[str], int]:
        """The gang's pods on nodes (not terminating, not finished) and its ready count, read from the
        API server (a pod whose read fails: as the cycle's cluster shows it)."""
        placed: list[str] = []
        ready = 0
        for t in job.tasks:
            ns, name = _split(t.key)
            try:
                pod = self.api.get(POD.item(name, ns))
            except APIError as exc:
                self._api_error("get", "pods", exc)
                if exc.status == 404:
                    continue
                if t.status in _READY:
                    ready += 1
                    if t.status in _PLACED and t.managed:
                        placed.append(t.key)
                continue
            meta, phase = pod.get("metadata") or {}, (pod.get("status") or {}).get("phase")
            if phase == "Succeeded":
                ready += 1
            elif (
                (pod.get("spec") or {}).get("nodeName")
                and not meta.get("deletionTimestamp")
                and phase != "Failed"
            ):
                ready += 1
                if t.managed:
                    placed.append(t.key)
        return placed, ready
