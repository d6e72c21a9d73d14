"""Scrape a scheduler's /metrics and turn two scrapes into the figures the report compares.

Both schedulers run with ``--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics``
(a bench-only lab setting) so the driver reads ``https://127.0.0.1:PORT/metrics`` without
credentials; their serving certificates are self-signed, so this loopback-only client does not
verify them. Figures, per run (a metric the process does not export gives None, shown "n/a"):

* ``scheduler_scheduling_attempt_duration_seconds{result="scheduled"}``: count, mean, and p50/p99
  estimated from the buckets (PromQL ``histogram_quantile``);
* ``scheduler_framework_extension_point_duration_seconds{status="Success"}``: mean per extension
  point (n/a where a scheduler exports no series for it);
* ``process_cpu_seconds_total``: CPU seconds (a cross-check of /proc);
* ``rest_client_requests_total``: API requests, in total and by method.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.request

from . import prom

ALLOW_PATHS = "/healthz,/readyz,/livez,/metrics"
EXTENSION_POINTS = ("PreFilter", "Filter", "PreScore", "Score", "Reserve", "Permit", "PreBind", "Bind")
ATTEMPT = "scheduler_scheduling_attempt_duration_seconds"
EXTENSION = "scheduler_framework_extension_point_duration_seconds"


def _context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE   # the scheduler's self-signed serving cert, on loopback only
    return ctx


def fetch_text(port: int, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=_context(), timeout=timeout) as r:
        return r.read().decode()


async def scrape(port: int, timeout: float = 10.0) -> prom.Samples:
    return prom.parse(await asyncio.to_thread(fetch_text, port, timeout))


async def wait_serving(port: int, alive, timeout: float = 120.0) -> None:
    """Wait until /metrics answers (``alive()`` raises if the process died meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        alive()
        try:
            await asyncio.to_thread(fetch_text, port, 3.0)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.3)


def _ms(x: float | None) -> float | None:
    return None if x is None else round(x * 1000.0, 3)


def figures(d: prom.Samples, bound: int) -> dict:
    """Figures of one run from ``d``: a delta of two scrapes, or a fresh process's totals."""
    count = prom.total(d, f"{ATTEMPT}_count", result="scheduled")
    total_s = prom.total(d, f"{ATTEMPT}_sum", result="scheduled")
    cum = prom.buckets(d, ATTEMPT, result="scheduled")
    ext: dict[str, float | None] = {}
    for ep in EXTENSION_POINTS:
        n = prom.total(d, f"{EXTENSION}_count", extension_point=ep, status="Success")
        s = prom.total(d, f"{EXTENSION}_sum", extension_point=ep, status="Success")
        ext[ep] = _ms(s / n) if n and s is not None else None
    requests = prom.total(d, "rest_client_requests_total")
    by_method: dict[str, float] = {}
    for labels, v in prom.select(d, "rest_client_requests_total"):
        method = labels.get("method", "?")
        by_method[method] = by_method.get(method, 0.0) + v
    cpu = prom.total(d, "process_cpu_seconds_total")
    attempts_all = prom.total(d, "scheduler_schedule_attempts_total")     # every result, pods
    group_attempts = prom.total(d, "scheduler_podgroup_schedule_attempts_total")   # kube-scheduler 1.37's
    fallbacks = {f"{labels.get('plugin', '?')}/{labels.get('reason', '?')}": int(v)
                 for labels, v in prom.select(d, "pysched_metrics_fallbacks_total") if v}
    return {
        "attempts": int(count) if count is not None else None,
        "attempts_all_results": int(attempts_all) if attempts_all is not None else None,
        "podgroup_attempts": int(group_attempts) if group_attempts is not None else None,
        "attempt_mean_ms": _ms(total_s / count) if count and total_s is not None else None,
        "attempt_p50_ms": _ms(prom.histogram_quantile(0.5, cum)),
        "attempt_p99_ms": _ms(prom.histogram_quantile(0.99, cum)),
        "extension_point_mean_ms": ext,
        "cpu_s": round(cpu, 3) if cpu is not None else None,
        "api_requests": int(requests) if requests is not None else None,
        "api_requests_per_pod": round(requests / bound, 3) if requests is not None and bound else None,
        "api_requests_by_method": {m: int(v) for m, v in sorted(by_method.items()) if v},
        "load_fallbacks": fallbacks,    # load-aware cycles that used a fallback, by plugin/reason
    }
