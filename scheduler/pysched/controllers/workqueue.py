"""A coalescing, rate-limited work queue of object keys, as client-go's workqueue for controllers.

* A key added several times before a worker takes it is processed once; a key added while it is
  being processed is processed again afterwards, never by two workers at once.
* Workers take keys at most ``qps`` per second (bursts of ``burst``): a storm of events cannot
  turn into a storm of writes.
* ``retry`` re-adds a failed key after an exponential per-key backoff (``base_delay`` doubling
  up to ``max_delay``); ``forget`` resets it after a success.
"""

from __future__ import annotations

import asyncio

from pysched.client.rest import TokenBucket


class WorkQueue:
    def __init__(self, *, qps: float = 10.0, burst: int = 100, base_delay: float = 0.05,
                 max_delay: float = 60.0):
        self._ready: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()      # in _ready, not yet taken
        self._processing: set[str] = set()
        self._dirty: set[str] = set()       # added while processing: re-queue on done
        self._failures: dict[str, int] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self.limiter = TokenBucket(qps, burst)
        self.base_delay = base_delay
        self.max_delay = max_delay

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, key: str) -> None:
        if key in self._processing:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._ready.put_nowait(key)

    def retry(self, key: str) -> float:
        """Add ``key`` again after its backoff; return the delay."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        delay = min(self.max_delay, self.base_delay * (2 ** n))
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._timers[key] = asyncio.get_running_loop().call_later(delay, self._fire, key)
        return delay

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    async def get(self) -> str:
        key = await self._ready.get()
        self._queued.discard(key)
        self._processing.add(key)
        await self.limiter.acquire()
        return key

    def done(self, key: str) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def close(self) -> None:
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()
