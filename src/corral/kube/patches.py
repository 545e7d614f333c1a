"""JSON merge patches (RFC 7386) as the watch cache's assumptions use them: a patch overlaid on a cached
object until the watch shows it (:meth:`corral.kube.cache.WatchCache.assume`), and the test of whether an
object already shows a patch.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["PRESENT", "contains", "merge_patch", "merge_patches"]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (``None`` removes a key); ``target`` is not modified."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


#: in a confirm patch: the key is present, whatever its value
PRESENT = object()


def contains(obj: object, patch: object) -> bool:
    """True when ``obj`` already shows every value of the merge patch ``patch``."""
    if patch is PRESENT:
        return obj is not None
    if not isinstance(patch, dict):
        return obj == patch
    if not isinstance(obj, dict):
        return False
    for k, v in patch.items():
        if v is None:
            if k in obj:
                return False
        elif not contains(obj.get(k), v):
            return False
    return True


def merge_patches(a: dict, b: dict) -> dict:
    """Two merge patches as one (``b`` over ``a``; a ``None`` in ``b`` stays a removal)."""
    out = copy.deepcopy(a)
    for k, v in b.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge_patches(out[k], v)
        else:
            out[k] = v
    return out
