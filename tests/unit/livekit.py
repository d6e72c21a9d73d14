"""Running the live scheduling loop over the offline engine in a unit test: binding cycles, Permit
waits and backoffs happen for real, on the test's own event loop."""

from __future__ import annotations

import asyncio


async def until(cond, timeout=10.0, interval=0.01):
    """Poll ``cond()`` until true (a liveness bound, not a speed check)."""
    end = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < end, "condition not reached"
        await asyncio.sleep(interval)


def run_live(sim, body):
    """Run ``sim``'s scheduling loop while ``await body()`` drives the test, then stop it all."""
    async def main():
        loop_task = asyncio.create_task(sim.scheduler.run())
        try:
            await body()
        finally:
            sim.scheduler.stop()
            await asyncio.wait_for(loop_task, 5)
            for t in list(sim.scheduler.binding_tasks):
                t.cancel()
    asyncio.run(main())
