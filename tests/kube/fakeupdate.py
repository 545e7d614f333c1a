"""What the tests' API server (:mod:`tests.kube.fakeapi`) refuses in a client's write beyond the types of
the schema (:mod:`tests.kube.fakeschema`), as a kube-apiserver does:

- **Immutable fields** (``ValidateObjectMetaUpdate`` and each kind's ``Validate...Update``):
  ``metadata.uid`` may not change and ``metadata.deletionTimestamp`` may not be set or changed by a write
  (only a delete sets it; ``creationTimestamp`` is silently kept, as ``rest.BeforeUpdate`` does); a Pod's
  ``spec`` may change only in its containers' and init containers' images, ``activeDeadlineSeconds``,
  ``terminationGracePeriodSeconds``, tolerations added and scheduling gates removed (``ValidatePodUpdate``:
  ``spec.nodeName`` is set through the Binding subresource only); a ResourceClaim's ``spec`` never
  changes and its ``status.allocation`` does not change once set (``ValidateResourceClaimUpdate``,
  ``ValidateResourceClaimStatusUpdate``); a Node's ``spec.podCIDR``, ``podCIDRs`` and ``providerID`` do
  not change once set.
- **CEL rules** of the peers' CRDs (``x-kubernetes-validations``, evaluated with the CEL library of the
  ``dra`` extra): each rule with ``self`` the value at its place in the object and, for a transition rule
  (one naming ``oldSelf``), ``oldSelf`` the value the stored object had there — object fields by name,
  items of ``x-kubernetes-list-type: map`` lists by their keys; a transition rule is not evaluated on a
  create or where the old object had no value, as the API server does. A rule that is false is a 422
  naming the field and the rule's ``message``.
- **String and integer formats** of the CRDs' schemas: ``date-time`` (RFC 3339, as ``metav1.Time`` and
  the API server's format check read it), ``int32`` and ``int64`` ranges.

Only what a write newly breaks is refused (a fixture's own gaps are not the writer's), as for the schema.
"""

from __future__ import annotations

import copy
import functools
import re
from datetime import datetime
from typing import Any

import yaml

from tests.kube.fakerules import Refused
from tests.kube.fakeschema import PEERS

__all__ = ["check_client_write", "date_time", "in_range", "rule_problems"]

#: (kind, apiVersion) -> the peer's CRD whose rules and formats are checked
CRDS = {
    ("PodGroup", "scheduling.volcano.sh/v1beta1"): "volcano/scheduling.volcano.sh_podgroups.yaml",
    ("Queue", "scheduling.volcano.sh/v1beta1"): "volcano/scheduling.volcano.sh_queues.yaml",
    ("HyperNode", "topology.volcano.sh/v1alpha1"): "volcano/topology.volcano.sh_hypernodes.yaml",
    ("PodGroup", "scheduling.run.ai/v2alpha2"): "kai/scheduling.run.ai_podgroups.yaml",
    ("Queue", "scheduling.run.ai/v2"): "kai/scheduling.run.ai_queues.yaml",
    ("Topology", "kai.scheduler/v1alpha1"): "kai/kai.scheduler_topologies.yaml",
}
_MISSING = object()
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_POD_MUTABLE = "`spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations), `spec.terminationGracePeriodSeconds`, `spec.schedulingGates` (only removals)"


@functools.cache
def _schema(kind: str, api: str) -> Any:
    """The ``openAPIV3Schema`` of the CRD serving ``kind`` ``api``; None when not here."""
    rel = CRDS.get((kind, api))
    if rel is None or not (PEERS / rel).is_file():
        return None
    crd = yaml.safe_load((PEERS / rel).read_text())
    version = api.rpartition("/")[2]
    return next(
        (v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == version), None
    )


@functools.cache
def _cel() -> Any:
    try:
        import cel
    except ImportError:  # without the dra extra: rules are not checked
        return None
    return cel


def in_range(value: Any, fmt: str) -> bool:
    """Whether an integer fits ``int32`` / ``int64`` (anything else is not this check's)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return True
    low, high = _RANGES[fmt]
    return low <= value <= high


def date_time(value: str) -> bool:
    """RFC 3339 date and time, as ``metav1.Time`` and the API server's ``date-time`` format read it."""
    if not _DATE_TIME.match(value):
        return False
    try:
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _rule(schema: dict, value: Any, old: Any, path: str, out: set[tuple[str, str]]) -> None:
    cel = _cel()
    for v in schema.get("x-kubernetes-validations") or []:
        rule = v["rule"]
        transition = re.search(r"\boldSelf\b", rule) is not None
        if cel is None or (transition and old is _MISSING):
            continue
        try:
            ok = cel.evaluate(rule, {"self": value, **({"oldSelf": old} if transition else {})})
        except Exception as exc:  # noqa: BLE001 - a rule that errors refuses the object, as the server does
            out.add((path, f"Invalid value: rule {rule!r} failed: {exc}"))
            continue
        if ok is not True:
            out.add((path, f"Invalid value: {v.get('message') or 'failed rule: ' + rule}"))


def _format(schema: dict, value: Any, path: str, out: set[tuple[str, str]]) -> None:
    fmt = schema.get("format")
    if fmt == "date-time" and isinstance(value, str) and not date_time(value):
        out.add((path, f'Invalid value: "{value}": {path} in body must be of type date-time'))
    elif fmt in _RANGES and not in_range(value, fmt):
        out.add((path, f"Invalid value: {value}: {path} in body must be of type {fmt}"))


