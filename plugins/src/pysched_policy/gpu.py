"""GPU (Score): keep GPU nodes for GPU pods.

GPUs reach pods two ways, and both count. As an extended resource (``nvidia.com/gpu`` by default;
``resourceNames`` in pluginConfig): the pod requests it, a node has it allocatable. Through Dynamic
Resource Allocation: one of the pod's ResourceClaims requests a DeviceClass listed in
``deviceClassNames`` (default ``gpu.nvidia.com``, the class NVIDIA's DRA driver installs), and a
node has devices published in a ResourceSlice by a driver listed in ``draDrivers`` (default
``gpu.nvidia.com``).

A pod that wants a GPU scores 50 on every node - where it fits is NodeResourcesFit's and
DynamicResources' job. A pod that needs no GPU scores GPU nodes 0 and all other nodes 100, so GPU
capacity stays free. The pod's effective request follows the API rules (init containers, sidecars,
overhead, limits-only extended resources); a zero request is no demand. Reads: the pod's requests
and claims, the nodes' allocatable amounts (``NodeBatch.allocatable``), ResourceClaims and
ResourceSlices (the DRA GPU nodes are worked out again only when the ObjectStore changes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pysched.framework import CycleState, Handle, NodeBatch, PodInfo, ScorePlugin
from pysched.framework.api import ConfigError, is_extended_resource

GPU_POD_SCORE = 50
NON_GPU_ON_GPU_NODE = 0
NON_GPU_ON_PLAIN_NODE = 100
DEFAULT_RESOURCE_NAMES = ("nvidia.com/gpu",)
DEFAULT_DEVICE_CLASSES = ("gpu.nvidia.com",)
DEFAULT_DRA_DRIVERS = ("gpu.nvidia.com",)


@dataclass
class GPUArgs:
    """``resourceNames``: the extended resources that mean "GPU" (default ``nvidia.com/gpu``);
    ``deviceClassNames``: the DRA DeviceClasses that do (default ``gpu.nvidia.com``);
    ``draDrivers``: the DRA drivers whose ResourceSlices make a node a GPU node (``gpu.nvidia.com``)."""
    KIND = "GPUArgs"

    resource_names: list[str] = field(default_factory=lambda: list(DEFAULT_RESOURCE_NAMES))
    device_class_names: list[str] = field(default_factory=lambda: list(DEFAULT_DEVICE_CLASSES))
    dra_drivers: list[str] = field(default_factory=lambda: list(DEFAULT_DRA_DRIVERS))

    def __post_init__(self) -> None:
        if not self.resource_names:
            self.resource_names = list(DEFAULT_RESOURCE_NAMES)

    def validate(self, path: str) -> None:
        for i, n in enumerate(self.resource_names):
            if not is_extended_resource(n):
                raise ConfigError(f"{path}.resourceNames[{i}]: {n!r} is not an extended resource name (domain/name)")
        for key, names in (("deviceClassNames", self.device_class_names), ("draDrivers", self.dra_drivers)):
            for i, n in enumerate(names):
                if not isinstance(n, str) or not n:
                    raise ConfigError(f"{path}.{key}[{i}]: must be a non-empty string")


class GPU(ScorePlugin[GPUArgs]):
    name = "GPU"

    def __init__(self, args: GPUArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        a = self.args
        self.resource_names = tuple(a.resource_names)
        self.device_classes = frozenset(a.device_class_names)
        self.dra_drivers = frozenset(a.dra_drivers)
        self._dra_nodes: tuple[int, frozenset[str]] = (-1, frozenset())
        self._dra_mask: tuple[tuple[int, ...], npt.NDArray[np.bool_]] | None = None

    def wants_gpu(self, pod: PodInfo) -> bool:
        if any(pod.requests.get(n, 0) > 0 for n in self.resource_names):
            return True
        return bool(pod.resource_claims) and any(self._claim_wants_gpu(c) for c in self._claims(pod))

    def _claims(self, pod: PodInfo) -> list[dict[str, Any]]:
        out = []
        for name in pod.claim_names():
            claim = self.handle.objects.get("resourceclaims", f"{pod.namespace}/{name}") if name else None
            if claim is not None:
                out.append(claim)
        return out

    def _claim_wants_gpu(self, claim: dict[str, Any]) -> bool:
        for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
            specs = [r["exactly"]] if r.get("exactly") is not None else list(r.get("firstAvailable") or ())
            if any(s.get("deviceClassName") in self.device_classes for s in specs):
                return True
        return False

    def dra_gpu_nodes(self) -> frozenset[str]:
        """The nodes with devices in a ResourceSlice of a ``draDrivers`` driver."""
        objects = self.handle.objects
        if self._dra_nodes[0] != objects.version:
            names = frozenset(s["spec"]["nodeName"] for s in objects.list("resourceslices")
                              if (s.get("spec") or {}).get("driver") in self.dra_drivers
                              and s["spec"].get("nodeName") and s["spec"].get("devices"))
            self._dra_nodes = (objects.version, names)
        return self._dra_nodes[1]

    def _dra_slot_mask(self, nodes: NodeBatch, dra: frozenset[str]) -> npt.NDArray[np.bool_]:
        """Per node-table slot: a DRA GPU node (NodeBatch's per-slot arrays). Rebuilt when the
        slices or the nodes change, so a pod's score stays one ``take``."""
        key = (self._dra_nodes[0], *nodes.nodes_version)
        if self._dra_mask is None or self._dra_mask[0] != key:
            mask = np.zeros(nodes.slot_count, dtype=bool)
            index = nodes.slot_index
            for name in dra:
                slot = index.get(name)
                if slot is not None:
                    mask[slot] = True
            self._dra_mask = (key, mask)
        return self._dra_mask[1]

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        n = len(nodes)
        if self.wants_gpu(pod):
            return np.full(n, GPU_POD_SCORE, dtype=np.int64)
        gpu_node = np.zeros(n, dtype=bool)
        for name in self.resource_names:
            if nodes.has_resource(name):
                gpu_node |= nodes.allocatable(name) > 0
        dra = self.dra_gpu_nodes()
        if dra:
            gpu_node |= nodes.take(self._dra_slot_mask(nodes, dra))
        return np.where(gpu_node, NON_GPU_ON_GPU_NODE, NON_GPU_ON_PLAIN_NODE).astype(np.int64)
