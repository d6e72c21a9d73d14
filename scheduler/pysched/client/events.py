"""Event recorder: kube-scheduler's Events (``events.k8s.io/v1``) written in the background.

``Scheduled`` (Normal, action ``Binding``, "Successfully assigned ns/name to node") and
``FailedScheduling`` (Warning, action ``Scheduling``, the FitError message, at most 1024 bytes)
use the same reason, action and note as upstream; ``reportingController`` is the profile's
schedulerName, ``reportingInstance`` ``<controller>-<hostname>``.

Recording never blocks scheduling and, like client-go's events broadcaster, never drops an event
because of a burst: ``record()`` only counts the occurrence in an ``EventBacklog`` keyed by
client-go's isomorphic key, and workers write what is owed through their own client and
its rate limiter (kube-scheduler also has a separate event client with the same qps/burst).
There are enough workers (``WORKERS``) for Events to keep pace with binds at thousands of pods
per second: client-go writes each event in its own goroutine, limited only by that client's QPS,
and with 4 workers the 5,000-node drain benchmark left 8,500 of 10,000 Scheduled events unwritten
when the last pod was bound.

Binds come first: while the scheduler works through a backlog (pods waiting in activeQ and binds in
flight, ``defer_while``) only ``BUSY_WORKERS`` workers write, so Events do not compete with binds for
the API server; the others resume as soon as the backlog is gone. In the 5,000-node drain benchmark
(SchedulingNodeAffinity, 5,000 pods) this took pysched from 635 to 727-771 binds/s against the
null binder's 788, with every Event still written (``bench/runs/events-yield``).

A repeat of an event recorded in the last six minutes becomes a series on the existing object:
client-go writes ``series.count`` 2 at once; we then write the current count at most every
``series_interval`` seconds, 10 by default (client-go every 30 minutes and when the series ends).

Writes fail and retry as client-go's do: errors without an HTTP answer (connection refused or
reset, timeouts, any other exception from the client) are retried up to ``max_tries`` tries in
all, ``retry_interval`` to 1.25 x ``retry_interval`` apart (client-go: 12 tries, 10 s + 25 %
jitter); 429 and 5xx answers too (client-go's REST client retries those when the server sends
Retry-After). Other 4xx answers are final. A series update answered 404 (the Event was deleted or
expired) creates the Event again with its series; that create answered 409 is retried. A create
answered 409 means the Event exists (an earlier try that timed out got through) and counts as
written.

Dropping is a last resort, counted in ``pysched_events_dropped_total{reason}``: ``backlog_full``
(more than ``limit`` distinct pending events: the least valuable pending write goes, see
``eventseries``), ``rejected`` (a final 4xx), ``retries_exhausted`` and ``shutdown`` (what
``stop()`` could not flush within its drain time).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
from collections.abc import Callable

from pysched.client.eventseries import SERIES_WINDOW, EventBacklog, PendingEvent, event_name, isomorphic_key, now_micro
from pysched.client.rest import ApiError, KubeClient, retryable
from pysched.metrics import METRICS
from pysched.util.eventloop import cancel_and_wait
from pysched.util.logs import kv

log = logging.getLogger("pysched.client.events")
DEFAULT_LIMIT = 100_000
MAX_TRIES = 12          # client-go maxTriesPerEvent
RETRY_INTERVAL = 10.0   # client-go defaultSleepDuration, jittered by up to +25 %
SERIES_INTERVAL = 10.0  # how often counts of running series are written
WORKERS = 16            # concurrent Event writes (each holds one connection of the event client)
BUSY_WORKERS = 2        # ... while the scheduler is working through a backlog (``defer_while``)
BUSY_POLL = 0.05        # seconds between looks at the scheduler's backlog by a worker held back


def _error_code(exc: BaseException) -> str:
    if isinstance(exc, ApiError) and exc.status:
        return str(exc.status)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    return type(exc).__name__


def _retryable(exc: BaseException, *, recreating: bool) -> bool:
    return retryable(exc) or (isinstance(exc, ApiError) and exc.status == 409 and recreating)


class EventRecorder:
    def __init__(self, client: KubeClient | None, *, workers: int = WORKERS, limit: int = DEFAULT_LIMIT,
                 instance: str | None = None, max_tries: int = MAX_TRIES, retry_interval: float = RETRY_INTERVAL,
                 series_interval: float = SERIES_INTERVAL, window: float = SERIES_WINDOW):
        self.client = client
        self.instance = instance or os.environ.get("POD_NAME") or socket.gethostname()
        self.backlog = EventBacklog(limit, window=window)
        self.max_tries = max_tries
        self.retry_interval = retry_interval
        self.series_interval = series_interval
        self._workers = workers
        self._tasks: list[asyncio.Task] = []
        self._wake = asyncio.Event()
        self._accepting = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timers: set[asyncio.TimerHandle] = set()
        self._children: dict = {}
        self._full_drops = 0
        self._busy: Callable[[], bool] | None = None
        self._busy_workers = BUSY_WORKERS
        self.posted = 0
        self.aggregated = 0
        self.dropped = 0

    # -- lifecycle -------------------------------------------------------------------------------

    def defer_while(self, busy: Callable[[], bool], workers: int = BUSY_WORKERS) -> None:
        """While ``busy()`` (the scheduler has pods waiting and binds in flight), only ``workers`` of
        the workers write: binds get the API server first, Events follow, none dropped for it."""
        self._busy = busy
        self._busy_workers = workers

    def start(self) -> None:
        if self.client is None:
            return
        self._loop = asyncio.get_running_loop()
        self._accepting = True
        METRICS.events_backlog.set_function(lambda: self.backlog.pending)
        METRICS.events_tracked.set_function(lambda: self.backlog.tracked)
        self._tasks = [asyncio.create_task(self._worker(i), name=f"event-worker-{i}") for i in range(self._workers)]
        self._tasks.append(asyncio.create_task(self._sync_loop(), name="event-series-sync"))

    async def stop(self, drain: float = 2.0) -> None:
        """Stop recording; write what is owed for up to ``drain`` seconds, count the rest as dropped."""
        self._accepting = False
        if self._tasks:
            self.backlog.sync()  # running series get their last count
            self._wake.set()
            deadline = time.monotonic() + max(0.0, drain)
            while self.backlog.pending and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        await cancel_and_wait(self._tasks)
        self._tasks = []
        for h in self._timers:
            h.cancel()
        self._timers.clear()
        left = self.backlog.abandon_pending()
        if left:
            self._drop("shutdown", len(left))
            log.warning("events not written before shutdown", extra=kv(count=len(left), drain=drain))

    @property
    def accepting(self) -> bool:
        """Events are being written (started, not stopping): a standby replica's recorder is not."""
        return self._accepting

    # -- recording -------------------------------------------------------------------------------

    def record(self, pod, *, controller: str, type_: str, reason: str, action: str, note: str,
               related=None, kind: str = "Pod", api_version: str = "v1") -> None:
        """Count one occurrence of an event about ``pod`` (``related``: a second pod the event
        names, as the preemptor in ``Preempted``); ``kind``/``api_version``: an object other than a
        pod (a PodGroup), with the same ``namespace``, ``name``, ``uid``, ``resource_version``."""
        if self.client is None:
            return
        if not self._accepting:
            if self._loop is not None:  # started, now stopping
                self._drop("shutdown", 1)
            return
        ns = pod.namespace or "default"
        regarding = {"apiVersion": api_version, "kind": kind, "namespace": ns, "name": pod.name, "uid": pod.uid}
        if pod.resource_version:
            regarding["resourceVersion"] = pod.resource_version
        rel = None
        if related is not None:
            rel = {"apiVersion": "v1", "kind": "Pod", "namespace": related.namespace or "default",
                   "name": related.name, "uid": related.uid}
            if related.resource_version:
                rel["resourceVersion"] = related.resource_version
        instance = f"{controller}-{self.instance}"[:128]
        key = isomorphic_key(regarding, rel, controller=controller, instance=instance, type_=type_,
                             reason=reason, action=action)

        def make() -> PendingEvent:
            return PendingEvent(key, namespace=ns, name=event_name(pod.name), regarding=regarding,
                                controller=controller, instance=instance, type_=type_, reason=reason,
                                action=action, note=note, event_time=now_micro(), related=rel)

        entry, aggregated, evicted = self.backlog.observe(key, make)
        if aggregated:
            self.aggregated += 1
            self._child("aggregated", type_, reason).inc()
        for e in evicted:
            self._lost(e, "backlog_full")
        if entry is None:  # every tracked event is being written: this one cannot wait
            self._drop("backlog_full", 1)
        elif self.backlog.has_ready:
            self._wake.set()

    # -- writing ---------------------------------------------------------------------------------

    async def _worker(self, i: int = 0) -> None:
        while True:
            busy = self._busy
            if busy is not None and i >= self._busy_workers and self._accepting and busy():
                await asyncio.sleep(BUSY_POLL)
                continue
            e = self.backlog.next_ready()
            if e is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._write(e)

    async def _write(self, e: PendingEvent) -> None:
        assert self.client is not None, "the workers run only when start() had a client"
        count, seen = e.count, e.last_observed_time
        recreating = False
        try:
            if e.written == 0:
                try:
                    await self.client.create_event(e.namespace, e.body(count, seen), decode=False)
                except ApiError as exc:
                    if exc.status != 409:
                        raise
                    log.debug("event already exists", extra=kv(pod=self._pod(e), event=e.name))
                operation = "create"
            else:
                try:
                    await self.client.patch_event(e.namespace, e.name, e.series_patch(count, seen))
                    operation = "series"
                except ApiError as exc:
                    if exc.status != 404:
                        raise
                    recreating = True  # deleted or expired: create it again, with its series
                    await self.client.create_event(e.namespace, e.body(count, seen), decode=False)
                    operation = "create"
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is a failed post (fenced writes included)
            self._failed(e, exc, recreating)
            return
        self.posted += 1
        self._child("posted", e.type, e.reason, operation).inc()
        self.backlog.written(e, count)
        if self.backlog.has_ready:
            self._wake.set()

    def _failed(self, e: PendingEvent, exc: Exception, recreating: bool) -> None:
        code = _error_code(exc)
        self._child("errors", code).inc()
        if not _retryable(exc, recreating=recreating):
            self._lost(e, "rejected", exc)
            self.backlog.give_up(e)
            return
        tries = self.backlog.failed(e)
        if tries >= self.max_tries:
            self._lost(e, "retries_exhausted", exc)
            self.backlog.give_up(e)
            return
        log.debug("event not written; will retry", extra=kv(pod=self._pod(e), reason=e.reason, tries=tries,
                                                             error=str(exc) or code))
        delay = self.retry_interval * (1.0 + 0.25 * random.random())
        handle: asyncio.TimerHandle | None = None

        def due() -> None:
            self._timers.discard(handle)
            if self.backlog.retry_due(e):
                self._wake.set()

        assert self._loop is not None, "retries are scheduled by the workers start() created"
        handle = self._loop.call_later(delay, due)
        self._timers.add(handle)

    async def _sync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.series_interval)
            self.backlog.sync()
            if self.backlog.has_ready:
                self._wake.set()

    # -- accounting ------------------------------------------------------------------------------

    @staticmethod
    def _pod(e: PendingEvent) -> str:
        return f"{e.namespace}/{e.regarding.get('name', '')}"

    def _lost(self, e: PendingEvent, why: str, exc: Exception | None = None) -> None:
        self._drop(why, 1)
        if why == "backlog_full":
            self._full_drops += 1
            if self._full_drops % 1000 != 1:
                return  # a full backlog evicts on every new event: log the first of each thousand
        log.warning("event not recorded", extra=kv(pod=self._pod(e), reason=e.reason, count=e.count,
                                                   dropped=why, error=(str(exc) or repr(exc)) if exc else None))

    def _drop(self, why: str, n: int) -> None:
        self.dropped += n
        self._child("dropped", why).inc(n)

    def _child(self, metric: str, *labels: str):
        key = (metric, *labels)
        c = self._children.get(key)
        if c is None:
            family = {"posted": METRICS.events_posted, "aggregated": METRICS.events_aggregated,
                      "errors": METRICS.events_post_errors, "dropped": METRICS.events_dropped}[metric]
            c = self._children[key] = family.labels(*labels)
        return c
