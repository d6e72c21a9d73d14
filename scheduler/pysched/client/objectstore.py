"""ObjectStore: the low-volume objects some plugins read, kept current by one informer per kind
(``client.reflector.Reflector``, LIST then WATCH, as the pods and nodes are).

* Namespaces (labels) - InterPodAffinity's ``namespaceSelector``;
* Services, ReplicaSets, StatefulSets, ReplicationControllers - PodTopologySpread's system default
  constraints select "the pods of the same workload" from them (``helper.DefaultSelector``);
* PersistentVolumeClaims, PersistentVolumes, StorageClasses - VolumeBinding, VolumeZone,
  VolumeRestrictions and NodeVolumeLimits;
* CSINodes, VolumeAttachments - NodeVolumeLimits (per-driver attach limits); CSIDrivers -
  NodeVolumeLimits (VolumeLimitScaling) and VolumeBinding (which drivers track storage capacity);
  CSIStorageCapacities - VolumeBinding (room to provision, capacity scoring);
* ResourceClaims, DeviceClasses, ResourceSlices - DynamicResources (a pod waits until its claims
  exist; devices are allocated from the slices the DRA drivers publish); DeviceTaintRules
  (``resource.k8s.io/v1``, served from Kubernetes 1.37) only while DynamicResources runs with the
  DRADeviceTaintRules gate, and optional: an API server that does not serve them has none.
* PodDisruptionBudgets - DefaultPreemption prefers victims no budget protects.
* PodGroups (``scheduling.x-k8s.io/v1alpha1``, scheduler-plugins' CRD) - Coscheduling's gangs. The
  CRD is optional: without it the store simply holds none (its informer lists again every
  ``optional_crd_poll_seconds`` until it is served, then watches it).
* Workload PodGroups (``scheduling.k8s.io/v1beta1`` PodGroups, Kubernetes 1.36+ with the
  GenericWorkload gate; stored as ``workloadpodgroups``) - GangScheduling's gangs, the pod-group
  cycle and TopologyPlacementGenerator. Optional: an API server that does not serve them has none.
* CompositePodGroups (``scheduling.k8s.io/v1alpha3``, the alpha CompositePodGroup gate; stored as
  ``compositepodgroups``) - the trees GangScheduling and the pod-group cycle schedule whole. Read
  only with that gate on; optional as workload PodGroups are.
* Kueue Topologies (``kueue.x-k8s.io/v1beta1``, stored as ``kueuetopologies``) -
  TopologyAwarePlacement with ``kueueTopology``: the levels it places groups on. Optional (Kueue's
  CRD), read only when that plugin is configured so.

Objects are kept as trimmed API dicts keyed by ``namespace/name`` (or ``name``). Waiters can
await a change of a given object (VolumeBinding's PreBind waits for claims to be bound).
Offline (``simulate``) the same store is filled from the snapshot file.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable

from pysched.apis.core.model import LabelSelector, Requirement, parse_label_selector, selector_from_labels

KINDS = ("namespaces", "services", "replicasets", "statefulsets", "replicationcontrollers",
         "csidrivers", "csistoragecapacities",
         "persistentvolumeclaims", "persistentvolumes", "storageclasses", "csinodes", "volumeattachments",
         "resourceclaims", "deviceclasses", "resourceslices", "devicetaintrules", "poddisruptionbudgets", "podgroups",
         "elasticquotas", "workloadpodgroups", "compositepodgroups", "kueuetopologies")
NAMESPACED = {"services", "replicasets", "statefulsets", "replicationcontrollers", "persistentvolumeclaims",
              "resourceclaims", "poddisruptionbudgets", "podgroups", "elasticquotas", "csistoragecapacities",
              "workloadpodgroups", "compositepodgroups"}
# API group and version of the kinds outside the core group.
GROUP_VERSIONS = {"replicasets": ("apps", "v1"), "statefulsets": ("apps", "v1"),
                  "storageclasses": ("storage.k8s.io", "v1"), "csinodes": ("storage.k8s.io", "v1"),
                  "volumeattachments": ("storage.k8s.io", "v1"),
                  "csidrivers": ("storage.k8s.io", "v1"), "csistoragecapacities": ("storage.k8s.io", "v1"),
                  "resourceclaims": ("resource.k8s.io", "v1"), "deviceclasses": ("resource.k8s.io", "v1"),
                  "resourceslices": ("resource.k8s.io", "v1"), "devicetaintrules": ("resource.k8s.io", "v1"),
                  "poddisruptionbudgets": ("policy", "v1"),
                  "podgroups": ("scheduling.x-k8s.io", "v1alpha1"),
                  "elasticquotas": ("scheduling.x-k8s.io", "v1alpha1"),
                  "workloadpodgroups": ("scheduling.k8s.io", "v1beta1"),
                  "compositepodgroups": ("scheduling.k8s.io", "v1alpha3"),
                  "kueuetopologies": ("kueue.x-k8s.io", "v1beta1")}
# The API's resource name of a store kind named otherwise (two kinds called PodGroup).
RESOURCE_NAMES = {"workloadpodgroups": "podgroups", "kueuetopologies": "topologies"}
# Kinds served by an optional CustomResourceDefinition, or by a newer API server only: a 404 on
# LIST means "not installed" (listed again every ``optional_crd_poll_seconds``).
OPTIONAL = {"podgroups", "elasticquotas", "devicetaintrules", "workloadpodgroups", "compositepodgroups",
            "kueuetopologies"}
KIND_TO_PLURAL = {"Namespace": "namespaces", "Service": "services", "ReplicaSet": "replicasets",
                  "StatefulSet": "statefulsets", "ReplicationController": "replicationcontrollers",
                  "PersistentVolumeClaim": "persistentvolumeclaims", "PersistentVolume": "persistentvolumes",
                  "StorageClass": "storageclasses", "CSINode": "csinodes", "VolumeAttachment": "volumeattachments",
                  "CSIDriver": "csidrivers", "CSIStorageCapacity": "csistoragecapacities",
                  "ResourceClaim": "resourceclaims", "DeviceClass": "deviceclasses",
                  "ResourceSlice": "resourceslices", "DeviceTaintRule": "devicetaintrules",
                  "PodDisruptionBudget": "poddisruptionbudgets",
                  "PodGroup": "podgroups", "ElasticQuota": "elasticquotas", "Topology": "kueuetopologies",
                  "CompositePodGroup": "compositepodgroups"}


def api_path(plural: str) -> str:
    """The cluster-wide collection path of ``plural`` (``/apis/storage.k8s.io/v1/csinodes``...)."""
    group, version = GROUP_VERSIONS.get(plural, ("", "v1"))
    resource = RESOURCE_NAMES.get(plural, plural)
    return f"/apis/{group}/{version}/{resource}" if group else f"/api/v1/{resource}"


def resource_version(obj: dict) -> str:
    """``metadata.resourceVersion`` ("" when absent)."""
    return (obj.get("metadata") or {}).get("resourceVersion") or ""


def store_key(plural: str, obj: dict) -> str:
    """The store's key of ``obj``: ``namespace/name`` for namespaced kinds, else ``name``."""
    return _key(plural, obj)


