"""PodCountIndex: per-node counts of pods matching a predicate, kept up to date incrementally.

PodTopologySpread and InterPodAffinity need, every cycle, "how many pods matching this selector
(in these namespaces) are on each node". Scanning every pod per cycle would cost O(pods); instead
the first request for a matcher scans once and every later pod add/remove (bound, assumed,
forgotten, deleted) adjusts the counts of the live matchers. Matchers unused for a while are
evicted (LRU). Counts are numpy arrays indexed by NodeTable slot.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from pysched.framework.matchers import PodMatcher


class PodCountIndex:
    def __init__(self, cache, limit: int = 256):
        self.cache = cache
        self.limit = limit
        self._entries: OrderedDict[PodMatcher, np.ndarray] = OrderedDict()
        self.builds = 0

    def counts(self, matcher: PodMatcher) -> np.ndarray:
        """Per-slot counts (read-only view; length >= table capacity)."""
        arr = self._entries.get(matcher)
        if arr is not None:
            self._entries.move_to_end(matcher)
            return arr
        table = self.cache.table
        arr = np.zeros(table.capacity, dtype=np.int64)
        nodes = self.cache.nodes
        for pod in self.cache.pods.values():
            info = nodes.get(pod.node_name)
            if info is not None and matcher.matches(pod):
                arr[info.slot] += 1
        self.builds += 1
        self._entries[matcher] = arr
        if len(self._entries) > self.limit:
            self._entries.popitem(last=False)
        return arr

    def _ensure(self, slot: int) -> None:
        cap = self.cache.table.capacity
        for m, arr in self._entries.items():
            if len(arr) < cap:
                grown = np.zeros(cap, dtype=np.int64)
                grown[: len(arr)] = arr
                self._entries[m] = grown

    def pod_added(self, pod, slot: int) -> None:
        if not self._entries:
            return
        if slot >= len(next(iter(self._entries.values()))):
            self._ensure(slot)
        for m, arr in self._entries.items():
            if m.matches(pod):
                arr[slot] += 1

    def pod_removed(self, pod, slot: int) -> None:
        for m, arr in self._entries.items():
            if slot < len(arr) and m.matches(pod):
                arr[slot] -= 1

    def slot_cleared(self, slot: int) -> None:
        for arr in self._entries.values():
            if slot < len(arr):
                arr[slot] = 0