def _walk(schema: Any, value: Any, old: Any, path: str, out: set[tuple[str, str]]) -> None:
    if not isinstance(schema, dict) or value is None:
        return
    _rule(schema, value, old, path or "<object>", out)
    _format(schema, value, path, out)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            child = props.get(key, extra if isinstance(extra, dict) else None)
            was = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
            _walk(child, sub, was, f"{path}.{key}" if path else key, out)
    elif isinstance(value, list):
        keys = (
            schema.get("x-kubernetes-list-map-keys")
            if schema.get("x-kubernetes-list-type") == "map"
            else None
        )
        olds: dict = {}
        if keys and isinstance(old, list):
            olds = {tuple(o.get(k) for k in keys): o for o in old if isinstance(o, dict)}
        for i, item in enumerate(value):
            was = (
                olds.get(tuple(item.get(k) for k in keys), _MISSING)
                if keys and isinstance(item, dict)
                else _MISSING
            )
            _walk(schema.get("items"), item, was, f"{path}[{i}]", out)


def rule_problems(kind: str, api: str, obj: dict, old: dict | None) -> set[tuple[str, str]]:
    """The CEL rules and formats of ``kind``'s CRD that ``obj`` breaks (``old``: the stored object, for
    the transition rules); none when the CRD is not here."""
    schema = _schema(kind, api)
    if schema is None:
        return set()
    out: set[tuple[str, str]] = set()
    _walk(schema, obj, _MISSING if old is None else old, "", out)
    return out


def _pod_spec(old: dict, new: dict) -> list[tuple[str, str]]:
    a, b = copy.deepcopy(old), copy.deepcopy(new)
    errors = []
    tol_a, tol_b = a.pop("tolerations", None) or [], b.pop("tolerations", None) or []
    if any(t not in tol_b for t in tol_a):
        errors.append(
            (
                "spec.tolerations",
                "Forbidden: existing toleration can not be modified except its tolerationSeconds",
            )
        )
    gates_a, gates_b = a.pop("schedulingGates", None) or [], b.pop("schedulingGates", None) or []
    if any(g not in gates_a for g in gates_b):
        errors.append(
            ("spec.schedulingGates", "Forbidden: only deletion is allowed, but found new scheduling gate")
        )
    for spec in (a, b):
        for field in ("activeDeadlineSeconds", "terminationGracePeriodSeconds"):
            spec.pop(field, None)
        for field in ("containers", "initContainers"):
            for c in spec.get(field) or []:
                if isinstance(c, dict):
                    c.pop("image", None)
    if a != b:
        errors.append(("spec", f"Forbidden: pod updates may not change fields other than {_POD_MUTABLE}"))
    return errors


def _immutable(kind: str, old: dict, new: dict, sub: str | None) -> list[tuple[str, str]]:
    errors = []
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    if nm.get("uid") and nm.get("uid") != om.get("uid"):
        errors.append(("metadata.uid", f'Invalid value: "{nm.get("uid")}": field is immutable'))
    if nm.get("deletionTimestamp") != om.get("deletionTimestamp"):
        if om.get("deletionTimestamp"):
            nm["deletionTimestamp"] = om["deletionTimestamp"]  # an update never changes it (kept)
        else:
            errors.append(("metadata.deletionTimestamp", "Invalid value: field is immutable"))
    if om.get("creationTimestamp"):
        nm["creationTimestamp"] = om["creationTimestamp"]  # ignored, as rest.BeforeUpdate does
    if kind == "Pod" and sub is None:
        errors += _pod_spec(old.get("spec") or {}, new.get("spec") or {})
    if kind == "ResourceClaim":
        if (old.get("spec") or {}) != (new.get("spec") or {}):
            errors.append(("spec", "Invalid value: field is immutable"))
        was = (old.get("status") or {}).get("allocation")
        if was is not None and (new.get("status") or {}).get("allocation") not in (None, was):
            errors.append(("status.allocation", "Invalid value: field is immutable"))
    if kind == "Node":
        for field in ("podCIDR", "podCIDRs", "providerID"):
            was = (old.get("spec") or {}).get(field)
            if was and (new.get("spec") or {}).get(field) != was:
                errors.append((f"spec.{field}", "Invalid value: field is immutable once set"))
    return errors


def check_client_write(kind: str, api: str, old: dict | None, new: dict, sub: str | None = None) -> None:
    """Refuse with 422 Invalid what a client's create (``old`` None) or update of ``kind`` breaks: the
    immutable fields, the CRD's CEL rules and formats (those the stored object broke already aside).
    ``new`` may be adjusted as the server adjusts it (kept ``creationTimestamp``)."""
    errors = [] if old is None else _immutable(kind, old, new, sub)
    fresh = rule_problems(kind, api, new, old)
    if fresh and old is not None:
        fresh -= rule_problems(kind, api, old, None)
    errors += sorted(fresh)
    if errors:
        name = (new.get("metadata") or {}).get("name") or ""
        raise Refused(
            422,
            "Invalid",
            f"{kind} {name!r} is invalid: " + "; ".join(f"{path}: {msg}" for path, msg in errors),
            [{"reason": "FieldValueInvalid", "message": msg, "field": path} for path, msg in errors],
        )
