"""GPU (Score): keep GPU nodes for GPU pods.

A pod that requests a GPU resource (``nvidia.com/gpu`` by default; ``resourceNames`` in
pluginConfig) scores 50 on every node - where it fits is NodeResourcesFit's job, against
allocatable minus what bound and assumed pods request. A pod that needs no GPU scores GPU nodes
(allocatable > 0 of any listed resource) 0 and all other nodes 100, so GPU capacity stays free.
The pod's effective request follows the API rules (init containers, sidecars, overhead,
limits-only extended resources); a zero request is no demand. Reads: the pod's requests and the
nodes' allocatable amounts (``NodeBatch.allocatable``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pysched.framework import CycleState, Handle, NodeBatch, PodInfo, ScorePlugin
from pysched.framework.api import ConfigError, is_extended_resource

GPU_POD_SCORE = 50
NON_GPU_ON_GPU_NODE = 0
NON_GPU_ON_PLAIN_NODE = 100
DEFAULT_RESOURCE_NAMES = ("nvidia.com/gpu",)


@dataclass
class GPUArgs:
    """``resourceNames``: the extended resources that mean "GPU" (default ``nvidia.com/gpu``)."""
    KIND = "GPUArgs"

    resource_names: list[str] = field(default_factory=lambda: list(DEFAULT_RESOURCE_NAMES))

    def __post_init__(self) -> None:
        if not self.resource_names:
            self.resource_names = list(DEFAULT_RESOURCE_NAMES)

    def validate(self, path: str) -> None:
        for i, n in enumerate(self.resource_names):
            if not is_extended_resource(n):
                raise ConfigError(f"{path}.resourceNames[{i}]: {n!r} is not an extended resource name (domain/name)")


class GPU(ScorePlugin):
    name = "GPU"
    Args = GPUArgs

    def __init__(self, args: GPUArgs | None, handle: Handle) -> None:
        a = args or GPUArgs()
        super().__init__(a, handle)
        self.resource_names = tuple(a.resource_names)

    def wants_gpu(self, pod: PodInfo) -> bool:
        return any(pod.requests.get(n, 0) > 0 for n in self.resource_names)

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        n = len(nodes)
        if self.wants_gpu(pod):
            return np.full(n, GPU_POD_SCORE, dtype=np.int64)
        gpu_node = np.zeros(n, dtype=bool)
        for name in self.resource_names:
            if nodes.has_resource(name):
                gpu_node |= nodes.allocatable(name) > 0
        return np.where(gpu_node, NON_GPU_ON_GPU_NODE, NON_GPU_ON_PLAIN_NODE).astype(np.int64)
