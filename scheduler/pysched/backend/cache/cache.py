"""The scheduler cache: nodes and the pods on them, with assume/forget.

Pod states, as in kube-scheduler's cache::

    Initial --assume--> Assumed --(informer: pod bound)--> Added --(update)--> Added
       ^                   |                                  |
       +------forget-------+                                  +--(informer: delete)--> gone
                           +--(informer: delete)--> gone

* ``assume(pod, node)`` counts the pod on the node the moment the scheduling cycle picks it, so
  the next cycle already sees the capacity taken. Binding then runs asynchronously.
* ``forget(pod)`` undoes an assumption when binding fails.
* Assumed pods never expire (kube-scheduler sets the expiry to 0 since k/k#106361, which
  double-booked nodes when a slow bind outlived the timeout). Only an informer event (bound or
  deleted) or a failed bind clears the assumption.
* Every non-terminal pod with ``spec.nodeName`` counts, whichever scheduler or client bound it.
  A pod on a node the cache does not know yet is parked and counted once the node appears.

The cache is written only from the event loop thread, and the scheduling cycle runs without
awaiting, so a cycle reads one consistent state (the "snapshot").
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from pysched.backend.cache.nodetable import NodeTable
from pysched.backend.cache.podindex import PodCountIndex
from pysched.backend.cache.termindex import TermIndex
from pysched.framework.nodeinfo import NodeInfo, NodeSpec
from pysched.framework.podinfo import PodInfo

log = logging.getLogger("pysched.backend.cache")


class SchedulerCache:
    def __init__(self, *, expect_rebinding: bool = False) -> None:
        """``expect_rebinding``: shadow mode - assumptions are predictions, others bind elsewhere."""
        self.table = NodeTable()
        self.nodes: dict[str, NodeInfo] = {}
        self.pods: dict[str, PodInfo] = {}          # uid -> pod counted on a node (added or assumed)
        self.assumed: dict[str, PodInfo] = {}       # uid -> assumed pod
        self.parked: dict[str, dict[str, PodInfo]] = {}  # node name -> pods bound to an unknown node
        self.generation = 0
        self.expect_rebinding = expect_rebinding
        self.index = PodCountIndex(self)
        self.terms = TermIndex(self.table)
        # Pods (on known nodes) with any pod affinity term / with required anti-affinity terms.
        self.with_affinity: dict[str, PodInfo] = {}
        self.with_required_anti: dict[str, PodInfo] = {}
        # ImageLocality: nodes per image name, and per-slot size columns built on demand.
        self.image_nodes: dict[str, int] = {}
        self._image_columns: dict[str, np.ndarray] = {}
        # VolumeRestrictions: "namespace/claim" -> how many pods on known nodes mount the claim
        # (``persistentVolumeClaim`` volumes), kube-scheduler's snapshot ``usedPVCSet``.
        self.pvc_users: dict[str, int] = {}
        # Preemption: how many cached pods (assumed, bound, parked) have each priority, so that a
        # pod no cached pod has a lower priority than is answered without a per-node dry run.
        self.priority_counts: dict[int, int] = {}

    def _count_claims(self, pod: PodInfo, sign: int) -> None:
        for claim, ephemeral in pod.pvc_names:
            if ephemeral:
                continue
            key = f"{pod.namespace}/{claim}"
            n = self.pvc_users.get(key, 0) + sign
            if n > 0:
                self.pvc_users[key] = n
            else:
                self.pvc_users.pop(key, None)

    def _count_images(self, spec: NodeSpec, sign: int) -> None:
        if not spec.images:
            return
        for name in spec.images:
            n = self.image_nodes.get(name, 0) + sign
            if n > 0:
                self.image_nodes[name] = n
            else:
                self.image_nodes.pop(name, None)
        self._image_columns.clear()

    def image_sizes(self, name: str):
        """Per-slot size of image ``name`` (0 where the node does not have it)."""
        col = self._image_columns.get(name)
        if col is None or len(col) < self.table.capacity:
            col = np.zeros(self.table.capacity, dtype=np.int64)
            for info in self.nodes.values():
                size = info.spec.images.get(name)
                if size:
                    col[info.slot] = size
            if len(self._image_columns) > 256:
                self._image_columns.clear()
            self._image_columns[name] = col
        return col

    def _track(self, pod: PodInfo, slot: int) -> None:
        self.index.pod_added(pod, slot)
        self.terms.pod_added(pod, slot)
        if pod.pvc_names:
            self._count_claims(pod, 1)
        terms = pod.affinity_terms
        if terms.any:
            self.with_affinity[pod.uid] = pod
            if terms.required_anti_affinity:
                self.with_required_anti[pod.uid] = pod

    def _untrack(self, pod: PodInfo, slot: int) -> None:
        self.index.pod_removed(pod, slot)
        self.terms.pod_removed(pod, slot)
        if pod.pvc_names:
            self._count_claims(pod, -1)
        self.with_affinity.pop(pod.uid, None)
        self.with_required_anti.pop(pod.uid, None)

    # -- nodes ---------------------------------------------------------------------------------

    def upsert_node(self, spec: NodeSpec) -> tuple[str, NodeInfo]:
        """Add or update a node. Returns ("added"|"updated"|"unchanged", info).

        All or nothing: a spec the table cannot hold raises before anything changes."""
        row = self.table.spec_row(spec)      # may raise; nothing is touched yet
        info = self.nodes.get(spec.name)
        if info is None:
            info = NodeInfo(spec, -1)
            parked = self.parked.get(spec.name, {})
            for pod in parked.values():
                info.add_pod(pod)
            self.table.add(info, row)
            self.parked.pop(spec.name, None)
            self.nodes[spec.name] = info
            self._count_images(spec, 1)
            for pod in parked.values():
                self._track(pod, info.slot)
            self.generation += 1
            return "added", info
        old = info.spec
        if old.same_for_scheduling(spec):
            info.spec = spec
            return "unchanged", info
        info.spec = spec
        if old.images != spec.images:
            self._count_images(old, -1)
            self._count_images(spec, 1)
        self.table.update_spec(info, old, row)
        info.generation += 1
        self.generation += 1
        return "updated", info

    @contextmanager
    def nodes_as_sent(self, specs: list[NodeSpec]) -> Iterator[None]:
        """The nodes ``specs`` as given, for one synchronous evaluation (an extender request that
        carries whole Node objects): unknown ones are added, known ones take the sent spec; the
        pods the cache counts on them stay. On exit every node is as before - unknown ones removed,
        known ones back to their informer spec - so nothing a request sends outlives it.

        The caller must not await inside the ``with``: the informer and the scheduling cycle run on
        the same event loop and must never see the request's nodes.
        """
        restore: list[tuple[str, NodeSpec | None]] = []
        mark = self.table.vocabulary_mark()
        try:
            for spec in specs:
                info = self.nodes.get(spec.name)
                old_spec = info.spec if info is not None else None   # upsert replaces info.spec
                self.upsert_node(spec)
                restore.append((spec.name, old_spec))
            yield
        finally:
            for name, old_spec in reversed(restore):
                if old_spec is None:
                    self.remove_node(name)
                else:
                    self.upsert_node(old_spec)
            self.table.trim_vocabulary(mark)

    def remove_node(self, name: str) -> NodeInfo | None:
        info = self.nodes.pop(name, None)
        if info is None:
            return None
        self._count_images(info.spec, -1)
        for pod in info.pods.values():
            # Every index lets go of the node's pods (the label index included: pods parked here
            # and deleted later never reach it again); ``_track`` files them anew if it returns.
            self._untrack(pod, info.slot)
        self.index.slot_cleared(info.slot)
        self.table.remove(info)
        # Pods stay counted against the name: if the node comes back they are still there.
        if info.pods:
            self.parked[name] = dict(info.pods)
        self.generation += 1
        return info

    # -- pods ----------------------------------------------------------------------------------

    def _place(self, pod: PodInfo) -> None:
        info = self.nodes.get(pod.node_name)
        if info is None:
            self.parked.setdefault(pod.node_name, {})[pod.uid] = pod
        else:
            info.add_pod(pod)
            self.table.add_pod(info.slot, pod)
            self._track(pod, info.slot)
        self.pods[pod.uid] = pod
        counts = self.priority_counts
        counts[pod.priority] = counts.get(pod.priority, 0) + 1
        self.generation += 1

    def _unplace(self, pod: PodInfo) -> None:
        if self.pods.pop(pod.uid, None) is not None:
            counts = self.priority_counts
            n = counts.get(pod.priority, 0) - 1
            if n > 0:
                counts[pod.priority] = n
            else:
                counts.pop(pod.priority, None)
        info = self.nodes.get(pod.node_name)
        if info is not None:
            if info.remove_pod(pod):
                self.table.remove_pod(info.slot, pod)
                self._untrack(pod, info.slot)
        else:
            parked = self.parked.get(pod.node_name)
            if parked is not None:
                parked.pop(pod.uid, None)
                if not parked:
                    del self.parked[pod.node_name]
        self.generation += 1

    def assume(self, pod: PodInfo, node_name: str) -> PodInfo:
        """Count ``pod`` on ``node_name`` before the bind; returns the assumed copy."""
        if pod.uid in self.pods:
            raise ValueError(f"pod {pod.key} is already in the cache (node {self.pods[pod.uid].node_name})")
        assumed = pod.with_node(node_name)
        self._place(assumed)
        self.assumed[pod.uid] = assumed
        return assumed

    def forget(self, pod: PodInfo) -> bool:
        """Undo an assumption (bind failed). False if the pod was not assumed any more."""
        assumed = self.assumed.pop(pod.uid, None)
        if assumed is None:
            return False
        self._unplace(assumed)
        return True

    def is_assumed(self, uid: str) -> bool:
        return uid in self.assumed

    def upsert_pod(self, pod: PodInfo) -> tuple[PodInfo | None, bool]:
        """Informer add/update of a pod that has ``spec.nodeName``.

        Returns (previous cached version or None, whether it confirmed an assumption).
        """
        old = self.pods.get(pod.uid)
        confirmed = False
        if pod.uid in self.assumed:
            assumed = self.assumed.pop(pod.uid)
            confirmed = True
            if assumed.node_name != pod.node_name:
                (log.debug if self.expect_rebinding else log.warning)(
                    "pod bound to a different node than assumed pod=%s assumed_node=%s node=%s",
                    pod.key, assumed.node_name, pod.node_name)
        if old is not None:
            if (old.node_name == pod.node_name and old.requests == pod.requests
                    and old.host_ports == pod.host_ports and old.non0_cpu == pod.non0_cpu
                    and old.non0_mem == pod.non0_mem and old.labels == pod.labels
                    and old.deleting == pod.deleting and old.affinity_terms == pod.affinity_terms):
                # Same accounting: swap the object without touching totals.
                info = self.nodes.get(pod.node_name)
                if info is not None:
                    info.pods[pod.uid] = pod
                    self.index.pod_replaced(old, pod)
                    if pod.uid in self.with_affinity:
                        self.with_affinity[pod.uid] = pod
                        if pod.uid in self.with_required_anti:
                            self.with_required_anti[pod.uid] = pod
                else:
                    self.parked.setdefault(pod.node_name, {})[pod.uid] = pod
                self.pods[pod.uid] = pod
                self.generation += 1
                return old, confirmed
            self._unplace(old)
        self._place(pod)
        return old, confirmed

    def remove_pod(self, uid: str) -> PodInfo | None:
        """Informer delete (or the pod went terminal). Returns the removed pod."""
        self.assumed.pop(uid, None)
        old = self.pods.get(uid)
        if old is None:
            return None
        self._unplace(old)
        return old

    # -- what-if (preemption, nominated pods) -------------------------------------------------

    def what_if(self) -> WhatIf:
        """Temporary pod moves for one synchronous evaluation (see ``WhatIf``)."""
        return WhatIf(self)

    # -- reads ---------------------------------------------------------------------------------

    def has_pod_below(self, priority: int) -> bool:
        """Whether any cached pod has a priority lower than ``priority`` (a possible victim)."""
        return any(p < priority for p in self.priority_counts)

    def node_count(self) -> int:
        return len(self.nodes)

    def dump(self) -> dict:
        """Debug view: per node requested vs allocatable (used by tests and /debug)."""
        return {name: {"allocatable": dict(info.allocatable), "requested": dict(info.requested),
                       "pods": sorted(p.key for p in info.pods.values())}
                for name, info in self.nodes.items()}


class WhatIf:
    """Pods taken off or put on nodes of the live cache for one synchronous evaluation - the
    victims a preemption would remove, the nominated pods a node is expected to receive - then
    put back exactly by ``restore()`` (in reverse order).

    Every structure that filters and scores read moves with them: NodeInfo, the node table's
    requested/non-zero/pod-count columns, the pod-count and affinity-term indices. So every plugin,
    in-tree or custom, sees the same simulated node without knowing it is one. The caller must
    not await between the first move and ``restore()``: the informer and the scheduling cycle run
    on the same event loop and must never see a simulated state.
    """

    __slots__ = ("cache", "_log")

    def __init__(self, cache: SchedulerCache):
        self.cache = cache
        self._log: list[tuple[bool, PodInfo]] = []

    def remove(self, pod: PodInfo) -> None:
        """Take ``pod`` (as the cache holds it) off its node."""
        if self.cache.pods.get(pod.uid) is not pod:
            raise ValueError(f"pod {pod.key} is not the cached object; cannot simulate its removal")
        self.cache._unplace(pod)
        self._log.append((False, pod))

    def add(self, pod: PodInfo) -> None:
        """Count ``pod`` on ``pod.node_name`` (a copy placed there, e.g. ``with_node``)."""
        if pod.uid in self.cache.pods:
            raise ValueError(f"pod {pod.key} is already counted on node {self.cache.pods[pod.uid].node_name}")
        self.cache._place(pod)
        self._log.append((True, pod))

    def restore(self) -> None:
        while self._log:
            added, pod = self._log.pop()
            if added:
                self.cache._unplace(pod)
            else:
                self.cache._place(pod)
