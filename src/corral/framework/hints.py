"""Cache hints: what a plugin's Predicate and NodeOrder answers depend on, so the framework may reuse
them (kube-scheduler's ``SignPlugin``: a plugin signs the fragment of the pod its Filter and Score
depend on, and a pod is batched only when every enabled plugin signs it).

A pod's **signature** is its request (``Task.klass.request``: :class:`corral.model.PodClass`, built
with the pod) followed by the fragment each plugin signs (:meth:`CacheHints.sign_pod`): the fields of the
pod's class its answers read — the ``predicates`` plugin its node selector, affinity, tolerations and
namespace, ``nodeorder`` its affinity, tolerations and namespace, ``gpushare`` its GPU share,
``network-topology-aware`` its sub-group, ``dra`` its claims (``()`` adds nothing). Two pods with one
signature get the same answer from every signing plugin on the same node state, and a field no enabled
plugin reads does not split the cache.

- **Predicate answers** are reused (a job skipped as known to fail, a no-fit reason shared by the gangs
  that fail in a row: :mod:`corral.actions.common.skipping`) only for a pod every enabled Predicate
  plugin signs (:meth:`corral.framework.session.Session.signature`).
- **NodeOrder scores** are kept per signature and refreshed row by row
  (:class:`~corral.framework.capacity.CapacityView`) only for a pod every enabled NodeOrder plugin
  signs with the score scope ``"row"`` (a node's score depends on that node's own row alone).

**Safe by default**: a plugin that does not implement :class:`CacheHints` signs nothing, so a session
with it caches none of the answers of the point it extends.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from corral.model import Task

__all__ = ["ALL", "ROW", "BaseSigned", "CacheHints", "ScoreScope"]

ScoreScope = Literal["row", "all"]
ROW: ScoreScope = "row"
ALL: ScoreScope = "all"


@runtime_checkable
class CacheHints(Protocol):
    def sign_pod(self, task: Task) -> tuple[Any, ...] | None:
        """The fragment of ``task`` this plugin's Predicate and NodeOrder answers depend on beyond its
        request and the nodes' state: ``()`` when the request is all; None when
        they depend on more (the job's expected run time, its other pods' places) — then no answer of
        this plugin for the pod is reused."""

    def score_scope(self, task: Task) -> ScoreScope:
        """``"row"``: this plugin's NodeOrder score of a node depends on that node's own row of the
        cluster state alone, so a kept score array stays right when other rows change; ``"all"``: on
        other nodes too (HyperNode occupancy, pods elsewhere), so scores are never kept. A plugin
        without NodeOrder answers ``"row"``."""


class BaseSigned(CacheHints):
    """The hints of a plugin whose answers depend on the pod's request, the fields of its
    :class:`~corral.model.PodClass` named in ``signs`` (and its labels, which the predicate key always
    holds), and that scores a node from its own row: ``predicates``, ``gpushare``, ``dra``, ``binpack``."""

    #: the :class:`~corral.model.PodClass` fields this plugin's answers read beyond the request
    signs: tuple[str, ...] = ()
    _signed_fields: Callable[[Any], tuple[Any, ...]] = staticmethod(lambda klass: ())

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = cls.signs
        if len(names) == 1:
            one = attrgetter(names[0])
            cls._signed_fields = staticmethod(lambda klass: (one(klass),))
        elif names:
            cls._signed_fields = staticmethod(attrgetter(*names))

    def sign_pod(self, task: Task) -> tuple[Any, ...] | None:
        klass = task.klass
        return None if klass is None else self._signed_fields(klass)

    def score_scope(self, task: Task) -> ScoreScope:
        return ROW
