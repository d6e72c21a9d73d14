"""Pod status patches of failed attempts: coalesced per pod, behind the binds, never after a bind.

A failed scheduling attempt sets the pod's ``PodScheduled=False`` condition and its
``nominatedNodeName`` (``pods/status``), and an explained pod gets its summary annotations. pysched
writes these in the background, which kube-scheduler does not; ``PodStatusWriter`` keeps that
from costing what it did:

* **Coalesced.** A pod has at most one patch waiting and one in flight; a newer patch for a pod
  whose patch still waits is merged into it (the newer condition wins). A storm of failed attempts
  (a gang retried thousands of times) costs a write per pod and round trip, not per attempt.
* **Behind the binds.** At most ``workers`` writes are under way; each takes its rate-limiter token
  only while the bucket holds more than ``reserve`` tokens, so the binds sharing the client find
  theirs - or after ``max_defer`` seconds, one token at a time, so a scheduler that binds at its
  qps limit for minutes still writes its failures. Writes never pile up debt in the limiter that
  a bind would then wait behind.
* **Never after the bind.** ``settle(uid)``, awaited by the binding cycle just before the bind,
  drops the status part of the pod's waiting patch (the binding sets ``PodScheduled=True`` and the
  nomination no longer matters) and waits for a write of that pod already sent, so a failed
  attempt's ``False`` cannot land after the next attempt's binding.
* **Retried.** A write with no HTTP answer, a 429 or a 5xx, or one the limiter could not serve
  within the request timeout, is sent again after a backoff (1 s doubling, ``MAX_TRIES`` tries in
  all) unless a newer patch for the pod replaced it. A 404 (the pod is gone) and other answers are
  final; a write the fence refused (not the leader) is dropped and counted.

Counted in ``pysched_pod_status_writes_total{result}``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from pysched.client.fence import NotLeaderError
from pysched.client.rest import retryable
from pysched.metrics import METRICS
from pysched.util.logs import kv

log = logging.getLogger("pysched.client.statuswriter")

WORKERS = 8          # status writes under way at once
MAX_DEFER = 2.0      # seconds a write waits for spare tokens before taking one anyway
MAX_TRIES = 5
RETRY_BASE = 1.0     # seconds before the second try, doubling, at most RETRY_MAX
RETRY_MAX = 30.0


@dataclass
class StatusPatch:
    """One pod's pending pods/status patch (a strategic merge patch)."""
    uid: str
    namespace: str
    name: str
    patch: dict[str, Any]
    tries: int = 0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def merge_patch(older: dict[str, Any], newer: dict[str, Any]) -> dict[str, Any]:
    """``newer`` over ``older``: maps merged key by key, anything else (a list of conditions, a
    value) taken from ``newer``."""
    out = dict(older)
    for k, v in newer.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge_patch(out[k], v)
        else:
            out[k] = v
    return out


