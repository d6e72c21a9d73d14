"""Shared by the load-aware scores: their common arguments, reading a metric series for a batch of
nodes, the explicit fallback policy, and the per-pod CPU prediction.

A node's reading is usable when its sample exists and is at most ``maxStalenessSeconds`` old
(samples fetched before an outage serve until then, so one timed-out fetch does not flip every
score). Otherwise the plugin's ``fallback`` decides, and is counted once
per cycle and reason (``pysched_metrics_fallbacks_total{plugin,reason}``): ``Neutral`` scores those
nodes 50, ``MinScore`` 0 (Trimaran's rule: a node without metrics scores the minimum), ``Requests``
scores them from requested (not used) resources, ``Disable`` skips the plugin for the cycle. A
fallback never filters a node out: a metrics outage cannot make a pod unschedulable.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pysched.framework import CycleState, NodeBatch, PodInfo, arg
from pysched.framework.api import ConfigError, resource_value
from pysched.framework.loadmetrics import (
    MISSING,
    PERCENT,
    PROMETHEUS,
    SOURCE_DOWN,
    STALE,
    LoadMetrics,
    MetricProviderArgs,
    MetricSeries,
)
from pysched.framework.status import Code, Status

NEUTRAL = "Neutral"
REQUESTS = "Requests"
DISABLE = "Disable"
MIN_SCORE = "MinScore"
NEUTRAL_SCORE = 50
FALLBACK_SCORE = {NEUTRAL: NEUTRAL_SCORE, MIN_SCORE: 0}    # the fallbacks that put a fixed score on a node

# node_exporter's figures as utilisation percentages, one series per ``instance``.
NODE_CPU_UTILISATION = '100 * (1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[1m])))'
NODE_MEMORY_UTILISATION = "100 * (1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes)"

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Int64Array = npt.NDArray[np.int64]

# Reading codes per node.
OK, DOWN, ABSENT, OLD = 0, 1, 2, 3
REASON_OF = {DOWN: SOURCE_DOWN, ABSENT: MISSING, OLD: STALE}


@dataclass
class LoadArgs:
    """Every load-aware plugin's arguments: ``metricProvider`` (required), ``fallback``
    (``Neutral`` | ``MinScore`` | ``Requests`` | ``Disable``; default ``Neutral``) and ``maxStalenessSeconds``
    (default 60): how old a node's sample may be before the fallback applies."""

    metric_provider: MetricProviderArgs = field(default_factory=MetricProviderArgs, metadata=arg(required=True))
    fallback: str = field(default=NEUTRAL, metadata=arg(choices=(NEUTRAL, MIN_SCORE, REQUESTS, DISABLE)))
    max_staleness_seconds: float = field(default=60.0, metadata=arg(ge=1, le=86400))

    def validate(self, path: str) -> None:
        if self.max_staleness_seconds < self.metric_provider.interval_seconds:
            raise ConfigError(f"{path}.maxStalenessSeconds: {self.max_staleness_seconds:g} is shorter than "
                              f"metricProvider.intervalSeconds ({self.metric_provider.interval_seconds:g}); every "
                              f"sample would be stale before the next fetch")

    def require_prometheus(self, path: str, plugin: str) -> None:
        if self.metric_provider.type != PROMETHEUS:
            raise ConfigError(f"{path}.metricProvider.type: {plugin} needs PromQL (Prometheus); "
                              f"{self.metric_provider.type} has no such queries")


def go_round(x: FloatArray) -> FloatArray:
    """Round half away from zero (Go's ``math.Round``), not numpy's half-to-even."""
    return np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))


class NoLoad:
    """``Handle.load`` when nothing provides load: every series is down, so the fallback applies."""

    def subscribe(self, provider: MetricProviderArgs, query: str, name: str, unit: str = PERCENT) -> MetricSeries:
        return MetricSeries(name=name, query=query, unit=unit, error="no metrics source in this process")

    def now(self) -> float:
        return time.time()

    def fallback_taken(self, plugin: str, reason: str) -> None:
        pass


def load_of(handle_load: LoadMetrics | None) -> LoadMetrics:
    return handle_load if handle_load is not None else NoLoad()


