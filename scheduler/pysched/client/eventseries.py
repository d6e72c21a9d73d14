"""The event recorder's bookkeeping: one entry per isomorphic Event, merged into series, bounded.

client-go's events broadcaster (``tools/events``) keeps a cache keyed by the isomorphic key:
the regarding and related object references (resourceVersion included), type, reason, action,
reportingController and reportingInstance; the note is not part of it. The first occurrence
creates an Event; a repeat while the key is cached makes it a series (``series.count``,
``series.lastObservedTime``) instead of a new object. This module holds that cache and the
writes still owed to the API, so memory grows with the number of distinct pending events, not
with the number of occurrences: a pod failing 100 times costs one entry.

Each entry is in one state:

* ``new``: not created yet; ``update``: created, a series count is due now (FIFO across both);
* ``retry``: a write failed and waits for its retry time; ``writing``: a worker has it;
* ``dirty``: created, further occurrences counted, written at the next ``sync()``;
* ``idle``: written; kept until ``window`` seconds after its last occurrence so repeats join it.

The entry count is capped. When a new key arrives at the cap the least valuable entry goes, in
this order: the oldest idle one (nothing is lost but future aggregation), then the oldest pending
count update (dirty, then due), then the oldest retrying write, then the oldest uncreated event. Entries being
written are never evicted. Pure logic with an injectable clock; the I/O is in ``events.py``.
"""

from __future__ import annotations

import datetime
import itertools
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable

SERIES_WINDOW = 360.0  # client-go finishTime: a key is isomorphic for six minutes after its last occurrence
MAX_EVENT_NAME = 253


def now_micro() -> str:
    """``metav1.MicroTime`` as the API serialises it."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_name(regarding_name: str) -> str:
    """client-go's GenerateEventName: ``<name>.<unix nanos in hex>``, a UUID if that is no valid name."""
    name = f"{regarding_name}.{time.time_ns():x}"
    return name if len(name) <= MAX_EVENT_NAME else str(uuid.uuid4())


def isomorphic_key(regarding: dict, related: dict | None, *, controller: str, instance: str, type_: str,
                   reason: str, action: str) -> tuple:
    """client-go's eventKey: the note is deliberately not part of it."""
    def ref(r: dict | None) -> tuple:
        if not r:
            return ()
        return (r.get("apiVersion", ""), r.get("kind", ""), r.get("namespace", ""), r.get("name", ""),
                r.get("uid", ""), r.get("resourceVersion", ""), r.get("fieldPath", ""))
    return (ref(regarding), ref(related), controller, instance, type_, reason, action)


class PendingEvent:
    """One isomorphic event: the Event object (created or to be) and its occurrence count."""

    __slots__ = ("key", "namespace", "name", "regarding", "related", "controller", "instance", "type",
                 "reason", "action", "note", "event_time", "count", "written", "last_observed",
                 "last_observed_time", "tries", "state", "seq")

    def __init__(self, key: Hashable, *, namespace: str, name: str, regarding: dict, controller: str,
                 instance: str, type_: str, reason: str, action: str, note: str, event_time: str,
                 related: dict | None = None):
        self.key = key
        self.namespace = namespace
        self.name = name
        self.regarding = regarding
        self.related = related
        self.controller = controller
        self.instance = instance
        self.type = type_
        self.reason = reason
        self.action = action
        self.note = note
        self.event_time = event_time
        self.count = 1
        self.written = 0  # the count the API has; 0: the object does not exist yet
        self.last_observed = 0.0
        self.last_observed_time = event_time
        self.tries = 0
        self.state = "new"
        self.seq = 0

    def __repr__(self) -> str:
        return f"PendingEvent({self.reason} {self.namespace}/{self.regarding.get('name')} x{self.count} {self.state})"

    def body(self, count: int, last_observed_time: str) -> dict:
        """The Event to create; with a series when it already happened more than once."""
        ev = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
              "metadata": {"name": self.name, "namespace": self.namespace},
              "eventTime": self.event_time, "reportingController": self.controller,
              "reportingInstance": self.instance, "action": self.action, "reason": self.reason,
              "note": self.note, "type": self.type, "regarding": self.regarding}
        if self.related:
            ev["related"] = self.related
        if count >= 2:
            ev["series"] = {"count": count, "lastObservedTime": last_observed_time}
        return ev

    @staticmethod
    def series_patch(count: int, last_observed_time: str) -> dict:
        return {"series": {"count": count, "lastObservedTime": last_observed_time}}


