"""The soak's verdicts, from its per-minute samples (``bench.soak`` writes them; this module only reads).

A sample (one JSON line of ``samples.jsonl``, gzipped into ``samples.jsonl.gz`` when the run is over) is::

    {"n": 7, "minute": 7.005, "t": 420.3,
     "pysched": [{"slot": "a", "incarnation": 1, "pid": 123, "leader": true, "rss_mib": 181.2,
                  "fds": 41, "threads": 9, "tasks": 57, "pending": {"active": 0, ...},
                  "events_backlog": 0}, ...],
     "kube": {"rss_mib": 95.0, "fds": 30, ...} | null,
     "latency": {"pysched": {"count": 1200, "p50": 0.004, "p99": 0.03}, "kube": {...}},
     "cluster": {"pods": 2900, "unbound": 3, "unbound_30s": 0}, "happened": ["handover a->b", ...]}

The verdicts (``judge``), each over the minutes after ``warmup`` minutes of a process's time in
one role - as leader (the process that schedules) or as standby (it keeps its caches and queue
current and never pops: a leak there once grew a standby 3 MiB a minute while every leader stayed
flat) - so that start-up (informer LISTs, first caches) and taking over are not read as growth:

* **RSS drift** under ``MAX_DRIFT_PCT`` % per hour: the least-squares slope of the process's RSS
  over its tenure in that role, times 60, over its mean RSS, judged on tenures with at least
  ``MIN_DRIFT_MINUTES`` samples after warm-up. Shorter ones are reported with the slope's standard
  error, not judged: a resident set moves by about 0.5 MiB from one minute to the next while
  nothing grows (one leader for an hour, ``bench/SOAK.md``), and over 10 minutes 5 %/h of 135 MiB
  is 1.1 MiB - the slope's standard error there is about half the limit, at 20 minutes a sixth.
  A handover every 15 minutes leaves no tenure that long, hence the soak's second run with one
  leader for the hour (``--handover-every 0``).
* **No growth in asyncio tasks or file descriptors**: the highest value in the last third of a
  tenure (of at least ``MIN_POINTS`` samples) is at most the highest of its first third plus
  ``SLACK`` (a few in flight at any moment).
* **Latency flat**: the median per-minute p99 of the last third of the run (after warm-up) is at
  most ``LATENCY_RATIO`` times that of the first third, or ``LATENCY_FLOOR_S`` above it (at a few
  milliseconds, a ratio alone would judge noise).
* **Every pod placed exactly once** and **no node above allocatable**, from the end-of-run checks
  the driver adds to the summary (the API server's audit log and the nodes' requests).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .rawdata import read_text

MAX_DRIFT_PCT = 5.0
MIN_POINTS = 5
MIN_DRIFT_MINUTES = 20
SLACK = 5
LATENCY_RATIO = 1.5
LATENCY_FLOOR_S = 0.05


@dataclass
class Tenure:
    """One pysched process's samples in one role (slot, incarnation, leader or standby), in order."""
    slot: str
    incarnation: int
    role: str = "leader"
    minutes: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    tasks: list[float] = field(default_factory=list)
    fds: list[float] = field(default_factory=list)
    heap_blocks: list[float] = field(default_factory=list)   # Python allocator blocks in use


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The samples of ``samples.jsonl``, plain or gzipped (``samples.jsonl.gz``; ``bench.rawdata``)."""
    return [json.loads(line) for line in read_text(path).splitlines() if line.strip()]


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float, float] | None:
    """The least-squares line of ys over xs: (mean x, mean y, sum of squared x deviations, slope);
    None with fewer than two distinct xs."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    return mx, my, sxx, sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs (0 with fewer than two distinct xs)."""
    fit = _fit(xs, ys)
    return 0.0 if fit is None else fit[3]


