"""The GPU device table: for every node of the snapshot (one row per node-table slot), its GPU
count, its model, and how much of each GPU is free (thousandths); and which pod holds which GPUs.

Rows follow the node table's slots (``NodeBatch`` per-slot arrays): ``sync`` rebuilds them when the
node set changes and lays the holdings on them again. A holding is added when a pod is reserved
(``hold``; the assumed pod) or seen bound (with the index annotation the scheduler wrote, or, for
a pod bound by someone else without it, on the lowest-index GPUs that fit), and removed when the pod
is unreserved or gone (``release``). ``gen`` counts changes per row, so per-node values derived from
a row (FGD's fragmentation) are recomputed only where something changed.

With DRA GPUs (``dra.DraInventory``), a node whose slices publish GPUs has those as its GPUs (in
the allocator's order; its model: the first one's), whatever its allocatable says; a holding of
DRA GPUs names its devices (``Holding.ids``), laid on their columns at each rebuild.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pysched.framework import NodeBatch
from pysched.framework.devicepreference import DeviceID
from pysched.plugins.gpushare.ask import FULL, GPUAsk
from pysched.plugins.gpushare.dra import DraInventory

TAGS = 17    # GpuClustering's pod kinds on a node: column 0 shared GPUs, k for k whole GPUs (16+: 16)


def tag_column(ask: GPUAsk) -> int:
    return 0 if ask.sharing else min(ask.count, TAGS - 1)


@dataclass(frozen=True)
class Holding:
    node: str
    devices: tuple[int, ...]
    milli: int
    tag: int
    ids: tuple[DeviceID, ...] = ()    # DRA GPUs (``devices`` then unused): where they are now


class DeviceTable:
    def __init__(self, node_gpu_resources: tuple[str, ...], model_label: str, order: str = "NodeHash") -> None:
        self.node_gpu_resources = node_gpu_resources
        self.order = order
        self.model_label = model_label
        self.key: tuple[int, ...] | None = None
        self.width = 1                                        # the most GPUs on one node (>= 1)
        self.left: npt.NDArray[np.int64] = np.zeros((0, 1), dtype=np.int64)
        self.count: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.model: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)   # code in ``models``, -1 none
        self.models: list[str] = []
        self.tags: npt.NDArray[np.int64] = np.zeros((0, TAGS), dtype=np.int64)
        self.gen: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        # Per row: its place in the fixed node order ties are broken by (smaller first).
        self.tie_key: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.rebuilds = 0
        self.slot_of: Mapping[str, int] = {}
        self.holdings: dict[str, Holding] = {}
        self.dra: DraInventory | None = None
        self.dra_row: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)    # the node's GPUs are DRA devices

    # -- rows ------------------------------------------------------------------------------------

    def sync(self, nodes: NodeBatch, dra: DraInventory | None = None) -> bool:
        """Rebuild the rows when the node set (or the DRA GPUs) changed since the last call; True
        when rebuilt."""
        key = nodes.nodes_version if dra is None else (*nodes.nodes_version, dra.version)
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
        self.dra_row = np.zeros(n, dtype=bool)
        if dra is not None and dra.by_node:
            model = model.copy()                             # not the label column's own codes
            for name, gpus in dra.by_node.items():
                r = nodes.slot_index.get(name)
                if r is None or r >= n:
                    continue
                self.dra_row[r] = True
                count[r] = len(gpus)
                m = gpus[0].model
                if m is None:
                    model[r] = -1
                    continue
                if m not in self.models:
                    self.models.append(m)
                model[r] = self.models.index(m)
        self.dra = dra
        self.width = max(1, int(count.max()) if n else 1)
        self.count, self.model = count, model
        self.left = np.where(np.arange(self.width)[None, :] < count[:, None], FULL, 0).astype(np.int64)
        self.tags = np.zeros((n, TAGS), dtype=np.int64)
        self.gen = np.zeros(n, dtype=np.int64) if len(self.gen) != n else self.gen + 1
        self.slot_of = nodes.slot_index
        self.tie_key = self._tie_keys(n)
        self.key = key
        self.rebuilds += 1
        for h in self.holdings.values():
            self._apply(h, -1)
        return True

    def _tie_keys(self, n: int) -> npt.NDArray[np.int64]:
        """NodeName: the name's rank among the nodes; otherwise a stable 63-bit hash of the name."""
        keys = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        names = sorted(self.slot_of.items())
        for i, (name, slot) in enumerate(names):
            if slot < n:
                keys[slot] = i if self.order == "NodeName" else \
                    int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big") >> 1
        return keys

    def row(self, node: str) -> int:
        return self.slot_of.get(node, -1)

    def _apply(self, h: Holding, sign: int) -> None:
        r = self.row(h.node)
        if r < 0:
            return                       # its node is gone (or not yet known): nothing to lay out
        devices = h.devices
        if h.ids:
            where = self.dra.column if self.dra is not None else {}
            devices = tuple(where[i][1] for i in h.ids if i in where and where[i][0] == h.node)
        for d in devices:
            if d < self.count[r]:        # an index past the node's GPUs (bad or stale) holds nothing
                self.left[r, d] = max(0, min(FULL, int(self.left[r, d]) + sign * h.milli))
        self.tags[r, h.tag] -= sign
        self.gen[r] += 1

    # -- holdings --------------------------------------------------------------------------------

    def hold(self, uid: str, node: str, devices: tuple[int, ...], ask: GPUAsk,
             ids: tuple[DeviceID, ...] = ()) -> None:
        """``uid`` holds ``ask.milli`` of each of ``devices`` of ``node`` (or of the DRA GPUs
        ``ids``), replacing what it held."""
        old = self.holdings.get(uid)
        h = Holding(node, devices, ask.milli, tag_column(ask), ids)
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
