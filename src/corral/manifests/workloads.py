"""Workloads as users submit them, replaced by the PodGroup and pods their controllers create, so that
``corral schedule`` (a what-if) and the simulator take them as the cluster would run them.

- a Volcano ``Job`` (``batch.volcano.sh/v1alpha1``): :mod:`corral.manifests.volcano_job`;
- a ``batch/v1`` Job or a JobSet (``jobset.x-k8s.io``) for KAI's scheduler, and pods of KAI's
  scheduler without a podgroup: :mod:`corral.manifests.kai_grouper`.

Every expansion is reported in :class:`~corral.model.notes.Notes` (``corral validate`` lists
them). Other objects pass through unchanged, in order; the made objects take the place of their workload.
"""

from __future__ import annotations

from collections.abc import Callable

from corral.errors import InputError
from corral.manifests.kai_grouper import (
    expand_batch_job,
    expand_jobset,
    group_bare_pods,
    is_bare_kai_pod,
    kai_template,
)
from corral.manifests.load import SourcedObject
from corral.manifests.volcano_job import VOLCANO_JOB_API, expand_volcano_job
from corral.manifests.workload_common import Existing, Made
from corral.model.notes import Notes

__all__ = ["expand_workloads"]

JOBSET_GROUP = "jobset.x-k8s.io"

Expander = Callable[[str, dict, Existing, Notes], "Made | None"]


def _dig(value: object, *keys: str) -> object:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _expander(raw: dict) -> Expander | None:
    kind, api = raw.get("kind"), raw.get("apiVersion")
    if kind == "Job" and api == VOLCANO_JOB_API:
        return expand_volcano_job
    raw_spec = raw.get("spec")
    spec: dict = raw_spec if isinstance(raw_spec, dict) else {}
    if kind == "Job" and api == "batch/v1" and kai_template(spec.get("template")):
        return expand_batch_job
    if kind == "JobSet" and isinstance(api, str) and api.startswith(JOBSET_GROUP + "/"):
        rjobs = spec.get("replicatedJobs")
        templates = [
            _dig(rj, "template", "spec", "template") for rj in (rjobs if isinstance(rjobs, list) else [])
        ]
        if any(kai_template(t) for t in templates):
            return expand_jobset
    return None


def _guarded(expand: Expander, file: str, raw: dict, existing: Existing, notes: Notes) -> Made | None:
    """``expand`` with every fault of the input made an :class:`InputError` naming the file and the
    object (SPEC.md §5: bad input never produces a traceback)."""
    try:
        return expand(file, raw, existing, notes)
    except InputError as exc:
        if exc.file is None:
            exc.file = file
            exc.args = (exc.describe(),)
        raise
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        raw_meta = raw.get("metadata")
        meta: dict = raw_meta if isinstance(raw_meta, dict) else {}
        raise InputError(
            f"malformed object: {type(exc).__name__}: {exc}",
            file=file,
            obj=f"{raw.get('kind')} {meta.get('namespace') or 'default'}/{meta.get('name', '?')}",
        ) from None


def _guarded_bare(objects: list[SourcedObject], existing: Existing, notes: Notes) -> list[SourcedObject]:
    try:
        return group_bare_pods(objects, existing, notes)
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        raise InputError(f"malformed pod: {type(exc).__name__}: {exc}") from None


def expand_workloads(objects: list[SourcedObject], notes: Notes) -> list[SourcedObject]:
    """``objects`` with every workload corral expands replaced by what its controller makes."""
    found = [_expander(raw) if raw.get("kind") in ("Job", "JobSet") else None for _f, raw in objects]
    bare = any(is_bare_kai_pod(raw) for _f, raw in objects)
    if not any(found) and not bare:
        return objects
    existing = Existing.of(objects)
    if bare:
        objects = _guarded_bare(objects, existing, notes)
        found = [_expander(raw) if raw.get("kind") in ("Job", "JobSet") else None for _f, raw in objects]
    out: list[SourcedObject] = []
    for (file, raw), expand in zip(objects, found):
        if expand is None:
            out.append((file, raw))
            continue
        made = _guarded(expand, file, raw, existing, notes)
        if made is not None:
            out.extend(made.objects)
            meta = raw.get("metadata") or {}
            ident = f"{raw.get('kind')} {meta.get('namespace') or 'default'}/{meta.get('name')}"
            notes.made(f"{ident} ({raw.get('apiVersion')})", made.report(), file)
    return out
