"""Shared by the volume plugins (VolumeBinding, VolumeZone, VolumeRestrictions, NodeVolumeLimits):
the cluster events that can make a pod with volumes schedulable and upstream's queueing hints for
them, a claim's storage class, and the
in-tree -> CSI migration rules (``k8s.io/csi-translation-lib``, per kube release) that
NodeVolumeLimits uses to count in-tree volumes against a CSI driver's attach limit."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlparse

from pysched.framework import ClusterEvent, ClusterEventWithHint, PodInfo, PodVolume
from pysched.framework.api import quantity_value


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def pvc_referenced(pod: PodInfo, pvc: dict[str, Any] | None, *, ephemeral: bool) -> bool:
    """The claim is in the pod's namespace and one of its volumes names it (``ephemeral``: the
    claims generated for ephemeral volumes count too)."""
    meta = _meta(pvc)
    if pvc is None or meta.get("namespace", "") != pod.namespace:
        return False
    name = meta.get("name", "")
    return any(n == name for n, eph in pod.pvc_names if ephemeral or not eph)


def binding_pvc_hint(pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """VolumeBinding's isSchedulableAfterPersistentVolumeClaimChange."""
    return pvc_referenced(pod, new, ephemeral=True)


def zone_pvc_hint(pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """VolumeZone's: the same, for ``persistentVolumeClaim`` volumes only."""
    return pvc_referenced(pod, new, ephemeral=False)


def binding_storage_class_hint(pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """Any StorageClass added; an update only when its allowedTopologies changed."""
    return old is None or (old or {}).get("allowedTopologies") != (new or {}).get("allowedTopologies")


def zone_storage_class_hint(pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """VolumeZone: only a WaitForFirstConsumer class added."""
    return (new or {}).get("volumeBindingMode") == "WaitForFirstConsumer"


def csinode_hint(pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """A CSINode added, or its migrated-plugins annotation changed."""
    key = "storage.alpha.kubernetes.io/migrated-plugins"
    before = (_meta(old).get("annotations") or {}).get(key)
    return old is None or before != (_meta(new).get("annotations") or {}).get(key)


def pv_topology_hint(topology_labels: tuple[str, ...]) -> Any:
    """VolumeZone's isSchedulableAfterPersistentVolumeChange: a PV added, or its topology labels changed."""
    def hint(pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
        if old is None:
            return True
        before, after = _meta(old).get("labels") or {}, _meta(new).get("labels") or {}
        return any(before.get(k) != after.get(k) for k in topology_labels)
    return hint


def capacity_limit(cap: dict[str, Any] | None) -> int | None:
    """``volumeLimit``: a CSIStorageCapacity's ``maximumVolumeSize``, else its ``capacity`` (None: neither)."""
    limit = (cap or {}).get("maximumVolumeSize")
    if limit is None:
        limit = (cap or {}).get("capacity")
    return None if limit is None else quantity_value(limit)


def storage_capacity_hint(pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """VolumeBinding's isSchedulableAfterCSIStorageCapacityChange: any CSIStorageCapacity added; an
    update only when its volume limit appeared or grew."""
    if old is None:
        return True
    after, before = capacity_limit(new), capacity_limit(old)
    return after is not None and (before is None or after > before)


def csi_driver_hint(pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """VolumeBinding's isSchedulableAfterCSIDriverChange: the pod has an in-line CSI volume of the
    driver and the driver stopped tracking storage capacity. A pod whose object is not kept (only
    pods this scheduler places are) is requeued when capacity tracking stops."""
    def tracks(d: dict[str, Any] | None) -> bool:
        return ((d or {}).get("spec") or {}).get("storageCapacity") is True
    if not tracks(old) or tracks(new):
        return False
    if pod.raw is None:
        return True
    name = _meta(new).get("name")
    return any((v.get("csi") or {}).get("driver") == name
               for v in (pod.raw.get("spec") or {}).get("volumes") or () if isinstance(v, dict) and v.get("csi"))


NODE_ADD_OR_LABEL = (ClusterEventWithHint(ClusterEvent("Node", "Add")),
                     ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel")))
# VolumeBinding's registrations (upstream's EventsToRegister).
BINDING_EVENTS = (ClusterEventWithHint(ClusterEvent("StorageClass", "Add"), binding_storage_class_hint),
                  ClusterEventWithHint(ClusterEvent("StorageClass", "Update"), binding_storage_class_hint),
                  ClusterEventWithHint(ClusterEvent("PersistentVolumeClaim", "Add"), binding_pvc_hint),
                  ClusterEventWithHint(ClusterEvent("PersistentVolumeClaim", "Update"), binding_pvc_hint),
                  ClusterEventWithHint(ClusterEvent("PersistentVolume", "Add")),
                  ClusterEventWithHint(ClusterEvent("PersistentVolume", "Update")),
                  *NODE_ADD_OR_LABEL,
                  ClusterEventWithHint(ClusterEvent("CSINode", "Add"), csinode_hint),
                  ClusterEventWithHint(ClusterEvent("CSINode", "Update"), csinode_hint),
                  ClusterEventWithHint(ClusterEvent("CSIDriver", "Update"), csi_driver_hint),
                  ClusterEventWithHint(ClusterEvent("CSIStorageCapacity", "Add"), storage_capacity_hint),
                  ClusterEventWithHint(ClusterEvent("CSIStorageCapacity", "Update"), storage_capacity_hint))


def claim_class(pvc: dict[str, Any]) -> str:
    """The claim's StorageClass name: the beta annotation if set, else ``spec.storageClassName``."""
    ann = (pvc.get("metadata") or {}).get("annotations") or {}
    cls = ann.get("volume.beta.kubernetes.io/storage-class")
    if cls is not None:
        return str(cls)
    return str((pvc.get("spec") or {}).get("storageClassName") or "")


# -- in-tree -> CSI migration (csi-translation-lib) --------------------------------------------

class TranslationError(ValueError):
    """An in-tree volume the translation library refuses (its message is upstream's)."""


MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
PORTWORX = "kubernetes.io/portworx-volume"
UNSPECIFIED = "UNSPECIFIED"

# Volume source field -> (in-tree plugin name, CSI driver name): every plugin the translation
# library knows. A volume or PV of these kinds is "migratable".
IN_TREE: dict[str, tuple[str, str]] = {
    "gcePersistentDisk": ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    "awsElasticBlockStore": ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    "cinder": ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
    "azureDisk": ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    "azureFile": ("kubernetes.io/azure-file", "file.csi.azure.com"),
    "vsphereVolume": ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
    "portworxVolume": (PORTWORX, "pxd.portworx.com"),
}
PLUGIN_TO_DRIVER = dict(IN_TREE.values())
# Plugins whose migration the scheduler treats as on whenever the node has a CSINode; Portworx
# too from kube 1.36 (the CSIMigrationPortworx gate removed), at 1.35 only when the CSINode's
# migrated-plugins annotation lists it; the others never.
ALWAYS_MIGRATED = frozenset(("kubernetes.io/aws-ebs", "kubernetes.io/gce-pd", "kubernetes.io/azure-disk",
                             "kubernetes.io/cinder"))
PORTWORX_ALWAYS_MIGRATED_FROM = (1, 36)
_EBS_ID = re.compile(r"vol-[^/]*")
_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
_ZONE = "topology.kubernetes.io/zone"


def migration_on(csinode: dict[str, Any] | None, plugin: str, kube_version: tuple[int, int]) -> bool:
    """``isCSIMigrationOn`` of kube-scheduler ``kube_version``: whether volumes of in-tree ``plugin``
    count against its CSI driver."""
    if csinode is None or not plugin:
        return False
    if plugin in ALWAYS_MIGRATED:
        return True
    if plugin != PORTWORX:
        return False
    if kube_version >= PORTWORX_ALWAYS_MIGRATED_FROM:
        return True
    ann = ((csinode.get("metadata") or {}).get("annotations") or {}).get(MIGRATED_PLUGINS_ANNOTATION) or ""
    return plugin in ann.split(",")


def ebs_volume_id(kubernetes_id: str) -> str:
    """``aws://<zone>/vol-...`` or a bare ``vol-...`` -> the EBS volume id."""
    if not kubernetes_id.startswith("aws://"):
        return kubernetes_id
    url = urlparse(kubernetes_id)
    vol = url.path.strip("/")
    if not _EBS_ID.fullmatch(vol):
        raise TranslationError(f"Invalid format for AWS volume ({kubernetes_id})")
    return vol


def _gce_region(zones: list[str]) -> str:
    regions = set()
    for zone in zones:
        parts = zone.split("-")
        if len(parts) != 3:
            raise TranslationError(f"zone in unexpected format, expected: {{locale}}-{{region}}-{{zone}}, got: {zone}")
        regions.add("-".join(parts[:2]))
    if len(regions) != 1:
        raise TranslationError(f"multiple or no regions gotten from zones, got: {sorted(regions)}")
    return regions.pop()


def inline_volume_handle(vol: PodVolume) -> str:
    """The CSI volume handle the translation library gives an in-line in-tree volume."""
    if vol.source == "gcePersistentDisk":
        return f"projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{vol.id}"
    if vol.source == "awsElasticBlockStore":
        return ebs_volume_id(vol.id)
    if vol.source == "azureDisk":
        kind = vol.extra[0] if vol.extra else "Shared"
        if kind.lower() != "managed":
            raise TranslationError(f"kind({kind}) is not supported in csi migration")
        return vol.id
    return vol.id   # cinder, portworx: the volume id as is


def pv_in_tree_source(pv: dict[str, Any]) -> str | None:
    """The in-tree volume source field of a PersistentVolume the library can migrate, if any."""
    spec = pv.get("spec") or {}
    for source in IN_TREE:
        if spec.get(source) is not None:
            return source
    return None


def pv_volume_handle(pv: dict[str, Any], source: str) -> str:
    """The CSI volume handle of an in-tree PersistentVolume translated to CSI."""
    src = (pv.get("spec") or {}).get(source) or {}
    if source == "gcePersistentDisk":
        labels = (pv.get("metadata") or {}).get("labels") or {}
        zones = (labels.get(_BETA_ZONE) or labels.get(_ZONE) or "").split("__")
        pd = src.get("pdName") or ""
        if len(zones) == 1 and zones[0]:
            return f"projects/{UNSPECIFIED}/zones/{zones[0]}/disks/{pd}"
        if len(zones) > 1:
            return f"projects/{UNSPECIFIED}/regions/{_gce_region(zones)}/disks/{pd}"
        return f"projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{pd}"
    if source == "awsElasticBlockStore":
        return ebs_volume_id(str(src.get("volumeID") or ""))
    if source == "azureDisk":
        kind = str(src.get("kind") or "Shared")
        if kind.lower() != "managed":
            raise TranslationError(f"kind({kind}) is not supported in csi migration")
        return str(src.get("diskURI") or "")
    if source == "azureFile":
        return ""   # never counted: its migration is off for the scheduler
    if source == "vsphereVolume":
        return ""
    return str(src.get("volumeID") or "")
