"""StaticLoad: load metrics from a file, for simulate and explain what-ifs (without one, every
series has no samples, so plugins use their fallback).

The file (YAML or JSON) maps nodes to metric values by the names the plugins subscribe with -
``cpu``/``memory`` (utilisation percent; LoadVariationRiskBalancing's window mean), ``cpu_stddev``/
``memory_stddev``, and each MetricScore metric's ``name``::

    ageSeconds: 0          # optional: how old every sample is
    nodes:
      node-a: {cpu: 35, memory: 60, gpu_temp: 71}

Errors name the offending field (``nodes.node-a.cpu: ...``).
"""

from __future__ import annotations

import math
import time
from typing import Any

import yaml

from pysched.apis.config.types import ConfigError
from pysched.framework.loadmetrics import PERCENT, MetricProviderArgs, MetricSeries


def load_metrics_file(path: str) -> dict[str, Any]:
    """Read and check a metrics file; raises ConfigError naming the field."""
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not YAML/JSON: {exc}") from None
    return check_metrics(doc, path)


def check_metrics(doc: Any, where: str = "metrics") -> dict[str, Any]:
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), dict):
        raise ConfigError(f"{where}: nodes: expected a mapping of node name to metric values")
    for k in doc:
        if k not in ("nodes", "ageSeconds"):
            raise ConfigError(f"{where}: {k}: unknown field (known: nodes, ageSeconds)")
    age = doc.get("ageSeconds", 0)
    if isinstance(age, bool) or not isinstance(age, (int, float)) or age < 0:
        raise ConfigError(f"{where}: ageSeconds: expected a number >= 0, got {age!r}")
    for node, values in doc["nodes"].items():
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: nodes.{node}: expected a mapping of metric name to number")
        for name, v in values.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ConfigError(f"{where}: nodes.{node}.{name}: expected a number, got {v!r}")
    return doc


class StaticLoad:
    def __init__(self, doc: dict[str, Any] | None = None, *, now: float | None = None):
        self.doc = doc or {"nodes": {}}
        self._now = now
        self.series: dict[str, MetricSeries] = {}
        self.fallbacks: dict[tuple[str, str], int] = {}

    def subscribe(self, provider: MetricProviderArgs, query: str, name: str, unit: str = PERCENT) -> MetricSeries:
        series = self.series.get(name)
        if series is None:
            # The file holds utilisation percent for cpu/memory whatever the live source reports.
            if name.split("_")[0] in ("cpu", "memory"):
                unit = PERCENT
            series = self.series[name] = MetricSeries(name=name, query=query, unit=unit)
            at = self.now() - float(self.doc.get("ageSeconds", 0))
            values = {node: float(figures[name]) for node, figures in self.doc["nodes"].items()
                      if name in figures}
            if self.doc["nodes"]:
                series.replace(values, at, at)
            else:
                series.failed("no metrics file given")
        return series

    def now(self) -> float:
        return self._now if self._now is not None else time.time()

    def fallback_taken(self, plugin: str, reason: str) -> None:
        key = (plugin, reason)
        self.fallbacks[key] = self.fallbacks.get(key, 0) + 1
