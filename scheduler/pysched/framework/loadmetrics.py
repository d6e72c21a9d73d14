"""Load metrics as plugins see them: the per-node samples a background collector keeps, never a
request made from a scheduling cycle.

A load-aware plugin names its metric source (``MetricProviderArgs``, from its ``pluginConfig``)
and the queries it needs when it is built: ``handle.load.subscribe(provider, query, name)`` returns
a ``MetricSeries`` the collector (``pysched.loadmetrics``) refreshes on the provider's interval,
each request with a bounded timeout. A cycle reads the series as it is at that moment: per-node
values with the time they were sampled, whether the last fetch worked, and a ``version`` that moves
with every refresh (a key for what plugins derive from it). Offline (simulate, explain) the same
protocol is served from a metrics file.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Protocol

from pysched.apis.config.types import ConfigError
from pysched.framework.args import arg

PROMETHEUS = "Prometheus"
METRICS_SERVER = "KubernetesMetricsServer"

# Why a node's load could not be read; the label values of ``pysched_metrics_fallbacks_total``.
SOURCE_DOWN = "source_down"
MISSING = "missing"
STALE = "stale"
FALLBACK_REASONS = (SOURCE_DOWN, MISSING, STALE)

# Units of a series' values.
PERCENT = "percent"          # utilisation, 0-100 (Prometheus queries for cpu/memory)
MILLICORES = "millicores"    # metrics-server cpu usage
BYTES = "bytes"              # metrics-server memory usage
SCALAR = "scalar"            # anything else (MetricScore)


@dataclass
class MetricProviderArgs:
    """Where a plugin's load comes from.

    ``type``: ``Prometheus`` (the HTTP API's instant queries) or ``KubernetesMetricsServer``
    (``metrics.k8s.io``, through the scheduler's own API credentials); ``address``: Prometheus's
    base URL; ``nodeLabel``: the label of a query's result that holds the node name (default
    ``instance``; a ``host:port`` value is matched on its host part too; each query is sent as
    ``max by (<nodeLabel>) (<query>)``: the highest value when it gives several per node); ``intervalSeconds``: how
    often the collector refreshes; ``timeoutSeconds``: the bound on every request (at most the
    interval); ``bearerTokenFile``/``caFile``/``insecureSkipVerify``: TLS and auth to Prometheus.
    """
    KIND = "MetricProviderArgs"

    type: str = field(default=PROMETHEUS, metadata=arg(choices=(PROMETHEUS, METRICS_SERVER)))
    address: str = ""
    node_label: str = "instance"
    interval_seconds: float = field(default=15.0, metadata=arg(ge=1, le=3600))
    timeout_seconds: float = field(default=2.0, metadata=arg(ge=0.05, le=600))
    bearer_token_file: str = ""
    ca_file: str = ""
    insecure_skip_verify: bool = False

    def validate(self, path: str) -> None:
        if self.type == PROMETHEUS:
            if not self.address.startswith(("http://", "https://")):
                raise ConfigError(f"{path}.address: a Prometheus provider needs an http:// or https:// URL, "
                                  f"got {self.address!r}")
            if not self.node_label:
                raise ConfigError(f"{path}.nodeLabel: must not be empty")
        elif self.address:
            raise ConfigError(f"{path}.address: a KubernetesMetricsServer provider is reached through the "
                              f"API server; leave address empty")
        if self.timeout_seconds > self.interval_seconds:
            raise ConfigError(f"{path}.timeoutSeconds: {self.timeout_seconds:g} is longer than intervalSeconds "
                              f"({self.interval_seconds:g}); a fetch must end before the next one starts")
        for key, value in (("bearerTokenFile", self.bearer_token_file), ("caFile", self.ca_file)):
            if value and not os.path.isfile(value):
                raise ConfigError(f"{path}.{key}: {value!r} is not a readable file")

    def key(self) -> tuple[str, str, str, float, float, str, str, bool]:
        """Providers with the same key share one collector loop."""
        return (self.type, self.address.rstrip("/"), self.node_label, self.interval_seconds, self.timeout_seconds,
                self.bearer_token_file, self.ca_file, self.insecure_skip_verify)


@dataclass
class MetricSeries:
    """One query's latest result per node. Written by the collector only (``replace``/``failed``),
    read by plugins: ``values`` maps a node name to its value and ``times`` (the same keys in the
    same order) to when it was sampled (epoch seconds).

    Two flat maps, not a ``(value, time)`` pair per node: a pair is a tuple the cyclic garbage
    collector tracks, and 5,000 of them per query in every round were enough to set off a young
    collection of everything the scheduler had allocated since the last one (60-70 ms)."""

    name: str
    query: str
    unit: str = PERCENT
    values: dict[str, float] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    up: bool = False           # the last fetch worked
    error: str = "not fetched yet"
    fetched_at: float = 0.0    # when the last successful fetch finished (0: never)
    version: int = 0

    def replace(self, values: dict[str, float], sampled_at: float | dict[str, float], now: float) -> None:
        """A successful fetch: ``values`` by node (non-finite ones dropped), sampled at one time
        for all or at each node's own (a map with at least ``values``' keys)."""
        if not all(map(math.isfinite, values.values())):
            values = {n: v for n, v in values.items() if math.isfinite(v)}
        if isinstance(sampled_at, dict):
            self.times = {n: sampled_at[n] for n in values}
        else:
            self.times = dict.fromkeys(values, float(sampled_at))
        self.values = values
        self.up = True
        self.error = ""
        self.fetched_at = now
        self.version += 1

    def failed(self, error: str) -> None:
        """The last fetch failed: the samples stay (their age shows), the source is down."""
        if self.up or self.error != error:
            self.version += 1
        self.up = False
        self.error = error


class LoadMetrics(Protocol):
    """What ``Handle.load`` offers: the collector live, a metrics file offline."""

    def subscribe(self, provider: MetricProviderArgs, query: str, name: str, unit: str = PERCENT) -> MetricSeries:
        """The series for ``query`` from ``provider`` (one per distinct provider and query);
        ``name`` names it in logs, metrics files and explanations."""
        ...

    def now(self) -> float:
        """The clock samples are aged against (epoch seconds)."""
        ...

    def fallback_taken(self, plugin: str, reason: str) -> None:
        """Count a fallback (``pysched_metrics_fallbacks_total{plugin,reason}``)."""
        ...