def slope_stderr(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The standard error of the least-squares slope of ys over xs (0 with fewer than 3 points)."""
    fit = _fit(xs, ys)
    if fit is None or len(xs) < 3:
        return 0.0
    mx, my, sxx, b = fit
    residual = sum((y - my - b * (x - mx)) ** 2 for x, y in zip(xs, ys))
    return (residual / (len(xs) - 2) / sxx) ** 0.5


def drift_pct_per_hour(minutes: Sequence[float], values: Sequence[float]) -> float:
    """The trend of ``values`` (sampled at ``minutes``) as a percentage of their mean per hour."""
    mean = sum(values) / len(values) if values else 0.0
    return 100.0 * slope(minutes, values) * 60.0 / mean if mean else 0.0


def drift_stderr_pct_per_hour(minutes: Sequence[float], values: Sequence[float]) -> float:
    """``drift_pct_per_hour``'s standard error, in the same unit."""
    mean = sum(values) / len(values) if values else 0.0
    return 100.0 * slope_stderr(minutes, values) * 60.0 / mean if mean else 0.0


def grew(values: Sequence[float], slack: float = SLACK) -> bool:
    """The last third's highest value exceeds the first third's highest by more than ``slack``."""
    third = max(1, len(values) // 3)
    return max(values[-third:]) > max(values[:third]) + slack


def tenures(samples: Iterable[dict[str, Any]], warmup: float) -> list[Tenure]:
    """Every process's tenures, as leader and as standby, each without its first ``warmup`` minutes."""
    out: dict[tuple[str, int, str], Tenure] = {}
    since: dict[tuple[str, int, str], float] = {}
    for s in samples:
        for p in s.get("pysched") or ():
            key = (p["slot"], p["incarnation"], "leader" if p.get("leader") else "standby")
            since.setdefault(key, s["minute"])
            if s["minute"] - since[key] < warmup:
                continue
            t = out.setdefault(key, Tenure(*key))
            t.minutes.append(s["minute"])
            t.rss.append(p["rss_mib"])
            t.tasks.append(p.get("tasks") or 0)
            t.fds.append(p["fds"])
            if p.get("heap_blocks") is not None:
                t.heap_blocks.append(p["heap_blocks"])
    return list(out.values())


def latency_flat(samples: Sequence[dict[str, Any]], warmup: float, who: str = "pysched") -> dict[str, Any]:
    p99s = [s["latency"][who]["p99"] for s in samples
            if s["minute"] >= warmup and (s.get("latency") or {}).get(who, {}).get("p99") is not None]
    if len(p99s) < 3:
        return {"judged": False, "why": f"{len(p99s)} minutes with scheduling after warm-up"}
    third = max(1, len(p99s) // 3)
    first, last = statistics.median(p99s[:third]), statistics.median(p99s[-third:])
    limit = max(first * LATENCY_RATIO, first + LATENCY_FLOOR_S)
    return {"judged": True, "ok": last <= limit, "first_p99_s": first, "last_p99_s": last, "limit_s": limit}


def judge(samples: Sequence[dict[str, Any]], end_checks: dict[str, Any], warmup: float) -> dict[str, Any]:
    """Every verdict, and ``pass`` when all that could be judged held."""
    per_tenure = []
    for t in tenures(samples, warmup):
        row: dict[str, Any] = {"slot": t.slot, "incarnation": t.incarnation, "role": t.role,
                               "minutes": len(t.minutes),
                               "rss_mib_first": t.rss[0], "rss_mib_last": t.rss[-1]}
        if len(t.minutes) >= MIN_POINTS:
            drift = drift_pct_per_hour(t.minutes, t.rss)
            if len(t.heap_blocks) == len(t.minutes):
                # Not judged, shown beside the RSS: objects kept grow this; allocator fragmentation does not.
                row["heap_blocks_drift_pct_per_hour"] = round(drift_pct_per_hour(t.minutes, t.heap_blocks), 2)
            drift_judged = len(t.minutes) >= MIN_DRIFT_MINUTES
            row.update(judged=True, rss_drift_pct_per_hour=round(drift, 2),
                       rss_drift_stderr_pct_per_hour=round(drift_stderr_pct_per_hour(t.minutes, t.rss), 2),
                       rss_drift_judged=drift_judged, tasks_grew=grew(t.tasks), fds_grew=grew(t.fds),
                       ok=(not drift_judged or abs(drift) < MAX_DRIFT_PCT) and not grew(t.tasks)
                       and not grew(t.fds))
        else:
            row.update(judged=False, rss_drift_judged=False)
        per_tenure.append(row)
    judged = [r for r in per_tenure if r["judged"]]
    latency = latency_flat(samples, warmup)
    verdicts = {
        "memory_tasks_fds": {"judged": bool(judged), "ok": all(r["ok"] for r in judged), "tenures": per_tenure,
                             "rss_drift_judged": any(r["rss_drift_judged"] for r in per_tenure)},
        "latency_flat": latency,
        "placed_exactly_once": end_checks.get("placed_exactly_once", {"judged": False}),
        "within_allocatable": end_checks.get("within_allocatable", {"judged": False}),
        "all_placed": end_checks.get("all_placed", {"judged": False}),
    }
    verdicts["pass"] = all(v.get("ok", False) for v in verdicts.values() if isinstance(v, dict) and v.get("judged"))
    verdicts["all_judged"] = (all(v.get("judged") for k, v in verdicts.items() if isinstance(v, dict))
                              and verdicts["memory_tasks_fds"]["rss_drift_judged"])
    return verdicts


def overcommitted(nodes: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]],
                  parse: Any) -> list[str]:
    """Nodes whose live pods (bound, not Succeeded or Failed - terminating ones still hold their
    share) request more CPU or memory than the node's allocatable, or are more pods than it allows.
    ``parse(resource, quantity)`` turns a quantity into an integer (millicores, bytes, count)."""
    used: dict[str, list[int]] = {}
    for p in pods:
        node = p["spec"].get("nodeName")
        if not node or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        acc = used.setdefault(node, [0, 0, 0])
        for c in p["spec"]["containers"]:
            req = (c.get("resources") or {}).get("requests") or {}
            acc[0] += parse("cpu", req.get("cpu", 0))
            acc[1] += parse("memory", req.get("memory", 0))
        acc[2] += 1
    bad = []
    for n in nodes:
        name = n["metadata"]["name"]
        if name not in used:
            continue
        alloc = n["status"]["allocatable"]
        cap = (parse("cpu", alloc["cpu"]), parse("memory", alloc["memory"]), parse("pods", alloc["pods"]))
        if any(u > c for u, c in zip(used[name], cap)):
            bad.append(f"{name}: requests {used[name]} > allocatable {list(cap)}")
    return bad
