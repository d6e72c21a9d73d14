"""PodInfo: the slim, pre-parsed view of a Pod that the cache, queue and plugins share.

Built once per watch event from the raw JSON dict (never from generated client models). Every
field a plugin needs is parsed here, so the scheduling cycle does no dictionary digging and no
quantity parsing. A pod whose spec cannot be parsed keeps ``parse_error`` (naming the field) and
is reported as a scheduling error instead of crashing the informer; so is one whose fields have
the wrong JSON types (``objectshape`` names the first such field).

Only pods this scheduler has to place keep their raw object (``raw``, with managedFields
dropped): extenders and explanations need it. Pods already on a node keep only the parsed fields.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any, NamedTuple

from pysched.apis.core.model import (
    NodeSelector,
    ObjectError,
    PreferredTerm,
    Toleration,
    parse_node_selector,
    parse_preferred_terms,
    parse_tolerations,
)
from pysched.apis.core.objectshape import pod_problem
from pysched.apis.core.resources import fit_score_requests, pod_resource
from pysched.framework.affinity import EMPTY as NO_AFFINITY
from pysched.framework.affinity import PodAffinityTerms, parse_pod_affinity

log = logging.getLogger("pysched.framework.podinfo")
_EPOCH_CACHE: dict[str, float] = {}


class PodVolume(NamedTuple):
    """An in-line volume that VolumeRestrictions or NodeVolumeLimits read (other kinds are not kept).

    ``source``: the volume source's field name (``gcePersistentDisk``, ``awsElasticBlockStore``,
    ``iscsi``, ``rbd``, ``azureDisk``, ``azureFile``, ``cinder``, ``portworxVolume``,
    ``vsphereVolume``); ``name``: the volume's name in the pod; ``id``: what identifies the disk
    (pdName, volumeID, iqn, ``pool/image``, diskURI, volumePath...); ``read_only``; ``extra``:
    RBD monitors, or an Azure disk's ``kind``."""
    source: str
    name: str
    id: str
    read_only: bool = False
    extra: tuple[str, ...] = ()


# Volume source field -> (field holding the disk's identity); the sources PodVolume keeps.
_INLINE_SOURCES = {"gcePersistentDisk": "pdName", "awsElasticBlockStore": "volumeID", "iscsi": "iqn",
                   "rbd": "image", "azureDisk": "diskURI", "azureFile": "shareName", "cinder": "volumeID",
                   "portworxVolume": "volumeID", "vsphereVolume": "volumePath"}


# Sources that are never disks: checked first so that the common volumes cost one set lookup.
_COMMON_SOURCES = frozenset(("configMap", "secret", "emptyDir", "projected", "downwardAPI", "hostPath", "csi", "nfs",
                             "image"))


def _inline_volume(v: dict[str, Any]) -> PodVolume | None:
    for source, id_field in _INLINE_SOURCES.items():
        src = v.get(source)
        if src is None:
            continue
        name = v.get("name") or ""
        ro = bool(src.get("readOnly"))
        if source == "rbd":
            # The API server defaults the pool to "rbd".
            return PodVolume(source, name, f"{src.get('pool') or 'rbd'}/{src.get('image') or ''}", ro,
                             tuple(src.get("monitors") or ()))
        if source == "azureDisk":
            return PodVolume(source, name, src.get("diskURI") or "", ro, (str(src.get("kind") or "Shared"),))
        return PodVolume(source, name, str(src.get(id_field) or ""), ro)
    return None


def parse_time(text: str | None) -> float:
    """RFC 3339 timestamp to epoch seconds (0.0 when absent or invalid)."""
    if not text:
        return 0.0
    hit = _EPOCH_CACHE.get(text)
    if hit is not None:
        return hit
    try:
        v = datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        v = 0.0
    if len(_EPOCH_CACHE) > 8192:
        _EPOCH_CACHE.clear()
    _EPOCH_CACHE[text] = v
    return v


