"""NodeVolumeLimits (PreFilter, Filter): a node's CSI drivers can attach only so many volumes.

The limits are the node's CSINode ``spec.drivers[].allocatable.count`` (a driver without a count,
or a node without a CSINode, has no limit). Per driver, the unique volumes (``driver/handle``)
of the pods already on the node (bound or assumed, any scheduler's) plus the VolumeAttachments
to the node that no pod accounts for, plus the incoming pod's volumes not already on the node,
must not exceed the count; otherwise ``node(s) exceed max volume count`` (Unschedulable).

What counts as a volume of a driver, as kube-scheduler 1.35-1.37: a ``persistentVolumeClaim`` or
generic ``ephemeral`` volume (claim ``<pod>-<volume>``, which must be controlled by the pod) whose
claim is bound to a PV with ``spec.csi`` (driver, volumeHandle) or with an in-tree source that is
migrated to CSI (AWS EBS, GCE PD, Azure Disk, Cinder whenever the node has a CSINode; Portworx too
from 1.36, at 1.35 only when the CSINode's ``storage.alpha.kubernetes.io/migrated-plugins``
annotation lists it), the handle translated as ``k8s.io/csi-translation-lib`` does; an unbound
claim counts against its StorageClass's provisioner (translated when in-tree) as a volume of its
own; in-line in-tree volumes of those plugins count too. CSI in-line volumes never count. A claim
of the incoming pod that does not exist is UnschedulableAndUnresolvable (``looking up PVC ns/name:
persistentvolumeclaim "name" not found``). Pods with no claim and no migratable in-line volume are
skipped at PreFilter.

With VolumeLimitScaling (on by default from 1.37), before the limits: a driver of the pod's new
volumes that has a CSIDriver object with ``spec.preventPodSchedulingIfMissing: true`` (at 1.35, any
CSIDriver object) and is not among the node's CSINode drivers (or the node has no CSINode) makes
the node Unschedulable with ``<driver> CSI driver is not installed on the node``; the pod's first
such driver is named (upstream's is the first of a Go map, in no defined order). Upstream
registers no CSIDriver event: such a pod comes back on a CSINode added, or one whose driver
limits rose. Reads: CSINodes, CSIDrivers, VolumeAttachments, PVCs, PVs, StorageClasses from the
ObjectStore; the pods on each node.
"""
from __future__ import annotations

from typing import Any

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
    NodeInfo,
    PodInfo,
    PreFilterPlugin,
    PreFilterResult,
    Status,
)
from pysched.framework.features import VOLUME_LIMIT_SCALING
from pysched.plugins.helper.volumes import (
    IN_TREE,
    PLUGIN_TO_DRIVER,
    PORTWORX,
    TranslationError,
    claim_class,
    inline_volume_handle,
    migration_on,
    pv_in_tree_source,
    pv_volume_handle,
)

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"
# VolumeLimitScaling: the release from which a CSIDriver opts in (``preventPodSchedulingIfMissing``);
# at 1.35 (alpha) any CSIDriver object did.
OPT_IN_FROM = (1, 36)
# Unbound claims count as volumes of their own: a handle no real volume can have.
UNBOUND_PREFIX = "\x00unbound-"


class _NotFound(Exception):
    """The incoming pod's claim does not exist (UnschedulableAndUnresolvable)."""


def volume_limits(csinode: dict[str, Any] | None) -> dict[str, int]:
    """Driver name -> ``allocatable.count`` from a CSINode (drivers without a count have no limit)."""
    limits: dict[str, int] = {}
    if csinode is None:
        return limits
    for d in (csinode.get("spec") or {}).get("drivers") or ():
        count = (d.get("allocatable") or {}).get("count")
        if count is not None:
            limits[d.get("name") or ""] = int(count)
    return limits


