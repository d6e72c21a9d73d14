"""TermIndex: per-node counts of the existing pods that declare each distinct affinity term.

InterPodAffinity must ask, every cycle, which existing pods' required anti-affinity terms (and,
for scoring, required affinity and preferred terms) match the incoming pod. Walking every such
pod costs O(pods) per cycle - a Deployment of 1,000 replicas with anti-affinity means 1,000
matches per cycle. Pods of one workload declare identical terms, so the cache keeps, per distinct
term, how many pods on each NodeTable slot declare it: the plugin then evaluates each distinct term
once and turns its per-slot counts into topology-domain counts with one ``bincount``.
Counts change incrementally as pods are added, assumed, forgotten, bound and removed.

Given the incoming pod's labels, only the terms that could match them are evaluated: each term is
filed under the label pairs one of which a matching pod must carry (``selector_anchors``: the
values of its narrowest ``In`` requirement, matchLabels included), and terms without such a pair
(Exists, NotIn, an empty selector) are always evaluated. With 2,500 groups each declaring its own
anti-affinity term, a pod evaluates its group's term instead of all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from pysched.apis.core.model import LabelSelector
from pysched.framework.affinity import AffinityTerm


def selector_anchors(selector: LabelSelector | None) -> frozenset[tuple[str, str]] | None:
    """Label pairs one of which every pod ``selector`` matches carries (the values of its ``In``
    requirement with the fewest values), or None when it has no ``In`` requirement (any pod may
    match, or - a nil selector - none: the caller must look)."""
    if selector is None:
        return None
    best = None
    for r in selector.requirements:
        if r.operator == "In" and (best is None or len(r.values) < len(best.values)):
            best = r
    if best is None:
        return None
    return frozenset((best.key, v) for v in best.values)


class AnchoredKeys:
    """Keys (terms, pod matchers) filed by the label pairs one of which every pod a key matches
    carries (``anchors_of(key)``, as ``selector_anchors`` computes them); a key without such pairs
    is a candidate for every pod. ``candidates(labels)`` gives them in the order they were added."""

    __slots__ = ("_anchors_of", "_anchored", "_scan", "_seq", "_next")

    def __init__(self, anchors_of: Callable[[Any], frozenset[tuple[str, str]] | None]) -> None:
        self._anchors_of = anchors_of
        self._anchored: dict[tuple[str, str], dict[Any, None]] = {}
        self._scan: dict[Any, None] = {}
        self._seq: dict[Any, int] = {}
        self._next = 0

    def add(self, key) -> None:
        self._seq[key] = self._next
        self._next += 1
        anchors = self._anchors_of(key)
        if anchors is None:
            self._scan[key] = None
            return
        for pair in anchors:
            self._anchored.setdefault(pair, {})[key] = None

    def discard(self, key) -> None:
        self._seq.pop(key, None)
        anchors = self._anchors_of(key)
        if anchors is None:
            self._scan.pop(key, None)
            return
        for pair in anchors:
            keys = self._anchored.get(pair)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._anchored[pair]

    def candidates(self, labels: Mapping[str, str]) -> list:
        """The keys that could match a pod with ``labels``, in the order they were added."""
        found: dict[Any, None] = dict(self._scan)
        anchored = self._anchored
        for pair in labels.items():
            keys = anchored.get(pair)
            if keys:
                found.update(keys)
        seq = self._seq
        return sorted(found, key=seq.__getitem__)


class _Counts:
    """Per key, how many counted pods declare it on each NodeTable slot - sparse (slot -> count):
    a term is usually declared by a few pods on a few nodes, and a dense array per term cost
    8 bytes x nodes each (3,750 terms at 5,000 nodes: 150 MB) - with the total per key (empty keys
    are dropped), and the keys filed by the label pairs their term's selector requires (``keys``)."""

    __slots__ = ("slots", "totals", "keys")

    def __init__(self, term_of: Callable[[Any], AffinityTerm]) -> None:
        self.slots: dict[Any, dict[int, int]] = {}
        self.totals: dict[Any, int] = {}
        self.keys = AnchoredKeys(lambda key: selector_anchors(term_of(key).selector))

    def add(self, key, slot: int, delta: int) -> None:
        per = self.slots.get(key)
        if per is None:
            if delta < 0:
                return
            per = self.slots[key] = {}
            self.keys.add(key)
        count = per.get(slot, 0) + delta
        if count > 0:
            per[slot] = count
        else:
            per.pop(slot, None)
        total = self.totals.get(key, 0) + delta
        if total <= 0:
            del self.slots[key]
            self.totals.pop(key, None)
            self.keys.discard(key)
        else:
            self.totals[key] = total

    def items(self):
        return self.slots.items()

    def __len__(self) -> int:
        return len(self.slots)