class SlotValues:
    """A series' values and sample times by node-table slot, rebuilt only when the series or the
    node table changes (a cycle then reads them with one ``take``)."""

    __slots__ = ("series", "_key", "values", "times", "oldest", "newest", "covered")

    def __init__(self, series: MetricSeries):
        self.series = series
        self._key: tuple[int, ...] | None = None
        self.values: FloatArray = np.zeros(0)
        self.times: FloatArray = np.zeros(0)
        # The oldest sample time over the table's nodes, -inf when a node has none: one comparison
        # tells a cycle every node is fresh. Taken over nodes, not slots - the table keeps spare
        # slots (-inf) that no batch reads.
        self.oldest = -np.inf
        self.newest = -np.inf     # the newest sample time over the table's nodes (-inf: no sample)
        self.covered = 0          # the table's nodes with a sample

    def refresh(self, nodes: NodeBatch) -> None:
        key = (self.series.version, *nodes.nodes_version)
        if key == self._key:
            return
        n = nodes.slot_count
        index = nodes.slot_index
        values = np.full(n, np.nan)
        times = np.full(n, -np.inf)
        series = self.series
        m = len(series.values)
        # As arrays, not a loop per node: a 5,000-node series maps in 0.6 ms instead of 3.4 ms.
        slots = np.fromiter(map(index.get, series.values, itertools.repeat(-1)), dtype=np.intp, count=m)
        vals = np.fromiter(series.values.values(), dtype=np.float64, count=m)
        at = np.fromiter(series.times.values(), dtype=np.float64, count=m)   # same keys, same order
        known = slots >= 0
        if not known.all():
            slots, vals, at = slots[known], vals[known], at[known]
        values[slots] = vals
        times[slots] = at
        covered = len(slots)
        self.values, self.times, self._key = values, times, key
        if covered:
            self.oldest = float(at.min()) if covered == len(index) else -np.inf
            self.newest = float(at.max())
        else:
            self.oldest = self.newest = -np.inf
        self.covered = covered


@dataclass
class Readings:
    """One series over a batch: ``values`` (NaN where not usable), ``codes`` (OK/DOWN/ABSENT/OLD),
    ``ages`` (seconds since the sample; inf when there is none)."""
    values: FloatArray
    codes: npt.NDArray[np.int8]
    ages: FloatArray

    @property
    def usable(self) -> npt.NDArray[np.bool_]:
        return self.codes == OK

    def all_usable(self) -> bool:
        return not self.codes.any()


def read(sv: SlotValues, nodes: NodeBatch, now: float, max_staleness: float) -> Readings:
    sv.refresh(nodes)
    values = sv.values[nodes.slots]
    times = sv.times[nodes.slots]
    ages = now - times
    codes = np.zeros(len(values), dtype=np.int8)
    codes[np.isnan(values)] = ABSENT
    codes[(codes == OK) & (ages > max_staleness)] = OLD
    if not sv.series.up:
        # The samples from before the outage serve while they are fresh; the nodes they no
        # longer cover are down, not merely missing.
        codes[codes != OK] = DOWN
    if codes.any():
        values = np.where(codes == OK, values, np.nan)
    return Readings(values, codes, ages)


def uniform_fallback(values: list[SlotValues], nodes: NodeBatch, now: float, max_staleness: float) -> int | None:
    """The code every node of the table has when it is one and the same without looking at nodes
    (what ``merge`` of ``read`` over any batch would give each node): DOWN when no series has a
    fresh sample and the first is down, ABSENT when none has a fresh sample and the first, up, has
    none at all; None otherwise (some node may be usable, or the codes differ). Lets a cycle with
    no usable load skip the per-node work (start-up before the first fetch, an outage)."""
    for sv in values:
        sv.refresh(nodes)
        if not now - sv.newest > max_staleness:     # read()'s test of one node's age
            return None
    first = values[0]
    if not first.series.up:
        return DOWN
    return ABSENT if first.covered == 0 else None


def merge(readings: list[Readings]) -> npt.NDArray[np.int8]:
    """Per node, the first non-OK code over several series (OK when all are usable)."""
    codes = readings[0].codes.copy()
    for r in readings[1:]:
        codes = np.where(codes == OK, r.codes, codes).astype(np.int8)
    return codes


