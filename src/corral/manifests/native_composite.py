"""Composite pod groups (``scheduling.k8s.io/v1alpha3`` ``CompositePodGroup``, Kubernetes 1.37, feature
gate ``CompositePodGroup``) onto corral's sub-group gangs (:mod:`corral.model.subgroups`).

A ``CompositePodGroup`` groups PodGroups (``spec.parentCompositePodGroupName``) and other composites into
a tree (at most 4 levels, kube-scheduler's limit); a gang composite is admitted only when at least
``schedulingPolicy.gang.minGroupCount`` of its child groups can be scheduled at once, each child to its
own minimum (a PodGroup: its ``minCount``; a composite: its ``minGroupCount``). That is KAI's sub-group
tree, so corral reads it as one: the root composite is one job (``<ns>/<root>``), every PodGroup under it
a leaf sub-group with its ``minCount`` (its pods take the PodGroup's name as their role), every composite
under it a set with its ``minGroupCount``, and each ``schedulingConstraints.topology[].key`` the
constraint of its sub-group (every pod below in one domain of that node label).

Decisions:
- a ``basic`` composite ("the groups of this composite group should be scheduled independently") and a
  composite with ``disruptionMode`` ``all`` are refused by name: corral would admit or evict them as a
  gang, which they are not;
- a composite or PodGroup naming a parent that does not exist, a parent cycle or a tree deeper than 4
  levels leave the job unschedulable with that reason (kube-scheduler keeps such groups waiting and
  marks the layout invalid);
- the job's queue, priority and ``preemptionPolicy`` are the root composite's (kube-scheduler needs one
  priority across the tree); a PodGroup of the tree that gives its own is warned about (not used);
- a PodGroup of the tree with ``spec.resourceClaims`` shares its claims among its own pods, as a
  PodGroup of its own (:mod:`corral.dra.pods`), and one with ``disruptionMode`` ``all`` is refused
  unless its minimum is every pod of it, as a PodGroup of its own;
- kube-scheduler writes its conditions on the leaf PodGroups (the root's status stays empty in 1.37):
  so does corral (:mod:`corral.kube.native_status`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from corral.errors import InputError
from corral.manifests.fields import Obj
from corral.manifests.native import (
    NativeGroup,
    _policy,
    _queue,
    _queue_keys,
    _topology_key,
    unique_by_name,
)
from corral.manifests.records import PodGroupRec

__all__ = ["MAX_DEPTH", "CompositeRec", "CompositeTree", "assemble_composites", "parse_composite"]

MAX_DEPTH = 4  # kube-scheduler's limit on a composite tree's levels


@dataclass
class CompositeRec:
    name: str
    namespace: str
    api: str
    parent: str
    min_groups: int
    topology_key: str
    priority: int | None
    priority_class: str
    preempt_never: bool
    labels: dict[str, str]
    annotations: dict[str, str]
    creation: float
    file: str = ""


@dataclass
class CompositeTree:
    """The sub-groups of one root composite: name -> (parent, "set" or "leaf", minimum, topology key);
    parent "" is the root; the leaves' own groups (for their conditions), by name."""

    root_min: int
    nodes: dict[str, tuple[str, str, int, str]] = field(default_factory=dict)
    leaves: dict[str, NativeGroup] = field(default_factory=dict)
    #: what the tree's PodGroups give that the tree does not use, as (object, message): warnings of the
    #: cluster (``corral validate`` prints them)
    notes: list[tuple[str, str]] = field(default_factory=list)


def parse_composite(o: Obj, api: str) -> CompositeRec:
    spec = o.section("spec")
    if spec.get("schedulingPolicy") is None:
        raise o.error("a CompositePodGroup needs schedulingPolicy (gang or basic)", "spec.schedulingPolicy")
    minimum, gang = _policy(o, spec["schedulingPolicy"], "spec.schedulingPolicy", "minGroupCount")
    if not gang:
        raise o.error(
            "a basic composite schedules its groups independently, which corral does not model: it would "
            "admit them as one gang; use a gang policy or drop the composite",
            "spec.schedulingPolicy.basic",
        )
    mode = o.mapping(spec.get("disruptionMode"), "spec.disruptionMode")
    if mode.get("all") is not None:
        raise o.error(
            "disruptionMode all: corral evicts a composite's groups one by one, keeping its gang; use "
            "disruptionMode single",
            "spec.disruptionMode.all",
        )
    policy = o.string(spec.get("preemptionPolicy"), "spec.preemptionPolicy")
    if policy not in ("", "Never", "PreemptLowerPriority"):
        raise o.error(
            f"unknown preemptionPolicy {policy!r} (allowed: Never, PreemptLowerPriority)",
            "spec.preemptionPolicy",
        )
    labels, annotations = _queue_keys(o)
    creation = o.meta.get("creationTimestamp")
    return CompositeRec(
        name=o.name,
        namespace=o.namespace,
        api=api,
        parent=o.string(spec.get("parentCompositePodGroupName"), "spec.parentCompositePodGroupName"),
        min_groups=minimum,
        topology_key=_topology_key(o, spec.get("schedulingConstraints"), "spec.schedulingConstraints"),
        priority=o.integer(spec["priority"], "spec.priority") if spec.get("priority") is not None else None,
        priority_class=o.string(spec.get("priorityClassName"), "spec.priorityClassName"),
        preempt_never=policy == "Never",
        labels=labels,
        annotations=annotations,
        creation=o.time(creation, "metadata.creationTimestamp") if creation else 0.0,
        file=o.file,
    )


