"""The domains of each topology level over a placement's nodes, and which of them may hold a pod
group, best fit first - numpy over the batch, once per cycle, no per-node Python.

A domain of level ``i`` is the nodes sharing the values of levels ``0..i`` (outermost first): as
Kueue reads a topology, a rack label ``r1`` in block ``b1`` and ``r1`` in block ``b2`` are two
racks. A node missing one of those labels is in no domain of level ``i`` (nor below).

A domain's room for the group (``Demand``), from each node's free capacity (allocatable minus the
requests of the pods on it, bound or assumed) for the resources the members request:

* ``free``: the free capacity summed over the domain, per resource;
* ``slots``: how many members it could hold, node by node: on each node the number of the
  smallest member that fits (``min`` over the resources of ``free // request``, and the free pod
  slots), summed. Both are upper bounds: a domain below either cannot hold the group and is left
  out without being simulated (pruning); a domain that passes may still fail (a filter, a taint,
  the members' different sizes), which the simulation decides.

Best fit: a domain that can hold every member comes before one that can hold only ``minCount``;
among the former the one with the fewest slots left over after the group (the group fragments it
least), then the least free capacity left over (summed over the resources, each in units of the
group's request), then the domain's name; among the latter the one with the most slots first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pysched.framework import NodeBatch, PodInfo

POD_SLOTS = "pods"


@dataclass
class Demand:
    """What the members of this cycle ask for: per resource (``resources``) the ``total`` over all
    of them, the ``least`` total of any ``minimum`` of them, and the ``smallest`` single request;
    ``count`` members, of which the group needs ``minimum``."""

    resources: tuple[str, ...]
    total: np.ndarray
    least: np.ndarray
    smallest: np.ndarray
    count: int
    minimum: int


def demand_of(members: Sequence[PodInfo], minimum: int) -> Demand:
    names = sorted({r for p in members for r, q in p.requests.items() if q > 0 and r != POD_SLOTS})
    req = np.array([[p.requests.get(r, 0) for r in names] for p in members], dtype=np.int64).reshape(
        len(members), len(names))
    minimum = max(0, min(minimum, len(members)))
    ordered = np.sort(req, axis=0)
    return Demand(tuple(names), req.sum(axis=0), ordered[:minimum].sum(axis=0),
                  ordered[0] if len(members) else np.zeros(len(names), dtype=np.int64), len(members), minimum)


@dataclass
class Room:
    """Per node of the batch: ``free`` capacity (nodes x the demand's resources) and ``slots``."""

    free: np.ndarray
    slots: np.ndarray


def room_of(nodes: NodeBatch, demand: Demand) -> Room:
    n = len(nodes)
    pods_free = np.maximum(nodes.allocatable(POD_SLOTS) - nodes.pod_count(), 0)
    slots = pods_free.copy()
    free = np.zeros((n, len(demand.resources)), dtype=np.int64)
    for j, r in enumerate(demand.resources):
        alloc = nodes.allocatable(r)
        if not alloc.any():
            # No node of the placement has it (a DRA-backed extended resource): not judged here.
            demand.total[j] = demand.least[j] = 0
            continue
        free[:, j] = np.maximum(alloc - nodes.requested(r), 0)
        if demand.smallest[j] > 0:
            slots = np.minimum(slots, free[:, j] // demand.smallest[j])
    return Room(free, slots)


class Levels:
    """Each level's domain id per node of ``nodes`` (-1: in no domain of that level)."""

    def __init__(self, nodes: NodeBatch, keys: Sequence[str]):
        self.keys = tuple(keys)
        self.values = [nodes.label(k) for k in self.keys]
        n = len(nodes)
        self.ids: list[np.ndarray] = []
        self.counts: list[int] = []
        prev = np.zeros(n, dtype=np.int64)
        valid = np.ones(n, dtype=bool)
        for lv in self.values:
            codes = lv.codes.astype(np.int64)
            valid = valid & (codes >= 0)
            combined = prev * (len(lv.vocabulary) + 1) + codes + 1
            uniq, inverse = np.unique(combined[valid], return_inverse=True)
            ids = np.full(n, -1, dtype=np.int64)
            ids[valid] = inverse
            self.ids.append(ids)
            self.counts.append(len(uniq))
            prev = np.where(valid, ids, 0)

    def name(self, level: int, node_index: int) -> str:
        """The domain of ``level`` holding the batch's ``node_index``: its values joined by "/"."""
        return "/".join(str(self.values[j].value_of(int(self.values[j].codes[node_index])))
                        for j in range(level + 1))


@dataclass
class Domain:
    name: str
    id: int
    whole: bool   # may hold every member (else only the group's minimum)


def best_domains(levels: Levels, level: int, room: Room, demand: Demand, *, whole_only: bool,
                 pinned: str | None, limit: int) -> list[Domain]:
    """The domains of ``level`` that may hold the group - every member, or (``whole_only`` False)
    at least its minimum - best fit first, at most ``limit``; only ``pinned`` when it is set."""
    ids = levels.ids[level]
    size = levels.counts[level]
    keep = ids >= 0
    slots = np.bincount(ids[keep], weights=room.slots[keep], minlength=size).astype(np.int64)
    free = np.zeros((size, len(demand.resources)), dtype=np.int64)
    for j in range(len(demand.resources)):
        free[:, j] = np.bincount(ids[keep], weights=room.free[keep, j], minlength=size).astype(np.int64)
    whole = (slots >= demand.count) & (free >= demand.total).all(axis=1)
    fits = whole if whole_only else whole | ((slots >= demand.minimum) & (free >= demand.least).all(axis=1))
    candidates = np.flatnonzero(fits)
    if not len(candidates):
        return []
    first_node = _first_nodes(ids, size)
    scale = np.maximum(demand.total, 1).astype(np.float64)
    leftover = ((free - demand.total) / scale).sum(axis=1)
    ranked = []
    for d in candidates.tolist():
        name = levels.name(level, int(first_node[d]))
        if pinned is not None and name != pinned:
            continue
        key = ((0, int(slots[d]) - demand.count, float(leftover[d])) if whole[d]
               else (1, -int(slots[d]), -float(leftover[d])))
        ranked.append((key, name, d))
    ranked.sort()
    return [Domain(name, d, key[0] == 0) for key, name, d in ranked[:limit]]


def roomiest_domain(levels: Levels, level: int, room: Room, pinned: str | None) -> Domain | None:
    """The domain of ``level`` with the most slots (then name), pinned or not: the one a group that
    fits nowhere is tried in, so that it fails with the filters' own reasons."""
    ids = levels.ids[level]
    keep = ids >= 0
    size = levels.counts[level]
    slots = np.bincount(ids[keep], weights=room.slots[keep], minlength=size)
    first_node = _first_nodes(ids, size)
    ranked = sorted((-float(slots[d]), levels.name(level, int(first_node[d])), d) for d in range(size))
    for _, name, d in ranked:
        if pinned is None or name == pinned:
            return Domain(name, d, False)
    return None


def _first_nodes(ids: np.ndarray, size: int) -> np.ndarray:
    """Per domain id (0..size-1), the index of its first node in the batch."""
    where = np.flatnonzero(ids >= 0)
    uniq, first = np.unique(ids[where], return_index=True)
    out = np.full(size, -1, dtype=np.int64)
    out[uniq] = where[first]
    return out
