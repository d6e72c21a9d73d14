"""GPU (Score): keep GPU nodes for GPU pods.

A pod that requests a GPU resource (``nvidia.com/gpu`` by default; ``resourceNames`` in
pluginConfig) scores 50 on every node - where it fits is NodeResourcesFit's job, against
allocatable minus what bound and assumed pods request. A pod that needs no GPU scores GPU nodes
(allocatable > 0 of any listed resource) 0 and all other nodes 100, so GPU capacity stays free.
The pod's effective request follows the API rules (init containers, sidecars, overhead,
limits-only extended resources); a zero request is no demand. Reads: the pod's requests and the
NodeTable's allocatable columns.
"""

from __future__ import annotations

import numpy as np

from pysched.apis.config import ConfigError
from pysched.framework.args import get_str_list, strict
from pysched.framework.interface import ScorePlugin
from pysched.apis.core.resources import is_extended_resource

GPU_POD_SCORE = 50
NON_GPU_ON_GPU_NODE = 0
NON_GPU_ON_PLAIN_NODE = 100


class GPUArgs:
    def __init__(self, resource_names=("nvidia.com/gpu",)):
        self.resource_names = list(resource_names)

    @classmethod
    def from_dict(cls, raw: dict, path: str) -> "GPUArgs":
        raw = strict(raw, path, ("resourceNames",))
        names = get_str_list(raw, "resourceNames", path) or ["nvidia.com/gpu"]
        for i, n in enumerate(names):
            if not is_extended_resource(n):
                raise ConfigError(f"{path}.resourceNames[{i}]: {n!r} is not an extended resource name (domain/name)")
        return cls(names)

    def to_dict(self) -> dict:
        return {"resourceNames": list(self.resource_names)}


class GPU(ScorePlugin):
    name = "GPU"
    Args = GPUArgs

    def __init__(self, args=None, handle=None):
        super().__init__(args or GPUArgs(), handle)

    def wants_gpu(self, pod) -> bool:
        return any(pod.requests.get(n, 0) > 0 for n in self.args.resource_names)

    def score(self, state, pod, node):
        if self.wants_gpu(pod):
            return GPU_POD_SCORE
        gpu_node = any(node.allocatable.get(n, 0) > 0 for n in self.args.resource_names)
        return NON_GPU_ON_GPU_NODE if gpu_node else NON_GPU_ON_PLAIN_NODE

    def score_nodes(self, state, pod, nodes):
        n = len(nodes)
        if self.wants_gpu(pod):
            return np.full(n, GPU_POD_SCORE, dtype=np.int64)
        table = nodes.table
        gpu_node = np.zeros(n, dtype=bool)
        for name in self.args.resource_names:
            col = table.res_index.get(name)
            if col is not None:
                gpu_node |= table.alloc[nodes.slots, col] > 0
        return np.where(gpu_node, NON_GPU_ON_GPU_NODE, NON_GPU_ON_PLAIN_NODE).astype(np.int64)
