"""Schema validation by the in-process API server (:mod:`tests.kube.fakeapi`) of the objects ``corral run``
writes, as a real kube-apiserver validates them: the built-in kinds (Pod, the ``pods/binding`` Binding,
Node, Event, Lease, ResourceClaim, ``scheduling.k8s.io/v1beta1`` PodGroup) against Kubernetes 1.37's OpenAPI schemas from the
``kubernetes-validate`` package, and Volcano's and KAI's PodGroups and Queues against their CRDs'
``openAPIV3Schema`` (``../shared/peers``, see its README).

The object checked is the one the server would store: the merged object after a patch, the whole object
of a create or a replace, the Binding's body. A field of the wrong type, a value outside an enum or an
unknown field, or a string or integer outside its ``format`` (``date-time``, ``int32``, ``int64``), is
refused with a 422 ``Invalid`` naming the field. Unknown fields are refused
(``fieldValidation=Strict``; a real server's default, ``Warn``, drops them with a warning header), so that
a write whose field a real cluster would drop fails the tests instead of passing silently.

Only what a write newly breaks is refused: a problem the stored object already had (a test's hand-written
fixture missing a field the schema requires, say) is not the writer's. Without ``jsonschema`` and
``kubernetes-validate`` (test dependencies) the built-in kinds are not checked; without ``../shared/peers``
the peers' kinds are not: :func:`checks` says which kinds are.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import yaml

from tests.kube.fakerules import Refused

__all__ = ["PEERS", "check_write", "checks", "problems"]

PEERS = Path(__file__).resolve().parents[3] / "shared" / "peers"
#: (kind, apiVersion) -> the file of kubernetes-validate's 1.37 strict schemas
_BUILTIN = {
    ("Pod", "v1"): "pod-v1.json",
    ("Binding", "v1"): "binding-v1.json",
    ("PodGroup", "scheduling.k8s.io/v1beta1"): "podgroup-scheduling-v1beta1.json",
    ("Event", "v1"): "event-v1.json",
    ("Lease", "coordination.k8s.io/v1"): "lease-coordination-v1.json",
    ("Node", "v1"): "node-v1.json",
    ("ResourceClaim", "resource.k8s.io/v1"): "resourceclaim-resource-v1.json",
}
#: (kind, apiVersion) -> the peer's CRD under ../shared/peers
_CRDS = {
    ("PodGroup", "scheduling.volcano.sh/v1beta1"): "volcano/scheduling.volcano.sh_podgroups.yaml",
    ("Queue", "scheduling.volcano.sh/v1beta1"): "volcano/scheduling.volcano.sh_queues.yaml",
    ("PodGroup", "scheduling.run.ai/v2alpha2"): "kai/scheduling.run.ai_podgroups.yaml",
    ("Queue", "scheduling.run.ai/v2"): "kai/scheduling.run.ai_queues.yaml",
}
RELEASE = "v1.37.0-local-strict"


def _strict(schema: Any) -> Any:
    """A CRD's structural schema as JSON Schema: ``nullable`` admits null, ``x-kubernetes-int-or-string``
    admits an integer or a string, and an object with ``properties`` (not marked
    ``x-kubernetes-preserve-unknown-fields``) admits no other field (strict field validation)."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _formats(jsonschema: Any) -> Any:
    """The string and integer formats a kube-apiserver checks: ``date-time`` (``metav1.Time`` and
    ``MicroTime``, and the CRDs' ``format: date-time``; RFC 3339), ``int32``, ``int64``."""
    from tests.kube.fakeupdate import date_time, in_range

    checker = jsonschema.FormatChecker(formats=())
    checker.checks("date-time")(lambda v: not isinstance(v, str) or date_time(v))
    checker.checks("int32")(lambda v: in_range(v, "int32"))
    checker.checks("int64")(lambda v: in_range(v, "int64"))
    return checker


@functools.cache
def _validator(kind: str, api: str) -> Any:
    """The validator of one kind, or None when its schema (or jsonschema) is not installed here."""
    try:
        import jsonschema
        from referencing import Registry, Resource
    except ImportError:
        return None
    if (kind, api) in _BUILTIN:
        try:
            import kubernetes_validate
        except ImportError:
            return None
        folder = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / RELEASE
        schema = json.loads((folder / _BUILTIN[(kind, api)]).read_text())
        defs = json.loads((folder / "_definitions.json").read_text())
        registry: Any = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
        return jsonschema.Draft202012Validator(schema, registry=registry, format_checker=_formats(jsonschema))
    if (kind, api) in _CRDS:
        path = PEERS / _CRDS[(kind, api)]
        if not path.is_file():
            return None
        crd = yaml.safe_load(path.read_text())
        version = api.rpartition("/")[2]
        [spec] = [v for v in crd["spec"]["versions"] if v["name"] == version]
        schema = _strict(spec["schema"]["openAPIV3Schema"])
        return jsonschema.Draft202012Validator(schema, format_checker=_formats(jsonschema))
    return None


def checks(kind: str, api: str) -> bool:
    """Whether writes of this kind are checked against a schema here."""
    return _validator(kind, api) is not None


def problems(kind: str, api: str, obj: dict | None) -> set[tuple[str, str]]:
    """The schema's complaints about ``obj`` as (field path, message); none when not checked."""
    validator = _validator(kind, api)
    if validator is None or obj is None:
        return set()
    obj = {**copy.deepcopy(obj), "kind": kind, "apiVersion": api}
    return {
        (".".join(str(p) for p in e.absolute_path) or "<object>", e.message)
        for e in validator.iter_errors(obj)
    }


def check_write(kind: str, api: str, old: dict | None, new: dict) -> None:
    """Refuse ``new`` (what a write would store in place of ``old``, None for a create) with 422 Invalid
    when it breaks the kind's schema where ``old`` did not."""
    fresh = problems(kind, api, new)
    if fresh and old is not None:
        fresh -= problems(kind, api, old)
    if fresh:
        name = (new.get("metadata") or {}).get("name") or ""
        raise Refused(
            422,
            "Invalid",
            f"{kind} {name!r} is invalid: " + "; ".join(f"{path}: {msg}" for path, msg in sorted(fresh)),
            [{"reason": "FieldValueInvalid", "message": msg, "field": path} for path, msg in sorted(fresh)],
        )
