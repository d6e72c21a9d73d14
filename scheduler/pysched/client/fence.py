"""The write fence: nothing is written to the API server unless this replica can prove it leads.

With leader election on, every client that writes on the scheduler's behalf (binds, pod status
patches, PersistentVolume/Claim updates in PreBind, Events, an extender's bind) carries a
``WriteFence``. The client calls ``check()`` after its last wait - the rate limiter, a free
connection, connecting - synchronously and immediately before the request bytes are written,
so a request that queued for seconds (or a process that was paused: SIGSTOP, a VM freeze, CPU
throttling) is only sent if the lease is fresh at the moment it goes out.

"Fresh" is the LeaderElector's: this replica holds the Lease and its last successful renewal
*started* less than ``renewDeadline`` ago on this process's monotonic clock. Another candidate
can take the Lease at the earliest ``leaseDuration`` after it observed that renewal, so a write
sent while fresh reaches the API server at least ``leaseDuration - renewDeadline`` before any
successor may act.

``close()`` shuts the fence for good (lease lost, or graceful shutdown before the Lease is
released); writes that already went out are tracked in ``in_flight`` so a graceful shutdown can
let them finish - and cancel everything that has not been sent - before handing over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pysched.apis.core.errors import ApiError


class NotLeaderError(ApiError):
    """A write was refused by this process's own fence: it cannot prove it leads right now."""

    local = True

    def __init__(self, why: str):
        super().__init__(0, "NotLeader", f"not written: {why}")


class WriteFence:
    def __init__(self, fresh: Callable[[], bool], *, description: str = "leader lease"):
        self._fresh = fresh
        self.description = description
        self.closed_reason = ""
        self.in_flight: set[asyncio.Task] = set()
        self.refused = 0
        self._changed: asyncio.Event | None = None

    @property
    def closed(self) -> bool:
        return bool(self.closed_reason)

    def close(self, reason: str) -> None:
        """No write passes any more (lease lost, or shutting down before the Lease is released)."""
        if not self.closed_reason:
            self.closed_reason = reason
        self.notify()

    def notify(self) -> None:
        """Freshness may have changed (a renewal, a loss): wake ``wait_allowed``."""
        if self._changed is not None:
            self._changed.set()

    async def wait_allowed(self) -> bool:
        """Wait - without spinning - until writes may go out; False once the fence is closed."""
        while not self.closed_reason:
            if self._fresh():
                return True
            if self._changed is None:
                self._changed = asyncio.Event()
            self._changed.clear()
            await self._changed.wait()
        return False

    def allows(self) -> bool:
        return not self.closed_reason and self._fresh()

    def check(self) -> None:
        """Raise NotLeaderError unless a write may go out now. Synchronous: no await may follow
        it before the request is written."""
        if self.closed_reason:
            self.refused += 1
            raise NotLeaderError(self.closed_reason)
        if not self._fresh():
            self.refused += 1
            raise NotLeaderError(f"the {self.description} is not fresh")

    def sent(self) -> None:
        """The calling task's write went out: track it until it finishes (see ``finished``)."""
        task = asyncio.current_task()
        if task is not None:
            self.in_flight.add(task)

    def finished(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.in_flight.discard(task)
