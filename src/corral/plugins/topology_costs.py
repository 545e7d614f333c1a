"""The eviction cost of entering HyperNodes (``network-topology-aware``'s ``entry_costs`` for the gang
eviction actions), vectorised over every domain at once; split from :mod:`network_topology`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from corral.model.resources import EPS

__all__ = ["Victims", "entry_costs"]


@dataclass
class Victims:
    """The pods that might give way, as arrays (:meth:`NetworkTopologyPlugin._victims`)."""

    rows: np.ndarray  # per pod: its node
    owner: np.ndarray  # per pod: its job's index
    req: np.ndarray  # per pod: its request in the columns asked
    work: np.ndarray  # per pod: its work
    held: np.ndarray  # per job: all the work it holds
    surplus: np.ndarray  # per job: ready pods above minMember (negative: broken)


def entry_costs(
    masks: np.ndarray,
    lack: np.ndarray,
    rows: np.ndarray,
    owner: np.ndarray,
    req: np.ndarray,
    work: np.ndarray,
    held: np.ndarray,
    surplus: np.ndarray,
    want: np.ndarray,
) -> list[float]:
    """Every domain's entry cost (:meth:`NetworkTopologyPlugin.entry_costs`) at once. ``masks``: one
    node mask per domain; ``lack``: what each domain lacks; ``rows``/``owner``/``req``/``work``: per
    candidate pod its node, job index, request in the needed columns and work in units of the need;
    ``held``/``surplus``: per job. The pods of each (domain, job) pair are summed; each domain's groups
    are sorted (surplus before core, then the most of the need freed per unit of cost, then the job)
    and taken until they cover what the domain lacks — all domains in one sort, cut per domain."""
    n_jobs, n_cols = len(held), len(want)
    out = np.where(np.all(lack <= EPS, axis=1), 0.0, np.inf)
    short = np.flatnonzero(out > 0)
    if not short.size or not rows.size:
        return out.tolist()
    dom, pod = np.nonzero(masks[short][:, rows])
    if not dom.size:
        return out.tolist()
    keys, slot = np.unique(dom * n_jobs + owner[pod], return_inverse=True)
    g_dom, g_job = keys // n_jobs, keys % n_jobs
    m = len(keys)
    local = np.stack([np.bincount(slot, weights=req[pod, c], minlength=m) for c in range(n_cols)], axis=1)
    count = np.bincount(slot, minlength=m)
    spare = surplus[g_job]
    # as the bundles count (seed 000 cost model): a job's surplus pods (all of them when it is broken)
    # cost nothing, the rest costs everything the job holds
    share = np.where(spare < 0, 1.0, np.minimum(count, np.maximum(spare, 0)) / np.maximum(count, 1))
    frees = np.concatenate([local * share[:, None], local * (1 - share)[:, None]])
    spend = np.concatenate([np.zeros(m), np.where(share < 1, held[g_job], 0.0)])
    kind = np.repeat([0, 1], m)
    dom2, job2 = np.concatenate([g_dom, g_dom]), np.concatenate([g_job, g_job])
    use = np.flatnonzero(np.any(frees > EPS, axis=1))
    gain = (np.minimum(frees[use], want) / want).sum(axis=1)
    roi = np.where(spend[use] > 0, gain / np.where(spend[use] > 0, spend[use], 1.0), np.inf)
    order = use[np.lexsort((job2[use], -roi, kind[use], dom2[use]))]
    seg = dom2[order]
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    # cumulative sums within each domain's run: the running total minus what came before the run
    run = np.cumsum(frees[order], axis=0)
    before = np.vstack([np.zeros((1, n_cols)), run])[starts]
    base = np.repeat(before, np.diff(np.r_[starts, len(order)]), axis=0)
    covered = np.all(run - base >= lack[short][seg] - EPS, axis=1)
    hit = np.flatnonzero(covered)
    first_d, first_at = np.unique(seg[hit], return_index=True)
    cut = dict(zip(first_d.tolist(), hit[first_at].tolist()))
    spent = spend[order]
    for i in starts.tolist():
        end = cut.get(int(seg[i]))
        if end is not None:
            out[short[seg[i]]] = float(np.cumsum(spent[i : end + 1])[-1])
    return out.tolist()
