"""TargetLoadPacking (PreScore, Score, Reserve): pack nodes up to a target CPU utilisation, by
measured use rather than requests (scheduler-plugins' Trimaran plugin of the same name).

A node's predicted utilisation U is its measured CPU use, plus what pods placed on it since its
sample are predicted to use, plus this pod's prediction, over its allocatable CPU (percent;
Trimaran divides by capacity, but allocatable is what pods can use; a node without CPU scores 0).
The score rises linearly from ``target`` at U=0 to 100 at U=``target`` (default 40 %); just above
the target it drops back to ``target`` and falls linearly to 0 at U=100, and is 0 beyond::

    U <= target:  (100 - target) * U / target + target
    U >  target:  target * (100 - U) / (100 - target)

A pod's prediction (Trimaran's): per container its CPU limit, else its request times
``defaultRequestsMultiplier`` (1.5), else ``defaultRequests.cpu`` (1 core). Pods this scheduler
reserves, and pods seen bound by anyone (predicted from their requests: the limits of pods other
schedulers place are not kept), count on their node for ``pendingLoadSeconds`` (60) before the
sample the cycle reads - a burst of pods therefore spreads instead of all landing on the one
node that looked idle at the last scrape. When a node's sample is missing, stale or the source is
down, ``fallback`` applies (``load``); ``Requests`` uses requested CPU in place of use.
Reads: the metric series (``Handle.load``), the nodes' allocatable and requested CPU.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pysched.framework import (
    MAX_NODE_SCORE,
    CycleState,
    Handle,
    NodeBatch,
    PodInfo,
    PodWatcher,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
    Status,
    arg,
)
from pysched.framework.api import ConfigError, resource_value
from pysched.framework.loadmetrics import MILLICORES, PERCENT
from pysched.plugins.loadaware.load import (
    FALLBACK_SCORE,
    NEUTRAL_SCORE,
    NODE_CPU_UTILISATION,
    OK,
    REQUESTS,
    BoolArray,
    FloatArray,
    Int64Array,
    LoadArgs,
    SlotValues,
    load_of,
    pod_cpu_prediction,
    prescore_without_load,
    read,
    reading_note,
    store_scores,
    stored_scores,
    take_fallback,
)

KEY = "TargetLoadPacking/preScore"
PREDICTION_KEY = "TargetLoadPacking/prediction"   # the pod's predicted millicores, PreScore to Reserve


@dataclass
class TargetLoadPackingArgs(LoadArgs):
    """``targetUtilization`` (percent, default 40); ``defaultRequests`` (``cpu``, default "1") and
    ``defaultRequestsMultiplier`` (1.5) for the prediction; ``query``: PromQL giving CPU utilisation
    percent per node (ignored for metrics-server, which reports usage); ``pendingLoadSeconds``."""
    KIND = "TargetLoadPackingArgs"

    target_utilization: int = field(default=40, metadata=arg(ge=1, le=99))
    default_requests: dict[str, str] = field(default_factory=lambda: {"cpu": "1"})
    default_requests_multiplier: float = field(default=1.5, metadata=arg(ge=1, le=100))
    query: str = NODE_CPU_UTILISATION
    pending_load_seconds: float = field(default=60.0, metadata=arg(ge=0, le=3600))

    def validate(self, path: str) -> None:
        super().validate(path)
        for k in self.default_requests:
            if k != "cpu":
                raise ConfigError(f"{path}.defaultRequests.{k}: only cpu is predicted")
        try:
            millis = self.default_cpu_millis()
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(f"{path}.defaultRequests.cpu: {exc}") from None
        if millis <= 0:
            raise ConfigError(f"{path}.defaultRequests.cpu: must be more than 0")
        if not self.query.strip():
            raise ConfigError(f"{path}.query: must not be empty")

    def default_cpu_millis(self) -> int:
        return resource_value("cpu", self.default_requests.get("cpu", "1"))


def target_load_score(utilisation: FloatArray, target: float) -> Int64Array:
    """Trimaran's score of predicted utilisation (percent), rounded half away from zero."""
    u = utilisation
    below = (MAX_NODE_SCORE - target) * u / target + target
    above = target * (MAX_NODE_SCORE - u) / (MAX_NODE_SCORE - target)
    # Above 100 % the "above" line is negative: clipped to 0. Scores are >= 0, so rounding half
    # away from zero is floor(x + 0.5).
    s = np.clip(np.where(u <= target, below, above), 0.0, MAX_NODE_SCORE)
    out: Int64Array = np.floor(s + 0.5).astype(np.int64)
    return out


def target_load_score_one(u: float, target: float) -> int:
    """``target_load_score`` of one node with Python floats: the same IEEE operations in the same
    order, so the same result to the last bit (for updating one node of a cached array)."""
    if u <= target:
        s = (MAX_NODE_SCORE - target) * u / target + target
    else:
        s = target * (MAX_NODE_SCORE - u) / (MAX_NODE_SCORE - target)
    return math.floor(min(max(s, 0.0), float(MAX_NODE_SCORE)) + 0.5)


