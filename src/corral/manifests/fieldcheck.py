"""Fields of peer objects that corral reads but does not act on as the peer does: refused by name, or
accepted with a warning (their status in docs/compatibility.md is ``refused`` or ``warned``).

The line between the two: where ignoring a field could make corral do something destructive its peer
would not (evict for a job the peer would hold back), the field is **refused** — one line naming the
object, the field and what to do. Where corral is only less eager than its peer (it does not evict a
stale gang, it does not dispatch to another cluster), the field is accepted and **warned** about once per
object (:class:`~corral.model.notes.Notes`).
"""

from __future__ import annotations

from typing import Any

from corral.manifests.fields import Obj
from corral.model.notes import Notes

__all__ = ["KAI_PREEMPTIBILITY", "check_fields", "check_pending_pod"]

#: KAI's PodGroup ``spec.preemptibility`` values (v2alpha2.ParsePreemptibility)
KAI_PREEMPTIBILITY = ("preemptible", "non-preemptible")


def check_fields(o: Obj, kind: str, api: str, notes: Notes | None) -> None:
    """Refuse (raise :class:`~corral.errors.InputError`) or warn about the fields of one object that
    corral does not honour; ``notes`` None: refusals only (a parse whose warnings nobody reads)."""
    kai = api.startswith("scheduling.run.ai")
    spec = o.raw.get("spec")
    if not isinstance(spec, dict):
        return
    found: list[tuple[str, str]] = []
    if kind == "Queue" and not kai:
        found = _volcano_queue(o, spec)
    elif kind == "Queue":
        found = _kai_queue(spec)
    elif kind == "PodGroup" and kai:
        found = _kai_podgroup(o, spec)
    if notes is not None:
        for path, message in found:
            notes.warn(o.ident, path, message, o.file)


def _volcano_queue(o: Obj, spec: dict) -> list[tuple[str, str]]:
    strategy = spec.get("dequeueStrategy")
    if strategy not in (None, "", "traverse"):
        raise o.error(
            f"dequeue strategy {strategy!r} is not supported: corral allocates as 'traverse' (a job that "
            "does not fit is passed over); remove the field or set it to traverse",
            "spec.dequeueStrategy",
        )
    out = []
    if spec.get("affinity"):
        out.append(
            (
                "spec.affinity",
                "node-group affinity needs Volcano's nodegroup plugin, which corral does not provide: "
                "the queue's pods are placed without it",
            )
        )
    if spec.get("extendClusters"):
        out.append(
            (
                "spec.extendClusters",
                "dispatch to other clusters is not modelled: the queue's jobs are scheduled in this cluster",
            )
        )
    return out


def _kai_queue(spec: dict) -> list[tuple[str, str]]:
    resources = spec.get("resources")
    if not isinstance(resources, dict):
        return []
    gpu = resources.get("gpu")
    weight = gpu.get("overQuotaWeight", 1) if isinstance(gpu, dict) else 1
    out = []
    for key in ("cpu", "memory"):
        r = resources.get(key)
        if isinstance(r, dict) and r.get("overQuotaWeight") is not None and r["overQuotaWeight"] != weight:
            out.append(
                (
                    f"spec.resources.{key}.overQuotaWeight",
                    f"corral weighs a queue by one number, gpu.overQuotaWeight ({weight}); "
                    f"this one ({r['overQuotaWeight']}) is not used",
                )
            )
    return out


def _kai_podgroup(o: Obj, spec: dict) -> list[tuple[str, str]]:
    if spec.get("preemptionDelay") not in (None, ""):
        raise o.error(
            "corral does not delay a podgroup's preemption and reclaim: it would evict for this podgroup "
            "before KAI does; remove the field",
            "spec.preemptionDelay",
        )
    out: list[tuple[str, Any]] = []
    preemptibility = spec.get("preemptibility")
    if preemptibility not in (None, "", *KAI_PREEMPTIBILITY):
        raise o.error(
            f"unknown preemptibility {preemptibility!r} (allowed: {', '.join(KAI_PREEMPTIBILITY)})",
            "spec.preemptibility",
        )
    if preemptibility == "non-preemptible":
        out.append(
            (
                "spec.preemptibility",
                "never a victim in corral, as in KAI; KAI also keeps a non-preemptible podgroup within "
                "its queue's quota, which corral does not",
            )
        )
    grace = spec.get("stalenessGracePeriod")
    if grace not in (None, "") and not str(grace).strip().startswith("-"):
        out.append(
            (
                "spec.stalenessGracePeriod",
                "corral does not evict a gang left below its minimum on a timer: it stays running",
            )
        )
    return out


_POD_FIELDS = (
    (
        "spec.topologySpreadConstraints",
        "pod topology spread is not evaluated: the pod may be placed where its spread constraint forbids",
    ),
    (
        "spec.schedulingGates",
        "scheduling gates are not evaluated: corral places the pod as if its gates were removed",
    ),
)


def check_pending_pod(raw: dict, ident: str, file: str, notes: Notes) -> None:
    """Warn about the fields of a pending pod corral schedules that would constrain its placement and
    that corral does not evaluate (kube-scheduler's and Volcano's predicates do)."""
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return
    for path, message in _POD_FIELDS:
        if spec.get(path[5:]):
            notes.warn(ident, path, message, file)
