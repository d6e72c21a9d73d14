"""NodeTable: the cluster's nodes as columns, for filters and scores evaluated over all nodes at once.

Each node owns a row ("slot"). The table holds, as numpy arrays indexed by slot:

* ``alloc`` / ``req``: allocatable and requested amounts, one column per resource name (cpu in
  millicores, ``pods`` as the pod-count limit); new resource names add columns on first sight;
* ``npods``: pods on the node (assigned or assumed); ``non0``: non-zero cpu/memory requests;
* ``unsched``: ``spec.unschedulable``; ``taint_class``: an id of the node's taint list, so a
  toleration check runs once per distinct taint list rather than once per node;
* label columns, built on first use per label key: an int code per slot (-1 = label absent)
  plus the key's vocabulary, so ``In``/``NotIn``/``Exists``/``Gt`` over 5,000 nodes are a few
  vector operations.

``order()`` lists live slots the way kube-scheduler's node tree does: zones interleaved
round-robin, nodes in insertion order within a zone, so a rotating start index spreads the search
across zones. The cache is the only writer; the scheduling cycle runs between writes (one asyncio
thread), so a cycle always sees one consistent table.
"""

from __future__ import annotations

import math

import numpy as np

from pysched.apis.core.model import Taint, parse_int
from pysched.framework.nodeinfo import REGION_LABEL, ZONE_LABEL, NodeInfo, NodeSpec
from pysched.framework.podinfo import PodInfo

FIXED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class LabelColumn:
    __slots__ = ("key", "codes", "vocab", "values", "_ints", "_ints_len")

    def __init__(self, key: str, capacity: int):
        self.key = key
        self.codes = np.full(capacity, -1, dtype=np.int32)
        self.vocab: dict[str, int] = {}
        self.values: list[str] = []
        self._ints: np.ndarray | None = None
        self._ints_len = -1

    def code(self, value: str | None, create: bool = True) -> int:
        if value is None:
            return -1
        c = self.vocab.get(value)
        if c is None:
            if not create:
                return -2  # never matches a real code
            c = len(self.values)
            self.vocab[value] = c
            self.values.append(value)
        return c

    def codes_of(self, values) -> np.ndarray:
        return np.array([self.vocab[v] for v in values if v in self.vocab], dtype=np.int32)

    def ints(self) -> np.ndarray:
        """Per-code integer value (NaN where the label value is not an integer)."""
        ints = self._ints
        if ints is None or self._ints_len != len(self.values):
            arr = np.empty(len(self.values) + 1, dtype=np.float64)
            for i, v in enumerate(self.values):
                n = parse_int(v)
                arr[i] = float(n) if n is not None else math.nan
            arr[-1] = math.nan  # code -1 (absent) indexes the last element
            self._ints = ints = arr
            self._ints_len = len(self.values)
        return ints