class PodStatusWriter:
    """``spawn``: runs a sender coroutine as a tracked background task (the scheduler's API tasks,
    drained at shutdown and cancelled when leadership is lost); returns False when it cannot."""

    def __init__(self, client: Any, spawn: Callable[[Coroutine[Any, Any, None]], bool], *,
                 workers: int = WORKERS, reserve: float | None = None, max_defer: float = MAX_DEFER,
                 retry_base: float = RETRY_BASE):
        self.client = client
        self.spawn = spawn
        self.workers = max(1, workers)
        limiter = getattr(client, "limiter", None)    # the client's TokenBucket; none or rate 0: unlimited
        self.limiter = limiter if limiter is not None and limiter.rate > 0 else None
        burst = limiter.capacity if limiter is not None else 0.0
        self.reserve = reserve if reserve is not None else max(1.0, burst / 4)
        self.max_defer = max_defer
        self.retry_base = retry_base
        self.pending: dict[str, StatusPatch] = {}        # uid -> waiting patch, oldest first
        self.taking: dict[str, StatusPatch] = {}         # uid -> patch waiting for its token
        self.in_flight: dict[str, asyncio.Future[None]] = {}
        self.retrying: dict[str, StatusPatch] = {}       # uid -> patch that failed, sent again later
        self.senders = 0

    # -- what the scheduler calls -------------------------------------------------------------------

    def queue(self, uid: str, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """Write ``patch`` to the pod's status soon, merged into one still waiting for it."""
        waiting = self.pending.get(uid)
        if waiting is not None:
            waiting.patch = merge_patch(waiting.patch, patch)
            METRICS.pod_status_writes.labels("coalesced").inc()
        else:
            self.pending[uid] = StatusPatch(uid, namespace, name, patch)
        self._kick()

    async def settle(self, uid: str) -> None:
        """The pod is about to be bound: its waiting condition and nomination go unwritten, and a
        write of it already sent is waited for (it must land before the binding)."""
        for waiting in (self.pending.get(uid), self.taking.get(uid), self.retrying.get(uid)):
            if waiting is not None and "status" in waiting.patch:
                del waiting.patch["status"]
                METRICS.pod_status_writes.labels("superseded").inc()
        waiting = self.pending.get(uid)
        if waiting is not None and not waiting.patch:
            del self.pending[uid]
        sent = self.in_flight.get(uid)
        if sent is not None:
            await asyncio.shield(sent)

    def busy(self) -> bool:
        return bool(self.pending or self.taking or self.in_flight or self.retrying)

    # -- sending ------------------------------------------------------------------------------------

    def _kick(self) -> None:
        if self.senders < self.workers and self._next_uid() is not None:
            self.senders += 1
            if not self.spawn(self._sender()):
                self.senders -= 1

    def _next_uid(self) -> str | None:
        """The oldest waiting pod with no write of its own already under way (one at a time per pod,
        so an older patch never lands after a newer one)."""
        for uid in self.pending:
            if uid not in self.taking and uid not in self.in_flight:
                return uid
        return None

    async def _sender(self) -> None:
        try:
            while True:
                uid = self._next_uid()
                if uid is None:
                    return
                await self._room()
                if uid not in self.pending or uid in self.taking or uid in self.in_flight:
                    continue   # settled, or taken by another sender meanwhile
                entry = self.pending.pop(uid)
                limiter = self.limiter
                if limiter is not None:
                    self.taking[uid] = entry   # settle() may still empty it while it waits
                    try:
                        await limiter.acquire()
                    finally:
                        del self.taking[uid]
                    if not entry.patch:
                        limiter.refund()
                if not entry.patch:
                    continue
                await self._send(entry)
        finally:
            self.senders -= 1

    async def _room(self) -> None:
        """Wait until the limiter has a token to spare beyond ``reserve`` (the binds'), at most
        ``max_defer`` seconds."""
        limiter = self.limiter
        if limiter is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_defer
        while True:
            spare = limiter.available() - self.reserve
            left = deadline - loop.time()
            if spare >= 1.0 or left <= 0:
                return
            await asyncio.sleep(min(left, (1.0 - spare) / limiter.rate))

    async def _send(self, entry: StatusPatch) -> None:
        uid = entry.uid
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.in_flight[uid] = done
        try:
            await self.client.patch_pod_status(entry.namespace, entry.name, entry.patch, rate_limit=False)
            METRICS.pod_status_writes.labels("written").inc()
        except NotLeaderError:
            METRICS.fenced_writes.labels("pod_status").inc()
            METRICS.pod_status_writes.labels("fenced").inc()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is counted and logged, none stops the writer
            self._failed(entry, exc)
        finally:
            del self.in_flight[uid]
            done.set_result(None)

    def _failed(self, entry: StatusPatch, exc: Exception) -> None:
        status = getattr(exc, "status", None)
        if status == 404:
            return   # the pod is gone
        entry.tries += 1
        if retryable(exc) and entry.tries < MAX_TRIES:
            METRICS.pod_status_writes.labels("retried").inc()
            delay = min(RETRY_MAX, self.retry_base * 2 ** (entry.tries - 1))
            self.retrying[entry.uid] = entry
            asyncio.get_running_loop().call_later(delay, self._retry, entry)
            return
        METRICS.pod_status_writes.labels("failed").inc()
        log.warning("error updating pod status", extra=kv(pod=entry.key, status=status, error=str(exc),
                                                           tries=entry.tries))

    def _retry(self, entry: StatusPatch) -> None:
        if self.retrying.get(entry.uid) is entry:
            del self.retrying[entry.uid]
        if not entry.patch:
            return   # settled: the pod was bound meanwhile
        newer = self.pending.get(entry.uid)
        if newer is not None:
            newer.patch = merge_patch(entry.patch, newer.patch)   # the newer values win
        else:
            self.pending[entry.uid] = entry
        self._kick()
