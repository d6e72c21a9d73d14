"""Throughput and latency statistics, computed as scheduler_perf does.

Throughput: the number of pods bound in each whole 1-second interval from the moment the first
measured pod is created until the last one is bound (a final partial interval is not a sample, as
scheduler_perf samples only on its 1 s ticks, unless the run is shorter than a second). Average is
pods / elapsed seconds; Perc50/90/99 are nearest-rank percentiles of the per-second samples.
Latency: per pod, watcher-observed bind time minus watcher-observed creation time.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list (scheduler_perf's ``ceil(n*p/100)-1``)."""
    if not sorted_values:
        return 0.0
    idx = max(0, math.ceil(len(sorted_values) * pct / 100.0) - 1)
    return float(sorted_values[min(idx, len(sorted_values) - 1)])


def per_second_samples(start: float, bind_times: list[float]) -> list[float]:
    if not bind_times:
        return []
    end = max(bind_times)
    elapsed = max(end - start, 1e-9)
    full = int(elapsed)
    counts = [0] * (full + 1)
    for t in bind_times:
        counts[min(int(max(t - start, 0.0)), full)] += 1
    samples = [float(c) for c in counts[:full]]
    if not samples:
        samples.append(counts[full] / elapsed)
    return samples


@dataclass
class Summary:
    pods: int
    bound: int
    elapsed_s: float
    avg: float
    p50: float
    p90: float
    p99: float
    latency_p50_ms: float
    latency_p99_ms: float

    def as_dict(self) -> dict:
        return asdict(self)


def summarise(start: float, records: dict[str, dict], expected: int) -> Summary:
    """``records``: pod key -> {"seen": t_created_seen, "bound": t_bound_seen or None}."""
    binds = [r["bound"] for r in records.values() if r.get("bound") is not None]
    samples = sorted(per_second_samples(start, binds))
    lat = sorted((r["bound"] - r["seen"]) * 1000.0 for r in records.values()
                 if r.get("bound") is not None and r.get("seen") is not None)
    elapsed = (max(binds) - start) if binds else 0.0
    return Summary(pods=expected, bound=len(binds), elapsed_s=round(elapsed, 3),
                   avg=round(len(binds) / elapsed, 1) if elapsed > 0 else 0.0,
                   p50=round(percentile(samples, 50), 1), p90=round(percentile(samples, 90), 1),
                   p99=round(percentile(samples, 99), 1),
                   latency_p50_ms=round(percentile(lat, 50), 1), latency_p99_ms=round(percentile(lat, 99), 1))


def bound_over_time(start: float, bind_times: list[float], step: float = 0.25) -> tuple[list[float], list[int]]:
    """Cumulative bound pods sampled every ``step`` seconds, for the chart."""
    times = sorted(t - start for t in bind_times)
    if not times:
        return [0.0], [0]
    xs, ys, i, t = [], [], 0, 0.0
    while True:
        while i < len(times) and times[i] <= t:
            i += 1
        xs.append(round(t, 3))
        ys.append(i)
        if i == len(times):
            return xs, ys
        t += step
