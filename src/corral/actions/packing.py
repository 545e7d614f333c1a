"""The first-fit estimate gang eviction steers by (seed 000 §3 step 3; :mod:`corral.actions.gang_evict`):
how many of a gang's waiting pods a domain could hold once some victims are gone. The estimate only
orders and prunes the victims; the Statement dry run decides."""
from __future__ import annotations

import math

import numpy as np

from corral.framework.extension import Domain
from corral.framework.session import Session
from corral.model import Task
from corral.model.resources import EPS

__all__ = ["LOOKAHEAD", "Packer", "PackState", "first_useful"]

#: Candidates (bundles of one kind and policy rank, or pods of one SAFE bundle) looked at for one that
#: lets more of the gang fit.
LOOKAHEAD = 16


class Packer:
    """A quick estimate of how many of the gang's waiting pods a domain could hold once given victims are
    gone: first fit, pod by pod in TaskOrder, over each node's future idle capacity plus what the victims
    on it free, within the pod's predicate mask. It only steers which victims are taken first and which
    are spared; the dry run decides."""

    def __init__(self, session: Session, tasks: list[Task], domain: Domain, within: "Packer | None" = None) -> None:
        """``within``: the same gang's Packer over a domain holding this one (a part of it): the column
        that alone limits the gang there does here too."""
        nodes = session.cluster.nodes
        self.rows = np.flatnonzero(domain.mask & ~nodes.down)
        self.pos = {int(r): i for i, r in enumerate(self.rows)}
        self.base = np.clip(nodes.future_idle[self.rows], 0, None)
        # runs of identical pods (same class: same request and constraints), in TaskOrder
        self.groups: list[list] = []            # [request, mask, count, class]
        for t in tasks:
            last = self.groups[-1] if self.groups else None
            if last is not None and t.klass and last[3] == t.klass:
                last[2] += 1
                continue
            self.groups.append([t.request, session.predicate(t)[self.rows], 1, t.klass])
        self.n = len(tasks)
        # one run of identical pods (the usual gang): a node holds floor(room / request) of them
        self.single = len(self.groups) == 1 and bool((self.groups[0][0] > 0).any())
        #: the one column that can limit how many of them a node holds, if there is one (:meth:`_binding`)
        self.one: int | None = None
        if self.single:
            req = self.groups[0][0]
            self.cols = req > 0
            self.req = req[self.cols]
            self.mask = self.groups[0][1]
            self.one = within.one if within is not None and within.one is not None else \
                self._binding(req, nodes.allocatable[self.rows])

    def _binding(self, req: np.ndarray, alloc: np.ndarray) -> int | None:
        """(One run of identical pods.) The requested column that alone decides how many of them each
        node can hold, whatever is evicted: every other requested column (the pod slot, CPU on a GPU
        node) holds, with what is free now, at least as many as the node's whole allocatable of that
        column could. None when no column does."""
        cols = np.flatnonzero(self.cols)
        if len(cols) == 1:
            return int(cols[0])
        if not len(self.rows):
            return None
        fits = np.floor((self.base[:, cols] + EPS) / req[cols])          # with what is free now
        most = np.floor((alloc[:, cols] + EPS) / req[cols])              # with the node empty
        for k, c in enumerate(cols):
            others = np.arange(len(cols)) != k
            if (fits[:, others] >= most[:, k:k + 1]).all():
                return int(c)
        return None

    def rooms(self, free: np.ndarray) -> np.ndarray:
        """(One run of identical pods.) How many of them each node holds."""
        room = np.floor((free[:, self.cols] + EPS) / self.req).min(axis=1)
        return np.where(self.mask, np.maximum(room, 0), 0)

    def freed(self, victims: list[Task], free: np.ndarray | None = None, sign: float = 1.0) -> np.ndarray:
        """Each domain node's room once ``victims`` are gone (added to ``free`` if given, else to what
        is free or being freed now; with ``sign`` -1, taken back from ``free``)."""
        free = self.base.copy() if free is None else free.copy()
        idx = [(self.pos[v.node], v.request) for v in victims if v.node in self.pos]
        if idx:
            np.add.at(free, [i for i, _ in idx], sign * np.array([r for _, r in idx]))
        return free

    def fit(self, free: np.ndarray) -> int:
        """How many of the gang's waiting pods fit into ``free``, first fit in TaskOrder."""
        if self.single:
            return int(min(self.n, self.rooms(free).sum()))
        free = free.copy()
        placed = 0
        for req, mask, k, _ in self.groups:
            cols = req > 0
            # first fit of k identical pods: fill the nodes in row order
            room = np.floor((free[:, cols] + EPS) / req[cols]).min(axis=1) if cols.any() else np.full(len(free), k)
            room = np.where(mask, np.maximum(room, 0), 0)
            take = np.minimum(room, np.maximum(k - (np.cumsum(room) - room), 0))
            free -= take[:, None] * req
            placed += int(take.sum())
        return placed

    def count(self, victims: list[Task]) -> int:
        return self.fit(self.freed(victims))


