"""The PodGroup writes of the applier (:class:`corral.kube.apply.Applier`): a PodGroup's phase, gang
condition and annotations.

- One merge patch carrying the ``resourceVersion`` the decision was made on, on the object itself: Volcano's
  PodGroup CRD declares no status subresource (``subresources: {}``), and Volcano's scheduler updates
  the whole object. KAI's PodGroup has a status subresource: its status goes to ``/status`` and the
  annotations follow with the ``resourceVersion`` that write returned (never the stale one, so corral
  does not conflict with itself).
- A 409 reads the object again and retries once. A read that finds the object already holding what was
  decided (the watch cache was behind the server) is assumed in the cache as a write would be, until the
  watch shows it: the next cycles do not decide it again while the watch catches up.
- Conditions: Volcano's gang plugin's (``Unschedulable``/``NotEnoughResources`` while the gang is not
  ready, ``Scheduled`` once it is, replacing the condition of the same type and keeping the others),
  KAI's ``schedulingConditions`` on KAI PodGroups (:mod:`corral.kube.conventions`); written only when
  they change, so an unschedulable backlog costs no writes cycle after cycle. A PodGroup found to need
  no write for the same gang condition is passed over without a look at the object while its job is the
  same object (nothing of it changed) and for at most ``QUIET_MEMORY`` seconds, so the backlog costs no
  work cycle after cycle either.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from corral.framework.decisions import Decisions
from corral.kube.api import APIError
from corral.kube.apply_report import ApplyReport
from corral.kube.conventions import gang_condition, kai_conditions, merged_conditions
from corral.manifests.native import NATIVE_GROUP
from corral.model import ALLOCATED_STATES, Cluster, TaskStatus
from corral.model.clock import format_time

__all__ = ["PodGroupWrites", "merge_with_rv"]

_READY = frozenset(ALLOCATED_STATES) | {TaskStatus.SUCCEEDED}  # what a gang's readiness counts
#: seconds a PodGroup that needed no write for its gang condition is passed over (its job unchanged)
QUIET_MEMORY = 60.0


def _split(key: str) -> tuple[str, str]:
    ns, _, name = key.partition("/")
    return ns, name


class PodGroupWrites:
    """Mixed into the applier: uses its ``api``, ``cache``, ``_count`` and ``_api_error``."""

    api: Any
    cache: Any
    _count: Any
    _api_error: Any
    #: podgroup -> (its job object, the reason it cannot be placed, monotonic time) of a PodGroup whose
    #: gang condition needed no write, found in a cycle that changed none of its pods
    pg_quiet: dict[str, tuple[Any, str, float]]

    def _patch_retry(
        self, path: str, current: dict, build: Callable[[dict], dict | None]
    ) -> tuple[dict | None, bool]:
        """Patch with ``current``'s resourceVersion; on 409 read the object again and retry once. The
        server's answer (None: nothing written), and whether the server is known to hold what ``build``
        asks: written, or found so by the read after a 409 (the cache was behind the server)."""
        for attempt in (1, 2):
            patch = build(current)
            if patch is None:
                return None, attempt == 2
            rv = (current.get("metadata") or {}).get("resourceVersion")
            body = merge_with_rv(patch, rv)
            try:
                return self.api.patch(path, body), True
            except APIError as exc:
                if exc.status != 409 or attempt == 2:
                    raise
                self._api_error("patch", path.split("/")[-2] if path.endswith("status") else "object", exc)
                current = self.api.get(path[: -len("/status")] if path.endswith("/status") else path)
        return None, False

    def _podgroup_writes(
        self,
        decisions: Decisions,
        cluster: Cluster,
        bound: list[tuple[str, str]],
        now: float,
        report: ApplyReport,
    ) -> list[tuple[str, str, Callable[[], None]]]:
        """One write per PodGroup the cycle touched: its phase and annotations (the decisions) and its gang
        condition (Volcano's gang plugin: Unschedulable while the gang is not ready, Scheduled once it is).

        A gang that cannot be placed, whose job is the object found needing no write (nothing of it
        rebuilt), for the same reason, with its pods in their states as built in both cycles (the cycle's
        operations left none of them in another state, :func:`_status_moved`), would get the same
        condition message: it is passed over without counting its pods."""
        want: dict[str, dict[str, Any]] = {}
        for update in decisions.podgroups:
            want[update.podgroup] = {"phase": update.phase, "annotations": dict(update.annotations or {})}
        transition = f"corral-{now:.0f}"
        for c in decisions.conditions:  # Kubernetes' own PodGroups: kube-scheduler's conditions
            want.setdefault(c.podgroup, {}).setdefault("native", []).append(native_condition(c, now))
        ready = self._ready_gangs(decisions, cluster, bound)
        moved = _status_moved(decisions)
        mono = time.monotonic()
        quiet: set[str] = set()
        for u in decisions.unschedulable:
            job = cluster.jobs.get(u.podgroup)
            if job is None or job.synthetic or u.podgroup in cluster.native_groups:
                continue
            untouched = moved is not None and u.podgroup not in moved
            q = self.pg_quiet.get(u.podgroup)
            if (
                untouched
                and q is not None
                and q[0] is job
                and q[1] == u.reason
                and mono - q[2] < QUIET_MEMORY
                and u.podgroup not in want
                and u.podgroup not in ready
            ):
                quiet.add(u.podgroup)  # the same gang condition on the same job: nothing to write
                continue
            n_ready = job.ready_count()
            msg = f"{len(job.tasks) - n_ready}/{len(job.tasks)} tasks in gang unschedulable: {u.reason}"
            w = want.setdefault(u.podgroup, {})
            w["message"], w["job"], w["reason"], w["untouched"] = msg, job, u.reason, untouched
        for uid in ready:
            want.setdefault(uid, {})["condition"] = gang_condition(True, "", transition, now)
        self.pg_quiet = {
            uid: q
            for uid, q in self.pg_quiet.items()
            if (uid in want or uid in quiet) and mono - q[2] < QUIET_MEMORY
        }
        out: list[tuple[str, str, Callable[[], None]]] = []
        for uid, w in want.items():
            if "message" in w:
                message = w.pop("message")
                w.setdefault("condition", gang_condition(False, message, transition, now))  # ready wins
            out.append(("podgroups", uid, functools.partial(self._podgroup, uid, w, report)))
        return out

    @staticmethod
    def _ready_gangs(decisions: Decisions, cluster: Cluster, bound: list[tuple[str, str]]) -> list[str]:
        """The gangs the cycle's binds that landed (``bound``) brought to their minimum, in the order of
        their first bind."""
        if not bound:
            return []
        placed: dict[str, int] = defaultdict(int)
        decided = {b.pod for b in decisions.binds}
        owner = {b.pod: b.podgroup for b in decisions.binds}
        for pod, _node in bound:
            uid = owner.get(pod)
            if uid:
                placed[uid] += 1
        out = []
        for uid, n in placed.items():
            job = cluster.jobs.get(uid)
            if job is None or job.synthetic or uid in cluster.native_groups:
                continue
            before = sum(1 for t in job.tasks if t.key not in decided and t.status in _READY)
            if before + n >= job.min_member:
                out.append(uid)
        return out

    def _podgroup(self, uid: str, want: dict[str, Any], report: ApplyReport) -> None:
        found = self.cache.find("PodGroup", uid)
        if found is None:  # a job of one pod: no PodGroup object to write
            self._count(report, "podgroups", "skipped", uid)
            return
        rtype, raw = found
        ns, name = _split(uid)
        patch = _PodGroupPatch(rtype, want)
        if not rtype.status_subresource:
            answer, held = self._patch_retry(rtype.item(name, ns), raw, patch.whole)
            wrote = answer is not None
        else:
            answer, held = self._patch_retry(rtype.item(name, ns, "status"), raw, patch.status_only)
            current = answer if answer is not None else raw
            second, held_too = self._patch_retry(rtype.item(name, ns), current, patch.annotations_only)
            wrote, held = answer is not None or second is not None, held or held_too
        phase, annotations, cond = want.get("phase"), want.get("annotations") or {}, want.get("condition")
        # what the server holds (written, or found on a read back the cache was behind) is assumed until
        # the watch shows it: the next cycle does not decide it again while the watch lags
        if held or (patch.write_phase is None and phase):
            assumed: dict[str, Any] = {}
            if phase:
                assumed["status"] = {"phase": phase}
            if annotations:
                assumed["metadata"] = {"annotations": dict(annotations)}
            if assumed:
                self.cache.assume("PodGroup", uid, assumed, assumed)
        if (
            not wrote
            and cond is not None
            and want.get("untouched")
            and "phase" not in want
            and "native" not in want
        ):
            self.pg_quiet[uid] = (want["job"], want["reason"], time.monotonic())
        self._count(report, "podgroups", "done" if wrote else "skipped", uid)


class _PodGroupPatch:
    """What one PodGroup should say (its phase, annotations and conditions of ``want``), as the patch of
    a current object: only what differs."""

    def __init__(self, rtype: Any, want: dict[str, Any]) -> None:
        self.want = want
        self.volcano = rtype.api_version.startswith("scheduling.volcano.sh")
        self.native = rtype.api_version.startswith(NATIVE_GROUP + "/")
        # a phase only in Volcano's PodGroupStatus: the native API's conditions say it, and KAI's CRD has
        # no status.phase (a real API server prunes it, so it would be written again every cycle); for
        # those the phase is kept in the cache alone
        self.write_phase = want.get("phase") if self.volcano else None
        self.annotations: dict[str, str] = want.get("annotations") or {}
        self.cond: dict | None = want.get("condition")

    def status(self, cur: dict) -> dict:
        status: dict[str, Any] = {}
        have = cur.get("status") or {}
        if self.native:
            conditions = have.get("conditions")
            generation = (cur.get("metadata") or {}).get("generation")
            for c in self.want.get("native") or []:
                c = {**c, "observedGeneration": generation} if generation is not None else c
                conditions = merged_conditions(conditions, c) or conditions
            if conditions is not have.get("conditions"):
                status["conditions"] = conditions
        if self.write_phase and have.get("phase") != self.write_phase:
            status["phase"] = self.write_phase
        if self.cond is not None and self.volcano:
            conditions = merged_conditions(have.get("conditions"), self.cond)
            if conditions is not None:
                status["conditions"] = conditions
        elif self.cond is not None:
            labels = (cur.get("metadata") or {}).get("labels") or {}
            kai = kai_conditions(have.get("schedulingConditions"), self.cond, labels, time.time())
            if kai is not None:
                status["schedulingConditions"] = kai
        return status

    def annotations_of(self, cur: dict) -> dict:
        have = (cur.get("metadata") or {}).get("annotations") or {}
        return {k: v for k, v in self.annotations.items() if have.get(k) != v}

    def whole(self, cur: dict) -> dict | None:
        """Status and annotations in one merge patch (a PodGroup without a status subresource)."""
        status, ann = self.status(cur), self.annotations_of(cur)
        patch: dict[str, Any] = {}
        if status:
            patch["status"] = status
        if ann:
            patch["metadata"] = {"annotations": ann}
        return patch or None

    def status_only(self, cur: dict) -> dict | None:
        status = self.status(cur)
        return {"status": status} if status else None

    def annotations_only(self, cur: dict) -> dict | None:
        ann = self.annotations_of(cur)
        return {"metadata": {"annotations": ann}} if ann else None


def _status_moved(decisions: Decisions) -> set[str] | None:
    """The jobs whose pods the cycle's operations left in another state than the cycle found them
    (``decisions.touched``: each pod operated on, with its state before; None: unknown)."""
    if decisions.touched is None:
        return None
    return {t.job.uid for t, before, _n in decisions.touched if t.job is not None and t.status is not before}


def native_condition(c: Any, now: float) -> dict:
    """A ``metav1.Condition`` of a :class:`~corral.kube.native_status.PodGroupCondition`."""
    return {
        "type": c.type,
        "status": c.status,
        "reason": c.reason,
        "message": c.message,
        "lastTransitionTime": format_time(now),
    }


def merge_with_rv(patch: dict, rv: Any) -> dict:
    if not rv:
        return patch
    out = dict(patch)
    out["metadata"] = {**(patch.get("metadata") or {}), "resourceVersion": rv}
    return out
