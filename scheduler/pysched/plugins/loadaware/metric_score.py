"""MetricScore (PreScore, Score): score nodes on any PromQL expression - GPU temperature, network
latency, cost per hour, a CloudWatch metric exported into Prometheus.

Each configured metric maps a node's value v to 0-100 through its bounds and direction: with
``f = (clamp(v, min, max) - min) / (max - min)``, ``HigherIsBetter`` scores ``100 * f`` and
``LowerIsBetter`` ``100 * (1 - f)``. The node's score is the weighted mean over the metrics, rounded
half away from zero. A node whose value for a metric is missing, stale, or whose source is down gets
the fallback for that metric: ``Neutral`` (50), ``MinScore`` (0) or ``Disable`` (the plugin sits the
cycle out);
``Requests`` has no meaning here and is refused. Reads: the series (``Handle.load``) only.
"""

from __future__ import annotations

import math
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
from pysched.framework.loadmetrics import SCALAR
from pysched.plugins.loadaware.load import (
    FALLBACK_SCORE,
    NEUTRAL_SCORE,
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

KEY = "MetricScore/preScore"
HIGHER = "HigherIsBetter"
LOWER = "LowerIsBetter"
_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass
class MetricSpec:
    """One metric: ``name`` (for explanations and metrics files), ``query`` (PromQL, one series per
    node), ``min``/``max`` (the bounds mapped to the score range), ``direction``, ``weight``."""

    name: str = field(default="", metadata=arg(required=True))
    query: str = field(default="", metadata=arg(required=True))
    min: float = 0.0
    max: float = 100.0
    direction: str = field(default=LOWER, metadata=arg(choices=(HIGHER, LOWER)))
    weight: int = field(default=1, metadata=arg(ge=1, le=100))

    def validate(self, path: str) -> None:
        if not _NAME.match(self.name):
            raise ConfigError(f"{path}.name: {self.name!r} must be a metric-style name ([a-zA-Z_][a-zA-Z0-9_]*)")
        for key, v in (("min", self.min), ("max", self.max)):
            if not math.isfinite(v):
                raise ConfigError(f"{path}.{key}: must be a finite number, got {v}")
        if not self.max > self.min:
            raise ConfigError(f"{path}.max: {self.max:g} must be greater than min ({self.min:g})")


@dataclass
class MetricScoreArgs(LoadArgs):
    """``metrics``: at least one ``MetricSpec``, names unique."""
    KIND = "MetricScoreArgs"

    metrics: list[MetricSpec] = field(default_factory=list, metadata=arg(required=True))

    def validate(self, path: str) -> None:
        super().validate(path)
        self.require_prometheus(path, "MetricScore")
        if self.fallback == REQUESTS:
            raise ConfigError(f"{path}.fallback: Requests has no meaning for MetricScore; use Neutral or Disable")
        seen: set[str] = set()
        for i, m in enumerate(self.metrics):
            if m.name in seen:
                raise ConfigError(f"{path}.metrics[{i}].name: {m.name!r} is listed twice")
            seen.add(m.name)


def metric_score(values: FloatArray, spec: MetricSpec) -> FloatArray:
    """One metric's 0-100 score per node (float, before weighting and rounding)."""
    f = (np.clip(values, spec.min, spec.max) - spec.min) / (spec.max - spec.min)
    return (f if spec.direction == HIGHER else 1.0 - f) * MAX_NODE_SCORE


class MetricScore(PreScorePlugin[MetricScoreArgs], ScorePlugin[MetricScoreArgs]):
    name = "MetricScore"

    def __init__(self, args: MetricScoreArgs | None, handle: Handle) -> None:
        super().__init__(args, handle)
        a = self.args
        self.args = a
        self.load = load_of(handle.load)
        self.values = [SlotValues(self.load.subscribe(a.metric_provider, m.query, m.name, SCALAR))
                       for m in a.metrics]
        self.total_weight = float(sum(m.weight for m in a.metrics)) or 1.0

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Status | None:
        a = self.args
        now = self.load.now()
        if not state.explaining():
            done, st = prescore_without_load(self.name, self.values, a, self.load, state, KEY, nodes, now)
            if done:
                return st
        readings = [read(sv, nodes, now, a.max_staleness_seconds) for sv in self.values]
        codes = merge(readings)
        if codes.any():
            st = take_fallback(self.name, codes, a.fallback, self.load)
            if st is not None:
                state.write(KEY, False)
                return st
        total = np.zeros(len(nodes))
        parts = []
        unusable = float(FALLBACK_SCORE.get(a.fallback, NEUTRAL_SCORE))
        for spec, r in zip(a.metrics, readings, strict=True):
            s = np.where(r.usable, metric_score(np.nan_to_num(r.values), spec), unusable)
            parts.append(s)
            total += spec.weight * s
        scores = np.clip(go_round(total / self.total_weight), 0, MAX_NODE_SCORE).astype(np.int64)
        store_scores(state, KEY, nodes, scores)
        if state.explaining():
            notes = {}
            for i, name in enumerate(nodes.names):
                items = []
                for spec, r, s in zip(a.metrics, readings, parts, strict=True):
                    if r.codes[i]:
                        items.append(f"{spec.name} {REASON_OF[int(r.codes[i])]} -> {s[i]:.0f} (fallback {a.fallback})")
                    else:
                        items.append(f"{spec.name}={r.values[i]:g} -> {s[i]:.1f}")
                notes[name] = "; ".join(items)
            state.explain(self.name, notes)
        return None

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeBatch) -> Int64Array:
        return stored_scores(state, KEY, pod, nodes, self.pre_score)