class PackState:
    """The estimate's room per node for one set of victims, kept up to date as victims are added or
    given back; for a gang of one run of identical pods only the nodes touched are counted again."""

    def __init__(self, pack: Packer, free: np.ndarray) -> None:
        self.pack, self._free = pack, free
        self._lag: list[tuple[int, np.ndarray]] = []          # updates of ``free`` not yet applied
        self.one: int | None = None         # the gang requests one resource only: its column
        self._seen: dict[int, tuple[list[Task], dict]] = {}     # id(pods) -> (pods, what they free)
        if pack.single:
            room = pack.rooms(free)
            self.total = float(room.sum())
            self.room = room
            if pack.one is not None:
                # plain floats for the usual GPU gang, which only its GPUs limit: numpy is slow on one
                # number at a time
                self.one = pack.one
                self.free1 = free[:, self.one].tolist()
                self.req1 = float(pack.groups[0][0][self.one])
                self.mask1 = pack.mask.tolist()
                self.room = room.tolist()

    @property
    def free(self) -> np.ndarray:
        """Each domain node's room (all resources) with the victims taken."""
        if self._lag:
            np.add.at(self._free, [p for p, _ in self._lag], np.array([r for _, r in self._lag]))
            self._lag = []
        return self._free

    def _touch(self, pods: list[Task], sign: float) -> dict[int, np.ndarray] | dict[int, float]:
        """What ``pods`` free per domain node (times ``sign``): request vectors, or, for a gang that
        requests one resource, amounts of it."""
        pos, one = self.pack.pos, self.one
        add: dict = {}
        for v in pods:
            p = pos.get(v.node)
            if p is not None:
                r = sign * (float(v.request[one]) if one is not None else v.request)
                add[p] = add[p] + r if p in add else r
        return add

    def _rooms(self, add: dict) -> dict[int, float]:
        pk = self.pack
        if self.one is not None:
            f, req, mask = self.free1, self.req1, self.mask1
            return {p: (max(float(math.floor((f[p] + a + EPS) / req)), 0.0) if mask[p] else 0.0)
                    for p, a in add.items()}
        free = self.free
        return {p: (max(float(np.floor((free[p, pk.cols] + r[pk.cols] + EPS) / pk.req).min()), 0.0)
                    if pk.mask[p] else 0.0) for p, r in add.items()}

    def _added(self, pods: list[Task]) -> dict:
        """:meth:`_touch` of evicting ``pods``, kept: :func:`first_useful` asks about the same options
        again and again."""
        hit = self._seen.get(id(pods))
        if hit is None or hit[0] is not pods:
            hit = self._seen[id(pods)] = (pods, self._touch(pods, 1.0))
        return hit[1]

    def count(self) -> int:
        """How many of the gang's pods the estimate places now."""
        if self.pack.single:
            return int(min(self.pack.n, self.total))
        return self.pack.fit(self.free)

    def trial(self, pods: list[Task], sign: float = 1.0) -> int:
        """The same with ``pods`` evicted too (``sign`` -1: given back), nothing changed."""
        if self.pack.single:
            add = self._added(pods) if sign > 0 else self._touch(pods, sign)
            new = self._rooms(add)
            return int(min(self.pack.n, self.total + sum(new[p] - self.room[p] for p in add)))
        return self.pack.fit(self.pack.freed(pods, self.free, sign))

    def useful(self, pods: list[Task], have: int) -> bool:
        """Would evicting ``pods`` too let the estimate place more than ``have`` (what it places now,
        fewer than all) of the gang? For a one-resource gang: does the room of a node they free grow
        (rooms only grow as victims are added)."""
        if self.one is None:
            return self.trial(pods) > have
        f, req, mask, room = self.free1, self.req1, self.mask1, self.room
        for p, a in self._added(pods).items():
            if mask[p] and math.floor((f[p] + a + EPS) / req) > room[p]:
                return True
        return False

    def apply(self, pods: list[Task], sign: float = 1.0) -> None:
        if self.pack.single:
            add = self._touch(pods, sign)
            new = self._rooms(add)
            room = self.room
            for p in add:
                self.total += new[p] - room[p]
                room[p] = new[p]
            if self.one is not None:
                for p, a in add.items():
                    self.free1[p] += a
            pos = self.pack.pos
            for v in pods:
                p = pos.get(v.node)
                if p is not None:
                    self._lag.append((p, sign * v.request))
        else:
            self._free = self.pack.freed(pods, self.free, sign)


def first_useful(state: PackState, options: list[list[Task]], same) -> int:
    """Index of the first option (among the leading ones for which ``same(i)`` holds, at most
    ``LOOKAHEAD``) whose pods, evicted on top of the victims of ``state``, let the estimate place more
    of the gang; 0 when none does."""
    have = state.count()
    if len(options) <= 1 or have >= state.pack.n:
        return 0
    for i, opt in enumerate(options[:LOOKAHEAD]):
        if not same(i):
            break
        if state.useful(opt, have):
            return i
    return 0

