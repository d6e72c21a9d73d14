"""VolumeZone (PreFilter, Filter): a pod's bound volumes' zones/regions must include the node's.

For each bound PersistentVolume carrying topology labels (``topology.kubernetes.io/zone`` /
``region`` or the beta ``failure-domain`` labels; ``__``-separated values list several zones),
a node that has any topology label must carry the same key (or its GA translation) with one of
those values; otherwise ``node(s) had no available volume zone`` (UnschedulableAndUnresolvable).
Unbound WaitForFirstConsumer claims are skipped (VolumeBinding handles them). Reads: PVCs, PVs,
StorageClasses from the ObjectStore; node labels.
"""

from __future__ import annotations

from pysched.framework.interface import FilterResult, EnqueueExtensions, FilterPlugin, PreFilterPlugin
from pysched.framework.status import Code, Status

from pysched.plugins.helper.volumes import VOLUME_EVENTS, claim_class

REASON = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
KEY = "VolumeZone/state"


class VolumeZone(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = "VolumeZone"

    def pre_filter(self, state, pod, nodes):
        if not pod.pvc_names:
            return None, Status(Code.SKIP)
        store = getattr(self.handle, "objects", None)
        topologies = []
        for name, _ in pod.pvc_names:
            if not name:
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PersistentVolumeClaim had no name")
            pvc = store.get("persistentvolumeclaims", f"{pod.namespace}/{name}") if store else None
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
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'storageclass.storage.k8s.io "{cls}" not found')
                mode = sc.get("volumeBindingMode")
                if not mode:
                    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'VolumeBindingMode not set for StorageClass "{cls}"')
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

    def filter(self, state, pod, nodes):
        if not state.get(KEY):
            return FilterResult.all_pass(len(nodes))
        return FilterResult.each(nodes, lambda node: self._filter_node(state, pod, node))

    def _filter_node(self, state, pod, node):
        topologies = state.get(KEY)
        if not topologies:
            return None
        labels = node.labels
        if not any(k in labels for k in TOPOLOGY_LABELS):
            return None
        for key, values in topologies:
            v = labels.get(key)
            if v is None:
                v = labels.get(GA.get(key, key))
            if v is None or v not in values:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, REASON)
        return None

    def events_to_register(self):
        return VOLUME_EVENTS
