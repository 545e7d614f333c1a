"""The watch cache of ``corral run``: list + watch of every resource of :data:`~corral.kube.api.RESOURCES`
into object dicts, each parsed once on arrival by the snapshot loader's own parser
(:func:`corral.manifests.kinds.parse_object`), and assembled per cycle by the snapshot loader's own
assembly (:func:`corral.manifests.build.assemble_cluster`). One model, one code path: a cycle over the
cache and ``corral schedule`` over :meth:`WatchCache.dump` build the same cluster.

Warnings (SPEC.md §5: no field dropped silently): each object's parse records, with its parsed form,
what the snapshot reader warns about it (fields accepted but not acted on, a pending pod's placement
constraints corral does not evaluate, a DeviceClass's ``extendedResourceName``); a build gives them with the assembly's as ``Cluster.notes``, as
:func:`~corral.manifests.build.build_cluster` does, and ``corral run`` tells them
(:meth:`corral.kube.runner.Runner.warn`). An unchanged object is not parsed again for them.

The stores are filled by one reflector per resource type (:mod:`corral.kube.informer`, client-go's
list + watch); assumptions are merge patches (:mod:`corral.kube.patches`).

Bad objects (SPEC.md §5 for snapshots: one line naming object and field) never stop the scheduler: an
object the parser rejects is logged once (per distinct error) and left out until a later version of it
reads; an object the assembly rejects (a queue naming a missing parent, a queue cycle, a duplicate) is
logged once and left out of that cycle.

Assumptions (kube-scheduler's "assume" cache): a write the scheduler made (a bind, an eviction, a
nomination, a podgroup status) is overlaid on the cached dict until the watch shows it, so the next cycle
never decides on a state older than its own writes (no pod is bound twice). ``--dry-run`` overlays the
decisions as ``corral schedule --cycles`` applies them between cycles and never clears them.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corral.errors import InputError
from corral.kube.api import RESOURCES, KubeAPI, ResourceType
from corral.kube.informer import Informer
from corral.kube.jobfacts import IndexMismatch
from corral.kube.logs import Log
from corral.kube.metrics import Metrics
from corral.kube.model import LiveModel
from corral.kube.patches import PRESENT, contains, merge_patch, merge_patches
from corral.manifests.build import DEFAULT_SCHEDULERS, assemble_cluster
from corral.manifests.dra import dra_lines
from corral.manifests.fieldcheck import check_pending_pod
from corral.manifests.kinds import parse_object
from corral.manifests.records import PodGroupRec
from corral.model import Cluster
from corral.model.notes import Note, Notes

__all__ = ["PRESENT", "WatchCache", "key_of"]


@dataclasses.dataclass
class _Entry:
    raw: dict
    record: Any  # (kind, record) from parse_object, None when the object cannot be read
    #: what the reader warned about while parsing this version (fields accepted but not acted on)
    notes: tuple[Note, ...] = ()
    #: a pending pod's placement constraints corral does not evaluate: told while its scheduler is served
    pending: tuple[Note, ...] = ()


@dataclasses.dataclass
class _Assumption:
    patch: dict | None  # None: the object is gone (dry-run eviction)
    confirm: dict | None  # the watch shows this (a merge patch) -> the assumption ends
    deadline: float
    created: bool = False  # the patch is a whole object the store does not hold (a dry run's claim)


def key_of(raw: dict) -> str:
    meta = raw.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


class WatchCache:
    """Stores of every resource type, their sync state, and the assumptions of the scheduler's writes."""

    def __init__(
        self,
        api: KubeAPI | None,
        log: Log,
        metrics: Metrics | None = None,
        resources: Sequence[ResourceType] = RESOURCES,
        *,
        page: int = 5000,
        watch_timeout: int = 300,
        backoff: tuple[float, float] = (0.5, 30.0),
    ) -> None:
        self.api = api
        self.log = log
        self.metrics = metrics
        self.resources = tuple(resources)
        self.page = page
        self.watch_timeout = watch_timeout
        self.backoff = backoff
        self.lock = threading.RLock()
        self.stores: dict[ResourceType, dict[str, _Entry]] = {r: {} for r in self.resources}
        self.synced: set[ResourceType] = set()
        self.absent: set[ResourceType] = set()
        self.assumed: dict[tuple[str, str], _Assumption] = {}  # (kind, key) -> assumption
        #: (kind, key) -> (stored dict, assumption, their merge and its record): a dry run's assumptions
        #: last the run, and a full assembly would parse every one of them again
        self.assumed_parsed: dict[tuple[str, str], tuple[dict, _Assumption, tuple[dict, Any]]] = {}
        self.changed = threading.Event()
        self.informers: list[Informer] = []
        self.bad: set[tuple[ResourceType, str]] = set()
        self.view_seconds = 0.0  # the last build's snapshot of the stores
        self.versions: dict[str, int] = {}  # kind -> changes (objects or assumptions)
        self.topology: tuple[tuple, Any] | None = None  # (versions of Node, HyperNode), tree
        self.view_topology: tuple = ()
        self.dirty: set[tuple[ResourceType, str]] = set()  # changed since the last build
        self.model = LiveModel()
        #: the entries with warnings, by (type, key): a cycle's warnings cost what is warned, not the cache
        self.noted: dict[tuple[ResourceType, str], _Entry] = {}
        self.noted_version = 0
        self._told: tuple[tuple, list[Note]] = ((), [])  # (version, schedulers), the reader's warnings

    # -- informers ---------------------------------------------------------------------------------
    def start(self) -> None:
        assert self.api is not None
        for r in self.resources:
            inf = Informer(self, r)
            self.informers.append(inf)
            inf.start()

    def stop(self, wait: float = 2.0) -> None:
        """Stop every informer; wait at most ``wait`` seconds in all for them to end (they are daemon
        threads: a watch blocked in a read until its next event or bookmark dies with the process)."""
        for inf in self.informers:
            inf.stop()
        deadline = time.monotonic() + wait
        for inf in self.informers:
            inf.join(timeout=max(0.0, deadline - time.monotonic()))

    def missing(self) -> list[str]:
        """The resources not listed yet."""
        with self.lock:
            return [r.name for r in self.resources if r not in self.synced]

    def wait_synced(self, timeout: float | None = None, stopping: threading.Event | None = None) -> bool:
        """True once every resource is listed (or known not served); False at ``timeout`` or as soon as
        ``stopping`` is set."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self.lock:
                if len(self.synced) == len(self.resources):
                    return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            if stopping is not None and stopping.is_set():
                return False
            self.changed.wait(0.05)
            self.changed.clear()

    def is_synced(self) -> bool:
        with self.lock:
            return len(self.synced) == len(self.resources)

    # -- store updates (informer threads) ------------------------------------------------------------
    def _parse(self, rtype: ResourceType, raw: dict) -> _Entry:
        raw.setdefault("kind", rtype.kind)
        raw.setdefault("apiVersion", rtype.api_version)
        key = (rtype.name, key_of(raw))
        notes = Notes()
        try:
            record = parse_object(rtype.name, raw, notes)
        except InputError as exc:
            self.log.once(
                key,
                "warning",
                "object left out: the model cannot read it",
                resource=rtype.name,
                object=key[1],
                field=exc.field,
                error=exc.describe(),
            )
            return _Entry(raw, None)
        self.log.forget(key)
        pending = Notes()
        if record is not None and record[0] == "Pod" and not record[1].node_name:
            check_pending_pod(raw, f"Pod {key[1]}", rtype.name, pending)
        elif record is not None and record[0] == "DeviceClass":  # the snapshot reader's report_read
            for obj, path, message in dra_lines([record[1]])[1]:
                notes.warn(obj, path, message, rtype.name)
        return _Entry(raw, record, tuple(notes.warnings), tuple(pending.warnings))

    def _note(self, rtype: ResourceType, key: str, entry: _Entry | None) -> None:
        """Keep ``entry`` (None: gone) in the index of warned entries; under the lock."""
        had = self.noted.pop((rtype, key), None)
        if entry is not None and (entry.notes or entry.pending):
            self.noted[(rtype, key)] = entry
        elif had is None:
            return
        self.noted_version += 1

    def warnings(self, schedulers: Sequence[str]) -> list[Note]:
        """The reader's warnings about the cached objects, as :func:`~corral.manifests.build.parse_objects`
        makes them for a snapshot (fields accepted but not acted on; a pending pod of one of
        ``schedulers``' placement constraints corral does not evaluate), by resource type and key. Kept
        with each object's parsed form: computed again only when a warned object changed."""
        with self.lock:
            memo = (self.noted_version, tuple(schedulers))
            if self._told[0] == memo:
                return self._told[1]
            order = {r: i for i, r in enumerate(self.resources)}
            noted = sorted(self.noted.items(), key=lambda kv: (order[kv[0][0]], kv[0][1]))
        served = set(schedulers)
        out: list[Note] = []
        for _k, e in noted:
            out.extend(e.notes)
            if e.pending and e.record[1].scheduler in served:
                out.extend(e.pending)
        self._told = (memo, out)
        return out

    def replace(self, rtype: ResourceType, items: list[dict]) -> None:
        entries = {}
        for raw in items:
            e = self._parse(rtype, raw)
            entries[key_of(raw)] = e
        with self.lock:
            self._bump(rtype.kind)
            self.dirty.update((rtype, k) for k in self.stores[rtype])
            self.dirty.update((rtype, k) for k in entries)
            for k in self.stores[rtype]:
                self._note(rtype, k, None)
            for k, e in entries.items():
                self._note(rtype, k, e)
            self.stores[rtype] = entries
            self.bad = {k for k in self.bad if k[0] is not rtype} | {
                (rtype, k) for k, e in entries.items() if e.record is None
            }
            self.synced.add(rtype)
            for (kind, key), a in list(self.assumed.items()):
                if (
                    kind == rtype.kind
                    and key in entries
                    and a.confirm is not None
                    and contains(entries[key].raw, a.confirm)
                ):
                    del self.assumed[(kind, key)]
        self.changed.set()

    def event(self, rtype: ResourceType, etype: str, raw: dict) -> None:
        key = key_of(raw)
        if etype == "DELETED":
            with self.lock:
                self._bump(rtype.kind)
                self.dirty.add((rtype, key))
                self.stores[rtype].pop(key, None)
                self._note(rtype, key, None)
                self.bad.discard((rtype, key))
                self.assumed.pop((rtype.kind, key), None)
            self.log.forget((rtype.name, key))
        else:
            entry = self._parse(rtype, raw)
            with self.lock:
                self._bump(rtype.kind)
                self.dirty.add((rtype, key))
                self.stores[rtype][key] = entry
                self._note(rtype, key, entry)
                if entry.record is None:
                    self.bad.add((rtype, key))
                else:
                    self.bad.discard((rtype, key))
                a = self.assumed.get((rtype.kind, key))
                if a is not None and a.confirm is not None and contains(raw, a.confirm):
                    del self.assumed[(rtype.kind, key)]
        self.changed.set()

    def _bump(self, kind: str) -> None:
        self.versions[kind] = self.versions.get(kind, 0) + 1

    def mark_absent(self, rtype: ResourceType) -> None:
        with self.lock:
            self.absent.add(rtype)
            self.synced.add(rtype)
        self.changed.set()

    def count(self) -> None:
        """Refresh the cache gauges (objects per resource, unreadable objects)."""
        if self.metrics is not None:
            with self.lock:
                for r, store in self.stores.items():
                    self.metrics.objects.labels(r.name).set(len(store))
                self.metrics.bad.set(len(self.bad))

    # -- reads (the scheduler thread) ----------------------------------------------------------------
    def find(self, kind: str, key: str) -> tuple[ResourceType, dict] | None:
        """The resource type and current dict (assumptions applied) of ``kind`` ``key``."""
        with self.lock:
            for r in self.resources:
                if r.kind == kind and key in self.stores[r]:
                    raw = self.stores[r][key].raw
                    a = self.assumed.get((kind, key))
                    if a is not None:
                        if a.patch is None:
                            return None
                        raw = merge_patch(raw, a.patch)
                    return r, raw
            a = self.assumed.get((kind, key))
            if a is not None and a.created and a.patch is not None:
                return next(r for r in self.resources if r.kind == kind), dict(a.patch)
        return None

    def assume(
        self, kind: str, key: str, patch: dict | None, confirm: dict | None, ttl: float = 60.0
    ) -> None:
        """Overlay ``patch`` on ``kind`` ``key`` until the watch shows ``confirm`` (or ``ttl`` runs out);
        successive patches of one object merge. A write whose echo the watch delivered before it was
        assumed (the answer came back after the event) is shown already: nothing is overlaid, so no
        assumption outlives the write for ``ttl`` seconds over later versions of the object."""
        with self.lock:
            old = self.assumed.get((kind, key))
            if old is not None and old.patch is not None and patch is not None:
                patch = merge_patches(old.patch, patch)
                if old.confirm is not None and confirm is not None:
                    confirm = merge_patches(old.confirm, confirm)
            created = old is not None and old.created
            confirmed_before = old is None or old.confirm is not None  # a dry run's overlay never ends
            if (
                confirm is not None
                and patch is not None
                and not created
                and confirmed_before
                and self._shows(kind, key, confirm)
            ):
                if old is not None:
                    del self.assumed[(kind, key)]
                    self._bump(kind)
                    self._touch(kind, key)
                return
            self.assumed[(kind, key)] = _Assumption(patch, confirm, time.monotonic() + ttl, created)
            self._bump(kind)
            self._touch(kind, key)

    def _shows(self, kind: str, key: str, confirm: dict) -> bool:
        """Whether the stored ``kind`` ``key`` (as the watch delivered it) contains ``confirm``; under the
        lock."""
        for r in self.resources:
            if r.kind == kind:
                entry = self.stores[r].get(key)
                if entry is not None:
                    return contains(entry.raw, confirm)
        return False

    def assume_created(self, kind: str, key: str, raw: dict, ttl: float) -> bool:
        """Overlay an object the API server does not hold (a dry run's claim made from a template, as
        the resourceclaim controller would create it) for ``ttl`` seconds; False when ``kind`` is not
        watched."""
        with self.lock:
            if not any(r.kind == kind for r in self.resources):
                return False
            self.assumed[(kind, key)] = _Assumption(raw, None, time.monotonic() + ttl, True)
            self._bump(kind)
            self._touch(kind, key)
            return True

    def unassume(self, kind: str, key: str) -> None:
        """End the assumption on ``kind`` ``key`` (a write read back and found not to have landed)."""
        with self.lock:
            if self.assumed.pop((kind, key), None) is not None:
                self._bump(kind)
                self._touch(kind, key)

    def _touch(self, kind: str, key: str) -> None:
        """Mark ``kind`` ``key`` changed (an assumption began or ended); under the lock."""
        self.dirty.update((r, key) for r in self.resources if r.kind == kind)

    def _expire(self) -> None:
        now = time.monotonic()
        for k in [k for k, a in self.assumed.items() if a.deadline < now]:
            del self.assumed[k]
            self._bump(k[0])
            self._touch(*k)

    def view(self) -> list[tuple[ResourceType, str, dict, Any]]:
        """A consistent snapshot: ``(type, key, dict, (kind, record))`` of every readable object, with
        the assumptions applied (patched objects are parsed again, outside the lock). The changes since
        the last build are taken with it (the snapshot holds them)."""
        with self.lock:
            self._expire()
            self.dirty.clear()
            assumed = dict(self.assumed)
            self.view_topology = (
                self.versions.get("Node", 0),
                self.versions.get("HyperNode", 0),
                self.versions.get("Topology", 0),
            )
            rows = [(r, key, e.raw, e.record) for r in self.resources for key, e in self.stores[r].items()]
        for k in [k for k in self.assumed_parsed if k not in assumed]:
            del self.assumed_parsed[k]  # ended assumptions
        if not assumed:
            return [row for row in rows if row[3] is not None]
        out = []
        for r, key, raw, record in rows:
            a = assumed.get((r.kind, key))
            if a is not None:
                memo = self.assumed_parsed.get((r.kind, key))
                if memo is None or memo[0] is not raw or memo[1] is not a:
                    memo = self.assumed_parsed[(r.kind, key)] = (raw, a, _assumed(r, raw, a))
                raw, record = memo[2]
            if record is not None:
                out.append((r, key, raw, record))
        held = {(r.kind, key) for r, key, _raw, _rec in rows}
        for (kind, key), a in assumed.items():
            if a.created and (kind, key) not in held:
                r = next(r for r in self.resources if r.kind == kind)
                raw, record = _assumed(r, {}, a)
                if record is not None:
                    out.append((r, key, raw, record))
        return out

    def delta(self) -> list[tuple[ResourceType, str, Any]]:
        """The changes since the last build, at one instant: ``(type, key, (kind, record) or None)`` of
        every object that changed, appeared or left (None: gone or unreadable), assumptions applied."""
        with self.lock:
            self._expire()
            rows = [
                (r, key, self.stores[r].get(key), self.assumed.get((r.kind, key))) for r, key in self.dirty
            ]
            self.dirty.clear()
        out = []
        for r, key, entry, a in rows:
            record = None
            if entry is not None:
                record = entry.record if a is None else _assumed(r, entry.raw, a)[1]
            elif a is not None and a.created:
                record = _assumed(r, {}, a)[1]
            out.append((r, key, record))
        return out

    def build(
        self, schedulers: Sequence[str] = DEFAULT_SCHEDULERS, with_objects: bool = False
    ) -> tuple[Cluster, list[dict]]:
        """The cluster of a consistent snapshot, and (``with_objects``, for a dump) the dicts it was built
        from. The garbage collector is paused meanwhile, as :func:`~corral.manifests.build.build_cluster`
        does: the build frees nothing a collection could.

        The model of the last build is kept (:class:`~corral.kube.model.LiveModel`): when only pods and
        podgroups changed, only their jobs are built again; otherwise every object is assembled again
        (the snapshot loader's assembly). An object the assembly rejects is named by the error; it is
        logged once and left out, and the assembly runs again without it.
        """
        paused = gc.isenabled()
        gc.disable()
        try:
            if not with_objects and self.model.ready:
                cluster = self._advance(schedulers)
                if cluster is not None:
                    return self._warned(cluster, schedulers), []
            if with_objects:
                self.model.reason = "a dump of the cache"
            return self._assemble(schedulers, with_objects)
        finally:
            if paused:
                gc.enable()

    def _advance(self, schedulers: Sequence[str]) -> Cluster | None:
        """The kept model brought up to date with the changes since the last build; None when it needs a
        full assembly (or failed: logged, and the full assembly is always right)."""
        t0 = time.perf_counter()
        delta = self.delta()
        self.view_seconds = time.perf_counter() - t0
        try:
            return self.model.advance(delta, schedulers)
        except IndexMismatch:
            raise  # CORRAL_CHECK_INDEX=1: a kept index is wrong, which the fallback must not hide
        except Exception as exc:  # noqa: BLE001 - the full assembly is always right
            self.log.error(
                "incremental model failed: assembling every object", error=f"{type(exc).__name__}: {exc}"
            )
            return None

    def _assemble(self, schedulers: Sequence[str], with_objects: bool) -> tuple[Cluster, list[dict]]:
        """Every object assembled (the snapshot loader's assembly), an object the assembly rejects left
        out (logged once), and the model adopting the result."""
        t0 = time.perf_counter()
        self.model.ready = False  # until the full assembly below is adopted
        rows = self.view()
        topo_key = self.view_topology
        self.view_seconds = time.perf_counter() - t0
        dropped: set[tuple[str, str]] = set()
        for _ in range(len(rows) + 1):
            tree = self.topology[1] if self.topology is not None and self.topology[0] == topo_key else None
            try:
                cluster = assemble_cluster(_records(rows, dropped), schedulers, tree)
            except InputError as exc:
                culprit = _culprit(exc, rows, dropped)
                if culprit is None:
                    raise
                dropped.add(culprit)
                self.log.once(
                    ("assembly", culprit),
                    "warning",
                    "object left out: the model cannot use it",
                    object=f"{culprit[0]} {culprit[1]}",
                    field=exc.field,
                    error=exc.describe(),
                )
                continue
            # the HyperNode tree is read-only in a session: reused while no Node or HyperNode changes
            self.topology = (topo_key, cluster.hypernodes)
            self.model.adopt(cluster, rows, dropped, schedulers)
            objects = (
                [raw for r, key, raw, (kind, _) in rows if (kind, key) not in dropped] if with_objects else []
            )
            return self._warned(cluster, schedulers), objects
        raise InputError("the cache cannot be assembled into a cluster")

    def _warned(self, cluster: Cluster, schedulers: Sequence[str]) -> Cluster:
        """``cluster`` with its warnings as the snapshot loader gives them (``Cluster.notes``): the
        reader's about the objects (:meth:`warnings`), then the assembly's."""
        notes = Notes()
        notes.extend(self.warnings(schedulers))
        notes.extend(cluster.notes.warnings)
        notes.expansions, notes.readings = cluster.notes.expansions, cluster.notes.readings
        cluster.notes = notes
        return cluster

    def dump(self, directory: str | Path, objects: list[dict], now: float) -> Path:
        """Write ``objects`` as a snapshot (``cluster.json``, a ``v1 List``) that ``corral schedule``
        reads; ``NOW`` holds the cycle's clock. Written to a temporary file and renamed (atomic)."""
        from corral.model.clock import format_time

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        target = d / "cluster.json"
        tmp = d / ".cluster.json.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, fh)
        os.replace(tmp, target)
        (d / "NOW").write_text(format_time(now) + "\n")
        return target


def _records(rows: list, dropped: set[tuple[str, str]]) -> dict[str, list]:
    """Kind -> records of ``rows`` but the ``dropped``; a PodGroup record gets its own annotations dict
    (the session writes annotations into the job, and the cached record outlives the cycle)."""
    records: dict[str, list] = {}
    for _r, key, _raw, (kind, rec) in rows:
        if dropped and (kind, key) in dropped:
            continue
        if kind == "PodGroup":
            copy_ = object.__new__(PodGroupRec)
            copy_.__dict__.update(rec.__dict__)
            copy_.annotations = dict(rec.annotations)
            rec = copy_
        records.setdefault(kind, []).append(rec)
    return records


def _assumed(r: ResourceType, raw: dict, a: _Assumption) -> tuple[dict, Any]:
    """``raw`` with the assumption ``a`` applied, and its record (None: gone, or unreadable)."""
    if a.patch is None:
        return raw, None
    raw = merge_patch(raw, a.patch)
    try:
        return raw, parse_object(r.name, raw)
    except InputError:
        return raw, None


def _culprit(exc: InputError, rows: list, dropped: set) -> tuple[str, str] | None:
    """The ``(kind, key)`` an assembly error names (``obj`` is ``"<Kind> <name>"``)."""
    if not exc.obj or " " not in exc.obj:
        return None
    kind, name = exc.obj.split(" ", 1)
    for _r, key, _raw, (k, _) in rows:
        if k == kind and key == name and (k, key) not in dropped:
            return (k, key)
    return None
