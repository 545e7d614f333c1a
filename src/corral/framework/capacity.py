"""The capacity view of a session: what each node can give a pod now, whether a pod fits, and the best
node by the plugins' scores — with the caches that make those cheap (DESIGN.md, the target plan).

The answers that depend on the pod's request alone (free, fits) are cached per ``Task.klass`` (the
pod's spec, of which the request is part) and refreshed row by row: the Statement reports each node row
it changes (:meth:`CapacityView.touch`), and a cached per-node array recomputes only the rows touched
since it was computed (found in the touch log when they are few). Scores are kept only under the key
the session gives (``score_key``: the pod's signature when every NodeOrder plugin signs it with the
score scope "row", :mod:`corral.framework.hints`); a plugin that declares no hint is never cached. Caches change no answer:
``tests/framework/test_capacity.py`` compares them with the uncached computation.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from corral.model import Cluster, Task, TaskStatus
from corral.model.resources import EPS

__all__ = ["CapacityView"]

#: A cache refresh reads the rows changed since it was computed from the touch log up to this many
#: entries; past it, one comparison of every row's stamp is cheaper.
_LOGGED_ROWS = 256

Scorer = Callable[[Task, np.ndarray], Any]


class CapacityView:
    """Free capacity, fits and node scores over ``cluster``'s nodes for one session.

    ``scorers`` are the NodeOrder functions in tier order; ``score_key(task)`` is the key ``task``'s
    scores may be kept under, refreshed row by row (None: never kept)."""

    def __init__(
        self,
        cluster: Cluster,
        scorers: Sequence[Scorer],
        score_key: Callable[[Task], tuple[Any, ...] | None],
    ) -> None:
        self.cluster = cluster
        self.scorers = list(scorers)
        self._score_key = score_key
        self.version = 0  # bumps on every touch
        # per-row change stamps: caches of fits and scores recompute only the rows changed since
        self.row_version = np.zeros(len(cluster.nodes), dtype=np.int64)
        # ...and the log of touches (row, version), so a refresh finds the few rows changed since an
        # entry was computed without comparing every row's stamp
        self._touched_rows: list[int] = []
        self._touched_at: list[int] = []
        self._cols_cache: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._fit_cache: dict[tuple[Any, ...], list[Any]] = {}
        self._score_cache: dict[tuple[Any, ...], list[Any]] = {}
        self._free_cache: dict[tuple[Any, ...], list[Any]] = {}
        self._need_cache: dict[tuple[Any, ...], tuple[list[int], list[float]]] = {}
        self.no_fit_cache: dict[tuple[Any, ...], str] = {}  # (class, state stamps) -> why it fits nowhere

    def request_cols(self, task: Task) -> tuple[np.ndarray, np.ndarray]:
        """``(cols, amounts)``: the resource columns ``task`` requests and how much of each (cached per
        equivalence class: this is on the path of every placement)."""
        key = task.klass
        got = self._cols_cache.get(key) if key else None
        if got is None:
            cols = np.flatnonzero(task.request)
            got = (cols, task.request[cols])
            if key:
                self._cols_cache[key] = got
        return got

    def touch(self, *rows: int) -> None:
        """Node rows whose state just changed (called by the Statement on every apply and revert)."""
        self.version += 1
        version = self.version
        for r in rows:
            if r >= 0:
                self.row_version[r] = version
                self._touched_rows.append(r)
                self._touched_at.append(version)

    def _refresh(
        self, cache: dict[Any, Any], key: tuple[Any, ...], compute: Callable[[np.ndarray | None], np.ndarray]
    ) -> np.ndarray:
        """A per-node array cached under ``key``; rows touched since it was computed are recomputed
        (found in the touch log when they are few: the cost follows the rows that changed)."""
        entry = cache.get(key)
        if entry is None:
            arr = compute(None)
            cache[key] = [arr, self.version]
            return arr
        arr, at = entry
        if at != self.version:
            start = bisect_right(self._touched_at, at)
            if len(self._touched_at) - start <= _LOGGED_ROWS:
                dirty = np.array(sorted(set(self._touched_rows[start:])), dtype=np.intp)
            else:
                dirty = np.flatnonzero(self.row_version > at)
            if dirty.size:
                arr[dirty] = compute(dirty)
            entry[1] = self.version
        return arr

    def free(self, task: Task, *, future: bool = False, rows: np.ndarray | None = None) -> np.ndarray:
        """What each node (or each of ``rows``) can give ``task`` now (``future``: once releasing pods
        are gone), over the columns ``task`` requests. Binds never take capacity promised to a
        nomination: "now" is the smaller of idle and future idle (SPEC.md §5, no over-commit by binds and
        nominations)."""
        nodes = self.cluster.nodes
        cols, own = self.request_cols(task)
        if rows is None:
            idle = nodes.allocatable[:, cols] - nodes.used[:, cols]
            fut = idle + nodes.releasing[:, cols] - nodes.pipelined[:, cols]
        else:  # few rows: one (rows x cols) index per column
            at = (rows[:, None], cols)
            idle = nodes.allocatable[at] - nodes.used[at]
            fut = idle + nodes.releasing[at] - nodes.pipelined[at]
        if task.status is TaskStatus.PIPELINED and task.nominated >= 0:
            # its own reservation is its to use
            if rows is None:
                fut[task.nominated] += own
            else:
                fut[rows == task.nominated] += own
        return fut if future else np.minimum(fut, idle)

    def free_all(self, task: Task, *, future: bool = False) -> np.ndarray:
        """:meth:`free` over every node, cached per equivalence class as :meth:`fits` is (do not modify
        the returned array)."""
        if not task.klass or (task.status is TaskStatus.PIPELINED and task.nominated >= 0):
            return self.free(task, future=future)
        return self._refresh(
            self._free_cache, (task.klass, future), lambda rows: self.free(task, future=future, rows=rows)
        )

    def fits(self, task: Task, *, future: bool = False) -> np.ndarray:
        """Boolean mask over nodes: does ``task``'s request fit (cached per equivalence class; do not
        modify the returned array)."""

        def compute(rows: np.ndarray | None) -> np.ndarray:
            if rows is not None and len(rows) == 1:
                return np.array([self._fits_row(task, int(rows[0]), future)])
            fits: np.ndarray = self.free(task, future=future, rows=rows) >= self.request_cols(task)[1] - EPS
            return np.all(fits, axis=1)

        if task.status is TaskStatus.PIPELINED and task.nominated >= 0:
            return compute(None)
        return self._refresh(self._fit_cache, (task.klass, future), compute)

    def _fits_row(self, task: Task, row: int, future: bool) -> bool:
        """:meth:`fits` on one node, in plain floats: the one row a placement changed costs a few
        operations rather than a dozen array calls (the same IEEE arithmetic, in the same order, as
        :meth:`free`; only for a task that holds no nomination of its own)."""
        nodes = self.cluster.nodes
        cols, need = self._need_list(task)
        alloc, used = nodes.allocatable[row].tolist(), nodes.used[row].tolist()
        releasing, pipelined = nodes.releasing[row].tolist(), nodes.pipelined[row].tolist()
        for c, n in zip(cols, need):
            idle = alloc[c] - used[c]
            fut = idle + releasing[c] - pipelined[c]
            if not (fut if future or fut < idle else idle) >= n:
                return False
        return True

    def _need_list(self, task: Task) -> tuple[list[int], list[float]]:
        key = task.klass
        got = self._need_cache.get(key) if key else None
        if got is None:
            cols, own = self.request_cols(task)
            got = (cols.tolist(), (own - EPS).tolist())
            if key:
                self._need_cache[key] = got
        return got

    def node_scores(self, task: Task, rows: np.ndarray) -> np.ndarray:
        """Summed NodeOrder scores for ``rows`` (cached per class where every scorer is row-local)."""
        if not self.scorers:
            return np.zeros(len(rows))
        key = self._score_key(task)
        if key is None:
            return self._sum_scores(task, rows)
        return self._all_scores(task, key)[rows]

    def _sum_scores(self, task: Task, sub: np.ndarray | None) -> np.ndarray:
        rr = np.arange(len(self.cluster.nodes)) if sub is None else sub
        fns = self.scorers
        score = np.array(fns[0](task, rr), dtype=float)  # a copy: the caches write into it
        for fn in fns[1:]:
            score = score + fn(task, rr)
        return score

    def _all_scores(self, task: Task, key: tuple[Any, ...]) -> np.ndarray:
        """Every node's summed score for the pods of score key ``key`` (cached; do not modify)."""
        return self._refresh(self._score_cache, (key,), lambda sub: self._sum_scores(task, sub))

    def best_row(self, task: Task, mask: np.ndarray) -> int:
        """The best node in ``mask`` by summed NodeOrder scores; ties go to the lowest row (name)."""
        key = self._score_key(task) if self.scorers else None
        if key is None:
            rows = np.flatnonzero(mask)
            return int(rows[int(np.argmax(self.node_scores(task, rows)))]) if rows.size else -1
        row = int(np.argmax(np.where(mask, self._all_scores(task, key), -np.inf)))
        return row if mask[row] else -1  # argmax lands outside the mask only when it is empty
