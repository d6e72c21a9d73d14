"""PodCountIndex: per-node counts of pods matching a predicate, kept up to date incrementally.

PodTopologySpread and InterPodAffinity need, every cycle, "how many pods matching this selector
(in these namespaces) are on each node". Scanning every pod per cycle would cost O(pods); instead
the first request for a matcher scans once and every later pod add/remove (bound, assumed,
forgotten, deleted) adjusts the counts of the live matchers. Matchers unused for a while are
evicted (LRU). Counts are numpy arrays indexed by NodeTable slot.

That first scan looks only at the pods carrying one of the label pairs the matcher requires (the
index keeps the counted pods by label pair; ``termindex.selector_anchors`` picks the pairs), so a
pod whose anti-affinity names its own group of four costs four checks, not one per pod in the
cluster. A matcher with no ``In`` requirement scans every pod. The live matchers are filed the same
way, so a pod added or removed is checked only against the matchers it could match.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from pysched.backend.cache.termindex import AnchoredKeys, selector_anchors
from pysched.framework.matchers import PodMatcher

if TYPE_CHECKING:
    from pysched.framework.podinfo import PodInfo


class PodCountIndex:
    def __init__(self, cache, limit: int = 256):
        self.cache = cache
        self.limit = limit
        self._entries: OrderedDict[PodMatcher, np.ndarray] = OrderedDict()
        self.builds = 0
        # (label key, value) -> {uid: pod} for the pods counted on a node. An entry can outlive its
        # pod (a node deleted with its pods): ``_candidates`` checks each against the cache and
        # drops the stale ones.
        self._by_label: dict[tuple[str, str], dict[str, PodInfo]] = {}
        # The live matchers, filed by the label pairs one of which a pod they match carries.
        self._live = AnchoredKeys(self._anchors)

    @staticmethod
    def _anchors(matcher: PodMatcher) -> frozenset[tuple[str, str]] | None:
        best = None
        for t in matcher.terms:
            anchors = selector_anchors(t.selector)
            if anchors is not None and (best is None or len(anchors) < len(best)):
                best = anchors
        return best

    def _candidates(self, matcher: PodMatcher) -> list[PodInfo]:
        """The cache's pods that could match ``matcher``: those with one of the label pairs its
        narrowest anchored term requires, or every pod."""
        best = None
        for t in matcher.terms:
            anchors = selector_anchors(t.selector)
            if anchors is None:
                continue
            size = sum(len(self._by_label.get(pair, ())) for pair in anchors)
            if best is None or size < best[0]:
                best = (size, anchors)
        pods = self.cache.pods
        if best is None:
            return list(pods.values())
        out: list[PodInfo] = []
        for pair in best[1]:
            members = self._by_label.get(pair)
            if not members:
                continue
            stale = [uid for uid, pod in members.items() if pods.get(uid) is not pod]
            for uid in stale:
                del members[uid]
            out.extend(members.values())
        return out

    def counts(self, matcher: PodMatcher) -> np.ndarray:
        """Per-slot counts (read-only view; length >= table capacity)."""
        arr = self._entries.get(matcher)
        if arr is not None:
            self._entries.move_to_end(matcher)
            return arr
        table = self.cache.table
        arr = np.zeros(table.capacity, dtype=np.int64)
        nodes = self.cache.nodes
        for pod in self._candidates(matcher):
            info = nodes.get(pod.node_name)
            if info is not None and matcher.matches(pod):
                arr[info.slot] += 1
        self.builds += 1
        self._entries[matcher] = arr
        self._live.add(matcher)
        if len(self._entries) > self.limit:
            evicted, _ = self._entries.popitem(last=False)
            self._live.discard(evicted)
        return arr

    def _ensure(self, slot: int) -> None:
        cap = self.cache.table.capacity
        for m, arr in self._entries.items():
            if len(arr) < cap:
                grown = np.zeros(cap, dtype=np.int64)
                grown[: len(arr)] = arr
                self._entries[m] = grown

    def pod_added(self, pod: PodInfo, slot: int) -> None:
        by_label = self._by_label
        for pair in pod.labels.items():
            members = by_label.get(pair)
            if members is None:
                members = by_label[pair] = {}
            members[pod.uid] = pod
        if not self._entries:
            return
        if slot >= len(next(iter(self._entries.values()))):
            self._ensure(slot)
        entries = self._entries
        for m in self._live.candidates(pod.labels):
            if m.matches(pod):
                entries[m][slot] += 1

    def pod_replaced(self, old: PodInfo, new: PodInfo) -> None:
        """``new`` is ``old``'s next version with the same labels (a status update): file the new
        object where the old one was. Left filed, the old version would outlive the pod - removal
        only drops the object it is given - one PodInfo per updated pod, forever (the soak's drift)."""
        by_label = self._by_label
        uid = new.uid
        for pair in new.labels.items():
            members = by_label.get(pair)
            if members is not None and members.get(uid) is old:
                members[uid] = new

    def pod_removed(self, pod: PodInfo, slot: int) -> None:
        by_label = self._by_label
        for pair in pod.labels.items():
            members = by_label.get(pair)
            if members is not None and members.get(pod.uid) is pod:
                del members[pod.uid]
                if not members:
                    del by_label[pair]
        if not self._entries:
            return
        entries = self._entries
        for m in self._live.candidates(pod.labels):
            arr = entries[m]
            if slot < len(arr) and m.matches(pod):
                arr[slot] -= 1

    def slot_cleared(self, slot: int) -> None:
        for arr in self._entries.values():
            if slot < len(arr):
                arr[slot] = 0