class NodeVolumeLimits(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = "NodeVolumeLimits"
    pre_filter_reads_other_pods = False   # PreFilter reads the pod itself (and objects), never other pods

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   nodes: NodeBatch) -> tuple[PreFilterResult | None, Status | None]:
        if pod.pvc_names or any(v.source in IN_TREE for v in pod.volumes):
            return None, None
        return None, Status(Code.SKIP)

    def reads_pods(self, state: CycleState, pod: PodInfo) -> str:
        return READS_ANY if pod.pvc_names or pod.volumes else READS_NONE   # other pods' volumes

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> FilterResult:
        if not pod.pvc_names and not pod.volumes:
            return FilterResult.all_pass(len(nodes))
        store = self.handle.objects
        scaling = VOLUME_LIMIT_SCALING in self.handle.feature_gates
        attachments: dict[str, dict[str, str]] | None = None
        # The pod's own volumes depend on the node only through which migrations are on there.
        own: dict[tuple[bool, bool], dict[str, str] | Status] = {}

        def pod_volumes(csinode: dict[str, Any] | None) -> dict[str, str] | Status:
            key = (csinode is not None, migration_on(csinode, PORTWORX, self.handle.kube_version))
            hit = own.get(key)
            if hit is None:
                found: dict[str, str] = {}
                try:
                    self._attachable(pod, csinode, True, found)
                    hit = found
                except _NotFound as exc:
                    hit = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, str(exc))
                except (TranslationError, ValueError) as exc:
                    hit = Status(Code.ERROR, str(exc))
                own[key] = hit
            return hit

        def check(info: NodeInfo) -> Status | None:
            nonlocal attachments
            csinode = store.get("csinodes", info.name)
            volumes = pod_volumes(csinode)
            if isinstance(volumes, Status):
                return volumes
            if not volumes:
                return None
            if scaling:
                for driver in dict.fromkeys(volumes.values()):
                    if not self._driver_installed(driver, csinode):
                        return Status(Code.UNSCHEDULABLE, f"{driver} CSI driver is not installed on the node")
            new = dict(volumes)
            limits = volume_limits(csinode)
            if not limits:
                return None
            attached: dict[str, str] = {}
            try:
                for other in info.pods.values():
                    if other.pvc_names or other.volumes:
                        self._attachable(other, csinode, False, attached)
            except (TranslationError, ValueError) as exc:
                return Status(Code.ERROR, str(exc))
            counts: dict[str, int] = {}
            for unique, driver in attached.items():
                new.pop(unique, None)
                counts[driver] = counts.get(driver, 0) + 1
            if attachments is None:
                attachments = self._attachments()
            for unique, driver in attachments.get(info.name, {}).items():
                if unique not in attached:
                    counts[driver] = counts.get(driver, 0) + 1
            wanted: dict[str, int] = {}
            for driver in new.values():
                wanted[driver] = wanted.get(driver, 0) + 1
            for driver, count in wanted.items():
                limit = limits.get(driver)
                if limit is not None and counts.get(driver, 0) + count > limit:
                    return Status(Code.UNSCHEDULABLE, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
            return None

        return FilterResult.each(nodes, check)

    def _driver_installed(self, driver: str, csinode: dict[str, Any] | None) -> bool:
        """``checkCSIDriverOnNode`` (VolumeLimitScaling): a driver without a CSIDriver object may not
        be a CSI driver at all and passes; one with it - from kube 1.36 only if it sets
        ``spec.preventPodSchedulingIfMissing: true`` - must be among the node's CSINode drivers."""
        obj = self.handle.objects.get("csidrivers", driver)
        if obj is None:
            return True
        if (self.handle.kube_version >= OPT_IN_FROM
                and (obj.get("spec") or {}).get("preventPodSchedulingIfMissing") is not True):
            return True
        return any(d.get("name") == driver for d in ((csinode or {}).get("spec") or {}).get("drivers") or ())

    # -- what a pod's volumes count against ------------------------------------------------------

    def _attachable(self, pod: PodInfo, csinode: dict[str, Any] | None, new_pod: bool,
                    result: dict[str, str]) -> None:
        """Add ``driver/handle -> driver`` for each of ``pod``'s volumes that counts (``filterAttachableVolumes``)."""
        store = self.handle.objects
        for vol in pod.volumes:
            if vol.source not in IN_TREE:
                continue
            plugin, driver = IN_TREE[vol.source]
            if not migration_on(csinode, plugin, self.handle.kube_version):
                continue
            try:
                handle = inline_volume_handle(vol)
            except TranslationError as exc:
                raise TranslationError(f"converting volume({vol.name}) from inline to csi: {exc}") from exc
            result[f"{driver}/{handle}"] = driver
        for claim, ephemeral in pod.pvc_names:
            if not claim:
                raise ValueError("PersistentVolumeClaim had no name")
            pvc = store.get("persistentvolumeclaims", f"{pod.namespace}/{claim}")
            if pvc is None:
                if new_pod:
                    raise _NotFound(f"looking up PVC {pod.namespace}/{claim}: "
                                    f'persistentvolumeclaim "{claim}" not found')
                continue
            if ephemeral and not _controlled_by(pvc, pod):
                raise ValueError(f"PVC {pod.namespace}/{claim} was not created for pod {pod.namespace}/{pod.name} "
                                 f"(pod is not owner)")
            driver, handle = self._driver_info(csinode, pvc)
            if driver and handle:
                result[f"{driver}/{handle}"] = driver

    def _driver_info(self, csinode: dict[str, Any] | None, pvc: dict[str, Any]) -> tuple[str, str]:
        """(CSI driver, volume handle) of a claim: from its PV, else from its StorageClass."""
        store = self.handle.objects
        pv_name = (pvc.get("spec") or {}).get("volumeName") or ""
        pv = store.get("persistentvolumes", pv_name) if pv_name else None
        if pv is None:
            return self._driver_info_from_class(csinode, pvc)
        csi = (pv.get("spec") or {}).get("csi")
        if csi is not None:
            return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
        source = pv_in_tree_source(pv)
        if source is None:
            return "", ""
        plugin, driver = IN_TREE[source]
        if not migration_on(csinode, plugin, self.handle.kube_version):
            return "", ""
        try:
            return driver, pv_volume_handle(pv, source)
        except TranslationError:
            return "", ""

    def _driver_info_from_class(self, csinode: dict[str, Any] | None, pvc: dict[str, Any]) -> tuple[str, str]:
        cls = claim_class(pvc)
        if not cls:
            return "", ""
        sc = self.handle.objects.get("storageclasses", cls)
        if sc is None:
            return "", ""
        meta = pvc.get("metadata") or {}
        handle = f"{UNBOUND_PREFIX}{meta.get('namespace')}/{meta.get('name')}"
        provisioner = str(sc.get("provisioner") or "")
        driver = PLUGIN_TO_DRIVER.get(provisioner)
        if driver is not None:
            if not migration_on(csinode, provisioner, self.handle.kube_version):
                return "", ""
            return driver, handle
        return provisioner, handle

    def _attachments(self) -> dict[str, dict[str, str]]:
        """Node name -> {driver/handle: driver} of the VolumeAttachments of CSI PVs."""
        store = self.handle.objects
        out: dict[str, dict[str, str]] = {}
        for va in store.list("volumeattachments"):
            spec = va.get("spec") or {}
            attacher = spec.get("attacher") or ""
            pv_name = (spec.get("source") or {}).get("persistentVolumeName")
            if not attacher or not pv_name:
                continue
            pv = store.get("persistentvolumes", pv_name)
            csi = ((pv or {}).get("spec") or {}).get("csi")
            if csi is None:
                continue
            out.setdefault(spec.get("nodeName") or "", {})[f"{attacher}/{csi.get('volumeHandle') or ''}"] = attacher
        return out

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (ClusterEventWithHint(ClusterEvent("CSINode", "Add")),
                ClusterEventWithHint(ClusterEvent("CSINode", "Update"), _after_csinode_updated),
                ClusterEventWithHint(ClusterEvent("Pod", "Delete"), _after_pod_deleted),
                ClusterEventWithHint(ClusterEvent("PersistentVolumeClaim", "Add"), _after_claim_added),
                ClusterEventWithHint(ClusterEvent("VolumeAttachment", "Delete"), _after_attachment_deleted))


def _controlled_by(pvc: dict[str, Any], pod: PodInfo) -> bool:
    meta = pvc.get("metadata") or {}
    if (meta.get("namespace") or "default") != pod.namespace:
        return False
    return any(ref.get("controller") and ref.get("uid") == pod.uid for ref in meta.get("ownerReferences") or ())


def _after_csinode_updated(pod: PodInfo, old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
    """Some driver's attach limit went up."""
    before = volume_limits(old)
    for d in ((new or {}).get("spec") or {}).get("drivers") or ():
        if int((d.get("allocatable") or {}).get("count") or 0) > before.get(d.get("name") or "", 0):
            return True
    return False


def _after_pod_deleted(pod: PodInfo, old: PodInfo | None, new: object) -> bool:
    """A pod on a node (or nominated to one) with a claim or a migratable in-line volume went away."""
    if old is None or (not old.node_name and not old.nominated_node):
        return False
    return bool(old.pvc_names) or any(v.source in IN_TREE for v in old.volumes)


def _after_claim_added(pod: PodInfo, old: object, new: dict[str, Any] | None) -> bool:
    meta = (new or {}).get("metadata") or {}
    return meta.get("namespace") == pod.namespace and any(c == meta.get("name") for c, _ in pod.pvc_names)


def _after_attachment_deleted(pod: PodInfo, old: dict[str, Any] | None, new: object) -> bool:
    """The pod has a claim, or an in-line migratable volume of the detached volume's driver."""
    if any(not eph for _, eph in pod.pvc_names):
        return True
    attacher = ((old or {}).get("spec") or {}).get("attacher")
    return any(v.source in IN_TREE and IN_TREE[v.source][1] == attacher for v in pod.volumes)