class RecentPlacements:
    """CPU predicted for pods placed since the sample: per node sums, expired by time in O(log n)
    per pod, and a per-slot array kept up to date incrementally (a cycle reads it with one take).
    ``changes`` lists the slots changed since the array was built (``epoch`` counts rebuilds), so a
    cache of scores over every slot can follow it one node at a time."""

    MAX_CHANGES = 4096

    def __init__(self) -> None:
        self.by_uid: dict[str, tuple[str, float, int]] = {}   # uid -> (node, placed_at, millis)
        self.per_node: dict[str, int] = {}
        self._heap: list[tuple[float, str]] = []
        self._key: tuple[int, ...] | None = None
        self._slots: FloatArray = np.zeros(0)
        self._index: Mapping[str, int] | None = None    # node name -> slot, of the table _slots follows
        self.changes: list[int] = []
        self.epoch = 0

    def __len__(self) -> int:
        return len(self.by_uid)

    def add(self, uid: str, node: str, at: float, millis: int) -> None:
        if uid in self.by_uid:
            self.remove(uid)
        self.by_uid[uid] = (node, at, millis)
        heapq.heappush(self._heap, (at, uid))
        self._shift(node, millis)

    def remove(self, uid: str) -> None:
        entry = self.by_uid.pop(uid, None)
        if entry is not None:
            self._shift(entry[0], -entry[2])

    def advance(self, cutoff: float) -> None:
        """Forget placements made before ``cutoff`` (the sample has them by then)."""
        heap = self._heap
        while heap and heap[0][0] < cutoff:
            at, uid = heapq.heappop(heap)
            entry = self.by_uid.get(uid)
            if entry is not None and entry[1] == at:
                self.remove(uid)

    def _shift(self, node: str, millis: int) -> None:
        total = self.per_node.get(node, 0) + millis
        if total:
            self.per_node[node] = total
        else:
            self.per_node.pop(node, None)
        if self._index is not None:
            slot = self._index.get(node)
            if slot is not None and slot < len(self._slots):
                self._slots[slot] += millis
                if len(self.changes) >= self.MAX_CHANGES:
                    self.changes.clear()
                    self.epoch += 1
                self.changes.append(slot)

    def per_slot(self, nodes: NodeBatch) -> FloatArray:
        key = nodes.nodes_version
        if key != self._key:
            arr = np.zeros(nodes.slot_count)
            index = nodes.slot_index
            for node, millis in self.per_node.items():
                slot = index.get(node)
                if slot is not None:
                    arr[slot] = millis
            self._slots, self._key, self._index = arr, key, index
            self.changes.clear()
            self.epoch += 1
        return self._slots


