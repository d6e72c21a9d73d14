"""LoadVariationRiskBalancing (PreScore, Score): prefer nodes whose load is low and steady, by the
mean and standard deviation of measured utilisation over a window (scheduler-plugins' Trimaran
plugin of the same name).

Per resource (cpu, memory), with the node's capacity C (allocatable), the window's mean use M and
standard deviation S (both from Prometheus, over ``window``) and the pod's request R::

    mu    = clamp((M + R) / C, 0, 1)
    sigma = clamp(S / C, 0, 1) ** (1 / safeVarianceSensitivity) * safeVarianceMargin, clamped to [0, 1]
    score = (1 - (mu + sigma) / 2) * 100

and the node's score is the lower of the cpu and memory scores, rounded half away from zero. When
a node's figures are missing, stale or the source is down, ``fallback`` applies (``load``);
``Requests`` takes M as the requested amount and S as 0. Needs a Prometheus provider (the window is
a PromQL subquery). Reads: four series (``Handle.load``), the nodes' allocatable and requested
cpu and memory, the pod's requests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from pysched.framework import (
    MAX_NODE_SCORE,
    CycleState,
    Handle,
    NodeBatch,
    PodInfo,
    PreScorePlugin,
    ScorePlugin,
    Status,
    arg,
)
from pysched.framework.api import ConfigError
from pysched.plugins.loadaware.load import (
    FALLBACK_SCORE,
    NODE_CPU_UTILISATION,
    NODE_MEMORY_UTILISATION,
    OK,
    REASON_OF,
    REQUESTS,
    FloatArray,
    Int64Array,
    LoadArgs,
    SlotValues,
    go_round,
    load_of,
    merge,
    prescore_without_load,
    read,
    store_scores,
    stored_scores,
    take_fallback,
)

KEY = "LoadVariationRiskBalancing/preScore"
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
RESOURCES = ("cpu", "memory")


@dataclass
class LoadVariationRiskBalancingArgs(LoadArgs):
    """``safeVarianceMargin`` (1) and ``safeVarianceSensitivity`` (1); ``cpuQuery`` and
    ``memoryQuery``: PromQL giving utilisation percent per node (node_exporter's by default);
    ``window``: the PromQL duration the mean and deviation are taken over (default 5m)."""
    KIND = "LoadVariationRiskBalancingArgs"

    safe_variance_margin: float = field(default=1.0, metadata=arg(ge=0, le=100))
    safe_variance_sensitivity: float = field(default=1.0, metadata=arg(ge=0, le=100))
    cpu_query: str = NODE_CPU_UTILISATION
    memory_query: str = NODE_MEMORY_UTILISATION
    window: str = "5m"

    def validate(self, path: str) -> None:
        super().validate(path)
        self.require_prometheus(path, "LoadVariationRiskBalancing")
        if not _DURATION.match(self.window):
            raise ConfigError(f"{path}.window: {self.window!r} is not a PromQL duration (like 5m or 1h30m)")
        if not any(int(n) for n in re.findall(r"[0-9]+", self.window)):
            raise ConfigError(f"{path}.window: must be longer than 0")
        for key, q in (("cpuQuery", self.cpu_query), ("memoryQuery", self.memory_query)):
            if not q.strip():
                raise ConfigError(f"{path}.{key}: must not be empty")


def risk_score(mean: FloatArray, stddev: FloatArray, request: float, capacity: FloatArray,
               margin: float, sensitivity: float) -> FloatArray:
    """Trimaran's per-resource score (float, before rounding); 0 where capacity is 0."""
    cap = np.where(capacity > 0, capacity, 1.0)
    used = np.clip(mean, 0.0, cap)
    dev = np.clip(stddev, 0.0, cap)
    mu = np.clip((used + max(request, 0.0)) / cap, 0.0, 1.0)
    sigma = risk_sigma(dev / cap, margin, sensitivity)
    score = (1.0 - (mu + sigma) / 2.0) * MAX_NODE_SCORE
    return np.where(capacity > 0, score, 0.0)


def risk_sigma(fraction: FloatArray, margin: float, sensitivity: float) -> FloatArray:
    """The deviation term: ``clamp(stddev / capacity) ** (1 / sensitivity) * margin``, clamped."""
    sigma = np.clip(fraction, 0.0, 1.0)
    if sensitivity > 0:
        sigma = np.power(sigma, 1.0 / sensitivity)
    elif sensitivity == 0:              # 1/0 = +Inf in Go: x**Inf is 0 below 1, 1 at 1
        sigma = np.where(sigma >= 1.0, 1.0, 0.0)
    return np.clip(sigma * margin, 0.0, 1.0)


def window_queries(a: LoadVariationRiskBalancingArgs) -> dict[tuple[str, str], str]:
    """The PromQL sent for each (resource, avg|stddev): a subquery over ``window`` stepped at the
    provider's interval (steps align to multiples of it, so a series younger than one step has
    no value yet)."""
    step = f"{int(a.metric_provider.interval_seconds)}s"
    return {(res, stat): f"{stat}_over_time(({q})[{a.window}:{step}])"
            for res, q in (("cpu", a.cpu_query), ("memory", a.memory_query)) for stat in ("avg", "stddev")}


class _Prepared:
    __slots__ = ("key", "oldest", "oldest_all", "per_res", "scores")

    def __init__(self, key: tuple[object, ...], oldest: FloatArray, oldest_all: float,
                 per_res: list[tuple[FloatArray, FloatArray, FloatArray, FloatArray]]):
        self.key = key
        self.oldest = oldest        # the oldest of the four samples' times, per slot (-inf: one is missing)
        self.oldest_all = oldest_all  # ... and over every node of the table
        self.scores: dict[tuple[float, ...], Int64Array] = {}   # the pod's requests -> scores by slot
        self.per_res = per_res      # per resource: used, sigma, capacity (1 where none), has capacity


class LoadVariationRiskBalancing(PreScorePlugin[LoadVariationRiskBalancingArgs],
                                 ScorePlugin[LoadVariationRiskBalancingArgs]):
    name = "LoadVariationRiskBalancing"

    def __init__(self, args: LoadVariationRiskBalancingArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        a = self.args
        self.args = a
        self.load = load_of(handle.load)
        self.values: dict[tuple[str, str], SlotValues] = {}
        for (res, stat), query in window_queries(a).items():
            name = res if stat == "avg" else f"{res}_stddev"
            self.values[(res, stat)] = SlotValues(self.load.subscribe(a.metric_provider, query, name))
        self._slot_values = list(self.values.values())          # in merge order
        self._series = tuple(sv.series for sv in self._slot_values)
        self._prepared: _Prepared | None = None

    def _prepare(self, nodes: NodeBatch) -> _Prepared:
        """What does not depend on the pod, by node-table slot: rebuilt when a series or the node
        table changes, so a cycle with every sample usable is a few array operations."""
        c, cs, m, ms = self._series
        key = (c.version, cs.version, m.version, ms.version, *nodes.nodes_version)
        if self._prepared is None or self._prepared.key != key:
            for sv in self._slot_values:
                sv.refresh(nodes)
            oldest = np.minimum.reduce([sv.times for sv in self._slot_values])
            per_res = []
            for res in RESOURCES:
                cap = nodes.allocatable_by_slot(res).astype(np.float64)
                has = cap > 0
                safe = np.where(has, cap, 1.0)
                mean = np.nan_to_num(self.values[(res, "avg")].values) * cap / 100.0
                dev = np.nan_to_num(self.values[(res, "stddev")].values) * cap / 100.0
                used = np.clip(mean, 0.0, safe)
                sigma = risk_sigma(np.clip(dev, 0.0, safe) / safe, self.args.safe_variance_margin,
                                   self.args.safe_variance_sensitivity)
                per_res.append((used, sigma, safe, has.astype(np.float64)))
            self._prepared = _Prepared(key, oldest, float(min(sv.oldest for sv in self._slot_values)), per_res)
        return self._prepared

    def _fast(self, pod: PodInfo, nodes: NodeBatch, now: float) -> Int64Array | None:
        """Scores when every series is up and every node's samples are fresh; None otherwise."""
        c, cs, m, ms = self._series
        if not (c.up and cs.up and m.up and ms.up):
            return None
        prep = self._prepare(nodes)
        slots = nodes.slots
        fresh_after = now - self.args.max_staleness_seconds
        if prep.oldest_all < fresh_after and not (prep.oldest[slots] >= fresh_after).all():
            return None
        # Scores over every slot depend on the pod only through its requests: cached per request
        # shape until the samples or the nodes change (pods of one template share one entry).
        r = pod.requests
        requests = (float(max(r.get("cpu", 0), 0)), float(max(r.get("memory", 0), 0)))   # RESOURCES
        full = prep.scores.get(requests)
        if full is None:
            best = None
            for req, (used, sigma, cap, has) in zip(requests, prep.per_res, strict=True):
                # divided, not multiplied by 1/cap: the general path's rounding, to the last bit
                mu = np.minimum((used + req) / cap, 1.0)
                s = (1.0 - (mu + sigma) * 0.5) * (MAX_NODE_SCORE * has)
                best = s if best is None else np.minimum(best, s)
            assert best is not None
            if len(prep.scores) >= 32:
                prep.scores.clear()
            full = prep.scores[requests] = np.floor(best + 0.5).astype(np.int64)
        out: Int64Array = full[slots]
        return out

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        a = self.args
        now = self.load.now()
        if not state.explaining():
            fast = self._fast(pod, nodes, now)
            if fast is not None:
                store_scores(state, KEY, nodes, fast)
                return None
            done, st = prescore_without_load(self.name, self._slot_values, a, self.load, state, KEY, nodes, now)
            if done:
                return st
        readings = {k: read(sv, nodes, now, a.max_staleness_seconds) for k, sv in self.values.items()}
        codes = merge(list(readings.values()))
        fallback_nodes = bool(codes.any())
        if fallback_nodes:
            st = take_fallback(self.name, codes, a.fallback, self.load)
            if st is not None:
                state.write(KEY, False)
                return st
        usable = codes == OK
        per_resource = []
        for res in RESOURCES:
            cap = nodes.allocatable(res).astype(np.float64)
            mean = readings[(res, "avg")].values * cap / 100.0
            dev = readings[(res, "stddev")].values * cap / 100.0
            if fallback_nodes and a.fallback == REQUESTS:
                mean = np.where(usable, mean, nodes.requested(res).astype(np.float64))
                dev = np.where(usable, dev, 0.0)
            per_resource.append(risk_score(np.nan_to_num(mean), np.nan_to_num(dev), float(pod.requests.get(res, 0)),
                                           cap, a.safe_variance_margin, a.safe_variance_sensitivity))
        scores = np.clip(go_round(np.minimum(*per_resource)), 0, MAX_NODE_SCORE).astype(np.int64)
        if fallback_nodes and a.fallback in FALLBACK_SCORE:
            scores = np.where(usable, scores, FALLBACK_SCORE[a.fallback])
        store_scores(state, KEY, nodes, scores)
        if state.explaining():
            notes = {}
            for i, name in enumerate(nodes.names):
                if usable[i]:
                    r = {k: float(v.values[i]) for k, v in readings.items()}
                    notes[name] = (f"cpu mean {r[('cpu', 'avg')]:.1f}% sd {r[('cpu', 'stddev')]:.1f}% -> "
                                   f"{per_resource[0][i]:.1f}; memory mean {r[('memory', 'avg')]:.1f}% "
                                   f"sd {r[('memory', 'stddev')]:.1f}% -> {per_resource[1][i]:.1f} (window {a.window})")
                else:
                    notes[name] = f"{REASON_OF[int(codes[i])]}: fallback {a.fallback}"
            state.explain(self.name, notes)
        return None

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Int64Array:
        return stored_scores(state, KEY, pod, nodes, self.pre_score)