def _key(plural: str, obj: dict) -> str:
    meta = obj.get("metadata") or {}
    if plural in NAMESPACED:
        return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"
    return meta.get("name", "")


class ObjectStore:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, dict]] = {k: {} for k in KINDS}
        self.version = 0
        self._kind_versions: dict[str, int] = {k: 0 for k in KINDS}
        self._waiters: list[asyncio.Future] = []
        self.listeners: list[Callable[[str, str | None, dict | None, dict], None]] = []

    # -- writes --------------------------------------------------------------------------------


    def subscribe(self, listener: Callable[[str, str | None, dict | None, dict], None]) -> None:
        """Call ``listener(plural, event type, previous version or None, object)`` on every change
        (the informers send ADDED, MODIFIED and DELETED; type None is a listing applied without
        events, e.g. by a test)."""
        self.listeners.append(listener)

    def informer_handlers(self, plural: str) -> tuple[Callable[[dict], None], Callable[[str, dict | None], None]]:
        """A ``client.reflector.Reflector``'s ``on_upsert`` and ``on_delete`` for ``plural``: an
        object new to the store is ADDED, a known one MODIFIED; a delete without the object (one
        a re-list no longer has) deletes what the store holds under that key."""
        objects = self.objects[plural]

        def on_upsert(obj: dict) -> None:
            self.apply(plural, "MODIFIED" if _key(plural, obj) in objects else "ADDED", obj)

        def on_delete(key: str, obj: dict | None) -> None:
            if obj is None:
                obj = objects.get(key)
            if obj is not None:
                self.apply(plural, "DELETED", obj)
        return on_upsert, on_delete

    def apply(self, plural: str, typ: str | None, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        meta.pop("managedFields", None)
        key = _key(plural, obj)
        if typ == "DELETED":
            old = self.objects[plural].pop(key, None)
        else:
            old = self.objects[plural].get(key)
            self.objects[plural][key] = obj
        self.version += 1
        self._kind_versions[plural] += 1
        for fn in self.listeners:
            fn(plural, typ, old, obj)
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def add(self, obj: dict) -> bool:
        plural = KIND_TO_PLURAL.get(obj.get("kind", ""))
        if plural == "podgroups" and str(obj.get("apiVersion", "")).startswith("scheduling.k8s.io/"):
            plural = "workloadpodgroups"
        if plural is None:
            return False
        self.apply(plural, "ADDED", obj)
        return True

    async def changed(self, timeout: float) -> bool:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            async with asyncio.timeout(timeout):   # not wait_for: it can lose a cancel on 3.11
                await fut
            return True
        except TimeoutError:
            return False

    # -- reads ---------------------------------------------------------------------------------

    def kind_version(self, plural: str) -> int:
        """Moves on with every change of ``plural`` (a key for what is derived from that kind alone)."""
        return self._kind_versions.get(plural, 0)

    def get(self, plural: str, key: str) -> dict | None:
        return self.objects[plural].get(key)

    def namespace_labels(self, name: str) -> dict:
        ns = self.objects["namespaces"].get(name)
        return ((ns or {}).get("metadata") or {}).get("labels") or {}

    def namespaces_matching(self, selector: LabelSelector) -> list[str]:
        return [name for name, ns in self.objects["namespaces"].items()
                if selector.matches((ns.get("metadata") or {}).get("labels") or {})]

    def default_selector(self, pod) -> LabelSelector | None:
        """``helper.DefaultSelector``: services selecting the pod, plus its controller's selector."""
        reqs: list[Requirement] = []
        merged: dict[str, str] = {}
        for key, svc in self.objects["services"].items():
            if not key.startswith(pod.namespace + "/"):
                continue
            sel = (svc.get("spec") or {}).get("selector") or {}
            if sel and all(pod.labels.get(k) == v for k, v in sel.items()):
                merged.update(sel)
        if merged:
            reqs.extend(selector_from_labels(merged).requirements)
        kind = pod.owner_kind
        owner_key = f"{pod.namespace}/{pod.owner_name}"
        if kind == "ReplicationController":
            rc = self.objects["replicationcontrollers"].get(owner_key)
            if rc is not None:
                merged.update((rc.get("spec") or {}).get("selector") or {})
                reqs = list(selector_from_labels(merged).requirements)
        elif kind in ("ReplicaSet", "StatefulSet"):
            store = self.objects["replicasets" if kind == "ReplicaSet" else "statefulsets"]
            owner = store.get(owner_key)
            if owner is not None:
                try:
                    other = parse_label_selector((owner.get("spec") or {}).get("selector"), "selector")
                except ValueError:
                    other = None
                if other is not None:
                    reqs.extend(other.requirements)
        if not reqs:
            return None
        return LabelSelector(tuple(reqs))

    # Defined last: inside the class body the name ``list`` means this method from here on.
    def list(self, plural: str) -> builtins.list[dict]:
        """Every stored object of ``plural`` (``persistentvolumes``...), in arrival order."""
        return [*self.objects[plural].values()]
