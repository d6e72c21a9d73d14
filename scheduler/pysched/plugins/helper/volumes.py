"""Shared by the volume plugins (VolumeBinding, VolumeZone): the cluster events that can make a
pod with volumes schedulable, and a claim's storage class."""

from __future__ import annotations

from typing import Any

from pysched.framework import ClusterEvent, ClusterEventWithHint

VOLUME_EVENTS = (ClusterEventWithHint(ClusterEvent("PersistentVolumeClaim", "*")),
                 ClusterEventWithHint(ClusterEvent("PersistentVolume", "*")),
                 ClusterEventWithHint(ClusterEvent("StorageClass", "*")),
                 ClusterEventWithHint(ClusterEvent("Node", "Add")),
                 ClusterEventWithHint(ClusterEvent("Node", "UpdateNodeLabel")))


def claim_class(pvc: dict[str, Any]) -> str:
    """The claim's StorageClass name: the beta annotation if set, else ``spec.storageClassName``."""
    ann = (pvc.get("metadata") or {}).get("annotations") or {}
    cls = ann.get("volume.beta.kubernetes.io/storage-class")
    if cls is not None:
        return str(cls)
    return str((pvc.get("spec") or {}).get("storageClassName") or "")
