"""LoadCollector: keeps every subscribed metric series fresh, in the background.

Plugins subscribe while the profiles are built (``Handle.load.subscribe``); ``run()`` then starts
one loop per distinct provider. Each round fetches all of the provider's queries at once, bounded
by the provider's ``timeoutSeconds`` (``asyncio.timeout`` around the whole round, whatever the
source does), and replaces the series in place; a failed or timed-out round marks them down and
keeps their old samples, whose age then shows. Rounds start every ``intervalSeconds`` whatever
the last one did. The scheduling cycle only reads the series.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from pysched.framework.loadmetrics import METRICS_SERVER, PERCENT, MetricProviderArgs, MetricSeries
from pysched.loadmetrics.sources import MetricsServerSource, PrometheusSource, SourceError
from pysched.metrics import METRICS
from pysched.util.logs import kv

log = logging.getLogger("pysched.loadmetrics")


class _Provider:
    def __init__(self, provider: MetricProviderArgs, source: Any):
        self.provider = provider
        self.source = source
        self.series: dict[tuple[str, str], MetricSeries] = {}   # (query, unit) -> series
        self.last_ok = 0.0
        self.up: bool | None = None
        self.nodes = 0      # how many nodes the last answer had values for (logged when it changes)


class LoadCollector:
    def __init__(self, client: Any = None, *, clock=time.time):
        self.client = client
        self.clock = clock
        self.providers: dict[tuple, _Provider] = {}

    # -- LoadMetrics -----------------------------------------------------------------------------

    def subscribe(self, provider: MetricProviderArgs, query: str, name: str, unit: str = PERCENT) -> MetricSeries:
        p = self.providers.get(provider.key())
        if p is None:
            source = (MetricsServerSource(provider, self.client) if provider.type == METRICS_SERVER
                      else PrometheusSource(provider, clock=self.clock))
            p = self.providers[provider.key()] = _Provider(provider, source)
        series = p.series.get((query, unit))
        if series is None:
            series = p.series[(query, unit)] = MetricSeries(name=name, query=query, unit=unit)
        return series

    def now(self) -> float:
        return self.clock()

    def fallback_taken(self, plugin: str, reason: str) -> None:
        METRICS.metrics_fallbacks.labels(plugin, reason).inc()

    # -- background ------------------------------------------------------------------------------

    def __bool__(self) -> bool:
        return bool(self.providers)

    async def run(self) -> None:
        """Refresh every provider until cancelled."""
        try:
            await asyncio.gather(*(self._loop(p) for p in self.providers.values()))
        finally:
            for p in self.providers.values():
                await p.source.close()

    async def _loop(self, p: _Provider) -> None:
        interval = p.provider.interval_seconds
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await self.fetch_round(p)
            await asyncio.sleep(max(0.0, interval - (loop.time() - started)))

    async def fetch_round(self, p: _Provider) -> None:
        source = p.source.label
        queries = sorted({q for q, _ in p.series})
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(p.provider.timeout_seconds):   # not wait_for: it can lose a cancel
                answers = await p.source.fetch(queries)
        except TimeoutError:
            self._down(p, f"no answer within {p.provider.timeout_seconds:g}s", "timeout", t0)
            return
        except SourceError as exc:
            self._down(p, str(exc), "error", t0)
            return
        except Exception as exc:  # noqa: BLE001 - a source bug must not end the loop
            log.exception("metrics fetch failed", extra=kv(source=source))
            self._down(p, f"{type(exc).__name__}: {exc}", "error", t0)
            return
        # A query that failed alone (a bad PromQL) fails its series; all of them: the source is down.
        failed = {q: str(a) for q, a in answers.items() if isinstance(a, BaseException)}
        if len(failed) == len(queries):
            self._down(p, next(iter(failed.values())), "error", t0)
            return
        now = self.clock()
        for (query, _), series in p.series.items():
            if query in failed:
                series.failed(failed[query])
            else:
                values, sampled_at = answers.get(query, ({}, now))
                series.replace(values, sampled_at, now)
        for query, error in failed.items():
            log.warning("metrics query failed", extra=kv(source=source, query=query, error=error))
        p.last_ok = now
        METRICS.metrics_fetch_duration.labels(source, "ok").observe(time.perf_counter() - t0)
        METRICS.metrics_source_up.labels(source).set(1)
        nodes = max((len(s.values) for s in p.series.values()), default=0)
        if p.up is not True:
            log.info("metrics source up", extra=kv(source=source, queries=len(queries), nodes=nodes))
        elif nodes != p.nodes:      # e.g. Prometheus's first rule evaluation after an empty answer
            log.info("metrics source: nodes with values changed", extra=kv(source=source, nodes=nodes, was=p.nodes))
        p.up, p.nodes = True, nodes

    def _down(self, p: _Provider, error: str, result: str, t0: float) -> None:
        source = p.source.label
        for series in p.series.values():
            series.failed(error)
        METRICS.metrics_fetch_duration.labels(source, result).observe(time.perf_counter() - t0)
        METRICS.metrics_source_up.labels(source).set(0)
        if p.up is not False:
            log.warning("metrics source down; load-aware plugins use their fallback",
                        extra=kv(source=source, error=error))
        p.up = False

    def update_metrics(self) -> None:
        """Sample ages (called from the scheduler's periodic metrics loop)."""
        now = self.clock()
        for p in self.providers.values():
            if p.last_ok:
                METRICS.metrics_sample_age.labels(p.source.label).set(max(0.0, now - p.last_ok))
