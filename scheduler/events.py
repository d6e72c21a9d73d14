"""Event recorder: kube-scheduler's Events (``events.k8s.io/v1``) posted in the background.

``Scheduled`` (Normal, action ``Binding``, "Successfully assigned ns/name to node") and
``FailedScheduling`` (Warning, action ``Scheduling``, the FitError message, at most 1024 bytes)
use the same reason, action and note as upstream; ``reportingController`` is the profile's
schedulerName. Posting never blocks scheduling: records go into a bounded queue drained by a
few workers on their own client and rate limiter (kube-scheduler also has a separate event
client); when the queue is full the record is dropped and counted. An identical event for the
same pod within six minutes updates the existing event's series count instead of creating a new
object, as client-go's event broadcaster does.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import socket
import time

from .kubeclient import ApiError, KubeClient
from .logs import kv
from .metrics import METRICS

log = logging.getLogger("scheduler.events")
SERIES_WINDOW = 360.0
SERIES_PATCH_INTERVAL = 10.0


def _now_micro() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventRecorder:
    def __init__(self, client: KubeClient | None, *, queue_size: int = 1000, workers: int = 4,
                 instance: str | None = None):
        self.client = client
        self.instance = instance or os.environ.get("POD_NAME") or socket.gethostname()
        self._q: asyncio.Queue | None = None
        self._queue_size = queue_size
        self._workers = workers
        self._tasks: list[asyncio.Task] = []
        self._series: dict[tuple, dict] = {}
        self.posted = 0
        self.dropped = 0

    def start(self) -> None:
        if self.client is None:
            return
        self._q = asyncio.Queue(self._queue_size)
        self._tasks = [asyncio.create_task(self._worker(), name=f"event-worker-{i}") for i in range(self._workers)]

    async def stop(self, drain: float = 2.0) -> None:
        if self._q is not None and drain:
            deadline = time.monotonic() + drain
            while not self._q.empty() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        self._tasks = []

    def record(self, pod, *, controller: str, type_: str, reason: str, action: str, note: str) -> None:
        if self._q is None:
            return
        try:
            self._q.put_nowait((pod.namespace, pod.name, pod.uid, pod.resource_version, controller,
                                type_, reason, action, note))
        except asyncio.QueueFull:
            self.dropped += 1
            METRICS.events_dropped.labels("queue_full").inc()

    async def _worker(self) -> None:
        assert self._q is not None
        while True:
            item = await self._q.get()
            try:
                await self._post(*item)
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                METRICS.events_dropped.labels("api_error").inc()
                log.warning("event not recorded", extra=kv(pod=f"{item[0]}/{item[1]}", reason=item[6], error=str(exc)))
            except Exception as exc:  # noqa: BLE001
                METRICS.events_dropped.labels("error").inc()
                log.warning("event not recorded", extra=kv(pod=f"{item[0]}/{item[1]}", reason=item[6], error=repr(exc)))

    async def _post(self, ns, name, uid, rv, controller, type_, reason, action, note) -> None:
        key = (uid, controller, type_, reason, action, note)
        now = time.monotonic()
        s = self._series.get(key)
        if s is not None and now - s["first"] < SERIES_WINDOW:
            s["count"] += 1
            if now - s["patched"] >= SERIES_PATCH_INTERVAL:
                s["patched"] = now
                await self.client.patch_event(ns, s["name"], {"series": {"count": s["count"], "lastObservedTime": _now_micro()}})
            return
        if len(self._series) > 20000:
            cutoff = now - SERIES_WINDOW
            self._series = {k: v for k, v in self._series.items() if v["first"] >= cutoff}
        ev_name = f"{name}.{time.time_ns():x}"
        body = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": ev_name, "namespace": ns},
            "eventTime": _now_micro(),
            "reportingController": controller,
            "reportingInstance": f"{controller}-{self.instance}"[:128],
            "action": action, "reason": reason, "note": note, "type": type_,
            "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": name, "uid": uid,
                          **({"resourceVersion": rv} if rv else {})},
        }
        await self.client.create_event(ns, body)
        self.posted += 1
        self._series[key] = {"name": ev_name, "count": 1, "first": now, "patched": now}
