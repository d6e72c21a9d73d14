"""The three measured phases of a run: drain, steady and burst.

Each starts after the init pods are bound by the scheduler under test and returns a ``Phase`` once
the measured pods are created and the watcher is following them; the run then waits for the
watcher, the Events, and takes its end sample (``bench.runner``).

* **drain** (scheduler throughput): the scheduler is stopped (SIGTERM, wait), every measured pod
  is created (64 in flight), the watcher lists them, and a *fresh* scheduler process starts with
  the backlog (``t0`` is taken just before it is started). Its CPU and peak RSS are over its
  whole life, startup included.
* **steady** (latency): the scheduler keeps running; the measured pods are created at a fixed rate
  on a schedule (pod ``i`` is due at ``t0 + i / rate``; a late creation does not push the later
  ones back), at most 64 in flight.
* **burst**: the scheduler keeps running; the measured pods are created as fast as the API server
  takes them (64 in flight).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pysched.client.rest import KubeClient

from . import procstat, prom
from .machine import OtherLoad
from .process import BenchError, Process
from .watcher import Spawned

if TYPE_CHECKING:
    from .runner import Run

MODES = ("drain", "steady", "burst")
CREATE_CONCURRENCY = 64


@dataclass
class Phase:
    mode: str
    sched: Process                 # the process measured (drain: the fresh one)
    t0: float                      # wall clock: first creation (steady, burst) or just before Popen (drain)
    load: OtherLoad
    cpu0: float                    # the scheduler's CPU seconds at t0 (0 for drain's fresh process)
    metrics0: prom.Samples | None  # a scrape at t0 (None: report the fresh process's totals)
    watcher: Spawned
    create_rate: float | None = None     # measured pods created per second
    target_rate: float | None = None     # steady: the rate asked for


async def create_paced(client: KubeClient, pods: list[dict], rate: float,
                       concurrency: int = CREATE_CONCURRENCY,
                       create: Callable[[dict], Awaitable[object]] | None = None) -> float:
    """Create ``pods`` with pod ``i`` due at ``start + i / rate``; returns pods per second achieved
    (pods / time until the last creation returned)."""
    if rate <= 0:
        raise ValueError(f"--steady-rate must be positive, got {rate}")

    async def post(p: dict) -> object:
        ns = p["metadata"].get("namespace", "default")
        return await client.request("POST", f"/api/v1/namespaces/{ns}/pods", body=p, rate_limit=False)

    send = create or post
    loop = asyncio.get_running_loop()
    sem = asyncio.Semaphore(concurrency)
    tasks = []

    async def one(p: dict) -> None:
        try:
            await send(p)
        finally:
            sem.release()

    start = loop.time()
    for i, p in enumerate(pods):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await sem.acquire()
        tasks.append(asyncio.create_task(one(p)))
    await asyncio.gather(*tasks)
    return len(pods) / max(loop.time() - start, 1e-9)


async def drain(run: Run, sched: Process | None) -> Phase:
    if sched is not None:
        sched.stop()
    pods = run.measured_pods()
    create_rate = await run.create_measured(pods)
    watcher = await run.spawn_watcher()
    await run.mark_t0()
    load = OtherLoad.start(run.control_plane_pids())
    t0 = time.time()
    fresh = run.start_scheduler(tag="-drain")
    run.measuring(fresh)
    return Phase("drain", fresh, t0, load, 0.0, None, watcher, create_rate=round(create_rate, 1))


async def _while_running(run: Run, sched: Process | None, mode: str,
                         create: Callable[[list[dict]], Awaitable[float]]) -> Phase:
    """steady and burst: the running scheduler, a scrape and CPU sample at t0, then ``create``."""
    if sched is None:
        raise ValueError("steady and burst need the scheduler running")
    watcher = await run.spawn_watcher()
    metrics0 = await run.scrape(sched)
    load, cpu0 = OtherLoad.start(run.control_plane_pids()), procstat.cpu_s(sched.pid)
    pods = run.measured_pods()
    run.measuring(sched)
    t0 = time.time()
    rate = await create(pods)
    return Phase(mode, sched, t0, load, cpu0, metrics0, watcher, create_rate=round(rate, 1))


async def steady(run: Run, sched: Process | None) -> Phase:
    if run.living:
        raise BenchError("steady mode paces bare pods; on a living cluster measure drain or burst")
    rate = run.spec.steady_rate
    phase = await _while_running(run, sched, "steady", lambda pods: create_paced(run.client, pods, rate))
    phase.target_rate = rate
    return phase


async def burst(run: Run, sched: Process | None) -> Phase:
    await run.mark_t0()
    return await _while_running(run, sched, "burst", run.create_measured)


PHASES: dict[str, Callable[[Run, Process | None], Awaitable[Phase]]] = {
    "drain": drain, "steady": steady, "burst": burst}
