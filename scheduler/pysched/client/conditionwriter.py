"""Condition writes to one object, in the order the scheduler decided them.

The pod-group cycle writes a PodGroup's ``PodGroupScheduled`` condition after each attempt: a
group that failed and, moments later, fit gets ``False`` then ``True``. Sent as two independent
background requests, the first could land last under load and leave ``False`` on a placed group.
``OrderedConditionWriter`` keeps at most one request in flight per object and sends only the
latest condition waiting behind it (coalesced), so the last decision is the last write. It also
remembers the last status it sent per object, so a later ``False`` does not follow a ``True``
the informer has not delivered yet (kube-scheduler's ``updatePodGroupCondition`` never goes back
from ``True``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any

from pysched.util.logs import kv

log = logging.getLogger("pysched.client.conditionwriter")

#: Objects whose last sent status is remembered (oldest forgotten first).
REMEMBERED = 10_000


class OrderedConditionWriter:
    """``spawn`` runs a coroutine as a tracked background API task (the scheduler's, fenced and
    drained like its other writes) and returns False when it cannot."""

    def __init__(self, client: Any, spawn: Callable[[Coroutine[Any, Any, None]], bool]):
        self.client = client
        self.spawn = spawn
        self.waiting: dict[str, tuple[str, dict[str, Any]]] = {}   # key -> (path, condition), latest
        self.sending: set[str] = set()
        self.sent: OrderedDict[str, str] = OrderedDict()            # key -> last status sent

    def last_status(self, key: str) -> str | None:
        """The status last queued or sent for ``key`` (None: none this process remembers)."""
        waiting = self.waiting.get(key)
        return waiting[1].get("status") if waiting else self.sent.get(key)

    def queue(self, key: str, path: str, condition: dict[str, Any]) -> None:
        """Write ``condition`` (a strategic merge by its type) to ``path`` after any write of ``key``
        still in flight; a condition still waiting is replaced by this one."""
        self.waiting[key] = (path, condition)
        if key not in self.sending:
            self.sending.add(key)
            if not self.spawn(self._send(key)):
                self.sending.discard(key)
                self.waiting.pop(key, None)

    async def _send(self, key: str) -> None:
        try:
            while key in self.waiting:
                path, condition = self.waiting.pop(key)
                self.sent[key] = str(condition.get("status"))
                self.sent.move_to_end(key)
                while len(self.sent) > REMEMBERED:
                    self.sent.popitem(last=False)
                try:
                    await self.client.request("PATCH", path, body={"status": {"conditions": [condition]}},
                                              content_type="application/strategic-merge-patch+json")
                except Exception as exc:  # noqa: BLE001 - a status write must not stop the scheduler
                    log.warning("could not update the condition", extra=kv(object=key, err=str(exc)))
        finally:
            self.sending.discard(key)
