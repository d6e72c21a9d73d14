"""Feature gates, as plugins see them: ``Handle.feature_gates`` holds the names of the gates that are on.

pysched behaves as kube-scheduler of one release (1.35, 1.36 or 1.37: the API server's, or
``--emulated-version``; ``Handle.kube_version``) with that release's feature-gate defaults and the
``--feature-gates`` flag applied, with kube's own gate names (``pysched.apis.features``). A plugin
asks ``DRA_PARTITIONABLE_DEVICES in handle.feature_gates``. The names plugins here read are below.

pysched's own gates sit in the same set, off by default, so that pysched decides as upstream does
unless asked:

* ``PyschedExistingAntiAffinityDeleteHint`` - InterPodAffinity's queueing hint also requeues a pod
  when a bound pod whose *own* required anti-affinity matched it is deleted. Upstream only looks
  at the waiting pod's terms, so a pod kept out by another pod's anti-affinity (a preemptor whose
  victim was that pod, typically) waits for the next unrelated event or the 5-minute flush of the
  unschedulable pool after its blocker is gone (docs/queueing-hints.md).
"""

from __future__ import annotations

from pysched.apis.features import NEWEST, FeatureGateError, defaults, parse_flag, resolve

__all__ = ["FeatureGateError", "parse_feature_gates", "default_gates", "EXISTING_ANTI_AFFINITY_DELETE_HINT"]

EXISTING_ANTI_AFFINITY_DELETE_HINT = "PyschedExistingAntiAffinityDeleteHint"

# kube's gate names that pysched's plugins read
NODE_DECLARED_FEATURES = "NodeDeclaredFeatures"
DRA_PARTITIONABLE_DEVICES = "DRAPartitionableDevices"
DRA_CONSUMABLE_CAPACITY = "DRAConsumableCapacity"
DRA_FRACTIONAL_CAPACITY_RANGE = "DRAFractionalCapacityRange"
DRA_DEVICE_TAINTS = "DRADeviceTaints"
DRA_DEVICE_TAINT_RULES = "DRADeviceTaintRules"
DRA_DEVICE_BINDING_CONDITIONS = "DRADeviceBindingConditions"
DRA_RESOURCE_CLAIM_DEVICE_STATUS = "DRAResourceClaimDeviceStatus"
DRA_EXTENDED_RESOURCE = "DRAExtendedResource"
DRA_ADMIN_ACCESS = "DRAAdminAccess"
DRA_PRIORITIZED_LIST = "DRAPrioritizedList"
STORAGE_CAPACITY_SCORING = "StorageCapacityScoring"
VOLUME_LIMIT_SCALING = "VolumeLimitScaling"


def default_gates(release: tuple[int, int] = NEWEST) -> frozenset[str]:
    """The gates on by default when pysched behaves as kube-scheduler ``release``."""
    return defaults(release)


def parse_feature_gates(text: str, release: tuple[int, int] = NEWEST) -> frozenset[str]:
    """``Name=true,Other=false`` -> the gates on at ``release`` with these overrides (kube's rules)."""
    return resolve(release, parse_flag(text)).enabled
