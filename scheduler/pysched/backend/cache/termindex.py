"""TermIndex: per-node counts of the existing pods that declare each distinct affinity term.

InterPodAffinity must ask, every cycle, which existing pods' required anti-affinity terms (and,
for scoring, required affinity and preferred terms) match the incoming pod. Walking every such
pod costs O(pods) per cycle - a Deployment of 1,000 replicas with anti-affinity means 1,000
matches per cycle. Pods of one workload declare identical terms, so the cache keeps, per distinct
term, how many pods on each NodeTable slot declare it: the plugin then evaluates each distinct term
once and turns its per-slot counts into topology-domain counts with one ``bincount``.
Counts change incrementally as pods are added, assumed, forgotten, bound and removed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pysched.framework.affinity import AffinityTerm


class _Counts:
    """Per-slot int64 counts for each key, with the total per key (empty keys are dropped)."""

    __slots__ = ("arrays", "totals")

    def __init__(self) -> None:
        self.arrays: dict[object, np.ndarray] = {}
        self.totals: dict[object, int] = {}

    def add(self, key, slot: int, delta: int, capacity: int) -> None:
        arr = self.arrays.get(key)
        if arr is None:
            if delta < 0:
                return
            arr = self.arrays[key] = np.zeros(max(capacity, slot + 1), dtype=np.int64)
        elif slot >= len(arr):
            grown = np.zeros(max(capacity, slot + 1), dtype=np.int64)
            grown[: len(arr)] = arr
            arr = self.arrays[key] = grown
        arr[slot] += delta
        total = self.totals.get(key, 0) + delta
        if total <= 0:
            del self.arrays[key]
            self.totals.pop(key, None)
        else:
            self.totals[key] = total

    def items(self):
        return self.arrays.items()

    def __len__(self) -> int:
        return len(self.arrays)


class TermIndex:
    def __init__(self, table) -> None:
        self.table = table
        self.required_anti = _Counts()      # AffinityTerm -> per-slot pods declaring it
        self.required_affinity = _Counts()  # AffinityTerm -> per-slot pods declaring it
        self.preferred = _Counts()          # (AffinityTerm, signed weight) -> per-slot pods

    def _apply(self, pod, slot: int, delta: int) -> None:
        terms = pod.affinity_terms
        if not terms.any:
            return
        cap = self.table.capacity
        for t in terms.required_anti_affinity:
            self.required_anti.add(t, slot, delta, cap)
        for t in terms.required_affinity:
            self.required_affinity.add(t, slot, delta, cap)
        for wt in terms.preferred_affinity:
            self.preferred.add((wt.term, wt.weight), slot, delta, cap)
        for wt in terms.preferred_anti_affinity:
            self.preferred.add((wt.term, -wt.weight), slot, delta, cap)

    def pod_added(self, pod, slot: int) -> None:
        self._apply(pod, slot, 1)

    def pod_removed(self, pod, slot: int) -> None:
        self._apply(pod, slot, -1)

    def term_domains(self, kind: str,
                     accept: Callable[[AffinityTerm], bool]) -> list[tuple[AffinityTerm, int, np.ndarray]]:
        """``Handle.existing_term_domains``: (term, weight, pods declaring it per domain code) for
        each distinct term of ``kind`` that ``accept`` admits and some counted pod's node labels."""
        if kind == "preferred":
            weighted = [(t, w, per_slot) for (t, w), per_slot in self.preferred.items()]
        elif kind == "requiredAntiAffinity":
            weighted = [(t, 1, per_slot) for t, per_slot in self.required_anti.items()]
        elif kind == "requiredAffinity":
            weighted = [(t, 1, per_slot) for t, per_slot in self.required_affinity.items()]
        else:
            raise ValueError(f"unknown affinity term kind {kind!r}")
        out = []
        for t, w, per_slot in weighted:
            if not accept(t):
                continue
            dom = domain_counts(self.table, t, per_slot)
            if dom is not None:
                out.append((t, w, dom))
        return out


def domain_counts(table, term: AffinityTerm, per_slot: np.ndarray) -> np.ndarray | None:
    """Pods per domain code of ``term.topology_key`` (None when no counted pod has the key)."""
    col = table.label_column(term.topology_key)
    n = min(len(per_slot), len(col.codes))
    codes = col.codes[:n]
    counts = per_slot[:n]
    has = (codes >= 0) & (counts > 0)
    if not has.any():
        return None
    return np.bincount(codes[has], weights=counts[has], minlength=len(col.values)).astype(np.int64)
