"""Assembly steps for the nodes of a cluster: node rows from Node records, and the HyperNode tree
(Volcano's HyperNodes and KAI's Topology domains) over those rows.

Both are public steps of :func:`corral.manifests.build.assemble_cluster` that ``corral run``'s
incremental model (:mod:`corral.kube.model`) calls again on its own when only nodes changed, so that
the rows and tree it keeps are the ones a full assembly builds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from corral.errors import InputError
from corral.manifests.kai import topology_domains
from corral.manifests.records import HyperNodeRec, NodeRec, TopologyRec
from corral.manifests.selectors import LabelSelector
from corral.model.hypernodes import HyperNode, HyperNodeTree
from corral.model.nodes import Nodes
from corral.model.patterns import compile_name_pattern
from corral.model.quantity import MILLI, parse_quantity
from corral.model.resources import GPU, PODS, ResourceIndex

__all__ = ["GPU_MEMORY", "GPU_MEMORY_PER_DEVICE", "GPU_NUMBER", "assemble_hypernodes", "assemble_nodes"]

#: Volcano's GPU-share resources, and corral's per-device node label/annotation (gpushare).
GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
GPU_MEMORY_PER_DEVICE = "volcano.sh/gpu-memory-per-device"


def assemble_nodes(
    recs: list[NodeRec], resources: ResourceIndex, extra: dict[str, dict[str, float]] | None = None
) -> Nodes:
    """The node rows of ``recs``, in name order, over the columns of ``resources``.

    A row's allocatable is the Node's ``status.allocatable`` plus ``extra[name]`` (the resource names
    DRA devices count as, :mod:`corral.dra`); a node that does not advertise ``pods`` has no pod-count
    limit (infinity); a node that gives its GPU memory per device but no ``volcano.sh/gpu-memory``
    advertises per-device × GPU count of it (gpushare). Labels, taints, unschedulable and annotations are
    kept per row. A duplicate name is an :class:`InputError`. Depends only on its arguments: ``corral
    run`` calls it again on the same records and gets the same rows."""
    recs = sorted(recs, key=lambda r: r.name)
    seen = set()
    for r in recs:
        if r.name in seen:
            raise InputError(
                "duplicate node", file=r.file or None, obj=f"Node {r.name}", field="metadata.name"
            )
        seen.add(r.name)
    alloc = np.zeros((len(recs), len(resources)))
    pods = resources.pos(PODS)
    for i, r in enumerate(recs):
        for k, v in r.allocatable.items():
            alloc[i, resources.pos(k)] = v
        for k, v in (extra.get(r.name) or {}).items() if extra else ():  # DRA devices (corral.dra)
            alloc[i, resources.pos(k)] += v
        if PODS not in r.allocatable:
            alloc[i, pods] = np.inf
        _gpu_memory(r, resources, alloc[i])
    nodes = Nodes(
        resources,
        [r.name for r in recs],
        alloc,
        [r.labels for r in recs],
        [r.taints for r in recs],
        [r.unschedulable for r in recs],
    )
    # model.Nodes does not declare this attribute (gpushare reads it with getattr): the model's to declare
    nodes.annotations = [r.annotations for r in recs]
    return nodes


def _gpu_memory(r: NodeRec, resources: ResourceIndex, row: np.ndarray) -> None:
    """Fill ``volcano.sh/gpu-memory`` allocatable from the per-device label/annotation when absent."""
    col = resources.get(GPU_MEMORY)
    per = r.annotations.get(GPU_MEMORY_PER_DEVICE, r.labels.get(GPU_MEMORY_PER_DEVICE))
    if col is None or GPU_MEMORY in r.allocatable or not per:
        return
    count = r.allocatable.get(GPU) or r.allocatable.get(GPU_NUMBER) or 0.0
    section = "annotations" if GPU_MEMORY_PER_DEVICE in r.annotations else "labels"
    row[col] = parse_quantity(
        per, where=f"Node {r.name}", field=f"metadata.{section}.{GPU_MEMORY_PER_DEVICE}"
    ) * int(count // MILLI)


def assemble_hypernodes(
    recs: list[HyperNodeRec], nodes: Nodes, topologies: Sequence[TopologyRec] = ()
) -> HyperNodeTree:
    """Volcano's HyperNodes, resolved to masks over the rows of ``nodes``, and the domains of KAI's
    Topology objects (:func:`~corral.manifests.kai.topology_domains`) in one tree, told apart by family.

    A HyperNode's mask holds its member nodes (``exactMatch``, ``regexMatch``, ``labelMatch``; a member
    naming no node adds nothing, as in Volcano) and the masks of its member HyperNodes. A duplicate
    name, a HyperNode containing itself, a member HyperNode that does not exist or a cycle is an
    :class:`InputError` naming the HyperNode and ``spec.members``. Depends only on the records and the
    node rows, so a caller with the same nodes gets the same tree."""
    files = {r.name: r.file or None for r in recs}
    hns = _linked_hypernodes(recs, files)
    members = {r.name: r.members for r in recs}
    _resolve_masks(hns, members, files, nodes)
    if topologies:
        hns.update(topology_domains(list(topologies), nodes)[0])
    return HyperNodeTree(hns)


def _linked_hypernodes(recs: list[HyperNodeRec], files: dict[str, str | None]) -> dict[str, HyperNode]:
    """The HyperNodes of ``recs`` by name, each with its member HyperNodes as children (and their parent
    set), masks not yet resolved."""
    hns: dict[str, HyperNode] = {}
    for r in recs:
        if r.name in hns:
            raise InputError(
                "duplicate hypernode", file=r.file, obj=f"HyperNode {r.name}", field="metadata.name"
            )
        # the model keeps the members untyped (object); they are read back here from the records
        hns[r.name] = HyperNode(r.name, r.tier, list(r.members), tier_name=r.tier_name)
    members = {r.name: r.members for r in recs}
    names = sorted(hns)  # computed once: membership resolution is linear
    no_labels: dict[str, dict] = {n: {} for n in hns}
    for hn in hns.values():
        for mtype, kind, value in members[hn.name]:
            if mtype != "HyperNode":
                continue
            for child in _match_names(names, kind, value, no_labels):
                if child == hn.name:
                    raise InputError(
                        "a hypernode cannot contain itself",
                        file=files.get(hn.name),
                        obj=f"HyperNode {hn.name}",
                        field="spec.members",
                    )
                hn.children.append(child)
                hns[child].parent = hn.name
            if kind == "exact" and value not in hns:
                raise InputError(
                    f"member hypernode {value!r} does not exist",
                    file=files.get(hn.name),
                    obj=f"HyperNode {hn.name}",
                    field="spec.members",
                )
    return hns


def _resolve_masks(
    hns: dict[str, HyperNode], members: dict[str, list], files: dict[str, str | None], nodes: Nodes
) -> None:
    """Set every HyperNode's mask: its member nodes and its children's masks, depth first by name; a
    cycle is an error naming it."""
    state: dict[str, int] = {}

    def resolve(name: str, path: list[str]) -> np.ndarray:
        hn = hns[name]
        if state.get(name) == 2:
            return hn.mask
        if state.get(name) == 1:
            cycle = " -> ".join(path[path.index(name) :] + [name])
            raise InputError(
                f"hypernode cycle: {cycle}",
                file=files.get(name),
                obj=f"HyperNode {name}",
                field="spec.members",
            )
        state[name] = 1
        mask = _member_nodes(members[name], nodes)
        for child in hn.children:
            mask |= resolve(child, path + [name])
        hn.mask = mask
        state[name] = 2
        return mask

    for name in sorted(hns):
        resolve(name, [])


def _member_nodes(members: list, nodes: Nodes) -> np.ndarray:
    """The mask of the node rows a HyperNode's ``Node`` members select."""
    mask = np.zeros(len(nodes), dtype=bool)
    for mtype, kind, value in members:
        if mtype == "Node":
            if isinstance(value, LabelSelector):  # labelMatch: through the nodes' label index
                mask |= nodes.selector_mask(value.requirements)  # (one pass per label key)
            elif kind == "exact":
                i = nodes.index.get(value)
                if i is not None:
                    mask[i] = True
            else:  # regexMatch
                mask |= nodes.regex_mask(value)
    return mask


def _match_names(
    names: list[str], kind: str, value: str | LabelSelector, labels: dict[str, dict]
) -> list[str]:
    if isinstance(value, LabelSelector):  # labelMatch
        return [n for n in names if value.matches(labels[n])]
    if kind == "exact":
        return [value] if value in labels else []
    matches = compile_name_pattern(value)  # regexMatch; RE2: linear time (corral.model.patterns)
    return [n for n in names if matches(n)]
