"""The safety net: pending pods of our profiles that nothing will ever schedule are found again.

Every pending pod of ours must be in the scheduling queue (activeQ, backoffQ, the unschedulable
pool, or in flight with a cycle working on it) or assumed in the cache with its bind under way or
just confirmed. A bug that breaks that - a failure path that drops a pod, a binding task that ends
without settling its pod - would leave the pod Pending for good: the informer delivers it once,
and a relist does not deliver it again while it is unchanged. ``PodRecovery`` compares, every
``interval`` seconds, the informer's pending pods with where the scheduler holds them, and puts
back the ones held nowhere, counting each in ``pysched_pods_recovered_total{reason}``:

* ``not_queued`` - pending, in no queue and not assumed;
* ``orphaned_in_flight`` - popped from the queue, but no scheduling or binding cycle works on it;
* ``assumed_unbound`` - assumed on a node with no bind under way, while the informer shows it
  pending: before the assumption is dropped, one GET must show the pod still pending (a watch
  that lags behind a bind that took effect is not a lost pod).

A pod must look lost on two checks in a row before anything is done, so a state that lasts an
instant (a pod between two steps of a cycle, an informer event on its way) is never "recovered".
Recovering is logged at warning level with the pod: it means a bug, and the metric should stay 0.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from pysched.metrics import METRICS
from pysched.podlocation import PENDING, lookup
from pysched.util.logs import kv

log = logging.getLogger("pysched.podrecovery")

DEFAULT_INTERVAL = 30.0
NOT_QUEUED, ORPHANED_IN_FLIGHT, ASSUMED_UNBOUND = "not_queued", "orphaned_in_flight", "assumed_unbound"
REASONS = (NOT_QUEUED, ORPHANED_IN_FLIGHT, ASSUMED_UNBOUND)


class PendingPod(Protocol):
    """What recovery reads of a pending pod (a ``PodInfo``; the framework is a layer above this one)."""

    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def key(self) -> str: ...


class PodRecovery:
    """``pending``: the informer's pending pods of our profiles (uid -> PodInfo, kept by the event
    handlers); ``working``: whether a scheduling or binding cycle holds the pod (by uid)."""

    def __init__(self, *, pending: Mapping[str, PendingPod], cache, queue, working: Callable[[str], bool], client=None,
                 interval: float = DEFAULT_INTERVAL, on_recovered: Callable[[object], None] | None = None):
        self.pending = pending
        self.cache = cache
        self.queue = queue
        self.working = working
        self.client = client
        self.interval = interval
        self.on_recovered = on_recovered
        self._suspects: dict[str, str] = {}   # uid -> reason seen on the previous check
        self.recovered = 0
        for reason in REASONS:
            METRICS.pods_recovered.labels(reason)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.check()
            except Exception:  # noqa: BLE001 - the net must outlive a bug it exists to catch
                log.exception("pod recovery check failed")

    def _lost(self, uid: str) -> str:
        """Why the pod looks lost now ("" if it does not)."""
        cache, queue = self.cache, self.queue
        if uid in cache.pods:
            if cache.is_assumed(uid) and uid not in queue and not self.working(uid):
                return ASSUMED_UNBOUND
            return ""
        qpi = queue.get(uid)
        if qpi is None:
            return NOT_QUEUED
        if qpi.where == "inflight" and not self.working(uid):
            return ORPHANED_IN_FLIGHT
        return ""

    async def check(self) -> int:
        """One pass; returns how many pods were put back."""
        suspects: dict[str, str] = {}
        for uid in list(self.pending):
            reason = self._lost(uid)
            if reason:
                suspects[uid] = reason
        confirmed = [(uid, r) for uid, r in suspects.items() if self._suspects.get(uid) == r]
        self._suspects = suspects
        done = 0
        for uid, reason in confirmed:
            if await self._recover(uid, reason):
                self._suspects.pop(uid, None)
                done += 1
        return done

    async def _recover(self, uid: str, reason: str) -> bool:
        pod = self.pending.get(uid)
        if pod is None or self._lost(uid) != reason:
            return False   # settled while we looked
        node = None
        if reason == ASSUMED_UNBOUND:
            assumed = self.cache.assumed.get(uid)
            node = assumed.node_name if assumed is not None else None
            where = await lookup(self.client, pod.namespace, pod.name, uid, what=pod.key)
            if where.state != PENDING or self.pending.get(uid) is not pod or self._lost(uid) != reason:
                return False   # bound (the watch lags), gone, unknown, or settled while we asked
            if assumed is not None and self.cache.forget(assumed) and self.on_recovered is not None:
                self.on_recovered(assumed)   # capacity came back on its node
        qpi = self.queue.get(uid)
        if qpi is not None and qpi.where == "inflight":
            self.queue.requeue_in_flight(qpi)
        else:
            self.queue.add(pod)
        self.recovered += 1
        METRICS.pods_recovered.labels(reason).inc()
        log.warning("pending pod was held nowhere; put back in the queue", extra=kv(
            pod=pod.key, reason=reason, assumed_node=node))
        return True
