"""SchedulingQueue: activeQ, backoffQ and the unschedulable pool, as in kube-scheduler.

* **activeQ** - a heap ordered by the QueueSort plugin (PrioritySort: higher ``priority`` first,
  then earlier queue timestamp). ``pop()`` waits for it.
* **backoffQ** - pods waiting out their backoff: ``initial * 2^(n-1)`` capped at ``max``
  (1 s doubling to 10 s by default), where n counts unschedulable attempts (or consecutive
  errors). Expired pods move to activeQ on a timer. When activeQ is empty, ``pop()`` takes the
  next unschedulable-backoff pod early (``SchedulerPopFromBackoffQ``, on by default upstream).
* **unschedulable pool** - pods no node could take. A cluster event (node added or changed,
  assigned pod deleted, ...) moves the pods whose rejecting plugins registered that event back to
  activeQ or backoffQ; pods left there for 5 minutes are flushed back every 30 s. Pods held by a
  PreEnqueue plugin (scheduling gates, DRA claims not there yet) wait here as "gated" and enter
  activeQ when an update of the pod, or a cluster event their gating plugin registered, lets
  PreEnqueue pass.
* **force_activate** - a pod someone asked about (it gained the explain annotation) moves from
  the unschedulable pool or backoffQ straight to activeQ, backoff or not; a pod in flight goes
  there when its attempt fails. Gated and held pods stay where they are.

The queue never loses a pod: every pending pod of our profiles is in exactly one of activeQ,
backoffQ, the unschedulable pool, or "in flight" (popped and being scheduled or bound).
All methods run on the event loop thread.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable

from pysched.backend.queue.nominator import Nominator
from pysched.framework.podinfo import PodInfo
from pysched.metrics import METRICS

log = logging.getLogger("pysched.backend.queue")

ACTIVE, BACKOFF, UNSCHEDULABLE, IN_FLIGHT = "active", "backoff", "unschedulable", "inflight"
DEFAULT_MAX_IN_UNSCHEDULABLE = 300.0
COMPACT_MARGIN = 512   # dead heap entries tolerated beyond the live count before ``_compact``
MAX_IN_FLIGHT_EVENTS = 10_000   # events kept for in-flight pods; beyond, a failing pod is requeued
FLUSH_UNSCHEDULABLE_INTERVAL = 30.0

# Events (names follow kube-scheduler's framework.ClusterEvent labels)
NODE_ADD = "NodeAdd"
NODE_UPDATE = "NodeUpdate"
ASSIGNED_POD_ADD = "AssignedPodAdd"
ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
ASSIGNED_POD_DELETE = "AssignedPodDelete"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
POD_UPDATE = "PodUpdate"
FORCE_ACTIVATE = "ForceActivate"
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
POP_FROM_BACKOFF = "PopFromBackoffQ"
POD_ADD = "PodAdd"


class QueuedPodInfo:
    __slots__ = ("pod", "timestamp", "initial_attempt", "attempts", "unschedulable_count",
                 "consecutive_errors", "unschedulable_plugins", "pending_plugins", "gated",
                 "gating_plugin", "where", "seq", "backoff_expiry", "sort_key", "first_enqueued",
                 "activate_on_return", "counted_plugins", "was_flushed")

    def __init__(self, pod: PodInfo, now: float):
        self.pod = pod
        self.timestamp = now
        self.first_enqueued = now
        self.initial_attempt = 0.0
        self.attempts = 0
        self.unschedulable_count = 0
        self.consecutive_errors = 0
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()
        self.gated = False
        self.gating_plugin = ""
        self.where = ""
        self.seq = 0
        # Moved out of the unschedulable pool by the 5-minute flush, not by an event, since its
        # last attempt (``scheduler_pod_scheduled_after_flush_total``).
        self.was_flushed = False
        self.backoff_expiry = 0.0
        self.sort_key: tuple = ()
        self.activate_on_return = ""   # force_activate while in flight: the event, for after the attempt
        # The plugins this pod counts in scheduler_unschedulable_pods right now (counted when it
        # is parked after a failed attempt or gated, uncounted when it is popped or deleted).
        self.counted_plugins: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return f"QueuedPodInfo({self.pod.key}, {self.where}, attempts={self.attempts})"


class SchedulingQueue:
    def __init__(self, *, sort_key: Callable[[QueuedPodInfo], tuple],
                 pre_enqueue: Callable[[PodInfo], object] | None = None,
                 initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 max_in_unschedulable: float = DEFAULT_MAX_IN_UNSCHEDULABLE,
                 clock: Callable[[], float] = time.monotonic, pop_from_backoff: bool = True,
                 hold: Callable[[PodInfo], bool] | None = None):
        """``hold(pod)``: the pod must stay in the unschedulable pool even when an event would move
        it (its asynchronous preemption is still evicting victims: DefaultPreemption's PreEnqueue)."""
        self._sort_key = sort_key
        self._hold = hold
        self._pre_enqueue = pre_enqueue
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self._clock = clock
        self._pop_from_backoff = pop_from_backoff
        self._pods: dict[str, QueuedPodInfo] = {}
        self._active: list[tuple] = []
        self._backoff: list[tuple] = []
        self._unsched: dict[str, QueuedPodInfo] = {}
        self._seq = itertools.count()
        self._wake: asyncio.Event | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self.scheduling_cycle = 0
        self.counts = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, IN_FLIGHT: 0, "gated": 0}
        self.closed = False
        self.nominator = Nominator()   # pending pods expected on a node (preemption)
        # Cluster events that arrived while pods were in flight (upstream's inFlightEvents): a pod
        # that fails is checked against those after it was popped, so an event its cycle could not
        # see (a node added mid-cycle) still requeues it. ``event_filter(qpi, event)`` is the
        # registry's hint check; events older than every in-flight pod are dropped.
        self.event_filter: Callable[[QueuedPodInfo, tuple], bool] | None = None
        self._event_seq = 0
        self._events: deque[tuple[int, str, tuple]] = deque()   # (seq, label, event)
        self._events_lost_before = 0      # events up to this seq were dropped (cap): replay says "requeue"
        self._inflight_since: dict[str, int] = {}                # uid -> event seq when popped
        self._inflight_order: deque[tuple[int, str]] = deque()   # (seq, uid) in pop order

    # -- bookkeeping -----------------------------------------------------------------------------

    def _set_where(self, qpi: QueuedPodInfo, where: str) -> None:
        old = qpi.where
        if old == where:
            return
        if old == IN_FLIGHT and self._inflight_since.pop(qpi.pod.uid, None) is not None:
            self._prune_events()
        if old:
            self.counts[old] -= 1
            if old == UNSCHEDULABLE and qpi.gated:
                self.counts["gated"] -= 1
        if where:
            self.counts[where] += 1
            if where == UNSCHEDULABLE and qpi.gated:
                self.counts["gated"] += 1
        qpi.where = where

    def update_metrics(self) -> None:
        counts = {"active": self.counts[ACTIVE], "backoff": self.counts[BACKOFF],
                  "unschedulable": self.counts[UNSCHEDULABLE] - self.counts["gated"], "gated": self.counts["gated"]}
        for queue, n in counts.items():
            METRICS.pending_pods.labels(queue).set(n)
            # 1.37's entity view of the same queues: every entity here is a pod (no pod groups)
            METRICS.queued_entities.labels(queue, "pod").set(n)

    def __len__(self) -> int:
        return len(self._pods)

    def __contains__(self, uid: str) -> bool:
        return uid in self._pods

    def has_unschedulable(self) -> bool:
        return bool(self._unsched)

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._pods.get(uid)

    def pending(self) -> list[QueuedPodInfo]:
        return list(self._pods.values())

    def _compact(self) -> None:
        """Drop dead heap entries once they outnumber the live ones. A pod deleted, bound by another
        scheduler or moved is dropped from a heap lazily, when a pop reaches it; a replica that
        never pops (a standby: the leader binds its pods) would otherwise keep every pod it ever
        queued, with its raw object, for as long as it runs (the soak's standby grew 3 MiB a
        minute). Rebuilding when the heap is more than twice its live size plus a margin costs
        O(n) once per n dead entries: constant per delete."""
        if len(self._active) > 2 * self.counts[ACTIVE] + COMPACT_MARGIN:
            self._active = [e for e in self._active if e[2].where == ACTIVE and e[2].seq == e[1]]
            heapq.heapify(self._active)
        if len(self._backoff) > 2 * self.counts[BACKOFF] + COMPACT_MARGIN:
            self._backoff = [e for e in self._backoff if e[3].where == BACKOFF and e[3].seq == e[2]]
            heapq.heapify(self._backoff)

    def resort(self) -> int:
        """Recompute every active pod's sort key and rebuild activeQ: the keys were computed when
        each pod was pushed, and a QueueSort may read objects listed after the pods (a PodGroup's
        creation time). Called once the caches have synced; returns how many keys changed."""
        live = [e[2] for e in self._active if e[2].where == ACTIVE and e[2].seq == e[1]]
        changed = 0
        for qpi in live:
            key = self._sort_key(qpi)
            if key != qpi.sort_key:
                qpi.sort_key = key
                changed += 1
        self._active = [(qpi.sort_key, qpi.seq, qpi) for qpi in live]
        heapq.heapify(self._active)
        return changed

    @staticmethod
    def _count(qpi: QueuedPodInfo, plugins: Iterable[str]) -> None:
        """Count the pod in ``scheduler_unschedulable_pods`` for these plugins (once each)."""
        new = frozenset(p for p in plugins if p and p not in qpi.counted_plugins)
        if new:
            gauge, profile = METRICS.unschedulable_pods, qpi.pod.scheduler_name
            for plugin in new:
                gauge.labels(plugin, profile).inc()
            qpi.counted_plugins |= new

    @staticmethod
    def _uncount(qpi: QueuedPodInfo) -> None:
        if qpi.counted_plugins:
            gauge, profile = METRICS.unschedulable_pods, qpi.pod.scheduler_name
            for plugin in qpi.counted_plugins:
                gauge.labels(plugin, profile).dec()
            qpi.counted_plugins = frozenset()

    def _push_active(self, qpi: QueuedPodInfo, event: str) -> None:
        qpi.seq = next(self._seq)
        qpi.sort_key = self._sort_key(qpi)
        heapq.heappush(self._active, (qpi.sort_key, qpi.seq, qpi))
        self._set_where(qpi, ACTIVE)
        self._compact()
        METRICS.incoming("active", event)
        if self._wake is not None:
            self._wake.set()

    def _push_backoff(self, qpi: QueuedPodInfo, event: str) -> None:
        qpi.seq = next(self._seq)
        heapq.heappush(self._backoff, (qpi.backoff_expiry, qpi.sort_key or self._sort_key(qpi), qpi.seq, qpi))
        self._set_where(qpi, BACKOFF)
        self._compact()
        METRICS.incoming("backoff", event)
        self._arm_timer(qpi.backoff_expiry)
        if self._pop_from_backoff and self._wake is not None and qpi.consecutive_errors == 0:
            self._wake.set()

    def _push_unschedulable(self, qpi: QueuedPodInfo, event: str) -> None:
        self._unsched[qpi.pod.uid] = qpi
        self._set_where(qpi, UNSCHEDULABLE)
        METRICS.incoming("unschedulable", event)

    def backoff_duration(self, qpi: QueuedPodInfo) -> float:
        count = qpi.consecutive_errors or qpi.unschedulable_count
        if count == 0 or self.max_backoff == 0:
            return 0.0
        # Doubling from initial_backoff, capped; the exponent is bounded first, so a pod retried
        # thousands of times cannot overflow the float (2.0 ** 1024 raises OverflowError).
        d = self.initial_backoff * (2.0 ** min(count - 1, 62))
        return min(d, self.max_backoff)

    def _is_backing_off(self, qpi: QueuedPodInfo, now: float) -> bool:
        return qpi.backoff_expiry > now

    def _requeue(self, qpi: QueuedPodInfo, event: str) -> str:
        if self._hold is not None and self._hold(qpi.pod):
            self._push_unschedulable(qpi, event)
            return UNSCHEDULABLE
        now = self._clock()
        if self._is_backing_off(qpi, now):
            self._push_backoff(qpi, event)
            return BACKOFF
        self._push_active(qpi, event)
        return ACTIVE

    # -- timers ----------------------------------------------------------------------------------

    def _arm_timer(self, when: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if when >= self._timer_at and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0.0, when - self._clock())
        self._timer_at = when
        self._timer = loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = float("inf")
        self.flush_backoff_completed()
        if self._backoff:
            self._arm_timer(self._backoff[0][0])

    def flush_backoff_completed(self) -> int:
        now = self._clock()
        moved = 0
        while self._backoff and self._backoff[0][0] <= now:
            _, _, seq, qpi = heapq.heappop(self._backoff)
            if qpi.where != BACKOFF or qpi.seq != seq:
                continue
            self._push_active(qpi, BACKOFF_COMPLETE)
            moved += 1
        return moved

    def flush_unschedulable_leftover(self) -> int:
        now = self._clock()
        stale = [q for q in self._unsched.values()
                 if not q.gated and now - q.timestamp > self.max_in_unschedulable]
        for q in stale:
            del self._unsched[q.pod.uid]
            q.was_flushed = True
            self._requeue(q, UNSCHEDULABLE_TIMEOUT)
        return len(stale)

    async def run_flush_loop(self, interval: float = FLUSH_UNSCHEDULABLE_INTERVAL) -> None:
        while not self.closed:
            await asyncio.sleep(interval)
            self.flush_unschedulable_leftover()
            self.update_metrics()

    # -- informer side ---------------------------------------------------------------------------

    def add(self, pod: PodInfo) -> None:
        """A new pending pod of one of our profiles."""
        if pod.uid in self._pods:
            self.update(pod)
            return
        now = self._clock()
        qpi = QueuedPodInfo(pod, now)
        self._pods[pod.uid] = qpi
        if pod.nominated_node:
            self.nominator.add(pod)
        if self._gate(qpi):
            self._push_unschedulable(qpi, POD_ADD)
            return
        self._push_active(qpi, POD_ADD)

    def _gate(self, qpi: QueuedPodInfo) -> bool:
        if self._pre_enqueue is None:
            return False
        st = self._pre_enqueue(qpi.pod)
        if st is None or getattr(st, "is_success", lambda: True)():
            qpi.gated = False
            qpi.gating_plugin = ""
            return False
        qpi.gated = True
        qpi.gating_plugin = getattr(st, "plugin", "")
        self._count(qpi, (qpi.gating_plugin,))
        return True

    def update(self, pod: PodInfo) -> None:
        qpi = self._pods.get(pod.uid)
        if qpi is None:
            self.add(pod)
            return
        old = qpi.pod
        qpi.pod = pod
        if self.nominator.node_of or pod.nominated_node:
            self.nominator.update(old, pod)
        if qpi.where == UNSCHEDULABLE:
            if qpi.gated:
                self._set_where(qpi, "")
                del self._unsched[pod.uid]
                if self._gate(qpi):
                    self._push_unschedulable(qpi, POD_UPDATE)
                    return
                qpi.timestamp = self._clock()
                self._push_active(qpi, POD_UPDATE)
                return
            if _spec_changed(old, pod) or (_generated_claims_changed(old, pod) and self._wants(
                    qpi, ("TargetPod", {"UpdatePodGeneratedResourceClaim"}, old, pod, True, None))):
                del self._unsched[pod.uid]
                self._requeue(qpi, POD_UPDATE)
        elif qpi.where == ACTIVE:
            key = self._sort_key(qpi)
            if key != qpi.sort_key:
                self._push_active(qpi, POD_UPDATE)

    def delete(self, uid: str) -> QueuedPodInfo | None:
        qpi = self._pods.pop(uid, None)
        if qpi is None:
            return None
        self.nominator.delete(uid)
        if qpi.where == UNSCHEDULABLE:
            self._unsched.pop(uid, None)
        self._uncount(qpi)   # nothing counted while in flight: popping uncounted it
        self._set_where(qpi, "")
        qpi.seq = -1  # lazily dropped from the heaps (by a pop, or by ``_compact``)
        self._compact()
        return qpi

    def move_all(self, event: str, interested: Callable[[QueuedPodInfo], bool] | None = None) -> int:
        """A cluster event: move the unschedulable pods it may help to activeQ/backoffQ."""
        if not self._unsched:
            return 0
        # Gated pods (held by a PreEnqueue plugin) move only on the events their gating plugin
        # registered (``interested`` knows them), and only if PreEnqueue now lets them through.
        moved = [uid for uid, qpi in self._unsched.items()
                 if (interested(qpi) if interested is not None else not qpi.gated)]
        released = 0
        for uid in moved:
            qpi = self._unsched.pop(uid)
            if qpi.gated:
                self._set_where(qpi, "")   # while still gated: keeps the gated count right
                if self._gate(qpi):
                    self._push_unschedulable(qpi, event)
                    continue
                qpi.timestamp = self._clock()
            self._requeue(qpi, event)
            released += 1
        return released

    def activate(self, uids: Iterable[str]) -> None:
        """Plugins' ``Activate``: pods waiting in the unschedulable pool or backoffQ move to activeQ;
        a pod in flight moves there when its attempt fails, as upstream registers a ForceActivate
        event for it (a gang released while its members are still in their binding cycles)."""
        for uid in uids:
            qpi = self._pods.get(uid)
            if qpi is not None and qpi.where == IN_FLIGHT:
                qpi.activate_on_return = FORCE_ACTIVATE
                continue
            if qpi is None or qpi.where not in (UNSCHEDULABLE, BACKOFF) or qpi.gated:
                continue
            if qpi.where == UNSCHEDULABLE:
                del self._unsched[uid]
            self._push_active(qpi, FORCE_ACTIVATE)

    def regate(self, uids: Iterable[str]) -> None:
        """Run PreEnqueue again for the pods (by uid) it holds back; those it now lets through go to
        activeQ (GangScheduling: the member that completes a gang arrived)."""
        for uid in uids:
            qpi = self._pods.get(uid)
            if qpi is None or qpi.where != UNSCHEDULABLE or not qpi.gated:
                continue
            del self._unsched[uid]
            self._set_where(qpi, "")
            if self._gate(qpi):
                self._push_unschedulable(qpi, POD_UPDATE)
                continue
            self._push_active(qpi, POD_UPDATE)   # its queue time kept: a group's members keep their order

    def regate_in_flight(self, qpi: QueuedPodInfo) -> None:
        """A pod taken for a cycle that PreEnqueue holds back again (its PodGroup is gone): back to
        the unschedulable pool, gated, with no failure counted - or to activeQ if it passes now."""
        if self._pods.get(qpi.pod.uid) is not qpi or qpi.where != IN_FLIGHT:
            return
        self._set_where(qpi, "")
        if self._gate(qpi):
            self._push_unschedulable(qpi, POD_UPDATE)
        else:
            self._push_active(qpi, POD_UPDATE)

    def take(self, uid: str) -> QueuedPodInfo | None:
        """Pop ``uid`` wherever it waits (activeQ, backoffQ, the unschedulable pool), as ``pop`` would:
        the other members of a pod group scheduled in one cycle. None when it is not queued there or
        PreEnqueue holds it back."""
        qpi = self._pods.get(uid)
        if qpi is None or qpi.gated or qpi.where not in (ACTIVE, BACKOFF, UNSCHEDULABLE):
            return None
        if qpi.where == UNSCHEDULABLE:
            del self._unsched[uid]
        return self._popped(qpi)   # a heap entry left behind is dropped lazily (where/seq)

    def force_activate(self, uid: str, event: str = FORCE_ACTIVATE) -> str:
        """Move a pending pod to activeQ now, bypassing its backoff (upstream's ``Activate``, for
        one pod a user asked about). A pod in flight is moved when its attempt fails (``Activate``
        registers the event for in-flight pods too); a gated pod, or one ``hold`` keeps (its
        preemption is still evicting), stays. Returns where the pod is, or "" if not queued."""
        qpi = self._pods.get(uid)
        if qpi is None:
            return ""
        if qpi.where == IN_FLIGHT:
            qpi.activate_on_return = event
            return IN_FLIGHT
        if qpi.where not in (UNSCHEDULABLE, BACKOFF) or qpi.gated:
            return qpi.where
        if self._hold is not None and self._hold(qpi.pod):
            return qpi.where
        if qpi.where == UNSCHEDULABLE:
            del self._unsched[uid]
        self._push_active(qpi, event)   # a pod left in the backoff heap is dropped lazily (seq)
        return ACTIVE

    # -- scheduler side --------------------------------------------------------------------------

    def _pop_now(self) -> QueuedPodInfo | None:
        while self._active:
            _, seq, qpi = heapq.heappop(self._active)
            if qpi.where == ACTIVE and qpi.seq == seq:
                return qpi
        if self._pop_from_backoff:
            skipped = []
            found = None
            while self._backoff:
                item = heapq.heappop(self._backoff)
                qpi = item[3]
                if qpi.where != BACKOFF or qpi.seq != item[2]:
                    continue
                if qpi.consecutive_errors:
                    skipped.append(item)  # error backoff is never cut short
                    continue
                METRICS.incoming("active", POP_FROM_BACKOFF)
                found = qpi
                break
            for item in skipped:
                heapq.heappush(self._backoff, item)
            return found
        return None

    def pop_nowait(self) -> QueuedPodInfo | None:
        qpi = self._pop_now()
        if qpi is None:
            return None
        return self._popped(qpi)

    def _popped(self, qpi: QueuedPodInfo) -> QueuedPodInfo:
        self._set_where(qpi, IN_FLIGHT)
        self._inflight_since[qpi.pod.uid] = self._event_seq
        self._inflight_order.append((self._event_seq, qpi.pod.uid))
        qpi.attempts += 1
        if qpi.attempts == 1:
            qpi.initial_attempt = self._clock()
        self._uncount(qpi)
        qpi.unschedulable_plugins = set()
        qpi.pending_plugins = set()
        self.scheduling_cycle += 1
        return qpi

    async def pop(self) -> QueuedPodInfo | None:
        if self._wake is None:
            self._wake = asyncio.Event()
        while not self.closed:
            qpi = self.pop_nowait()
            if qpi is not None:
                return qpi
            self._wake.clear()
            await self._wake.wait()
        return None

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo) -> str:
        """After a failed attempt: unschedulable pool, or backoffQ for errors."""
        if qpi.pod.uid not in self._pods or qpi.where != IN_FLIGHT:
            return ""  # deleted (or re-added) meanwhile
        self._count(qpi, qpi.unschedulable_plugins | qpi.pending_plugins)
        if not qpi.unschedulable_plugins and not qpi.pending_plugins:
            qpi.consecutive_errors += 1
        else:
            qpi.unschedulable_count += 1
            qpi.consecutive_errors = 0
        qpi.timestamp = self._clock()
        qpi.was_flushed = False   # back after an attempt: a later bind is not the flush's doing
        qpi.backoff_expiry = qpi.timestamp + self.backoff_duration(qpi)
        event, qpi.activate_on_return = qpi.activate_on_return, ""
        if event and not (self._hold is not None and self._hold(qpi.pod)):
            # Activated while in flight (the attempt began before the request): once more, now.
            self._push_active(qpi, event)
            return ACTIVE
        if not qpi.unschedulable_plugins and not qpi.pending_plugins:
            self._push_backoff(qpi, SCHEDULE_ATTEMPT_FAILURE)
            return BACKOFF
        seen = self._event_while_in_flight(qpi)
        if seen:
            # An event that arrived during the attempt may help: as if it came just after it.
            return self._requeue(qpi, seen)
        self._push_unschedulable(qpi, SCHEDULE_ATTEMPT_FAILURE)
        return UNSCHEDULABLE

    # -- events during an attempt ----------------------------------------------------------------

    def _wants(self, qpi: QueuedPodInfo, event: tuple) -> bool:
        """Whether a plugin that rejected ``qpi`` registered ``event`` and its hint says Queue
        (every event, without a registry)."""
        flt = self.event_filter
        return flt is None or flt(qpi, event)

    def record_event(self, label: str, event: tuple) -> None:
        """A cluster event (``label``: its metric name; ``event``: what ``event_filter`` reads),
        kept while any pod is in flight."""
        if not self._inflight_since:
            return
        self._event_seq += 1
        self._events.append((self._event_seq, label, event))
        if len(self._events) > MAX_IN_FLIGHT_EVENTS:
            self._events_lost_before = self._events.popleft()[0]

    def _event_while_in_flight(self, qpi: QueuedPodInfo) -> str:
        """The label of the first event since ``qpi`` was popped that its hints accept ("" if none)."""
        since = self._inflight_since.get(qpi.pod.uid)
        if since is None or since >= self._event_seq:
            return ""
        if since < self._events_lost_before:
            return "InFlightEventsDropped"   # some were dropped: assume one could help
        flt = self.event_filter
        for seq, label, event in reversed(self._events):
            if seq <= since:
                break
            if flt is None or flt(qpi, event):
                return label
        return ""

    def _prune_events(self) -> None:
        order, since = self._inflight_order, self._inflight_since
        while order and since.get(order[0][1]) != order[0][0]:
            order.popleft()
        oldest = order[0][0] if order else self._event_seq
        events = self._events
        while events and events[0][0] <= oldest:
            events.popleft()

    def done(self, uid: str) -> None:
        """The pod was scheduled (bound or handed to a binder): it leaves the queue."""
        qpi = self._pods.get(uid)
        if qpi is not None and qpi.where == IN_FLIGHT:
            self.nominator.delete(uid)
            self._pods.pop(uid)
            self._set_where(qpi, "")

    def requeue_in_flight(self, qpi: QueuedPodInfo, event: str = FORCE_ACTIVATE) -> None:
        """Put an in-flight pod straight back (e.g. the leader lost its lease mid-cycle)."""
        if self._pods.get(qpi.pod.uid) is qpi and qpi.where == IN_FLIGHT:
            qpi.activate_on_return = ""
            self._push_active(qpi, event)

    def close(self) -> None:
        self.closed = True
        if self._wake is not None:
            self._wake.set()
        if self._timer is not None:
            self._timer.cancel()


def _generated_claims_changed(old: PodInfo, new: PodInfo) -> bool:
    """The pod's own update that upstream calls UpdatePodGeneratedResourceClaim: its
    ``status.resourceClaimStatuses`` or ``status.extendedResourceClaimStatus`` changed."""
    if old.raw is None or new.raw is None:
        return False
    a, b = old.raw.get("status") or {}, new.raw.get("status") or {}
    return any(a.get(k) != b.get(k) for k in ("resourceClaimStatuses", "extendedResourceClaimStatus"))


def _spec_changed(old: PodInfo, new: PodInfo) -> bool:
    """Whether an update of a pending pod can change its scheduling result."""
    if old.labels != new.labels or old.requests != new.requests or old.tolerations != new.tolerations:
        return True
    if old.raw is not None and new.raw is not None:
        return (old.raw.get("spec") or {}) != (new.raw.get("spec") or {})
    return False
