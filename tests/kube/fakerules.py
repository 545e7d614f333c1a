"""The rules the in-process API server (:mod:`tests.kube.fakeapi`) enforces as a real kube-apiserver
does: name and label syntax, the eviction API's disruption budgets, strategic merge of pod conditions."""

from __future__ import annotations

import copy
import re
from typing import Any

__all__ = [
    "Refused",
    "Reply",
    "check_budgets",
    "status",
    "strategic_patch",
    "validate_fields",
    "validate_meta",
]


class Refused(Exception):  # noqa: N818 - an answer, not a fault
    """A request the API server refuses: ``code``, Status ``reason``, ``message`` and ``causes``."""

    def __init__(self, code: int, reason: str, message: str, causes: list | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.causes = code, reason, message, causes or []


class Reply(Exception):  # noqa: N818 - an answer, not a fault
    """An answer the server sends at once: ``code``, a Status ``body``, ``headers``."""

    def __init__(self, code: int, body: dict, headers: dict | None = None) -> None:
        super().__init__(code)
        self.code, self.body, self.headers = code, body, headers or {}


def status(code: int, reason: str, message: str) -> dict:
    """A failure Status object, as the API server writes one."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


_CORE_NAMES = {"Node", "Pod", "PriorityClass", "PodDisruptionBudget", "Lease"}
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def validate_meta(kind: str, meta: dict) -> None:
    """The API server's checks of a name and of label keys and values: a 422 Invalid otherwise."""
    errors = []
    name = meta.get("name") or ""
    if kind in _CORE_NAMES and (len(name) > 253 or not _SUBDOMAIN.match(name)):
        errors.append(f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 subdomain")
    elif not name or name in (".", "..") or "/" in name or "%" in name:  # a custom resource: a path segment
        errors.append(f"metadata.name: Invalid value: {name!r}: may not contain '/' or '%'")
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, short = str(key).rpartition("/")
        if (
            not short
            or len(short) > 63
            or not _LABEL_VALUE.match(short)
            or (prefix and not _SUBDOMAIN.match(prefix))
        ):
            errors.append(f"metadata.labels: Invalid value: {key!r}: not a qualified name")
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            errors.append(
                f"metadata.labels: Invalid value: {value!r}: must be no more than 63 characters"
                " and begin and end with an alphanumeric character"
            )
    if errors:
        raise Refused(422, "Invalid", f"{kind} {name!r} is invalid: " + "; ".join(errors))


def validate_fields(kind: str, obj: dict) -> None:
    """The API server's field validation of the kinds ``corral run`` writes beyond names and labels
    (``pkg/apis/core/validation`` ``legacyValidateEvent``, ``pkg/apis/coordination/validation``
    ``ValidateLeaseSpec``): an Event about a namespaced object lives in that object's namespace, one about
    a cluster-scoped object in ``default`` (or no namespace); a Lease's duration is above 0 and its
    transitions not negative. A 422 Invalid otherwise."""
    errors = []
    name = (obj.get("metadata") or {}).get("name") or ""
    if kind == "Event" and not obj.get("eventTime"):
        ns = (obj.get("metadata") or {}).get("namespace") or ""
        about = (obj.get("involvedObject") or {}).get("namespace") or ""
        if (about and ns != about) or (not about and ns not in ("", "default")):
            errors.append(
                f"involvedObject.namespace: Invalid value: {about!r}: does not match event.namespace"
            )
    if kind == "Lease":
        spec = obj.get("spec") or {}
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and (not isinstance(duration, int) or duration <= 0):
            errors.append(f"spec.leaseDurationSeconds: Invalid value: {duration!r}: must be greater than 0")
        if int(spec.get("leaseTransitions") or 0) < 0:
            errors.append("spec.leaseTransitions: Invalid value: must be greater than or equal to 0")
    if errors:
        raise Refused(422, "Invalid", f"{kind} {name!r} is invalid: " + "; ".join(errors))


def _scaled(value: Any, total: int) -> int:
    """An IntOrString of a budget: a count, or a percentage of ``total`` rounded up."""
    if isinstance(value, str) and value.endswith("%"):
        return -(-int(value[:-1]) * total // 100)
    return int(value)


def strategic_patch(target: Any, patch: Any, path: str = "") -> Any:
    """A merge patch, but ``status.conditions`` lists merge item by item on ``type`` (their merge key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        here = f"{path}.{k}" if path else k
        if v is None:
            out.pop(k, None)
        elif here == "status.conditions" and isinstance(v, list):
            merged = [c for c in out.get(k) or [] if c.get("type") not in {x.get("type") for x in v}]
            out[k] = merged + [{kk: vv for kk, vv in c.items() if vv is not None} for c in v]
        else:
            out[k] = strategic_patch(out.get(k), v, here)
    return out


def check_budgets(pdbs: Any, pods: dict, key: tuple[str, str], pod: dict) -> None:
    """The eviction API's budget check (the disruption controller's ``disruptionsAllowed``)."""
    labels = pod["metadata"].get("labels") or {}
    budgets = []
    for pdb in pdbs:
        sel = (pdb.get("spec", {}).get("selector") or {}).get("matchLabels") or {}
        if pdb["metadata"]["namespace"] == key[0] and sel and all(labels.get(k) == v for k, v in sel.items()):
            budgets.append((pdb, sel))
    if len(budgets) > 1:
        raise Refused(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )
    for pdb, sel in budgets:
        matching = [
            p
            for (ns, _), p in pods.items()
            if ns == key[0]
            and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in sel.items())
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        healthy = sum(
            1
            for p in matching
            if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") == "Running"
        )
        spec = pdb.get("spec") or {}
        if "minAvailable" in spec:
            desired = _scaled(spec["minAvailable"], len(matching))
        else:
            desired = len(matching) - _scaled(spec.get("maxUnavailable", 0), len(matching))
        if healthy - desired <= 0:
            raise Refused(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                [
                    {
                        "reason": "DisruptionBudget",
                        "type": "DisruptionBudget",
                        "message": f"The disruption budget {pdb['metadata']['name']} needs {desired} healthy "
                        f"pods and has {healthy} currently",
                    }
                ],
            )
