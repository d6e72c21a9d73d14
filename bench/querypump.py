"""The loadaware profile's Prometheus queries, sent by the driver during the other profiles' runs.

With ``--load-metrics all`` every run has the node exporter and Prometheus, so the profiles are
compared on the same machine load. Scraping is only half of that load: a loadaware scheduler also
has Prometheus evaluate its queries (the window subqueries over every node) every interval, on the
CPU the API server runs on, and a slower API server changes what the scheduler spends per pod.
``QueryPump`` sends the same queries, wrapped as the scheduler wraps them, at the same interval
from the start of the scheduler's run, and throws the answers away: what Prometheus does is then
the same in every run, and the only difference left is the scheduler's own work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import aiohttp

log = logging.getLogger("bench.querypump")


class QueryPump:
    """Every ``interval`` seconds (the first round at once), send each of ``queries`` to the
    Prometheus at ``address`` concurrently and read the answers whole."""

    def __init__(self, address: str, queries: list[str], interval: float, timeout: float):
        self.address = address.rstrip("/")
        self.queries = list(queries)
        self.interval = interval
        self.timeout = timeout
        self.rounds = 0               # rounds whose every answer was read
        self.failures = 0             # rounds with a query that failed or timed out
        self._task: asyncio.Task | None = None

    def start(self) -> QueryPump:
        """Start the rounds, or start them again from now (as a scheduler started again would)."""
        if self._task is not None:
            self._task.cancel()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="query-pump")
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout)) as session:
            while True:
                started = loop.time()
                answers = await asyncio.gather(*(self._query(session, q) for q in self.queries),
                                               return_exceptions=True)
                failed = [a for a in answers if isinstance(a, BaseException)]
                if failed:
                    self.failures += 1
                    log.warning("query pump round failed: %r", failed[0])
                else:
                    self.rounds += 1
                await asyncio.sleep(max(0.0, self.interval - (loop.time() - started)))

    async def _query(self, session: aiohttp.ClientSession, query: str) -> int:
        async with session.get(f"{self.address}/api/v1/query", params={"query": query}) as resp:
            body = await resp.read()
            resp.raise_for_status()
            return len(body)