class TermIndex:
    def __init__(self, table) -> None:
        self.table = table
        self.required_anti = _Counts(_itself)         # AffinityTerm -> per-slot pods declaring it
        self.required_affinity = _Counts(_itself)     # AffinityTerm -> per-slot pods declaring it
        self.preferred = _Counts(_first)              # (AffinityTerm, signed weight) -> per-slot pods

    def _apply(self, pod, slot: int, delta: int) -> None:
        terms = pod.affinity_terms
        if not terms.any:
            return
        for t in terms.required_anti_affinity:
            self.required_anti.add(t, slot, delta)
        for t in terms.required_affinity:
            self.required_affinity.add(t, slot, delta)
        for wt in terms.preferred_affinity:
            self.preferred.add((wt.term, wt.weight), slot, delta)
        for wt in terms.preferred_anti_affinity:
            self.preferred.add((wt.term, -wt.weight), slot, delta)

    def pod_added(self, pod, slot: int) -> None:
        self._apply(pod, slot, 1)

    def pod_removed(self, pod, slot: int) -> None:
        self._apply(pod, slot, -1)

    def term_domains(self, kind: str, accept: Callable[[AffinityTerm], bool],
                     labels: Mapping[str, str] | None = None) -> list[tuple[AffinityTerm, int, np.ndarray]]:
        """``Handle.existing_term_domains``: (term, weight, pods declaring it per domain code) for
        each distinct term of ``kind`` that ``accept`` admits and some counted pod's node labels;
        with ``labels``, only terms whose selector could match them are offered to ``accept``."""
        counts = {"preferred": self.preferred, "requiredAntiAffinity": self.required_anti,
                  "requiredAffinity": self.required_affinity}.get(kind)
        if counts is None:
            raise ValueError(f"unknown affinity term kind {kind!r}")
        keys: Iterable = counts.slots if labels is None else counts.keys.candidates(labels)
        slots = counts.slots
        if kind == "preferred":
            weighted = [(k[0], k[1], slots[k]) for k in keys]
        else:
            weighted = [(k, 1, slots[k]) for k in keys]
        out = []
        for t, w, per_slot in weighted:
            if not accept(t):
                continue
            dom = domain_counts(self.table, t, per_slot)
            if dom is not None:
                out.append((t, w, dom))
        return out


def _itself(key):
    return key


def _first(key):
    return key[0]


def domain_counts(table, term: AffinityTerm, per_slot: dict[int, int]) -> np.ndarray | None:
    """Pods per domain code of ``term.topology_key`` (None when no counted pod has the key)."""
    if not per_slot:
        return None
    col = table.label_column(term.topology_key)
    slots = np.fromiter(per_slot.keys(), dtype=np.int64, count=len(per_slot))
    counts = np.fromiter(per_slot.values(), dtype=np.int64, count=len(per_slot))
    inside = slots < len(col.codes)
    codes = col.codes[slots[inside]]
    has = codes >= 0
    if not has.any():
        return None
    return np.bincount(codes[has], weights=counts[inside][has], minlength=len(col.values)).astype(np.int64)
