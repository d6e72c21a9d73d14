"""VolumeZone (PreFilter, Filter): a pod's bound volumes' zones/regions must include the node's.

For each bound PersistentVolume carrying topology labels (``topology.kubernetes.io/zone`` /
``region`` or the beta ``failure-domain`` labels; ``__``-separated values list several zones),
a node that has any topology label must carry the same key (or its GA translation) with one of
those values; otherwise ``node(s) had no available volume zone`` (UnschedulableAndUnresolvable).
Unbound WaitForFirstConsumer claims are skipped (VolumeBinding handles them). Reads: PVCs, PVs,
StorageClasses from the ObjectStore; node labels.
"""

from __future__ import annotations

import numpy as np

from pysched.framework import (
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
    PreFilterPlugin,
    PreFilterResult,
    Status,
)
from pysched.plugins.helper.volumes import (
    NODE_ADD_OR_LABEL,
    claim_class,
    pv_topology_hint,
    zone_pvc_hint,
    zone_storage_class_hint,
)

REASON = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
KEY = "VolumeZone/state"

# (topology label key of a bound PV, the zones/regions it lists)
Topology = tuple[str, frozenset[str]]


class VolumeZone(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = "VolumeZone"
    pre_filter_reads_other_pods = False   # PreFilter reads the pod itself (and objects), never other pods

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.pvc_names:
            return None, Status(Code.SKIP)
        store = self.handle.objects
        topologies: list[Topology] = []
        for name, _ in pod.pvc_names:
            if not name:
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PersistentVolumeClaim had no name")
            pvc = store.get("persistentvolumeclaims", f"{pod.namespace}/{name}")
            if pvc is None:
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'persistentvolumeclaim "{name}" not found')
            pv_name = (pvc.get("spec") or {}).get("volumeName") or ""
            if not pv_name:
                cls = claim_class(pvc)
                if not cls:
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                        "PersistentVolumeClaim had no pv name and storageClass name")
                sc = store.get("storageclasses", cls)
                if sc is None:
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                        f'storageclass.storage.k8s.io "{cls}" not found')
                mode = sc.get("volumeBindingMode")
                if not mode:
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                        f'VolumeBindingMode not set for StorageClass "{cls}"')
                if mode == "WaitForFirstConsumer":
                    continue
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PersistentVolume had no name")
            pv = store.get("persistentvolumes", pv_name)
            if pv is None:
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'persistentvolume "{pv_name}" not found')
            labels = (pv.get("metadata") or {}).get("labels") or {}
            for key in TOPOLOGY_LABELS:
                if key in labels:
                    topologies.append((key, frozenset(labels[key].split("__"))))
        if not topologies:
            return None, Status(Code.SKIP)
        state.write(KEY, topologies)
        return None, None

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return READS_NONE   # node properties only

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        topologies: list[Topology] | None = state.get(KEY)
        if not topologies:
            return FilterResult.all_pass(len(nodes))
        # A node without any zone/region label passes; otherwise, for every PV topology, the node's
        # value of that key (or, for a beta key the node lacks, of its GA twin) must be listed.
        has_topology = np.zeros(len(nodes), dtype=bool)
        for key in TOPOLOGY_LABELS:
            has_topology |= nodes.label(key).exists()
        ok = np.ones(len(nodes), dtype=bool)
        for key, values in topologies:
            own = nodes.label(key)
            matches = own.isin(values)
            if key in GA:
                matches = np.where(own.exists(), matches, nodes.label(GA[key]).isin(values))
            ok &= matches
        return FilterResult.from_mask(~has_topology | ok, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        pv_hint = pv_topology_hint(TOPOLOGY_LABELS)
        return (ClusterEventWithHint(ClusterEvent("StorageClass", "Add"), zone_storage_class_hint),
                *NODE_ADD_OR_LABEL,
                ClusterEventWithHint(ClusterEvent("PersistentVolumeClaim", "Add"), zone_pvc_hint),
                ClusterEventWithHint(ClusterEvent("PersistentVolumeClaim", "Update"), zone_pvc_hint),
                ClusterEventWithHint(ClusterEvent("PersistentVolume", "Add"), pv_hint),
                ClusterEventWithHint(ClusterEvent("PersistentVolume", "Update"), pv_hint))