def prescore_without_load(plugin: str, values: list[SlotValues], args: LoadArgs, load: LoadMetrics,
                          state: CycleState, key: str, nodes: NodeBatch, now: float,
                          neutral: Callable[[], Int64Array] | None = None) -> tuple[bool, Status | None]:
    """PreScore when no node has usable load and all fall back for one reason (``uniform_fallback``):
    (done, its status). Counts the fallback once; with Disable it is done with Skip, with Neutral
    once ``neutral()`` (50 for every node when not given) is stored, with MinScore once 0 is. Not done otherwise - with
    Requests, or when nodes differ - and the per-node path runs (and counts the fallback itself)."""
    if args.fallback == REQUESTS:
        return False, None
    code = uniform_fallback(values, nodes, now, args.max_staleness_seconds)
    if code is None:
        return False, None
    load.fallback_taken(plugin, REASON_OF[code])
    if args.fallback == DISABLE:
        state.write(key, False)
        return True, Status(Code.SKIP)
    if args.fallback == MIN_SCORE:
        store_scores(state, key, nodes, np.zeros(len(nodes), dtype=np.int64))
    else:
        store_scores(state, key, nodes, neutral() if neutral is not None
                     else np.full(len(nodes), NEUTRAL_SCORE, dtype=np.int64))
    return True, None


def take_fallback(plugin: str, codes: npt.NDArray[np.int8], fallback: str, load: LoadMetrics) -> Status | None:
    """Count the fallback (once per reason present) and answer Skip when the policy is Disable;
    None: score, using the fallback for the nodes whose code is not OK."""
    present = np.unique(codes)
    for c in present.tolist():
        if c != OK:
            load.fallback_taken(plugin, REASON_OF[c])
    if fallback == DISABLE and len(present) and present.max() != OK:
        return Status(Code.SKIP)
    return None


_CPU_MILLIS: dict[Any, int] = {}     # a CPU quantity as written -> millicores (pods of a template share them)


def _cpu_millis(quantity: Any) -> int:
    if not isinstance(quantity, str | int | float):      # not a quantity: resource_value says why
        return resource_value("cpu", quantity)
    millis = _CPU_MILLIS.get(quantity)
    if millis is None:
        millis = resource_value("cpu", quantity)
        if len(_CPU_MILLIS) < 4096:
            _CPU_MILLIS[quantity] = millis
    return millis


def pod_cpu_prediction(pod: PodInfo, default_millis: int, multiplier: float) -> int:
    """Trimaran's prediction of a pod's CPU use (millicores): per container, its limit if set, else
    its request times ``multiplier``, else ``default_millis``."""
    raw: dict[str, Any] | None = pod.raw
    containers = ((raw or {}).get("spec") or {}).get("containers") if raw is not None else None
    if not containers:
        # Pods other schedulers place keep no raw object: their requests stand in (no limits).
        cpu = pod.requests.get("cpu", 0)
        return math.floor(cpu * multiplier + 0.5) if cpu else default_millis
    total = 0
    for c in containers:
        res = c.get("resources") or {}
        limit = (res.get("limits") or {}).get("cpu")
        if limit is not None:
            total += _cpu_millis(limit)
            continue
        request = (res.get("requests") or {}).get("cpu")
        if request is not None:
            total += math.floor(_cpu_millis(request) * multiplier + 0.5)
        else:
            total += default_millis
    return total


def store_scores(state: CycleState, key: str, nodes: NodeBatch, scores: Int64Array) -> None:
    """PreScore's scores for its batch (Score reads them back with ``stored_scores``)."""
    state.write(key, (nodes.slots, scores))


def stored_scores(state: CycleState, key: str, pod: PodInfo, nodes: NodeBatch,
                  pre_score: Callable[[CycleState, PodInfo, NodeBatch], Status | None]) -> Int64Array:
    """The scores PreScore stored, for ``nodes`` (the same batch, or a part of it); ``pre_score``
    runs here when it did not run this cycle (a caller that scores without it). Skipped: 50 each."""
    stored = state.get(key)
    if stored is None:
        if pre_score(state, pod, nodes) is not None:
            state.write(key, False)
        stored = state.get(key)
    if not stored:
        return np.full(len(nodes), NEUTRAL_SCORE, dtype=np.int64)
    slots, scores = stored
    if nodes.slots is slots:
        out: Int64Array = scores
        return out
    full = np.full(nodes.slot_count, NEUTRAL_SCORE, dtype=np.int64)
    full[slots] = scores
    out = full[nodes.slots]
    return out


def reading_note(codes: npt.NDArray[np.int8], ages: FloatArray, i: int, value: float, fallback: str) -> str:
    """The explanation of one node's reading."""
    c = int(codes[i])
    if c == OK:
        return f"sample {value:.1f} ({ages[i]:.0f}s old)"
    what = {DOWN: "source down", ABSENT: "no sample", OLD: f"sample {ages[i]:.0f}s old (stale)"}[c]
    return f"{what}: fallback {fallback}"
