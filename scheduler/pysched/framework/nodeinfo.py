"""NodeInfo: one node's scheduling-relevant fields plus what its pods take.

The node part (labels, taints, allocatable, images, declared features) is parsed from the watch
event; the pod part (requested resources, non-zero requests for scoring, host ports, the pods
themselves) is kept up to date by the cache as pods are added, assumed, forgotten and removed,
whichever scheduler bound them. The same numbers are mirrored into ``NodeTable`` rows for vectorised filters.
"""

from __future__ import annotations

import logging
from typing import Any

from pysched.apis.core.model import Taint, parse_taints
from pysched.apis.core.objectshape import node_problem
from pysched.apis.core.quantity import resource_value
from pysched.framework.podinfo import PodInfo

log = logging.getLogger("pysched.framework.nodeinfo")
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
HOSTNAME_LABEL = "kubernetes.io/hostname"


class NodeSpec:
    """The parsed Node object: only what scheduling reads."""

    __slots__ = ("name", "uid", "resource_version", "labels", "taints", "unschedulable",
                 "allocatable", "images", "raw_alloc", "declared_features", "parse_error", "raw")

    name: str
    uid: str
    resource_version: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: dict[str, int]               # status.allocatable as integers (cpu in millicores)
    images: dict[str, int]                    # image name -> size in bytes
    raw_alloc: dict[str, Any]                 # status.allocatable as sent
    declared_features: tuple[str, ...]        # status.declaredFeatures as sent (sorted by the API server)
    parse_error: str | None
    raw: dict[str, Any] | None                # the object, kept when extenders need whole Nodes

    @classmethod
    def from_dict(cls, obj: dict[str, Any], *, keep_raw: bool = False) -> NodeSpec:
        """Parse ``obj``; a field of the wrong JSON type gives a node with nothing allocatable whose
        ``parse_error`` names the field, never an exception."""
        try:
            return cls._parse(obj, keep_raw)
        except (AttributeError, TypeError, ValueError, KeyError, IndexError, OverflowError) as exc:
            problem = node_problem(obj)
            if problem is None:  # well-typed, yet the parser failed: our bug, keep it visible
                log.exception("cannot parse a well-typed node")
                problem = f"cannot parse the node: {type(exc).__name__}: {exc}"
            n = cls.__new__(cls)
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            meta = meta if isinstance(meta, dict) else {}
            name, uid, rv = (meta.get(k) for k in ("name", "uid", "resourceVersion"))
            n.name = name if isinstance(name, str) else ""
            n.uid = uid if isinstance(uid, str) else ""
            n.resource_version = rv if isinstance(rv, str) else ""
            n.labels, n.taints, n.unschedulable = {}, (), False
            n.raw_alloc, n.allocatable, n.images = {}, {}, {}
            n.declared_features = ()
            n.raw = obj if keep_raw and isinstance(obj, dict) else None
            n.parse_error = problem
            return n

    @classmethod
    def _parse(cls, obj: dict[str, Any], keep_raw: bool) -> NodeSpec:
        n = cls.__new__(cls)
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        n.name = meta.get("name") or ""
        n.uid = meta.get("uid") or ""
        n.resource_version = meta.get("resourceVersion") or ""
        n.labels = dict(meta.get("labels") or {})
        n.taints = parse_taints(spec.get("taints"))
        n.unschedulable = bool(spec.get("unschedulable"))
        n.raw_alloc = status.get("allocatable") or {}
        n.parse_error = None
        alloc = {}
        for name, q in n.raw_alloc.items():
            try:
                alloc[name] = resource_value(name, q)
            except ValueError as exc:
                n.parse_error = f"status.allocatable[{name}]: {exc}"
        n.allocatable = alloc
        images = {}
        for img in status.get("images") or ():
            size = img.get("sizeBytes") or 0
            for nm in img.get("names") or ():
                images[nm] = size
        n.images = images
        n.declared_features = tuple(status.get("declaredFeatures") or ())
        if keep_raw:
            meta.pop("managedFields", None)
            n.raw = obj
        else:
            n.raw = None
        return n

    def same_for_scheduling(self, other: NodeSpec) -> bool:
        return (self.labels == other.labels and self.taints == other.taints
                and self.unschedulable == other.unschedulable and self.raw_alloc == other.raw_alloc
                and self.images == other.images and self.declared_features == other.declared_features)


class NodeInfo:
    """A node plus the pods on it. ``slot`` is its row in the NodeTable."""

    __slots__ = ("spec", "slot", "pods", "requested", "non0_cpu", "non0_mem", "used_ports",
                 "generation")

    spec: NodeSpec
    slot: int                                 # its row in the cache's node table
    pods: dict[str, PodInfo]                  # uid -> pod (bound by anyone, or assumed)
    requested: dict[str, int]
    non0_cpu: int
    non0_mem: int
    used_ports: dict[tuple[str, str, int], int]
    generation: int

    def __init__(self, spec: NodeSpec, slot: int):
        self.spec = spec
        self.slot = slot
        self.pods = {}
        self.requested = {}
        self.non0_cpu = 0
        self.non0_mem = 0
        self.used_ports = {}
        self.generation = 0

    # convenient read-only views used by per-node plugins
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def labels(self) -> dict[str, str]:
        return self.spec.labels

    @property
    def taints(self) -> tuple[Taint, ...]:
        return self.spec.taints

    @property
    def allocatable(self) -> dict[str, int]:
        return self.spec.allocatable

    @property
    def allowed_pods(self) -> int:
        return self.spec.allocatable.get("pods", 0)

    def add_pod(self, pod: PodInfo) -> None:
        self.pods[pod.uid] = pod
        req = self.requested
        for k, v in pod.requests.items():
            req[k] = req.get(k, 0) + v
        self.non0_cpu += pod.non0_cpu
        self.non0_mem += pod.non0_mem
        for port in pod.host_ports:
            self.used_ports[port] = self.used_ports.get(port, 0) + 1
        self.generation += 1

    def remove_pod(self, pod: PodInfo) -> bool:
        old = self.pods.pop(pod.uid, None)
        if old is None:
            return False
        req = self.requested
        for k, v in old.requests.items():
            left = req.get(k, 0) - v
            if left:
                req[k] = left
            else:
                req.pop(k, None)
        self.non0_cpu -= old.non0_cpu
        self.non0_mem -= old.non0_mem
        for port in old.host_ports:
            c = self.used_ports.get(port, 0) - 1
            if c > 0:
                self.used_ports[port] = c
            else:
                self.used_ports.pop(port, None)
        self.generation += 1
        return True

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"
