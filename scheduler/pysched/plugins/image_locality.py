"""ImageLocality (Score): prefer nodes that already have the pod's container images.

For each container (and init container) image the node has, add ``size * (nodes with the
image / all nodes)``; the sum is clamped to [23 MiB, 1000 MiB x images] and scaled to 0-100,
as upstream. Image names without a tag get ``:latest``. Image volumes
(``spec.volumes[].image.reference``) follow the release (``Handle.kube_version``): kube-scheduler
1.35 ignores them; 1.36 adds them to the sum but still counts only the containers in the upper
bound; from 1.37 they are in both (``imageCount`` = containers + init containers + image
volumes). Reads: the snapshot's per-node image sizes (from node ``status.images``) and its count
of nodes per image (``Handle.snapshot``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pysched.framework import MAX_NODE_SCORE, CycleState, NodeBatch, PodInfo, ScorePlugin

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    if name.rfind(":") <= name.rfind("/"):
        name = name + ":latest"
    return name


class ImageLocality(ScorePlugin):
    name = "ImageLocality"

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> npt.NDArray[np.int64]:
        snapshot = self.handle.snapshot
        release = self.handle.kube_version
        images = pod.images + pod.image_volumes if release >= (1, 36) else pod.images
        n_images = max(len(images) if release >= (1, 37) else len(pod.images), 1)
        if not snapshot.image_nodes or not images:
            # No node has any of the pod's images: every sum is clamped up to the 23 MiB floor,
            # which scores 0.
            return np.zeros(len(nodes), dtype=np.int64)
        sums = np.zeros(len(nodes), dtype=np.int64)
        total = max(len(snapshot.nodes), 1)
        for img in images:
            name = normalized_image_name(img)
            spread = snapshot.image_nodes.get(name, 0) / total
            if spread:
                sums += (nodes.take(snapshot.image_sizes(name)) * spread).astype(np.int64)
        return _priority(sums, n_images)


def _priority(sums: npt.NDArray[np.int64], n_images: int) -> npt.NDArray[np.int64]:
    """``calculatePriority``: the sum clamped to [23 MiB, 1000 MiB x images], scaled to 0-100."""
    max_threshold = MAX_CONTAINER_THRESHOLD * n_images
    s = np.clip(sums, MIN_THRESHOLD, max_threshold)
    out: npt.NDArray[np.int64] = MAX_NODE_SCORE * (s - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)
    return out