class TargetLoadPacking(PreScorePlugin[TargetLoadPackingArgs], ScorePlugin[TargetLoadPackingArgs],
                        ReservePlugin[TargetLoadPackingArgs], PodWatcher):
    name = "TargetLoadPacking"

    def __init__(self, args: TargetLoadPackingArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        a = self.args
        self.args = a
        self.load = load_of(handle.load)
        metrics_server = a.metric_provider.type != "Prometheus"
        self.series = self.load.subscribe(a.metric_provider, "cpu" if metrics_server else a.query, "cpu",
                                          MILLICORES if metrics_server else PERCENT)
        self.values = SlotValues(self.series)
        self.default_millis = a.default_cpu_millis()
        self.placements = RecentPlacements()
        # prediction -> [epoch, changes seen, scores by slot], over the arrays of ``_prepared``
        self._cache: dict[int, list[Any]] = {}
        # (key, (used, capacity, sample times, has cpu) by slot, the oldest sample time)
        self._prepared: tuple[tuple[int, ...],
                              tuple[FloatArray, FloatArray, FloatArray, BoolArray], float] | None = None

    # -- placements --------------------------------------------------------------------------

    def _cutoff(self, now: float) -> float:
        """Placements older than the newest sample minus the start-up allowance are in the sample;
        without samples, none older than the staleness horizon matters."""
        a = self.args
        return max(self.series.fetched_at - a.pending_load_seconds,
                   now - a.pending_load_seconds - a.max_staleness_seconds)

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        millis = state.get(PREDICTION_KEY)
        if millis is None:
            millis = pod_cpu_prediction(pod, self.default_millis, self.args.default_requests_multiplier)
        now = self.load.now()
        self.placements.advance(self._cutoff(now))   # also when PreScore sat cycles out (Disable)
        self.placements.add(pod.uid, node_name, now, millis)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.placements.remove(pod.uid)

    def pod_seen(self, pod: PodInfo) -> None:
        # Bound by someone else recently: its load is not in the sample yet either.
        if not pod.node_name or pod.uid in self.placements.by_uid:
            return
        at = pod.start_time or pod.created
        if at and at > self.load.now() - self.args.pending_load_seconds:
            self.placements.add(pod.uid, pod.node_name, at,
                                pod_cpu_prediction(pod, self.default_millis, self.args.default_requests_multiplier))

    def pod_gone(self, uid: str) -> None:
        self.placements.remove(uid)

    # -- scoring -----------------------------------------------------------------------------

    def _prepare(self, nodes: NodeBatch) -> tuple[FloatArray, FloatArray, FloatArray, BoolArray]:
        """By node-table slot, rebuilt only when the series or the node table changes: the measured
        use in millicores (0 where there is no sample), the capacity (1 where none), the sample
        times (-inf where none) and whether the node has CPU."""
        key = (self.series.version, *nodes.nodes_version)
        if self._prepared is None or self._prepared[0] != key:
            self.values.refresh(nodes)
            alloc = nodes.allocatable_by_slot("cpu").astype(np.float64)
            v = self.values.values
            used = v * alloc / 100.0 if self.series.unit == PERCENT else v.copy()
            used[np.isnan(v)] = 0.0
            times = self.values.times
            self._cache.clear()         # scores cached over the old arrays
            self._prepared = (key, (used, np.where(alloc > 0, alloc, 1.0), times, alloc > 0),
                              float(self.values.oldest))
        return self._prepared[1]

    def _fast(self, predicted: int, nodes: NodeBatch, now: float) -> Int64Array | None:
        """Scores when the source is up and every node's sample is fresh; None otherwise.

        Scores over every slot are cached per prediction (pods of one template share it) and kept
        current one node at a time as placements change, so a cycle is one take."""
        if not self.series.up:
            return None
        used, cap, times, has = self._prepare(nodes)
        slots = nodes.slots
        fresh_after = now - self.args.max_staleness_seconds
        # every node's sample fresh (one comparison), else check the batch's own nodes
        assert self._prepared is not None
        if self._prepared[2] < fresh_after and not (times[slots] >= fresh_after).all():
            return None
        pending = self.placements.per_slot(nodes)
        pl = self.placements
        target = float(self.args.target_utilization)
        entry = self._cache.get(predicted)
        if entry is None or entry[0] != pl.epoch or len(pl.changes) - entry[1] > 64:
            util = (used + pending + predicted) * 100.0 / cap
            full = target_load_score(util, target) * has
            if len(self._cache) >= 32:
                self._cache.clear()
            entry = self._cache[predicted] = [pl.epoch, len(pl.changes), full]
        elif entry[1] < len(pl.changes):
            full = entry[2]
            for s in set(pl.changes[entry[1]:]):
                u = (float(used[s]) + float(pending[s]) + predicted) * 100.0 / float(cap[s])
                full[s] = target_load_score_one(u, target) if has[s] else 0
            entry[1] = len(pl.changes)
        out: Int64Array = entry[2][slots]
        return out

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        a = self.args
        now = self.load.now()
        predicted = pod_cpu_prediction(pod, self.default_millis, a.default_requests_multiplier)
        state.write(PREDICTION_KEY, predicted)
        self.placements.advance(self._cutoff(now))
        if not state.explaining():
            fast = self._fast(predicted, nodes, now)
            if fast is not None:
                store_scores(state, KEY, nodes, fast)
                return None
            done, st = prescore_without_load(
                self.name, [self.values], a, self.load, state, KEY, nodes, now,
                neutral=lambda: np.where(nodes.allocatable("cpu") > 0, NEUTRAL_SCORE, 0).astype(np.int64))
            if done:
                return st
        r = read(self.values, nodes, now, a.max_staleness_seconds)
        fallback_nodes = not r.all_usable()
        if fallback_nodes:
            st = take_fallback(self.name, r.codes, a.fallback, self.load)
            if st is not None:
                state.write(KEY, False)
                return st
        alloc = nodes.allocatable("cpu").astype(np.float64)
        pending = nodes.take(self.placements.per_slot(nodes))
        cap = np.where(alloc > 0, alloc, 1.0)
        if self.series.unit == PERCENT:
            used = r.values * alloc / 100.0
        else:
            used = r.values
        util = (used + pending + predicted) * 100.0 / cap
        if fallback_nodes and a.fallback == REQUESTS:
            by_requests = (nodes.requested("cpu") + pod.requests.get("cpu", 0)) * 100.0 / cap
            util = np.where(r.usable, util, by_requests)
        scores = target_load_score(np.where(np.isnan(util), 0.0, util), float(a.target_utilization))
        if fallback_nodes and a.fallback in FALLBACK_SCORE:
            scores = np.where(r.usable, scores, FALLBACK_SCORE[a.fallback])
        scores = np.where(alloc > 0, scores, 0)
        store_scores(state, KEY, nodes, scores)
        if state.explaining():
            notes = {}
            for i, name in enumerate(nodes.names):
                how = reading_note(r.codes, r.ages, i, float(r.values[i]) if r.codes[i] == OK else 0.0, a.fallback)
                notes[name] = (f"cpu {how}; pending {pending[i]:.0f}m; pod {predicted}m; "
                               f"predicted {util[i]:.1f}% of {alloc[i]:.0f}m (target {a.target_utilization}%)")
            state.explain(self.name, notes)
        return None

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Int64Array:
        return stored_scores(state, KEY, pod, nodes, self.pre_score)
