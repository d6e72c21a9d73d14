"""VolumeRestrictions (PreFilter, Filter): in-line disks a node cannot mount twice, and
ReadWriteOncePod claims already in use.

Filter, per node: the pod's in-line GCE PD, AWS EBS, iSCSI and RBD volumes must not conflict with
a volume of a pod already on the node (bound or assumed, any scheduler's): the same GCE PD
``pdName`` unless both are read-only, the same EBS ``volumeID``, the same iSCSI ``iqn`` unless
both are read-only, the same RBD pool and image on overlapping monitors unless both are
read-only; otherwise ``node(s) had no available disk`` (Unschedulable).

PreFilter, cluster-wide: each ``persistentVolumeClaim`` volume's claim must exist
(``persistentvolumeclaim "x" not found``, UnschedulableAndUnresolvable); if a claim with the
``ReadWriteOncePod`` access mode is already mounted by a pod on some node, every node fails with
``node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already
in-use by another pod`` (Unschedulable: preempting that pod could free it). A pod with neither
kind of volume is skipped at PreFilter. Reads: PVCs from the ObjectStore; the snapshot's pods and
its per-claim user counts (``Handle.pvc_in_use``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pysched.framework import (
    READS_ANY,
    READS_NONE,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    NodeBatch,
    PodInfo,
    PodVolume,
    PreFilterPlugin,
    PreFilterResult,
    Status,
)

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
                            "already in-use by another pod")
RWOP = "ReadWriteOncePod"
KEY = "PreFilterVolumeRestrictions"
# The in-line volume sources that cannot be mounted twice on a node.
CONFLICT_SOURCES = frozenset(("gcePersistentDisk", "awsElasticBlockStore", "iscsi", "rbd"))


@dataclass
class _State:
    disks: tuple[PodVolume, ...]         # the pod's volumes to check against the node's pods
    rwop_claims: frozenset[str]          # the pod's ReadWriteOncePod claims
    conflicting_claims: int              # how many of them some pod on a node already mounts

    def update_with_pod(self, other: PodInfo, sign: int) -> None:
        """For preemption's AddPod (+1) / RemovePod (-1): ``other``'s mounts of the pod's
        ReadWriteOncePod claims (matched by claim name alone, as upstream)."""
        self.conflicting_claims += sign * sum(1 for c, eph in other.pvc_names if not eph and c in self.rwop_claims)


def disks_of(pod: PodInfo) -> tuple[PodVolume, ...]:
    return tuple(v for v in pod.volumes if v.source in CONFLICT_SOURCES)


def volumes_conflict(a: PodVolume, b: PodVolume) -> bool:
    """``isVolumeConflict`` for one pair of in-line volumes."""
    if a.source != b.source or a.id != b.id:
        return False
    if a.source == "awsElasticBlockStore":
        return True
    if a.source == "rbd" and not set(a.extra).intersection(b.extra):
        return False
    return not (a.read_only and b.read_only)


def conflicts_with(disks: Iterable[PodVolume], other: PodInfo) -> bool:
    """Whether any of ``disks`` conflicts with a volume of ``other``."""
    theirs = other.volumes
    if not theirs:
        return False
    return any(volumes_conflict(d, v) for d in disks for v in theirs)


class VolumeRestrictions(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = "VolumeRestrictions"

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        disks = disks_of(pod) if pod.volumes else ()
        if not disks and not pod.pvc_names:
            return None, Status(Code.SKIP)
        store = self.handle.objects
        rwop: set[str] = set()
        for claim, ephemeral in pod.pvc_names:
            if ephemeral:
                continue
            pvc = store.get("persistentvolumeclaims", f"{pod.namespace}/{claim}")
            if pvc is None:
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'persistentvolumeclaim "{claim}" not found')
            if RWOP in ((pvc.get("spec") or {}).get("accessModes") or ()):
                rwop.add(claim)
        conflicting = sum(1 for claim in rwop if self.handle.pvc_in_use(pod.namespace, claim))
        if not disks and not conflicting:
            return None, Status(Code.SKIP)
        state.write(KEY, _State(disks, frozenset(rwop), conflicting))
        return None, None

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return READS_NONE if state.get(KEY) is None else READS_ANY   # other pods' disks and claims

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        s: _State | None = state.get(KEY)
        n = len(nodes)
        if s is None:
            return FilterResult.all_pass(n)
        disk_conflict = np.zeros(n, dtype=bool)
        if s.disks:
            for i, info in enumerate(nodes.infos):
                disk_conflict[i] = any(conflicts_with(s.disks, other) for other in info.pods.values())
        failures: list[tuple[Code, str, np.ndarray]] = []
        if disk_conflict.any():
            failures.append((Code.UNSCHEDULABLE, ERR_REASON_DISK_CONFLICT, disk_conflict))
        passed = ~disk_conflict
        if s.conflicting_claims > 0:
            if passed.any():
                failures.append((Code.UNSCHEDULABLE, ERR_REASON_RWOP_CONFLICT, passed.copy()))
            passed = np.zeros(n, dtype=bool)
        return FilterResult(passed, failures)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(ClusterEvent("Pod", "Delete"), _after_pod_deleted),
                ClusterEventWithHint(ClusterEvent("Node", "Add")),
                ClusterEventWithHint(ClusterEvent("PersistentVolumeClaim", "Add"), _after_claim_added))


def _after_pod_deleted(pod: PodInfo, old: PodInfo | None, new: object) -> bool:
    """A deleted pod in the same namespace that held one of the pod's disks or claims."""
    if old is None or old.namespace != pod.namespace:
        return False
    disks = disks_of(pod)
    if disks and conflicts_with(disks, old):
        return True
    claims = {c for c, eph in pod.pvc_names if not eph}
    return any(c in claims for c, eph in old.pvc_names if not eph)


def _after_claim_added(pod: PodInfo, old: object, new: dict[str, Any] | None) -> bool:
    """A claim the pod mounts (``persistentVolumeClaim``) was created in its namespace."""
    meta = (new or {}).get("metadata") or {}
    if meta.get("namespace") != pod.namespace:
        return False
    return any(c == meta.get("name") and not eph for c, eph in pod.pvc_names)
