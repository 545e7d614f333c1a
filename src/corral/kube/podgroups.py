"""The PodGroup writes of the applier (:class:`corral.kube.apply.Applier`): a PodGroup's phase, gang
condition and annotations.

- One merge patch carrying the ``resourceVersion`` the decision was made on, on the object itself: Volcano's
  PodGroup CRD declares no status subresource (``subresources: {}``), and Volcano's scheduler updates
  the whole object. KAI's PodGroup has a status subresource: its status goes to ``/status`` and the
  annotations follow with the ``resourceVersion`` that write returned (never the stale one, so corral
  does not conflict with itself).
- A 409 reads the object again and retries once.
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
    #: podgroup -> (its job object, the gang condition's message, monotonic time) of a PodGroup whose
    #: gang condition needed no write
    pg_quiet: dict[str, tuple[Any, str, float]]

    def _patch_retry(self, path: str, current: dict, build: Callable[[dict], dict | None]) -> dict | None:
        """Patch with ``current``'s resourceVersion; on 409 read the object again and retry once."""
        for attempt in (1, 2):
            patch = build(current)
            if patch is None:
                return None
            rv = (current.get("metadata") or {}).get("resourceVersion")
            body = merge_with_rv(patch, rv)
            try:
                return self.api.patch(path, body)
            except APIError as exc:
                if exc.status != 409 or attempt == 2:
                    raise
                self._api_error("patch", path.split("/")[-2] if path.endswith("status") else "object", exc)
                current = self.api.get(path[: -len("/status")] if path.endswith("/status") else path)
        return None

    def _podgroup_writes(
        self,
        decisions: Decisions,
        cluster: Cluster,
        bound: list[tuple[str, str]],
        now: float,
        report: ApplyReport,
    ) -> list[tuple[str, str, Callable[[], None]]]:
        """One write per PodGroup the cycle touched: its phase and annotations (the decisions) and its gang
        condition (Volcano's gang plugin: Unschedulable while the gang is not ready, Scheduled once it is)."""
        want: dict[str, dict[str, Any]] = {}
        for update in decisions.podgroups:
            want[update.podgroup] = {"phase": update.phase, "annotations": dict(update.annotations or {})}
        transition = f"corral-{now:.0f}"
        for c in decisions.conditions:  # Kubernetes' own PodGroups: kube-scheduler's conditions
            want.setdefault(c.podgroup, {}).setdefault("native", []).append(native_condition(c, now))
        for u in decisions.unschedulable:
            job = cluster.jobs.get(u.podgroup)
            if job is not None and not job.synthetic and u.podgroup not in cluster.native_groups:
                ready = job.ready_count()
                msg = f"{len(job.tasks) - ready}/{len(job.tasks)} tasks in gang unschedulable: {u.reason}"
                w = want.setdefault(u.podgroup, {})
                w["message"], w["job"] = msg, job  # the condition itself made only when it is looked at
        placed: dict[str, int] = defaultdict(int)
        decided = {b.pod for b in decisions.binds}
        owner = {t.key: job for job in cluster.jobs.values() for t in job.tasks} if bound else {}
        for pod, _node in bound:
            job = owner.get(pod)
            if job is not None:
                placed[job.uid] += 1
        for uid, n in placed.items():
            job = cluster.jobs[uid]
            before = sum(1 for t in job.tasks if t.key not in decided and t.status in _READY)
            if not job.synthetic and before + n >= job.min_member and uid not in cluster.native_groups:
                want.setdefault(uid, {})["condition"] = gang_condition(True, "", transition, now)
        mono = time.monotonic()
        self.pg_quiet = {
            uid: q for uid, q in self.pg_quiet.items() if uid in want and mono - q[2] < QUIET_MEMORY
        }
        out: list[tuple[str, str, Callable[[], None]]] = []
        for uid, w in want.items():
            q = self.pg_quiet.get(uid)
            if "message" in w:
                if (
                    q is not None
                    and w.keys() == {"message", "job"}
                    and q[0] is w["job"]
                    and q[1] == w["message"]
                ):
                    continue  # the same gang condition on the same job: nothing to write, as last time
                message = w.pop("message")
                w.setdefault("condition", gang_condition(False, message, transition, now))  # ready wins
            out.append(("podgroups", uid, functools.partial(self._podgroup, uid, w, report)))
        return out

    def _podgroup(self, uid: str, want: dict[str, Any], report: ApplyReport) -> None:
        found = self.cache.find("PodGroup", uid)
        if found is None:  # a job of one pod: no PodGroup object to write
            self._count(report, "podgroups", "skipped", uid)
            return
        rtype, raw = found
        ns, name = _split(uid)
        phase, annotations, cond = want.get("phase"), want.get("annotations") or {}, want.get("condition")
        native = rtype.api_version.startswith(NATIVE_GROUP + "/")
        # a phase only in Volcano's PodGroupStatus: the native API's conditions say it, and KAI's CRD has no
        # status.phase (a real API server prunes it, so it would be written again every cycle); for those
        # the phase is kept in the cache alone
        write_phase = phase if rtype.api_version.startswith("scheduling.volcano.sh") else None

        def status_of(cur: dict) -> dict:
            status: dict[str, Any] = {}
            have = cur.get("status") or {}
            if native:
                conditions = have.get("conditions")
                generation = (cur.get("metadata") or {}).get("generation")
                for c in want.get("native") or []:
                    c = {**c, "observedGeneration": generation} if generation is not None else c
                    conditions = merged_conditions(conditions, c) or conditions
                if conditions is not have.get("conditions"):
                    status["conditions"] = conditions
            if write_phase and have.get("phase") != write_phase:
                status["phase"] = write_phase
            if cond is not None and rtype.api_version.startswith("scheduling.volcano.sh"):
                conditions = merged_conditions(have.get("conditions"), cond)
                if conditions is not None:
                    status["conditions"] = conditions
            elif cond is not None:
                labels = (cur.get("metadata") or {}).get("labels") or {}
                kai = kai_conditions(have.get("schedulingConditions"), cond, labels, time.time())
                if kai is not None:
                    status["schedulingConditions"] = kai
            return status

        def annotations_of(cur: dict) -> dict:
            have = (cur.get("metadata") or {}).get("annotations") or {}
            return {k: v for k, v in annotations.items() if have.get(k) != v}

        def one_patch(cur: dict) -> dict | None:
            status, ann = status_of(cur), annotations_of(cur)
            patch: dict[str, Any] = {}
            if status:
                patch["status"] = status
            if ann:
                patch["metadata"] = {"annotations": ann}
            return patch or None

        wrote = False
        if not rtype.status_subresource:
            answer = self._patch_retry(rtype.item(name, ns), raw, one_patch)
            wrote = answer is not None
        else:
            answer = self._patch_retry(
                rtype.item(name, ns, "status"),
                raw,
                lambda cur: {"status": status_of(cur)} if status_of(cur) else None,
            )
            current = answer if answer is not None else raw
            second = self._patch_retry(
                rtype.item(name, ns),
                current,
                lambda cur: (
                    {"metadata": {"annotations": annotations_of(cur)}} if annotations_of(cur) else None
                ),
            )
            wrote = answer is not None or second is not None
        if wrote or (write_phase is None and phase):
            assumed: dict[str, Any] = {}
            if phase:
                assumed["status"] = {"phase": phase}
            if annotations:
                assumed["metadata"] = {"annotations": dict(annotations)}
            if assumed:
                self.cache.assume("PodGroup", uid, assumed, assumed)
        if not wrote and cond is not None and want.keys() == {"condition", "job"}:
            self.pg_quiet[uid] = (want["job"], cond["message"], time.monotonic())
        self._count(report, "podgroups", "done" if wrote else "skipped", uid)


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