class NodeTable:
    def __init__(self, capacity: int = 64):
        self.capacity = capacity
        self.res_index: dict[str, int] = {name: i for i, name in enumerate(FIXED_RESOURCES)}
        self.res_names: list[str] = list(FIXED_RESOURCES)
        r = len(self.res_names)
        self.alloc = np.zeros((capacity, r), dtype=np.int64)
        self.req = np.zeros((capacity, r), dtype=np.int64)
        self.non0 = np.zeros((capacity, 2), dtype=np.int64)
        self.npods = np.zeros(capacity, dtype=np.int64)
        self.alive = np.zeros(capacity, dtype=bool)
        self.unsched = np.zeros(capacity, dtype=bool)
        self.taint_class = np.zeros(capacity, dtype=np.int32)
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_ids: dict[tuple[Taint, ...], int] = {(): 0}
        self.infos: list[NodeInfo | None] = [None] * capacity
        self.slot_by_name: dict[str, int] = {}
        self.columns: dict[str, LabelColumn] = {}
        self._free: list[int] = []
        self._next = 0
        self._seq = np.zeros(capacity, dtype=np.int64)
        self._seq_counter = 0
        self._order: np.ndarray = np.zeros(0, dtype=np.int64)
        self._order_dirty = False
        self.count = 0
        self.version = 0  # bumps on any node-spec change (for per-node-set caches)
        # Plugins memoise per-table results here (e.g. toleration verdicts per taint class).
        self.memo: dict = {}

    # -- capacity ------------------------------------------------------------------------------

    def _grow(self) -> None:
        old = self.capacity
        new = old * 2

        def grow(a, fill=0):
            b = np.full((new,) + a.shape[1:], fill, dtype=a.dtype)
            b[:old] = a
            return b
        self.alloc, self.req, self.non0 = grow(self.alloc), grow(self.req), grow(self.non0)
        self.npods, self.alive, self.unsched = grow(self.npods), grow(self.alive), grow(self.unsched)
        self.taint_class, self._seq = grow(self.taint_class), grow(self._seq)
        for col in self.columns.values():
            col.codes = grow(col.codes, -1)
        self.infos.extend([None] * (new - old))
        self.capacity = new

    def resource_col(self, name: str, create: bool = False) -> int | None:
        i = self.res_index.get(name)
        if i is None and create:
            i = len(self.res_names)
            self.res_names.append(name)
            self.res_index[name] = i
            pad = np.zeros((self.capacity, 1), dtype=np.int64)
            self.alloc = np.hstack([self.alloc, pad])
            self.req = np.hstack([self.req, pad.copy()])
        return i

    # -- nodes ---------------------------------------------------------------------------------

    def spec_row(self, spec: NodeSpec) -> np.ndarray:
        """``spec``'s allocatable as a row of the ``alloc`` matrix (adding columns for new resource
        names). Raises ``OverflowError`` - before any slot is touched - for a value outside int64;
        ``quantity`` saturates, so only a hand-built spec can carry one."""
        for name, v in spec.allocatable.items():
            if not INT64_MIN <= v <= INT64_MAX:
                raise OverflowError(f"status.allocatable[{name}]: {v} does not fit in int64")
        cols = [(self.resource_col(name, create=True), v) for name, v in spec.allocatable.items()]
        row = np.zeros(len(self.res_names), dtype=np.int64)
        for i, v in cols:
            row[i] = v
        return row

    def add(self, info: NodeInfo, row: np.ndarray | None = None) -> int:
        """Give ``info`` a slot. All or nothing: on any failure the slot is released unchanged."""
        if row is None:
            row = self.spec_row(info.spec)
        if self._free:
            slot = self._free.pop()
        else:
            if self._next >= self.capacity:
                self._grow()
            slot = self._next
            self._next += 1
        try:
            info.slot = slot
            self.infos[slot] = info
            self.slot_by_name[info.spec.name] = slot
            self.alive[slot] = True
            self._seq_counter += 1
            self._seq[slot] = self._seq_counter
            self._write_spec(slot, info.spec, row)
            self.req[slot] = 0
            self.non0[slot] = 0
            self.npods[slot] = 0
            for pod in info.pods.values():
                self.add_pod(slot, pod)
        except BaseException:
            self._clear(slot, info)
            raise
        self.count += 1
        self._order_dirty = True
        return slot

    def update_spec(self, info: NodeInfo, old: NodeSpec, row: np.ndarray | None = None) -> None:
        slot = info.slot
        self._write_spec(slot, info.spec, self.spec_row(info.spec) if row is None else row)
        if _zone_key(old.labels) != _zone_key(info.spec.labels):
            self._order_dirty = True

    def remove(self, info: NodeInfo) -> None:
        self.count -= 1
        self._clear(info.slot, info)

    def _clear(self, slot: int, info: NodeInfo) -> None:
        """Empty ``slot`` and return it to the free list."""
        self.infos[slot] = None
        if self.slot_by_name.get(info.spec.name) == slot:
            del self.slot_by_name[info.spec.name]
        self.alive[slot] = False
        self.alloc[slot] = 0
        self.req[slot] = 0
        self.non0[slot] = 0
        self.npods[slot] = 0
        self.unsched[slot] = False
        self.taint_class[slot] = 0
        for col in self.columns.values():
            col.codes[slot] = -1
        self._free.append(slot)
        self._order_dirty = True
        self.version += 1

    def _write_spec(self, slot: int, spec: NodeSpec, row: np.ndarray) -> None:
        self.alloc[slot] = 0
        self.alloc[slot, :len(row)] = row
        self.unsched[slot] = spec.unschedulable
        tid = self._taint_ids.get(spec.taints)
        if tid is None:
            tid = len(self.taint_sets)
            self.taint_sets.append(spec.taints)
            self._taint_ids[spec.taints] = tid
        self.taint_class[slot] = tid
        labels = spec.labels
        for key, col in self.columns.items():
            col.codes[slot] = col.code(labels.get(key))
        self.version += 1

    # -- vocabulary ----------------------------------------------------------------------------

    def vocabulary_mark(self) -> tuple:
        """Where the resource columns, taint lists and label values end now (see ``trim_vocabulary``)."""
        return len(self.res_names), len(self.taint_sets), {k: len(c.values) for k, c in self.columns.items()}

    def trim_vocabulary(self, mark: tuple) -> None:
        """Forget resource columns, taint lists and label values added since ``mark`` that no live
        slot uses any more - what nodes that were only visiting (one extender request) left behind.
        These only ever grow otherwise."""
        n_res, n_taints, label_lens = mark
        live = self.alive[: self._next]
        if len(self.res_names) > n_res and not self.alloc[:, n_res:].any() and not self.req[:, n_res:].any():
            for name in self.res_names[n_res:]:
                del self.res_index[name]
            del self.res_names[n_res:]
            self.alloc = np.ascontiguousarray(self.alloc[:, :n_res])
            self.req = np.ascontiguousarray(self.req[:, :n_res])
        if len(self.taint_sets) > n_taints and not (self.taint_class[: self._next][live] >= n_taints).any():
            for taints in self.taint_sets[n_taints:]:
                del self._taint_ids[taints]
            del self.taint_sets[n_taints:]
            self.memo.clear()   # memoised per-taint-class verdicts would outlive their class ids
        for key in [k for k in self.columns if k not in label_lens]:
            # Built during the visit: kept if every value in it belongs to a node still here (the
            # usual case: visitors are the informer's nodes as sent), else rebuilt on next use.
            col = self.columns[key]
            used = col.codes[: self._next][live]
            if len(np.unique(used[used >= 0])) != len(col.values):
                del self.columns[key]
        for key, n in label_lens.items():
            col = self.columns[key]
            if len(col.values) > n and not (col.codes[: self._next][live] >= n).any():
                for v in col.values[n:]:
                    del col.vocab[v]
                del col.values[n:]

    # -- pods ----------------------------------------------------------------------------------

    def add_pod(self, slot: int, pod: PodInfo, sign: int = 1) -> None:
        row = self.req[slot]
        for name, v in pod.requests.items():
            i = self.res_index.get(name)
            if i is None:
                i = self.resource_col(name, create=True)
                row = self.req[slot]
            row[i] += sign * v
        self.non0[slot, 0] += sign * pod.non0_cpu
        self.non0[slot, 1] += sign * pod.non0_mem
        self.npods[slot] += sign

    def remove_pod(self, slot: int, pod: PodInfo) -> None:
        self.add_pod(slot, pod, -1)

    # -- queries -------------------------------------------------------------------------------

    def label_column(self, key: str) -> LabelColumn:
        col = self.columns.get(key)
        if col is None:
            col = LabelColumn(key, self.capacity)
            for slot in np.flatnonzero(self.alive[: self._next]):
                info = self.infos[slot]
                assert info is not None  # an alive slot holds its node
                col.codes[slot] = col.code(info.spec.labels.get(key))
            self.columns[key] = col
        return col

    def order(self) -> np.ndarray:
        """Live slots, zones interleaved (kube-scheduler's nodeTree order)."""
        if self._order_dirty:
            zones: dict[str, list[tuple[int, int]]] = {}
            first_seen: dict[str, int] = {}
            for slot in np.flatnonzero(self.alive[: self._next]):
                info = self.infos[slot]
                assert info is not None  # an alive slot holds its node
                zk = _zone_key(info.spec.labels)
                seq = int(self._seq[slot])
                zones.setdefault(zk, []).append((seq, int(slot)))
                if zk not in first_seen or seq < first_seen[zk]:
                    first_seen[zk] = seq
            lists = [sorted(zones[z]) for z in sorted(zones, key=first_seen.__getitem__)]
            out = []
            depth = 0
            remaining = sum(len(lst) for lst in lists)
            while remaining:
                for lst in lists:
                    if depth < len(lst):
                        out.append(lst[depth][1])
                        remaining -= 1
                depth += 1
            self._order = np.array(out, dtype=np.int64)
            self._order_dirty = False
        return self._order

    def names(self, slots) -> list[str]:
        infos = self.infos
        return [infos[s].spec.name for s in slots]


def _zone_key(labels: dict) -> str:
    region = labels.get(REGION_LABEL, "")
    zone = labels.get(ZONE_LABEL, "")
    if not region and not zone:
        return ""
    return region + ":\x00:" + zone
