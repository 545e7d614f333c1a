"""Cross-cycle memory, held by the front end and passed to every cycle (DESIGN.md, the target plan):
``run_cycle(cluster, …, history=h)``.

A :class:`ClusterHistory` owns what one cycle leaves for the next — the job index
(:mod:`~corral.framework.memo.jobindex`), the skip memory (:mod:`~corral.framework.memo.skipmemory`),
the kept job order keys (:mod:`~corral.framework.memo.orderkeys`) and the set of jobs the front end
changed since the last cycle — and the switches that turn those speed paths off (for the equivalence
tests and benchmarks). Nothing of it is stashed on a cluster or in a module global.

A front end talks to it through one method:

- the simulator and ``corral schedule --cycles`` keep one cluster object and change it between cycles;
  their history *tracks* (``tracked=True``) and they report every job whose pods, phase or fields they
  change through :meth:`ClusterHistory.changed`; the sessions then keep the job index and look only at
  what changed when they close;
- ``corral run`` builds a new cluster each cycle; its history does not track (no index) and keeps the
  skip memory and order keys, which check each job's own state themselves;
- with no history (``history=None``) a cycle gets a fresh untracked one: nothing is remembered.

Every speed path is exact: decisions are byte-identical with ``skip``/``keep_index`` on and off
(``tests/framework/test_skipcache.py``, ``tests/framework/test_jobindex.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from corral.framework.memo.jobindex import JobIndex
from corral.framework.memo.orderkeys import OrderKeys
from corral.framework.memo.skipmemory import SkipMemory
from corral.model import Cluster

__all__ = ["ClusterHistory"]

_YES = ("1", "true", "yes")


def _skip_default() -> bool:
    return os.environ.get("CORRAL_NO_SKIP", "") not in _YES


def _check_default() -> bool:
    return os.environ.get("CORRAL_CHECK_INDEX", "") in _YES


@dataclass(eq=False)
class ClusterHistory:
    """What earlier cycles learned, for the cycles a front end runs next (see the module docstring).

    ``tracked``: the front end reports every job change between cycles (:meth:`changed`), so the job
    index can be kept. ``skip``: leave out jobs known to fail (``CORRAL_NO_SKIP=1`` makes the default
    False). ``keep_index``: keep the job index where tracked (False: walk every job, skipping still on).
    ``check_index``: compare the kept index with a fresh build at every session open and fail on any
    difference (``CORRAL_CHECK_INDEX=1`` makes the default True).
    """

    tracked: bool = False
    skip: bool = field(default_factory=_skip_default)
    keep_index: bool = True
    check_index: bool = field(default_factory=_check_default)
    skip_memory: SkipMemory = field(default_factory=SkipMemory)
    order_keys: OrderKeys = field(default_factory=OrderKeys)
    _reported: set[str] = field(default_factory=set, init=False, repr=False)
    _index: JobIndex | None = field(default=None, init=False, repr=False)
    _cluster: Cluster | None = field(default=None, init=False, repr=False)

    # -- the front end's door --------------------------------------------------------------------
    def changed(self, *uids: str) -> None:
        """Jobs whose pods, phase or fields the front end changed, or that came or went, since the last
        session closed. Ignored by a history that does not track."""
        if self.tracked:
            self._reported.update(uids)

    # -- the session's side ----------------------------------------------------------------------
    @property
    def reported(self) -> set[str] | None:
        """The jobs the front end reported since the last session closed; None when not tracked."""
        return self._reported if self.tracked else None

    def open(self, cluster: Cluster) -> JobIndex | None:
        """The job index brought up to date for a session opening on ``cluster`` now, or None where none
        is kept (not tracked, skipping or the index off). A cluster other than the last one seen starts
        the memory afresh."""
        if cluster is not self._cluster:
            self._cluster, self._index = cluster, None
            self.order_keys = OrderKeys()
        if not (self.tracked and self.skip and self.keep_index):
            self._index = None
            return None
        index = self._index
        if (
            index is None
            or index.queues_key != tuple(cluster.queues)
            or index.width != len(cluster.resources)
        ):
            index = self._index = JobIndex(cluster)
        else:
            index.refresh(cluster, self._reported)
        if self.check_index:
            wrong = index.differences(JobIndex(cluster))
            if wrong:
                raise AssertionError(f"kept job index differs from a fresh build: {'; '.join(wrong)}")
        return index

    def closed(self, looked_at: Iterable[str]) -> None:
        """A closing session names the jobs it changed or looked at: the index looks at them again when
        the next session opens (after ``apply_decisions`` carried the decisions out)."""
        if self._index is not None:
            self._index.dirty.update(looked_at)

    def forget_reported(self, touched: set[str]) -> set[str] | None:
        """At close: drop the kept order keys of the reported jobs and of ``touched`` (the session's),
        and hand over the reported set, emptied for the next cycle (a copy; None when not tracked)."""
        if not self.tracked:
            return None
        reported = set(self._reported)
        self.order_keys.forget(reported, touched)
        self._reported.clear()
        return reported
