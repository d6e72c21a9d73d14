"""What plugins record in the process's Prometheus metrics: ``Handle.metrics`` as the engine fills it.

Pod groups (gang scheduling, for the plugins that hold gangs at Permit):
``pysched_podgroups_waiting``, ``pysched_podgroups_admitted_total``,
``pysched_podgroups_timed_out_total``, labelled by profile.

ElasticQuotas (for the plugins that enforce them, CapacityScheduling): ``pysched_quota_used``,
``pysched_quota_min`` and ``pysched_quota_max`` (gauges, labels ``quota`` = ``namespace/name`` and
``resource``; cpu in cores, the rest in units) are read from the registered plugins when Prometheus
scrapes, so keeping them costs the scheduling cycle nothing. ``used`` is what the scheduler charges
the quota: pods on a node and not terminated, and pods it has assumed. A ``max`` that is unlimited
is not exported. ``quota_victim`` counts ``pysched_quota_preemption_victims_total{quota,reason}``.

GPUs (for the plugins that place them device by device, GPUShare), labelled by profile and read at
scrape time too: ``pysched_gpus{state}`` (GPUs ``free``, ``partial``: shared and part used,
``full``), ``pysched_gpu_allocated_ratio`` (the share of the GPUs allocated) and, under FGD,
``pysched_gpu_fragmented_ratio`` (the share of the free GPU share that the target workload could
not use where it is: FGD's fragmentation).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from pysched.framework.handle import GPUSource, PluginMetrics, QuotaSource
from pysched.metrics import METRICS

UNLIMITED = 2**63 - 1
_sources: dict[int, weakref.ref[QuotaSource]] = {}    # newest last: a quota is read from its newest plugin


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

_gpu_sources: dict[int, tuple[str, weakref.ref[GPUSource]]] = {}


class GPUCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        gpus = GaugeMetricFamily("pysched_gpus", "GPUs by how much of them is held: free (none), partial "
                                 "(shared, part of it), full.", labels=["profile", "state"])
        allocated = GaugeMetricFamily("pysched_gpu_allocated_ratio", "The share of the GPUs' capacity held by "
                                      "pods (bound or assumed).", labels=["profile"])
        fragmented = GaugeMetricFamily("pysched_gpu_fragmented_ratio", "The share of the free GPU share that "
                                       "the target workload could not use where it is (FGD's fragmentation).",
                                       labels=["profile"])
        for profile, ref in list(_gpu_sources.values()):
            source = ref()
            if source is None:
                continue
            s = source.gpu_summary()
            for state in ("free", "partial", "full"):
                gpus.add_metric([profile, state], float(s.get(state, 0)))
            cap = float(s.get("capacity", 0))
            allocated.add_metric([profile], float(s.get("allocated", 0)) / cap if cap else 0.0)
            if "fragmented" in s:
                free = cap - float(s.get("allocated", 0))
                fragmented.add_metric([profile], float(s["fragmented"]) / free if free > 0 else 0.0)
        yield gpus
        yield allocated
        yield fragmented


METRICS.registry.register(GPUCollector())


def register(source: QuotaSource) -> None:
    """Export ``source``'s quotas (it has ``quotas()`` and ``usage.of(namespace)``) while it lives."""
    key = id(source)
    _sources[key] = weakref.ref(source, lambda _ref: _sources.pop(key, None))


class PrometheusPluginMetrics(PluginMetrics):
    """``Handle.metrics`` for one profile: its samples are labelled with the profile's name."""

    def __init__(self, profile: str) -> None:
        self.profile = profile

    def podgroups_waiting(self, groups: int) -> None:
        METRICS.podgroups_waiting.labels(self.profile).set(groups)

    def podgroup_admitted(self) -> None:
        METRICS.podgroups_admitted.labels(self.profile).inc()

    def podgroup_timed_out(self) -> None:
        METRICS.podgroups_timed_out.labels(self.profile).inc()

    def export_quotas(self, source: QuotaSource) -> None:
        register(source)

    def export_gpus(self, source: GPUSource) -> None:
        key = id(source)
        _gpu_sources[key] = (self.profile, weakref.ref(source, lambda _ref: _gpu_sources.pop(key, None)))

    def quota_victim(self, quota: str, reason: str) -> None:
        METRICS.quota_preemption_victims.labels(quota, reason).inc()

    def binding_conditions(self, driver: str, status: str, waited: float | None) -> None:
        if waited is None:
            METRICS.dra_binding_conditions_allocations.labels(self.profile, driver, status).inc()
        else:
            METRICS.dra_binding_conditions_wait.labels(self.profile, driver, status).observe(waited)

    def resource_claim_created(self, status: str) -> None:
        # as kube-scheduler labels it: no admin access, owned by a Pod (core group)
        METRICS.resource_claim_creates.labels(status, "false", "", "Pod").inc()