class EventBacklog:
    def __init__(self, limit: int, *, window: float = SERIES_WINDOW, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], str] = now_micro):
        if limit < 1:
            raise ValueError(f"event backlog limit must be at least 1, got {limit}")
        self.limit = limit
        self.window = window
        self.clock = clock
        self.wall = wall
        self.entries: dict[Hashable, PendingEvent] = {}
        self._queues: dict[str, OrderedDict] = {s: OrderedDict() for s in ("new", "update", "retry", "dirty", "idle")}
        self._writing = 0
        self._seq = itertools.count(1)

    # -- sizes -----------------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Entries that still owe the API a write (new, due, retrying, dirty or being written)."""
        q = self._queues
        return len(q["new"]) + len(q["update"]) + len(q["retry"]) + len(q["dirty"]) + self._writing

    @property
    def tracked(self) -> int:
        return len(self.entries)

    def in_state(self, state: str) -> int:
        return self._writing if state == "writing" else len(self._queues[state])

    @property
    def has_ready(self) -> bool:
        return bool(self._queues["new"] or self._queues["update"])

    # -- state moves -----------------------------------------------------------------------------

    def _move(self, e: PendingEvent, state: str) -> None:
        if e.state == "writing":
            self._writing -= 1
        elif e.state in self._queues:
            self._queues[e.state].pop(e.key, None)
        e.state = state
        if state == "writing":
            self._writing += 1
        elif state in self._queues:
            if state in ("new", "update"):
                e.seq = next(self._seq)
            self._queues[state][e.key] = e

    def _remove(self, e: PendingEvent, state: str = "gone") -> None:
        self._move(e, state)
        if self.entries.get(e.key) is e:
            del self.entries[e.key]

    def _due(self, e: PendingEvent) -> None:
        self._move(e, "new" if e.written == 0 else "update")

    # -- recording -------------------------------------------------------------------------------

    def observe(self, key: Hashable,
                make: Callable[[], PendingEvent]) -> tuple[PendingEvent | None, bool, list[PendingEvent]]:
        """Count one occurrence. Returns (entry, aggregated, dropped): ``aggregated`` when it joined an
        existing series; ``dropped`` the pending entries evicted to make room (the entry is None
        when nothing could be evicted and this occurrence itself is dropped)."""
        now = self.clock()
        e = self.entries.get(key)
        if e is not None and e.state == "idle" and now - e.last_observed >= self.window:
            self._remove(e)  # the series finished; a repeat now starts a new Event
            e = None
        if e is not None:
            e.count += 1
            e.last_observed = now
            e.last_observed_time = self.wall()
            if e.state == "idle":
                # client-go writes count 2 at once and later counts only periodically.
                self._move(e, "update" if e.written < 2 else "dirty")
            elif e.state == "dirty":
                self._queues["dirty"].move_to_end(key)
            return e, True, []
        dropped: list[PendingEvent] = []
        if len(self.entries) >= self.limit:
            victim = self._victim()
            if victim is None:
                return None, False, []
            if victim.state != "idle":
                dropped.append(victim)
            self._remove(victim, "dropped")
        e = make()
        e.last_observed = now
        self.entries[key] = e
        e.state = "gone"
        self._move(e, "new")
        return e, False, dropped

    def _victim(self) -> PendingEvent | None:
        for state in ("idle", "dirty", "update", "retry", "new"):
            q = self._queues[state]
            if q:
                return next(iter(q.values()))
        return None

    # -- writing ---------------------------------------------------------------------------------

    def next_ready(self) -> PendingEvent | None:
        """The oldest due write (creates and count updates in arrival order), now ``writing``."""
        new, upd = self._queues["new"], self._queues["update"]
        if not new and not upd:
            return None
        if not upd:
            q = new
        elif not new:
            q = upd
        else:
            q = new if next(iter(new.values())).seq < next(iter(upd.values())).seq else upd
        e = next(iter(q.values()))
        self._move(e, "writing")
        return e

    def written(self, e: PendingEvent, count: int) -> None:
        """A write of ``count`` succeeded."""
        e.written = max(e.written, count)
        e.tries = 0
        if e.state != "writing":
            return  # evicted meanwhile
        if e.count > e.written:
            self._move(e, "update" if e.written < 2 else "dirty")
        else:
            self._move(e, "idle")

    def failed(self, e: PendingEvent) -> int:
        """A write failed and will be retried; returns the number of tries so far."""
        e.tries += 1
        if e.state == "writing":
            self._move(e, "retry")
        return e.tries

    def retry_due(self, e: PendingEvent) -> bool:
        """The retry time of ``e`` came; False if it was evicted or flushed meanwhile."""
        if e.state != "retry" or self.entries.get(e.key) is not e:
            return False
        self._due(e)
        return True

    def give_up(self, e: PendingEvent) -> None:
        """The write will not be retried: forget an uncreated event; keep a created one for its series."""
        e.tries = 0
        if self.entries.get(e.key) is not e:
            return  # evicted or abandoned meanwhile
        if e.written == 0:
            self._remove(e, "dropped")
        else:
            e.written = e.count  # the unwritten occurrences are lost; later ones continue the series
            self._move(e, "idle")

    # -- periodic work ---------------------------------------------------------------------------

    def sync(self) -> None:
        """Make every dirty count due and forget series that ended (idle for ``window``)."""
        for e in list(self._queues["dirty"].values()):
            self._move(e, "update")
        now = self.clock()
        idle = self._queues["idle"]
        while idle:
            e = next(iter(idle.values()))
            if now - e.last_observed < self.window:
                break
            self._remove(e)

    def retry_all_now(self) -> None:
        for e in list(self._queues["retry"].values()):
            self._due(e)

    def abandon_pending(self) -> list[PendingEvent]:
        """Everything still owed to the API, removed (shutdown). Entries being written included."""
        out = [e for e in self.entries.values() if e.state != "idle"]
        for e in out:
            self._remove(e, "dropped")
        return out
