"""Lease-based leader election with client-go's semantics (``tools/leaderelection``).

* A candidate tries to acquire the ``coordination.k8s.io/v1`` Lease every ``retryPeriod`` (with
  client-go's 1.2 jitter; while another holder is seen, every half ``retryPeriod`` and exactly
  at the moment it would expire, so a crashed leader is replaced within
  ``leaseDuration + retryPeriod``). It may take it when nobody holds it or when the holder's record has not
  changed for ``leaseDuration`` **as observed on this process's monotonic clock** - never by
  comparing wall-clock timestamps written by another machine.
* Every write is an update guarded by the Lease's ``resourceVersion`` (a create when it does not
  exist), so two candidates can never both win; ``leaseTransitions`` counts holder changes and
  ``acquireTime`` is kept while the same holder renews.
* The leader renews every ``retryPeriod``. The lease is lost - ``on_stopped`` runs and the
  scheduler exits, as kube-scheduler does - as soon as ``renewDeadline`` has passed since the
  last successful renewal, or a read shows another holder (after a pause, say).
* ``is_fresh()`` is what the write fence (``scheduler.fence``) checks immediately before every
  write goes out: true only while this replica holds the lease and its last successful renewal
  *started* less than ``renewDeadline`` ago. Other candidates can take over at the earliest
  ``leaseDuration`` after they observed that renewal, which they cannot do before it started.
  ``fence`` is this elector's ``WriteFence``, woken after each successful write as holder.
* ``release()`` (graceful shutdown, after in-flight binds finished) empties the holder and sets a
  1-second duration so a follower takes over at its next retry.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable

from pysched.client.fence import WriteFence
from pysched.client.rest import ApiError, KubeClient
from pysched.metrics import METRICS
from pysched.util.logs import kv

log = logging.getLogger("pysched.client.leaderelection")
JITTER_FACTOR = 1.2


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4()}"


def _micro(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, client: KubeClient, *, namespace: str, name: str, identity: str | None = None,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                 on_started: Callable[[], None] | None = None, on_stopped: Callable[[], None] | None = None,
                 on_new_leader: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 sleep=asyncio.sleep):
        if not lease_duration > renew_deadline > JITTER_FACTOR * retry_period > 0:
            raise ValueError("leaseDuration > renewDeadline > 1.2 * retryPeriod > 0 is required")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started = on_started
        self.on_stopped = on_stopped
        self.on_new_leader = on_new_leader
        self.fence = WriteFence(self.is_fresh)      # what this replica's writes must pass
        self.clock = clock
        self.wall = wall
        self.sleep = sleep
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self._lease: dict | None = None          # last Lease object we read or wrote
        self._observed: dict | None = None       # last observed spec
        self._observed_time = float("-inf")      # monotonic time the spec last changed
        self._last_renew = float("-inf")         # monotonic start time of our last successful write as holder
        self.reported_leader = ""
        self.stopped = asyncio.Event()
        self.leading = asyncio.Event()
        self._gauge = METRICS.leader.labels(name)
        self._gauge.set(0)

    # -- state ---------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        if not self._observed:
            return False
        return self._observed.get("holderIdentity") == self.identity

    def is_fresh(self) -> bool:
        """The bind fence: we hold the lease and renewed it less than renewDeadline ago."""
        return self.is_leader() and self.clock() - self._last_renew < self.renew_deadline

    def lease_age(self) -> float:
        return self.clock() - self._last_renew

    def _lease_valid(self, now: float) -> bool:
        """The observed holder's lease has not run out: counted from when we observed its record,
        for the ``leaseDurationSeconds`` the *holder* wrote (client-go's rule). Waiting only our own
        configured duration would take over early from a holder configured with a longer one."""
        duration = self._observed.get("leaseDurationSeconds") if self._observed else None
        if type(duration) is not int or duration <= 0:
            duration = self.lease_duration
        return self._observed_time + duration > now

    def _set_observed(self, spec: dict) -> None:
        self._observed = dict(spec)
        self._observed_time = self.clock()
        holder = spec.get("holderIdentity") or ""
        if holder != self.reported_leader:
            self.reported_leader = holder
            if holder and self.on_new_leader is not None:
                self.on_new_leader(holder)

    def _record(self, transitions: int, acquire: str | None = None) -> dict:
        now = _micro(self.wall())
        return {"holderIdentity": self.identity, "leaseDurationSeconds": max(1, int(round(self.lease_duration))),
                "acquireTime": acquire or now, "renewTime": now, "leaseTransitions": transitions}

    # -- API -----------------------------------------------------------------------------------

    async def _get(self) -> dict | None:
        try:
            self._lease = await self.client.request("GET", self.path, timeout=self.renew_deadline / 2)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return self._lease

    async def _create(self, spec: dict) -> None:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}
        self._lease = await self.client.request(
            "POST", f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases", body=body,
            timeout=self.renew_deadline / 2)

    async def _update(self, spec: dict) -> None:
        if self._lease is None:
            raise ApiError(409, "Conflict", "no lease read yet")
        body = dict(self._lease)
        body["spec"] = spec
        self._lease = await self.client.request("PUT", self.path, body=body, timeout=self.renew_deadline / 2)

    def _renewed(self, started: float) -> bool:
        # The start of the request, not its answer: the API server may have written the record
        # (and a successor started its clock) any time after the request left.
        self._last_renew = started
        self.fence.notify()
        return True

    async def try_acquire_or_renew(self) -> bool:
        now = started = self.clock()
        if self.is_leader() and self._lease_valid(now):
            old = self._observed or {}
            spec = self._record(old.get("leaseTransitions") or 0, old.get("acquireTime"))
            try:
                await self._update(spec)
                self._set_observed(spec)
                return self._renewed(started)
            except (TimeoutError, ApiError, OSError) as exc:
                log.info("optimistic lease update failed; re-reading", extra=kv(lease=self.name, error=str(exc)))
        try:
            lease = await self._get()
        except (TimeoutError, ApiError, OSError) as exc:
            log.warning("error retrieving lease", extra=kv(lease=f"{self.namespace}/{self.name}", error=str(exc)))
            return False
        if lease is None:
            spec = self._record(0)
            try:
                await self._create(spec)
            except (TimeoutError, ApiError, OSError) as exc:
                log.info("lease create failed", extra=kv(lease=self.name, error=str(exc)))
                return False
            self._set_observed(spec)
            return self._renewed(started)
        spec = lease.get("spec") or {}
        if spec != self._observed:
            self._set_observed(spec)
        if spec.get("holderIdentity") and self._lease_valid(self.clock()) and not self.is_leader():
            return False
        if self.is_leader():
            new = self._record(spec.get("leaseTransitions") or 0, spec.get("acquireTime"))
        else:
            new = self._record((spec.get("leaseTransitions") or 0) + 1)
        try:
            await self._update(new)
        except (TimeoutError, ApiError, OSError) as exc:
            log.info("lease update failed", extra=kv(lease=self.name, error=str(exc)))
            return False
        self._set_observed(new)
        return self._renewed(started)

    # -- loops ---------------------------------------------------------------------------------

    async def acquire(self) -> None:
        log.info("attempting to acquire leader lease", extra=kv(lease=f"{self.namespace}/{self.name}",
                                                                identity=self.identity))
        while True:
            if await self.try_acquire_or_renew():
                log.info("successfully acquired lease", extra=kv(lease=f"{self.namespace}/{self.name}",
                                                                 identity=self.identity))
                return
            wait = self.retry_period * (1 + random.random() * JITTER_FACTOR)
            if self._observed and self._observed.get("holderIdentity"):
                # Held by someone: look again every half retryPeriod and exactly at expiry, so a
                # crashed leader is replaced within leaseDuration + retryPeriod of its last renewal.
                expiry = self._observed_time + self.lease_duration - self.clock()
                wait = min(self.retry_period / 2, max(0.01, expiry + 0.01))
            await self.sleep(wait)

    def _held_by_other(self) -> bool:
        holder = (self._observed or {}).get("holderIdentity")
        return bool(holder) and holder != self.identity and self._lease_valid(self.clock())

    async def renew_loop(self) -> None:
        """Renew every retryPeriod; return when the lease is lost."""
        where = f"{self.namespace}/{self.name}"
        while True:
            await self.sleep(self.retry_period)
            while True:
                left = self._last_renew + self.renew_deadline - self.clock()
                if left <= 0:
                    log.error("failed to renew lease within renewDeadline; leader election lost",
                              extra=kv(lease=where, renew_deadline=self.renew_deadline))
                    return
                try:
                    async with asyncio.timeout(left):   # not wait_for: it can lose a cancel on 3.11
                        ok = await self.try_acquire_or_renew()
                except TimeoutError:
                    ok = False
                if ok:
                    break
                if self._held_by_other():
                    log.error("lease is held by another candidate; leader election lost",
                              extra=kv(lease=where, holder=(self._observed or {}).get("holderIdentity")))
                    return
                left = self._last_renew + self.renew_deadline - self.clock()
                await self.sleep(min(self.retry_period, max(0.0, left)))

    async def run(self) -> None:
        """Acquire, lead until the lease is lost (or the task is cancelled), then call on_stopped."""
        try:
            await self.acquire()
            self._gauge.set(1)
            self.leading.set()
            if self.on_started is not None:
                self.on_started()
            await self.renew_loop()
        finally:
            self._gauge.set(0)
            self.leading.clear()
            self.stopped.set()
            if self.on_stopped is not None:
                self.on_stopped()

    async def release(self) -> bool:
        """Give the lease up (graceful shutdown): holder cleared, 1-second duration."""
        if not self.is_leader() or self._lease is None:
            return False
        old = self._observed or {}
        now = _micro(self.wall())
        spec = {"holderIdentity": "", "leaseDurationSeconds": 1, "acquireTime": now, "renewTime": now,
                "leaseTransitions": old.get("leaseTransitions") or 0}
        for _ in range(3):
            try:
                await self._update(spec)
                self._set_observed(spec)
                self._last_renew = float("-inf")
                self._gauge.set(0)
                log.info("released leader lease", extra=kv(lease=f"{self.namespace}/{self.name}"))
                return True
            except ApiError as exc:
                if exc.status != 409:
                    log.warning("failed to release lease", extra=kv(lease=self.name, error=str(exc)))
                    return False
                lease = await self._get()
                if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                    return False
            except (TimeoutError, OSError) as exc:
                log.warning("failed to release lease", extra=kv(lease=self.name, error=str(exc)))
                return False
        return False
