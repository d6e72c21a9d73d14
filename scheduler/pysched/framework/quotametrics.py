"""Metrics of ElasticQuotas for the plugins that enforce them (CapacityScheduling).

``pysched_quota_used``, ``pysched_quota_min`` and ``pysched_quota_max`` (gauges, labels ``quota``
= ``namespace/name`` and ``resource``; cpu in cores, the rest in units) are read from the
registered plugins when Prometheus scrapes, so keeping them costs the scheduling cycle nothing.
``used`` is what the scheduler charges the quota: pods on a node and not terminated, and pods it
has assumed. A ``max`` that is unlimited is not exported. ``victim`` counts
``pysched_quota_preemption_victims_total{quota,reason}``.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from pysched.metrics import METRICS

UNLIMITED = 2**63 - 1
_sources: dict[int, weakref.ref[Any]] = {}    # newest last: a quota is read from its newest plugin


def _value(resource: str, amount: int) -> float:
    return amount / 1000.0 if resource == "cpu" else float(amount)


class QuotaCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        used = GaugeMetricFamily("pysched_quota_used", "Resources charged to an ElasticQuota by the scheduler: "
                                 "requests of its namespace's pods on a node (or assumed) and not terminated "
                                 "(cpu in cores).", labels=["quota", "resource"])
        lo = GaugeMetricFamily("pysched_quota_min", "An ElasticQuota's spec.min: its guaranteed resources "
                               "(cpu in cores).", labels=["quota", "resource"])
        hi = GaugeMetricFamily("pysched_quota_max", "An ElasticQuota's spec.max: the most its namespace may "
                               "use, borrowing included (cpu in cores).", labels=["quota", "resource"])
        seen: set[str] = set()
        for ref in reversed(list(_sources.values())):
            source = ref()
            if source is None:
                continue
            for ns, q in sorted(source.quotas().items()):
                if q.key in seen:
                    continue
                seen.add(q.key)
                amounts = source.usage.of(ns)
                for r in sorted(set(q.min) | {k for k, v in q.max.items() if v != UNLIMITED} | set(amounts)):
                    used.add_metric([q.key, r], _value(r, amounts.get(r, 0)))
                for r, v in sorted(q.min.items()):
                    lo.add_metric([q.key, r], _value(r, v))
                for r, v in sorted(q.max.items()):
                    if v != UNLIMITED:
                        hi.add_metric([q.key, r], _value(r, v))
        yield used
        yield lo
        yield hi


_COLLECTOR = QuotaCollector()
METRICS.registry.register(_COLLECTOR)


def register(plugin: Any) -> None:
    """Export ``plugin``'s quotas (it has ``quotas()`` and ``usage.of(namespace)``) while it lives."""
    key = id(plugin)
    _sources[key] = weakref.ref(plugin, lambda _ref: _sources.pop(key, None))


def victim(quota: str, reason: str) -> None:
    """A preemption chose a pod of ``quota`` as a victim: ``reclaim`` or ``priority``."""
    METRICS.quota_preemption_victims.labels(quota, reason).inc()
