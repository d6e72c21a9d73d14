"""The GPU device table: for every node of the snapshot (one row per node-table slot), its GPU
count, its model, and how much of each GPU is free (thousandths); and which pod holds which GPUs.

Rows follow the node table's slots (``NodeBatch`` per-slot arrays): ``sync`` rebuilds them when the
node set changes and lays the holdings on them again. A holding is added when a pod is reserved
(``hold``; the assumed pod) or seen bound (with the index annotation the scheduler wrote, or, for
a pod bound by someone else without it, on the lowest-index GPUs that fit), and removed when the pod
is unreserved or gone (``release``). ``gen`` counts changes per row, so per-node values derived from
a row (FGD's fragmentation) are recomputed only where something changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pysched.framework import NodeBatch
from pysched.plugins.gpushare.ask import FULL, GPUAsk

TAGS = 17    # GpuClustering's pod kinds on a node: column 0 shared GPUs, k for k whole GPUs (16+: 16)


def tag_column(ask: GPUAsk) -> int:
    return 0 if ask.sharing else min(ask.count, TAGS - 1)


@dataclass(frozen=True)
class Holding:
    node: str
    devices: tuple[int, ...]
    milli: int
    tag: int


class DeviceTable:
    def __init__(self, node_gpu_resources: tuple[str, ...], model_label: str) -> None:
        self.node_gpu_resources = node_gpu_resources
        self.model_label = model_label
        self.key: tuple[int, int, int] | None = None
        self.width = 1                                        # the most GPUs on one node (>= 1)
        self.left: npt.NDArray[np.int64] = np.zeros((0, 1), dtype=np.int64)
        self.count: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.model: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)   # code in ``models``, -1 none
        self.models: list[str] = []
        self.tags: npt.NDArray[np.int64] = np.zeros((0, TAGS), dtype=np.int64)
        self.gen: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.rebuilds = 0
        self.slot_of: Mapping[str, int] = {}
        self.holdings: dict[str, Holding] = {}

    # -- rows ------------------------------------------------------------------------------------

    def sync(self, nodes: NodeBatch) -> bool:
        """Rebuild the rows when the node set changed since the last call; True when rebuilt."""
        key = nodes.nodes_version
        if key == self.key:
            return False
        n = nodes.slot_count
        count = np.zeros(n, dtype=np.int64)
        for res in reversed(self.node_gpu_resources):        # the first resource named wins
            alloc = nodes.allocatable_by_slot(res)
            count = np.where(alloc > 0, alloc, count)
        col = nodes.table.label_column(self.model_label)
        self.models = list(col.values)
        model = np.asarray(col.codes, dtype=np.int64)[:n] if len(col.codes) >= n else \
            np.concatenate([np.asarray(col.codes, dtype=np.int64), np.full(n - len(col.codes), -1, dtype=np.int64)])
        self.width = max(1, int(count.max()) if n else 1)
        self.count, self.model = count, model
        self.left = np.where(np.arange(self.width)[None, :] < count[:, None], FULL, 0).astype(np.int64)
        self.tags = np.zeros((n, TAGS), dtype=np.int64)
        self.gen = np.zeros(n, dtype=np.int64) if len(self.gen) != n else self.gen + 1
        self.slot_of = nodes.slot_index
        self.key = key
        self.rebuilds += 1
        for h in self.holdings.values():
            self._apply(h, -1)
        return True

    def row(self, node: str) -> int:
        return self.slot_of.get(node, -1)

    def _apply(self, h: Holding, sign: int) -> None:
        r = self.row(h.node)
        if r < 0:
            return                       # its node is gone (or not yet known): nothing to lay out
        for d in h.devices:
            if d < self.count[r]:        # an index past the node's GPUs (bad or stale) holds nothing
                self.left[r, d] = max(0, min(FULL, int(self.left[r, d]) + sign * h.milli))
        self.tags[r, h.tag] -= sign
        self.gen[r] += 1

    # -- holdings --------------------------------------------------------------------------------

    def hold(self, uid: str, node: str, devices: tuple[int, ...], ask: GPUAsk) -> None:
        old = self.holdings.get(uid)
        h = Holding(node, devices, ask.milli, tag_column(ask))
        if old == h:
            return
        if old is not None:
            self._apply(old, +1)
        self.holdings[uid] = h
        self._apply(h, -1)

    def release(self, uid: str) -> None:
        h = self.holdings.pop(uid, None)
        if h is not None:
            self._apply(h, +1)

    def fitting_devices(self, node: str, ask: GPUAsk) -> tuple[int, ...] | None:
        """The lowest-index GPUs of ``node`` that fit ``ask`` now (a bound pod whose GPUs were not
        written on it), or None."""
        r = self.row(node)
        if r < 0:
            return None
        fit = np.flatnonzero(self.left[r] >= ask.milli)
        fit = fit[fit < self.count[r]]
        return tuple(int(d) for d in fit[:ask.count]) if len(fit) >= ask.count else None

    def free_gpus(self) -> int:
        """Whole GPUs nobody holds any part of."""
        return int(((self.left == FULL) & (np.arange(self.width)[None, :] < self.count[:, None])).sum())
