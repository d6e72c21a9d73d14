"""ImageLocality (Score): prefer nodes that already have the pod's container images.

For each container (and init container) image the node has, add ``size * (nodes with the
image / all nodes)``; the sum is clamped to [23 MiB, 1000 MiB x containers] and scaled to 0-100,
as upstream. Image names without a tag get ``:latest``. Reads: node ``status.images`` (names and
sizes) and the cache's count of nodes per image.
"""

from __future__ import annotations

import numpy as np

from pysched.framework.interface import MAX_NODE_SCORE, ScorePlugin

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    if name.rfind(":") <= name.rfind("/"):
        name = name + ":latest"
    return name


class ImageLocality(ScorePlugin):
    name = "ImageLocality"

    def score(self, state, pod, node):
        images = node.spec.images
        n_containers = len(pod.images)
        if not images or not n_containers:
            return _priority(0, max(n_containers, 1))
        cache = self.handle.cache
        total = max(len(cache.nodes), 1)
        s = 0
        for img in pod.images:
            name = normalized_image_name(img)
            size = images.get(name)
            if size is not None:
                s += int(size * (cache.image_nodes.get(name, 0) / total))
        return _priority(s, n_containers)

    def score_nodes(self, state, pod, nodes):
        cache = self.handle.cache
        n_containers = max(len(pod.images), 1)
        if not cache.image_nodes or not pod.images:
            return np.full(len(nodes), _priority(0, n_containers), dtype=np.int64)
        total = max(len(cache.nodes), 1)
        s = np.zeros(len(nodes), dtype=np.int64)
        for img in pod.images:
            name = normalized_image_name(img)
            spread = cache.image_nodes.get(name, 0) / total
            if spread:
                s += (cache.image_sizes(name)[nodes.slots] * spread).astype(np.int64)
        max_threshold = MAX_CONTAINER_THRESHOLD * n_containers
        s = np.clip(s, MIN_THRESHOLD, max_threshold)
        return MAX_NODE_SCORE * (s - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


def _priority(sum_scores: int, n_containers: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * n_containers
    s = min(max(sum_scores, MIN_THRESHOLD), max_threshold)
    return MAX_NODE_SCORE * (s - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)
