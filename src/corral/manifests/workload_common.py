"""What the workload expanders share: the snapshot's own objects they must not duplicate, pods made from a
pod template, and minResources written as quantities."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any

from corral.errors import InputError
from corral.manifests.fields import Obj
from corral.manifests.load import SourcedObject

__all__ = ["MAX_PODS_ENV", "Existing", "Made", "check_pod_count", "pod_from_template", "quantity_text"]

#: the most pods one workload may expand into (a guard against ``replicas: 2000000000``)
MAX_PODS_ENV = "CORRAL_MAX_WORKLOAD_PODS"
_MAX_PODS_DEFAULT = 100_000


def check_pod_count(o: Obj, count: int, path: str) -> None:
    """Refuse a workload that would expand into more pods than ``CORRAL_MAX_WORKLOAD_PODS`` (default
    100,000), naming the field that asks for them."""
    raw = os.environ.get(MAX_PODS_ENV, "").strip()
    if raw and (not raw.isdigit() or len(raw) > 18 or int(raw) < 1):
        raise InputError(f"expected a positive integer, got {raw!r}", obj="environment", field=MAX_PODS_ENV)
    bound = int(raw) if raw else _MAX_PODS_DEFAULT
    if count > bound:
        raise o.error(f"{count} pods is more than the limit of {bound} (raise it with {MAX_PODS_ENV})", path)


@dataclass
class Existing:
    """Names the snapshot already holds, so a workload whose controller already ran is not expanded
    twice: PodGroups and pods by namespace, pods by their owner, PriorityClass values."""

    podgroups: set[tuple[str, str]] = field(default_factory=set)
    pods: set[tuple[str, str]] = field(default_factory=set)
    owned: set[tuple[str, str, str]] = field(default_factory=set)  # (namespace, owner kind, owner name)
    priority: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, objects: list[SourcedObject]) -> Existing:
        ex = cls()
        for _file, raw in objects:
            kind = raw.get("kind")
            meta = raw.get("metadata")
            if kind not in ("PodGroup", "Pod", "PriorityClass") or not isinstance(meta, dict):
                continue
            ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
            if kind == "PodGroup":
                ex.podgroups.add((ns, name))
            elif kind == "PriorityClass":
                value = raw.get("value")
                if isinstance(value, int) and not isinstance(value, bool):
                    ex.priority[name] = value
            else:
                ex.pods.add((ns, name))
                refs = meta.get("ownerReferences")
                for ref in refs if isinstance(refs, list) else []:
                    if isinstance(ref, dict):
                        ex.owned.add((ns, str(ref.get("kind")), str(ref.get("name"))))
        return ex


@dataclass
class Made:
    """The objects one workload expands into, and the line that reports them."""

    objects: list[SourcedObject] = field(default_factory=list)
    podgroup: str = ""
    summary: str = ""
    pods: list[str] = field(default_factory=list)

    def report(self, shown: int = 3) -> str:
        names = ", ".join(self.pods[:shown]) + (
            f", +{len(self.pods) - shown} more" if len(self.pods) > shown else ""
        )
        pods = f"{len(self.pods)} pod{'s' if len(self.pods) != 1 else ''}" + (f" ({names})" if names else "")
        return f"PodGroup {self.podgroup} ({self.summary}), {pods}"


def pod_from_template(
    o: Obj,
    template: Any,
    path: str,
    name: str,
    labels: dict[str, str],
    annotations: dict[str, str],
    defaults: dict[str, str],
) -> dict:
    """A pending pod from a pod template (``{metadata, spec}``), as a controller creates it: the
    template's labels and annotations with ``labels``/``annotations`` written over them, and each of
    ``defaults`` (spec field -> value) set where the template leaves it empty. The template is copied,
    never changed."""
    template = o.mapping(template, path)
    tmeta = o.mapping(template.get("metadata"), f"{path}.metadata")
    spec = copy.deepcopy(o.mapping(template.get("spec"), f"{path}.spec"))
    if "containers" not in spec:
        raise o.error("a pod template needs containers", f"{path}.spec.containers")
    for key, value in defaults.items():
        if value and not spec.get(key):
            spec[key] = value
    meta: dict[str, Any] = {
        "name": name,
        "namespace": o.namespace,
        "labels": {**o.strmap(tmeta.get("labels"), f"{path}.metadata.labels"), **labels},
        "annotations": {**o.strmap(tmeta.get("annotations"), f"{path}.metadata.annotations"), **annotations},
    }
    created = o.meta.get("creationTimestamp")
    if created:
        meta["creationTimestamp"] = created
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def quantity_text(milli: float) -> str:
    """A quantity in milli-units written back exactly (``2``, ``500m``)."""
    whole = int(round(milli))
    return str(whole // 1000) if whole % 1000 == 0 else f"{whole}m"