class PodInfo:
    """Parsed pod. Treat as immutable except for ``node_name`` while assumed."""

    __slots__ = (
        "uid", "namespace", "name", "key", "resource_version", "generation", "scheduler_name",
        "node_name", "phase", "deleting", "labels", "annotations", "priority", "created",
        "requests", "non0_cpu", "non0_mem", "host_ports", "tolerations", "node_selector",
        "required_affinity", "preferred_affinity", "pod_affinity", "pod_anti_affinity",
        "spread_constraints", "gates", "owner_kind", "owner_name", "owner_uid", "images",
        "image_volumes",
        "pvc_names", "volumes", "resource_claims", "scheduled_condition", "nominated_node", "raw",
        "parse_error", "spec_hash", "affinity_terms", "fit_score_requests",
        "preemption_policy", "start_time", "preempted_by_scheduler", "scheduling_group",
    )

    # Declared fields (filled by ``from_dict``; treat as read-only).
    uid: str
    namespace: str
    name: str
    key: str                                   # "namespace/name"
    resource_version: str
    generation: int
    scheduler_name: str
    node_name: str                             # "" while pending (or the assumed node)
    phase: str
    deleting: bool                             # has a deletionTimestamp
    labels: dict[str, str]
    annotations: dict[str, str]
    priority: int
    created: float                             # creationTimestamp, epoch seconds
    requests: dict[str, int]                   # effective requests (cpu in millicores)
    non0_cpu: int                              # cpu with kube-scheduler's non-zero defaults
    non0_mem: int
    # NodeResourcesFit's score view of a pod with pod-level requests (containers only, non-zero
    # defaults): (requests, cpu, memory); None for every other pod (use requests/non0_*).
    fit_score_requests: tuple[dict[str, int], int, int] | None
    host_ports: tuple[tuple[str, str, int], ...]   # (hostIP, protocol, hostPort)
    tolerations: tuple[Toleration, ...]
    node_selector: dict[str, str] | None
    required_affinity: NodeSelector | None
    preferred_affinity: tuple[PreferredTerm, ...]
    pod_affinity: dict[str, Any] | None        # spec.affinity.podAffinity as sent
    pod_anti_affinity: dict[str, Any] | None
    spread_constraints: list[dict[str, Any]] | None
    gates: tuple[str, ...]                     # spec.schedulingGates names
    owner_kind: str                            # the controller owner reference
    owner_name: str
    owner_uid: str
    images: tuple[str, ...]                    # container and init container images
    image_volumes: tuple[str, ...]             # spec.volumes[].image.reference, one per image volume
    pvc_names: tuple[tuple[str, bool], ...]    # (claim name, is an ephemeral volume's claim)
    volumes: tuple[PodVolume, ...]             # in-line disks (GCE PD, EBS, iSCSI, RBD, ...)
    resource_claims: tuple[dict[str, Any], ...]
    scheduled_condition: tuple[str, str, str] | None   # PodScheduled (status, reason, message)
    nominated_node: str
    raw: dict[str, Any] | None                 # the object, kept for pods this scheduler places
    parse_error: str | None                    # why the pod cannot be scheduled as sent
    spec_hash: int | None
    affinity_terms: PodAffinityTerms           # parsed pod (anti-)affinity terms
    preemption_policy: str                     # spec.preemptionPolicy ("PreemptLowerPriority" or "Never")
    start_time: float                          # status.startTime, epoch seconds (0.0: not started)
    preempted_by_scheduler: bool               # condition DisruptionTarget=True, reason PreemptionByScheduler
    # spec.schedulingGroup.podGroupName (Kubernetes 1.36+ Workload API): the PodGroup (scheduling.k8s.io)
    # this pod belongs to, in its namespace; "" for none.
    scheduling_group: str

    def __repr__(self) -> str:
        return f"PodInfo({self.key}, node={self.node_name or '-'})"

    def claim_names(self) -> list[str | None]:
        """Each of ``resource_claims``' ResourceClaim name: its ``resourceClaimName``, or for a
        template the claim generated for it (``status.resourceClaimStatuses``, read from ``raw``);
        None where that claim is not created (yet)."""
        generated = {s.get("name"): s.get("resourceClaimName")
                     for s in ((self.raw or {}).get("status") or {}).get("resourceClaimStatuses") or ()}
        return [ref.get("resourceClaimName") or generated.get(ref.get("name")) or None
                for ref in self.resource_claims]

    @property
    def assigned(self) -> bool:
        return bool(self.node_name)

    @classmethod
    def from_dict(cls, obj: dict[str, Any], *, keep_raw: bool = False, use_status: bool | None = None) -> PodInfo:
        """Parse ``obj``; a field of the wrong JSON type gives an unschedulable PodInfo whose
        ``parse_error`` names the field, never an exception."""
        try:
            return cls._parse(obj, keep_raw, use_status)
        except (AttributeError, TypeError, ValueError, KeyError, IndexError, OverflowError) as exc:
            problem = pod_problem(obj)
            if problem is None:  # well-typed, yet the parser failed: our bug, keep it visible
                log.exception("cannot parse a well-typed pod")
                problem = f"cannot parse the pod: {type(exc).__name__}: {exc}"
            return cls._unparsable(obj, problem, keep_raw)

    @classmethod
    def _unparsable(cls, obj: Any, problem: str, keep_raw: bool) -> PodInfo:
        """What can be told about a pod whose fields have the wrong types: its identity, if that much
        is well-formed, and the problem. It requests nothing and matches nothing."""
        p = cls.__new__(cls)
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        spec = obj.get("spec") if isinstance(obj, dict) else None
        spec = spec if isinstance(spec, dict) else {}

        def text(d: dict[str, Any], key: str, default: str = "") -> str:
            v = d.get(key)
            return v if isinstance(v, str) and v else default

        p.namespace = text(meta, "namespace", "default")
        p.name = text(meta, "name")
        p.uid = text(meta, "uid", f"{p.namespace}/{p.name}")
        p.key = f"{p.namespace}/{p.name}"
        p.resource_version = text(meta, "resourceVersion")
        p.generation = 0
        p.scheduler_name = text(spec, "schedulerName", "default-scheduler")
        p.node_name = text(spec, "nodeName")
        p.phase = "Pending"
        p.deleting = bool(meta.get("deletionTimestamp"))
        p.labels, p.annotations = {}, {}
        p.priority, p.created, p.nominated_node = 0, 0.0, ""
        p.owner_kind = p.owner_name = p.owner_uid = ""
        p.scheduled_condition = None
        p.requests, p.non0_cpu, p.non0_mem = {}, 0, 0
        p.fit_score_requests = None
        p.host_ports, p.images, p.tolerations, p.gates, p.pvc_names, p.resource_claims = (), (), (), (), (), ()
        p.volumes = p.image_volumes = ()
        p.node_selector = p.spread_constraints = p.pod_affinity = p.pod_anti_affinity = None
        p.required_affinity, p.preferred_affinity, p.affinity_terms = None, (), NO_AFFINITY
        p.raw = obj if keep_raw and isinstance(obj, dict) else None
        p.spec_hash = None
        p.preemption_policy, p.start_time, p.preempted_by_scheduler = "PreemptLowerPriority", 0.0, False
        p.scheduling_group = ""
        p.parse_error = problem
        return p

    @classmethod
    def _parse(cls, obj: dict[str, Any], keep_raw: bool, use_status: bool | None) -> PodInfo:
        p = cls.__new__(cls)
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        p.uid = meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        p.namespace = meta.get("namespace") or "default"
        p.name = meta.get("name") or ""
        p.key = f"{p.namespace}/{p.name}"
        p.resource_version = meta.get("resourceVersion") or ""
        p.generation = meta.get("generation") or 0
        p.scheduler_name = spec.get("schedulerName") or "default-scheduler"
        p.node_name = spec.get("nodeName") or ""
        p.phase = status.get("phase") or "Pending"
        p.deleting = bool(meta.get("deletionTimestamp"))
        p.labels = meta.get("labels") or {}
        p.annotations = meta.get("annotations") or {}
        p.priority = spec.get("priority") or 0
        p.created = parse_time(meta.get("creationTimestamp"))
        p.nominated_node = status.get("nominatedNodeName") or ""
        p.parse_error = None
        owner = None
        for ref in meta.get("ownerReferences") or ():
            if ref.get("controller"):
                owner = ref
                break
        p.owner_kind = owner.get("kind", "") if owner else ""
        p.owner_name = owner.get("name", "") if owner else ""
        p.owner_uid = owner.get("uid", "") if owner else ""
        p.scheduled_condition = None
        p.preempted_by_scheduler = False
        for cond in status.get("conditions") or ():
            ctype = cond.get("type")
            if ctype == "PodScheduled" and p.scheduled_condition is None:
                p.scheduled_condition = (cond.get("status"), cond.get("reason") or "", cond.get("message") or "")
            elif ctype == "DisruptionTarget":
                p.preempted_by_scheduler = (cond.get("status") == "True"
                                            and cond.get("reason") == "PreemptionByScheduler")
        p.preemption_policy = spec.get("preemptionPolicy") or "PreemptLowerPriority"
        p.start_time = parse_time(status.get("startTime"))

        if use_status is None:
            use_status = bool(p.node_name)
        p.fit_score_requests = None
        try:
            p.requests, p.non0_cpu, p.non0_mem = pod_resource(spec, status, use_status=use_status)
            if spec.get("resources"):
                p.fit_score_requests = fit_score_requests(spec)
        except ValueError as exc:
            p.requests, p.non0_cpu, p.non0_mem = {}, 0, 0
            p.parse_error = f"spec.containers resources: {exc}"

        ports = []
        images = []
        for c in spec.get("containers") or ():
            img = c.get("image")
            if img:
                images.append(img)
            for port in c.get("ports") or ():
                hp = port.get("hostPort") or 0
                if hp > 0:
                    ports.append((port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP", hp))
        for c in spec.get("initContainers") or ():
            img = c.get("image")
            if img:
                images.append(img)
            if c.get("restartPolicy") == "Always":
                for port in c.get("ports") or ():
                    hp = port.get("hostPort") or 0
                    if hp > 0:
                        ports.append((port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP", hp))
        p.host_ports = tuple(ports)
        p.images = tuple(images)
        p.tolerations = parse_tolerations(spec.get("tolerations"))
        p.node_selector = spec.get("nodeSelector") or None
        p.gates = tuple(g.get("name", "") for g in spec.get("schedulingGates") or ())
        group = spec.get("schedulingGroup")
        p.scheduling_group = (group.get("podGroupName") or "") if isinstance(group, dict) else ""
        p.spread_constraints = spec.get("topologySpreadConstraints") or None
        claims = []
        inline: list[PodVolume] = []
        image_volumes: list[str] = []
        for v in spec.get("volumes") or ():
            if v.get("image") is not None:
                image_volumes.append(v["image"].get("reference") or "")
            if v.get("persistentVolumeClaim"):
                claims.append((v["persistentVolumeClaim"].get("claimName", ""), False))
            elif v.get("ephemeral"):
                claims.append((f"{p.name}-{v.get('name', '')}", True))
            elif len(v) > 1 and not _COMMON_SOURCES.intersection(v):
                vol = _inline_volume(v)
                if vol is not None:
                    inline.append(vol)
        p.pvc_names = tuple(claims)
        p.volumes = tuple(inline)
        p.image_volumes = tuple(image_volumes)
        p.resource_claims = tuple(spec.get("resourceClaims") or ())

        affinity = spec.get("affinity") or {}
        node_aff = affinity.get("nodeAffinity") or {}
        p.required_affinity = None
        p.preferred_affinity = ()
        if node_aff:
            try:
                p.required_affinity = parse_node_selector(
                    node_aff.get("requiredDuringSchedulingIgnoredDuringExecution"),
                    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution")
                p.preferred_affinity = parse_preferred_terms(
                    node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"),
                    "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution")
            except ObjectError as exc:
                p.parse_error = str(exc)
        p.pod_affinity = affinity.get("podAffinity") or None
        p.pod_anti_affinity = affinity.get("podAntiAffinity") or None
        if p.pod_affinity or p.pod_anti_affinity:
            try:
                p.affinity_terms = parse_pod_affinity(p.pod_affinity, p.pod_anti_affinity, p.namespace)
            except ObjectError as exc:
                p.affinity_terms = NO_AFFINITY
                p.parse_error = str(exc)
        else:
            p.affinity_terms = NO_AFFINITY

        if keep_raw:
            meta.pop("managedFields", None)
            p.raw = obj
        else:
            p.raw = None
        p.spec_hash = None
        return p

    def with_node(self, node_name: str) -> PodInfo:
        """A copy placed on ``node_name`` (the assumed pod)."""
        c = PodInfo.__new__(PodInfo)
        for s in PodInfo.__slots__:
            setattr(c, s, getattr(self, s))
        c.node_name = node_name
        return c
