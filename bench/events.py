"""Scheduled Events posted for the measured pods, counted like with like for every scheduler.

A scheduler's CPU only compares with another's if both include posting the ``Scheduled`` Event of
every pod they bound. After the watcher has seen every measured pod bound, the driver lists the
``bench`` namespace's events.k8s.io/v1 Events until those with reason ``Scheduled``,
``reportingController`` = the scheduler's name and ``regarding`` one of the measured pods add up
to the bound count (an Event with a ``series`` counts ``series.count`` occurrences), or the count
stops growing for ``STALL_S`` seconds, or ``MAX_WAIT_S`` pass. Only then does the run take its end
sample of CPU, memory and metrics.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from pysched.client.rest import KubeClient

MAX_WAIT_S = 60.0
STALL_S = 5.0


def count_scheduled(events: Iterable[dict], controller: str, pods: set[str]) -> int:
    """Occurrences of ``Scheduled`` reported by ``controller`` about the pods named in ``pods``."""
    n = 0
    for ev in events:
        if ev.get("reason") != "Scheduled" or ev.get("reportingController") != controller:
            continue
        regarding = ev.get("regarding") or {}
        if regarding.get("kind", "Pod") != "Pod" or regarding.get("name") not in pods:
            continue
        series = ev.get("series") or {}
        n += int(series.get("count") or 1) if series else 1
    return n


async def wait_for_scheduled(client: KubeClient, namespace: str, controller: str, pods: set[str], want: int,
                             alive=lambda: None, max_wait: float = MAX_WAIT_S, stall: float = STALL_S,
                             poll: float = 1.0) -> tuple[int, float]:
    """Poll until ``want`` Scheduled occurrences are posted; returns (count, seconds until the count last
    grew): a count that stalls short of ``want`` is not charged the ``stall`` seconds spent making sure."""
    path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
    t0 = last_growth = time.monotonic()
    best = -1
    while True:
        alive()
        items, _ = await client.list_all(path, {"fieldSelector": f"reason=Scheduled,reportingController={controller}"})
        n = count_scheduled(items, controller, pods)
        now = time.monotonic()
        if n > best:
            best, last_growth = n, now
        if n >= want or now - last_growth >= stall or now - t0 >= max_wait:
            return n, round(last_growth - t0, 2)
        await asyncio.sleep(poll)
