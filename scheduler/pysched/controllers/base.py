"""What the scheduler's status controllers share: run only while this replica leads, wait for an
optional CRD, watch through embedded kopf, reconcile keys from a rate-limited work queue.

A subclass says what it watches (``watch_specs``), how it primes its index and whether it may
start (``prime``: "" when ready, else why not), and how it reconciles one key (``reconcile``).
``start`` runs it (``app`` calls it once the Lease is held), ``cancel`` stops reconciling at once
(the Lease lost), ``stop`` also ends the watch. A write refused by the fence (``NotLeaderError``)
ends the controller: a replica that cannot prove it leads writes nothing more. Other API errors
retry the key with the queue's backoff.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pysched.apis.core.errors import ApiError
from pysched.client.auth import Credentials
from pysched.client.fence import NotLeaderError
from pysched.client.kopf_watch import KopfWatch, WatchSpec
from pysched.client.rest import KubeClient
from pysched.controllers.workqueue import WorkQueue
from pysched.util.eventloop import cancel_and_wait
from pysched.util.logs import kv


class LeaderController:
    what = "controller"          # in log messages: "<what> started", "<what> waiting"
    key_name = "key"             # the log field naming a reconciled key
    log = logging.getLogger("pysched.controllers")

    def __init__(self, client: KubeClient, creds: Credentials, *, retry_period: float = 10.0, workers: int = 2,
                 qps: float = 20.0, burst: int = 50,
                 watch_factory: Callable[[Credentials, list[WatchSpec]], KopfWatch] = KopfWatch):
        self.client = client
        self.creds = creds
        self.retry_period = retry_period
        self.workers = workers
        self.queue = WorkQueue(qps=qps, burst=burst)
        self.watch_factory = watch_factory
        self.watch: KopfWatch | None = None
        self._task: asyncio.Task | None = None
        self.started = asyncio.Event()     # watching and reconciling
        self.writes = 0

    # -- what a subclass provides ----------------------------------------------------------------

    def watch_specs(self) -> list[WatchSpec]:
        raise NotImplementedError

    async def prime(self) -> str:
        """Empty when ready (the index primed); else why not (the CRD is not served...)."""
        raise NotImplementedError

    async def reconcile(self, key: str) -> object:
        raise NotImplementedError

    def waiting_is_a_warning(self) -> bool:
        return False

    def started_fields(self) -> dict[str, object]:
        return {}

    def after_start(self) -> None:
        """Called once watching: e.g. queue every key the priming found."""

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=self.what.replace(" ", "-"))

    def cancel(self) -> None:
        """Stop reconciling now (lease lost); ``stop`` also ends the watch."""
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
        self.queue.close()
        if self.watch is not None:
            await asyncio.to_thread(self.watch.stop)
            self.watch = None

    async def run(self) -> None:
        await self._wait_until_served()
        self.log.info(f"{self.what} started", extra=kv(**self.started_fields()))
        self.watch = self.watch_factory(self.creds, self.watch_specs())
        self.watch.start()
        self.started.set()
        self.after_start()
        await asyncio.gather(*(self._worker() for _ in range(self.workers)))

    async def _wait_until_served(self) -> None:
        logged = ""
        while True:
            why = await self.prime()
            if not why:
                return
            if why != logged:
                logged = why
                fn = self.log.warning if self.waiting_is_a_warning() else self.log.info
                fn(f"{self.what} waiting", extra=kv(reason=why, retry_seconds=self.retry_period))
            await asyncio.sleep(self.retry_period)

    async def discover(self, path: str, plural: str, crd: str) -> str:
        """"" when API discovery of ``path`` lists ``plural``; else why not."""
        try:
            found = await self.client.get(path)
        except ApiError as exc:
            return f"{crd} not served" if exc.status == 404 else \
                f"API discovery of {path} failed: {exc.status} {exc.message}"
        except (TimeoutError, OSError) as exc:
            return f"API discovery of {path} failed: {exc!r}"
        if not any(r.get("name") == plural for r in (found or {}).get("resources") or ()):
            return f"{crd} not served"
        return ""

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self.reconcile(key)
                self.queue.forget(key)
            except NotLeaderError:
                raise                      # the fence is closed: this replica must write nothing more
            except (ApiError, TimeoutError, OSError) as exc:
                delay = self.queue.retry(key)
                self.log.warning(f"{self.what.split()[0]} status update failed; retrying", extra=kv(
                    **{self.key_name: key}, error=str(exc), retry_seconds=round(delay, 3)))
            finally:
                self.queue.done(key)
