"""Throughput, latency and repeat statistics, computed as scheduler_perf does where it has a rule.

Throughput: the number of pods bound in each whole 1-second interval from the start of the window
until the last bind (a final partial interval is not a sample, as scheduler_perf samples only on
its 1 s ticks). Average is pods / elapsed seconds; Perc50/90/99 are nearest-rank percentiles of
the per-second samples, reported only when there are at least ``MIN_SECOND_SAMPLES`` of them (a
percentile of 1-3 samples is not a percentile: None, shown "n/a").
Latency: per pod, watcher-observed bind time minus watcher-observed creation time.
Repeats: every figure of a cell is reported as the median and the range (min-max) over repeats.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass

MIN_SECOND_SAMPLES = 10


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list (scheduler_perf's ``ceil(n*p/100)-1``)."""
    if not sorted_values:
        return 0.0
    idx = max(0, math.ceil(len(sorted_values) * pct / 100.0) - 1)
    return float(sorted_values[min(idx, len(sorted_values) - 1)])


def per_second_samples(start: float, bind_times: list[float]) -> list[float]:
    """Pods bound in each whole second from ``start``; the final partial second is dropped."""
    if not bind_times:
        return []
    full = int(max(max(bind_times) - start, 0.0))
    counts = [0] * (full + 1)
    for t in bind_times:
        counts[min(int(max(t - start, 0.0)), full)] += 1
    return [float(c) for c in counts[:full]]


def second_percentiles(samples: list[float]) -> tuple[float | None, float | None, float | None]:
    """p50/p90/p99 of per-second samples, or (None, None, None) with fewer than 10 samples."""
    if len(samples) < MIN_SECOND_SAMPLES:
        return None, None, None
    s = sorted(samples)
    return percentile(s, 50), percentile(s, 90), percentile(s, 99)


@dataclass
class Summary:
    pods: int
    bound: int
    elapsed_s: float
    avg: float
    p50: float | None          # per-second throughput percentiles (None: fewer than 10 samples)
    p90: float | None
    p99: float | None
    seconds: int               # how many whole-second samples there were
    latency_p50_ms: float
    latency_p90_ms: float
    latency_p99_ms: float

    def as_dict(self) -> dict:
        return asdict(self)


def _r(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(x, nd)


def summarise(start: float, records: dict[str, dict], expected: int) -> Summary:
    """``records``: pod key -> {"seen": t_created_seen, "bound": t_bound_seen or None}."""
    binds = [r["bound"] for r in records.values() if r.get("bound") is not None]
    samples = per_second_samples(start, binds)
    p50, p90, p99 = second_percentiles(samples)
    lat = sorted((r["bound"] - r["seen"]) * 1000.0 for r in records.values()
                 if r.get("bound") is not None and r.get("seen") is not None)
    elapsed = (max(binds) - start) if binds else 0.0
    return Summary(pods=expected, bound=len(binds), elapsed_s=round(elapsed, 3),
                   avg=round(len(binds) / elapsed, 1) if elapsed > 0 else 0.0,
                   p50=_r(p50), p90=_r(p90), p99=_r(p99), seconds=len(samples),
                   latency_p50_ms=round(percentile(lat, 50), 1), latency_p90_ms=round(percentile(lat, 90), 1),
                   latency_p99_ms=round(percentile(lat, 99), 1))


@dataclass(frozen=True)
class Spread:
    """One figure over the repeats of a cell."""
    median: float
    low: float
    high: float
    n: int


def spread(values: Iterable[float | None]) -> Spread | None:
    """Median and range of the values that exist (None: not measured in that repeat)."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return None
    return Spread(statistics.median(xs), min(xs), max(xs), len(xs))


def ratio(ours: Spread | None, theirs: Spread | None) -> float | None:
    """Ratio of medians ours / theirs (None when either is missing or theirs is 0)."""
    if ours is None or theirs is None or theirs.median == 0:
        return None
    return ours.median / theirs.median


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