def _root_of(c: CompositeRec, by_key: dict[tuple[str, str], CompositeRec]) -> tuple[CompositeRec, str, int]:
    """``(root, problem, depth)`` of composite ``c``: the top of its parent chain, why the layout is
    invalid ("" when it is not), and how many levels it spans."""
    chain = [c.name]
    cur = c
    while cur.parent:
        parent = by_key.get((cur.namespace, cur.parent))
        if parent is None:
            return cur, f"composite pod group {cur.namespace}/{cur.parent} does not exist", len(chain)
        if parent.name in chain:
            return parent, f"composite pod group cycle: {' -> '.join([*chain, parent.name])}", len(chain)
        chain.append(parent.name)
        cur = parent
    return cur, "", len(chain)


def assemble_composites(composites: list[CompositeRec], groups: list[PodGroupRec]) -> list[PodGroupRec]:
    """``groups`` with the PodGroups under composites replaced by one record per root composite (its
    :class:`CompositeTree` in ``native.composite``)."""
    by_key = unique_by_name(composites, "composite pod group", "CompositePodGroup")
    roots: dict[tuple[str, str], PodGroupRec] = {}
    problems: dict[tuple[str, str], str] = {}

    def root_record(c: CompositeRec) -> tuple[PodGroupRec, CompositeTree]:
        root, problem, depth = _root_of(c, by_key)
        key = (root.namespace, root.name)
        if key not in roots:
            roots[key] = _root_group(root)
        if problem or depth > MAX_DEPTH:
            problems.setdefault(key, problem or f"composite pod group tree deeper than {MAX_DEPTH} levels")
        rec = roots[key]
        return rec, rec.native.composite

    for c in sorted(composites, key=lambda c: (c.namespace, c.name)):
        rec, tree = root_record(c)
        if c.name != rec.name:
            parent = "" if c.parent == rec.name else c.parent
            tree.nodes[c.name] = (parent, "set", c.min_groups, c.topology_key)
    out: list[PodGroupRec] = []
    for g in groups:
        parent = g.native.parent if g.native is not None else ""
        if not parent:
            out.append(g)
            continue
        owner = by_key.get((g.namespace, parent))
        if owner is None:
            problem = f"composite pod group {g.namespace}/{parent} does not exist"
            out.append(replace(g, invalid=g.invalid or problem))  # a copy: the record outlives the build
            continue
        _join_leaf(g, parent, *root_record(owner))
    for key, rec in roots.items():
        _finish_root(rec, problems.get(key, ""))
    return out + sorted(roots.values(), key=lambda r: (r.namespace, r.name))


def _root_group(root: CompositeRec) -> PodGroupRec:
    """The one PodGroup record that stands for the tree of root composite ``root``."""
    native = NativeGroup(
        root.api,
        topology_key=root.topology_key,
        preempt_never=root.preempt_never,
        priority=root.priority,
        file=root.file,
    )
    native.composite = CompositeTree(root.min_groups)
    return PodGroupRec(
        name=root.name,
        namespace=root.namespace,
        min_member=1,
        min_task_member={},
        min_resources=None,
        queue=_queue(root.labels, root.annotations),
        priority_class=root.priority_class,
        topology_mode="",
        topology_tier=None,
        phase="Pending",
        creation=root.creation,
        annotations=dict(root.annotations),
        labels=dict(root.labels),
        file=root.file,
        native=native,
    )


def _join_leaf(g: PodGroupRec, parent: str, rec: PodGroupRec, tree: CompositeTree) -> None:
    """Put PodGroup ``g`` (under composite ``parent``) as a leaf of the tree ``rec`` stands for: a name
    the tree holds already is an error; a priority or preemption policy of its own is noted as unused
    (the tree takes its root's); the earliest creation time of the tree is the root record's."""
    assert g.native is not None  # a PodGroup under a composite is a native one
    if g.name in tree.nodes or g.name == rec.name:
        raise InputError(
            f"a PodGroup and a CompositePodGroup of one tree are both named {g.name!r}; rename one",
            file=g.file or None,
            obj=f"PodGroup {g.namespace}/{g.name}",
            field="metadata.name",
        )
    tree.nodes[g.name] = (
        "" if parent == rec.name else parent,
        "leaf",
        g.min_member,
        g.native.topology_key,
    )
    tree.leaves[g.name] = g.native
    unused = [
        f
        for f, given in (
            ("spec.priority", g.native.priority is not None),
            ("spec.priorityClassName", bool(g.priority_class)),
            ("spec.preemptionPolicy", g.native.preempt_never),
        )
        if given
    ]
    if unused:
        tree.notes.append(
            (
                f"PodGroup {g.namespace}/{g.name}",
                f"{', '.join(unused)} not used: the tree of composite "
                f"{rec.namespace}/{rec.name} takes its root's priority and preemption policy",
            )
        )
    if g.creation and (not rec.creation or g.creation < rec.creation):
        rec.creation = min(rec.creation or g.creation, g.creation)


def _finish_root(rec: PodGroupRec, problem: str) -> None:
    """A root record's validity and phase once every leaf joined: Running when every leaf is scheduled."""
    rec.invalid = problem
    tree = rec.native.composite
    scheduled = [n.condition and n.conditions.get(n.condition) == "True" for n in tree.leaves.values()]
    rec.phase = "Running" if scheduled and all(scheduled) else "Pending"
    if not tree.leaves and not rec.invalid:
        rec.invalid = "the composite pod group has no PodGroup under it"
